// Shared helpers of the tests of the strings core types: device scratch memory, a recorder of
// failed checks that works in kernels and on the host, and a fixture whose memory system has
// statistics on and must end balanced.
#pragma once

#include <gpumem/core/atomic.hpp>
#include <gpumem/core/config.hpp>
#include <gpumem/core/units.hpp>
#include <gpumem/cuda/device_backend.hpp>
#include <gpumem/nrt/memsys.hpp>

#include <gtest/gtest.h>

#include "nrt_test_support.hpp"

#include <cstddef>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace gpumem::test::strings {

using gpumem::test::device_array;

// Failed checks of device code: a count and the source lines of the first few. `words` points to
// check_words zeroed unsigned words (device memory in kernels, host memory on the host).
inline constexpr unsigned check_lines = 15;
inline constexpr unsigned check_words = check_lines + 1;

struct checker {
  unsigned* words;
  GPUMEM_HD bool operator()(bool ok, unsigned line) const {
    if (!ok) {
      unsigned const i = atomic_fetch_add(&words[0], 1u, mem_order::relaxed);
      if (i < check_lines) words[1 + i] = line;
    }
    return ok;
  }
};

#define GPUMEM_CHECK(c, cond) (c)((cond), __LINE__)

// "" when no check failed, otherwise how many and at which lines.
inline std::string failures(std::vector<unsigned> const& words) {
  if (words[0] == 0) return "";
  std::ostringstream out;
  out << words[0] << " failed check(s), at line(s)";
  for (unsigned i = 0; i < words[0] && i < check_lines; ++i)
    out << ' ' << words[1 + i];
  return out.str();
}

// A memory system with statistics on; TearDown asserts that the kernels recorded no error (tests
// that provoke out_of_memory call check() themselves) and that every allocation was freed.
class strings_fixture : public ::testing::Test {
 protected:
  void SetUp() override { ms_ = make_memsys(64 * MiB); }
  void TearDown() override {
    expect_memsys_balanced(*ms_);
    ms_.reset();
  }
  static std::unique_ptr<nrt::memsys> make_memsys(std::size_t bytes) {
    nrt::heap_options heap;
    heap.bytes = bytes;
    heap.slab_bytes = 64 * KiB;
    heap.shards = 1;
    return std::make_unique<nrt::memsys>(heap, nrt::memsys_options{true});
  }
  nrt::memsys& ms() { return *ms_; }

 private:
  std::unique_ptr<nrt::memsys> ms_;
};

}  // namespace gpumem::test::strings
