// Helpers shared by the mr/ tests: write and check byte patterns in memory of any resource, on
// either backend (host-accessible memory is touched directly, device memory through the backend),
// and check that live blocks are distinct, disjoint and intact; whether two blocks overlap; a
// stream that lives as long as a test.
#pragma once

#include <gpumem/cuda/device_backend.hpp>
#include <gpumem/mr/memory_resource.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <iterator>
#include <map>
#include <utility>
#include <vector>

namespace gpumem::test {

// Stream-ordered write of `value` into [p, p+bytes) on `stream`.
inline void fill_block(memory_resource const& mr, void* p, std::size_t bytes, std::uint8_t value,
                       stream_handle stream) {
  if (mr.properties().host_accessible) {
    backend().synchronize_stream(stream);
    std::memset(p, value, bytes);
  } else {
    backend().fill_async(p, value, bytes, stream);
  }
}

// Waits for `stream`, then returns the first offset in [p, p+bytes) that is not `value`, or
// `bytes` when all are.
inline std::size_t first_mismatch(memory_resource const& mr, void const* p, std::size_t bytes,
                                  std::uint8_t value, stream_handle stream) {
  backend().synchronize_stream(stream);
  std::vector<std::uint8_t> host(bytes);
  if (mr.properties().host_accessible) {
    std::memcpy(host.data(), p, bytes);
  } else {
    backend().copy(host.data(), p, bytes);
  }
  auto it = std::find_if(host.begin(), host.end(), [value](std::uint8_t b) { return b != value; });
  return static_cast<std::size_t>(it - host.begin());
}

// A live block and the byte it was filled with.
struct patterned_block {
  void* p;
  std::size_t bytes;
  std::uint8_t value;
};

// `bytes` from `mr` on `stream`, filled with `value` (stream-ordered).
inline patterned_block allocate_patterned(memory_resource& mr, std::size_t bytes,
                                          std::uint8_t value, stream_handle stream) {
  patterned_block const b{mr.allocate(bytes, stream), bytes, value};
  if (b.p != nullptr) fill_block(mr, b.p, bytes, value, stream);
  return b;
}

// Live blocks of `mr`: no pointer handed out twice (a fatal failure: freeing them would free one
// block twice), no two overlapping, each still holding its pattern. Call it inside
// ASSERT_NO_FATAL_FAILURE.
inline void expect_distinct_and_intact(memory_resource const& mr,
                                       std::vector<patterned_block> const& blocks,
                                       stream_handle stream) {
  std::map<std::uintptr_t, std::size_t> by_address;
  for (patterned_block const& b : blocks)
    by_address.emplace(reinterpret_cast<std::uintptr_t>(b.p), b.bytes);
  ASSERT_EQ(by_address.size(), blocks.size()) << "a pointer was handed out twice";
  for (auto it = by_address.begin(); it != by_address.end() && std::next(it) != by_address.end();
       ++it)
    EXPECT_LE(it->first + it->second, std::next(it)->first) << "blocks overlap";
  for (patterned_block const& b : blocks)
    EXPECT_EQ(first_mismatch(mr, b.p, b.bytes, b.value, stream), b.bytes)
        << "block of " << b.bytes << " bytes was overwritten";
}

// True when the blocks [p, p + p_bytes) and [q, q + q_bytes) share a byte.
inline bool overlap(void const* p, std::size_t p_bytes, void const* q, std::size_t q_bytes) {
  auto const x = reinterpret_cast<std::uintptr_t>(p);
  auto const y = reinterpret_cast<std::uintptr_t>(q);
  return x < y + q_bytes && y < x + p_bytes;
}

// A stream created for a test and destroyed with it.
// `before_destroy` lets a resource with per-stream state forget the stream first.
class scoped_stream {
 public:
  explicit scoped_stream(std::function<void(stream_handle)> before_destroy = {})
      : stream_(backend().create_stream(true)), before_destroy_(std::move(before_destroy)) {}
  ~scoped_stream() {
    if (before_destroy_) before_destroy_(stream_);
    backend().destroy_stream(stream_);
  }
  scoped_stream(scoped_stream const&) = delete;
  scoped_stream& operator=(scoped_stream const&) = delete;
  stream_handle get() const noexcept { return stream_; }
  operator stream_handle() const noexcept { return stream_; }

 private:
  stream_handle stream_;
  std::function<void(stream_handle)> before_destroy_;
};

}  // namespace gpumem::test
