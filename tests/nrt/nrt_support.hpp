// Shared helpers of the nrt tests: device scratch memory and the fixture that checks, after every
// test, that the memory system reported nothing and that its statistics balance.
#pragma once

#include <gpumem/core/units.hpp>
#include <gpumem/cuda/device_backend.hpp>
#include <gpumem/nrt/memsys.hpp>

#include <gtest/gtest.h>

#include <cstddef>
#include <memory>
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

 private:
  T* ptr_ = nullptr;
  std::size_t count_;
};

// Every test gets its own memory system with statistics on; TearDown asserts that the kernels
// recorded no error and that alloc == free and mi_alloc == mi_free.
class nrt_fixture : public ::testing::Test {
 protected:
  void SetUp() override {
    ms_ = std::make_unique<nrt::memsys>(nrt::heap_options{64 * MiB}, nrt::memsys_options{true});
  }
  void TearDown() override {
    EXPECT_NO_THROW(ms_->check());
    ASSERT_TRUE(ms_->statistics_enabled());
    nrt::memsys_statistics const s = ms_->statistics();
    EXPECT_EQ(s.alloc, s.free) << "NRT_Allocate / NRT_Free unbalanced: a leak";
    EXPECT_EQ(s.mi_alloc, s.mi_free) << "meminfos created / destroyed unbalanced: a leak";
    ms_->heap().trim();
    EXPECT_EQ(ms_->heap().usage().used_bytes, 0u) << "slabs still held after trim()";
    ms_.reset();
  }
  nrt::memsys& ms() { return *ms_; }

 private:
  std::unique_ptr<nrt::memsys> ms_;
};

}  // namespace gpumem::test
