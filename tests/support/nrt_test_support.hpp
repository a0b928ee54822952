// Helpers of the tests that run device code on an nrt::memsys (test_nrt, test_strings_*): zeroed
// device scratch memory, and the check that a test left its memory system clean.
//
//   device_array<unsigned> words(16);           // zero-filled, freed on destruction
//   launch_something(words.data());
//   std::vector<unsigned> const got = words.to_host();
//   ...
//   expect_memsys_balanced(ms);                 // in the fixture's TearDown
//
// Ownership: device_array owns its memory (through backend(), not a memsys). Not thread-safe; a
// failed check is a gtest failure.
#pragma once

#include <gpumem/cuda/device_backend.hpp>
#include <gpumem/nrt/memsys.hpp>

#include <gtest/gtest.h>

#include <cstddef>
#include <vector>

namespace gpumem::test {

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

// Fails the test unless the kernels recorded no error in `ms` (check()), its statistics are on,
// and every NRT allocation and meminfo it made was freed.
inline void expect_memsys_balanced(nrt::memsys& ms) {
  EXPECT_NO_THROW(ms.check());
  ASSERT_TRUE(ms.statistics_enabled());
  nrt::memsys_statistics const s = ms.statistics();
  EXPECT_EQ(s.alloc, s.free) << "NRT_Allocate / NRT_Free unbalanced: a leak";
  EXPECT_EQ(s.mi_alloc, s.mi_free) << "meminfos created / destroyed unbalanced: a leak";
}

}  // namespace gpumem::test
