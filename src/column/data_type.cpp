// Names and widths of column element types (see data_type.hpp).
#include <gpumem/column/data_type.hpp>
#include <gpumem/core/error.hpp>

#include <cstdint>
#include <string>

namespace gpumem {

namespace {
// In the order of type_id's enumerators.
constexpr char const* type_names[] = {"int8",   "int16",  "int32",   "int64",   "uint8", "uint16",
                                      "uint32", "uint64", "float32", "float64", "bool8", "string"};
static_assert(sizeof type_names / sizeof type_names[0] ==
              static_cast<std::size_t>(type_id::string) + 1);
}  // namespace

char const* to_string(type_id id) noexcept {
  auto const index = static_cast<std::size_t>(id);
  return index < sizeof type_names / sizeof type_names[0] ? type_names[index] : "unknown";
}

std::string to_string(data_type type) {
  auto const index = static_cast<std::size_t>(type.id());
  if (index < sizeof type_names / sizeof type_names[0]) return type_names[index];
  // A value no enumerator has (a cast from a bad integer): named by its number in messages.
  return "unknown type_id " + std::to_string(static_cast<std::int32_t>(type.id()));
}

std::size_t size_of(data_type type) {
  std::size_t const bytes = fixed_width_bytes(type.id());
  GPUMEM_EXPECTS(bytes != 0, "size_of: " + to_string(type) + " is not a fixed-width type");
  return bytes;
}

}  // namespace gpumem
