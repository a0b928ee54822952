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

#include <cstddef>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace gpumem::test::strings {

// `count` Ts of device memory, zero-filled; freed on destruction.
template <class T>
class device_array {
 public:
  explicit device_array(std::size_t count) : count_(count) {
    ptr_ = static_cast<T*>(backend().allocate(count * sizeof(T)));
    backend().fill(ptr_, 0, count * sizeof(T));
  }
  device_array(device_array const&) = delete;
  device_array& operator=(device_array const&) = delete;
  ~device_array() { backend().deallocate(ptr_); }
  T* data() const noexcept { return ptr_; }
  std::vector<T> to_host() const {
    backend().synchronize();
    std::vector<T> out(count_);
    backend().copy(out.data(), ptr_, count_ * sizeof(T));
    return out;
  }
  void from_host(std::vector<T> const& v) {
    backend().copy(ptr_, v.data(), v.size() * sizeof(T));
    backend().synchronize();
  }

 private:
  T* ptr_ = nullptr;
  std::size_t count_;
};

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
    EXPECT_NO_THROW(ms_->check());
    nrt::memsys_statistics const s = ms_->statistics();
    EXPECT_EQ(s.alloc, s.free) << "NRT_Allocate / NRT_Free unbalanced: a leak";
    EXPECT_EQ(s.mi_alloc, s.mi_free) << "meminfos created / destroyed unbalanced: a leak";
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
