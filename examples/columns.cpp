// Buffers and columns: a buffer from host bytes and a slice of it, a nullable int column and a
// slice with its null count, a strings column in the Arrow layout, and the device views kernels
// take.
#include <gpumem/buffer/buffer.hpp>
#include <gpumem/column/column.hpp>
#include <gpumem/column/column_device_view.hpp>
#include <gpumem/column/strings_column.hpp>
#include <gpumem/column/strings_column_device_view.hpp>
#include <gpumem/cuda/device_backend.hpp>

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

int main() {
  using namespace gpumem;
  std::printf("device: %s\n", backend().description().c_str());

  char const text[] = "hello, columns";
  buffer bytes = buffer::from_host(text, sizeof text - 1);  // device memory
  buffer word = bytes.slice(7, 7);                          // a view: no copy
  auto back = word.to_host();
  std::printf("slice of a %zu-byte buffer: \"%.*s\" (a view: %d, same memory: %d)\n", bytes.size(),
              static_cast<int>(back.size()), reinterpret_cast<char*>(back.data()), word.is_view(),
              word.owns_same_memory(bytes));

  std::vector<std::optional<int>> values{1, std::nullopt, 3, 4, std::nullopt, 6, 7, 8, 9, 10};
  column ints = column::from_host(values);
  column tail = ints.slice(3, 10);  // shares the buffers: offset 3, size 7
  std::printf("int column: %zu rows, %zu nulls; slice [3, 10): %zu rows, %zu null, offset %zu\n",
              ints.size(), ints.null_count(), tail.size(), tail.null_count(), tail.offset());
  std::printf("slice values:");
  for (auto const& v : tail.to_host<int>())
    std::printf(v ? " %d" : " null", v ? *v : 0);
  std::printf("\n");

  column words = strings_column_from_host({"do", "you", std::nullopt, "have", "cheese?"});
  std::printf("strings column: %zu rows, offsets %s with %zu entries, %zu bytes of characters\n",
              words.size(), to_string(words.child(0).type()).c_str(), words.child(0).size(),
              words.data().size());
  std::printf("rows [1, 4):");
  for (auto const& s : words.slice(1, 4).to_host_strings())
    std::printf(" %s", s ? ("\"" + *s + "\"").c_str() : "null");
  std::printf("\n");

  // What a kernel takes by value (gpumem::launch): plain pointers, the offset and the size.
  column_device_view iv = column_device_view::create(tail);
  strings_column_device_view sv = strings_column_device_view::create(words);
  std::printf("device views: %zu int rows from offset %zu; %zu string rows, nullable %d\n",
              iv.size(), iv.offset(), sv.size(), sv.nullable());
  return 0;
}
