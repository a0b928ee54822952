#include <gpumem/core/error.hpp>

#include <gtest/gtest.h>

#include <string>

TEST(errors, out_of_memory_carries_request_allocator_and_use) {
  gpumem::out_of_memory const e(3u << 20, "pool", 1u << 20, 5u << 20, "largest free block 0 B");
  EXPECT_EQ(e.requested_bytes(), 3u << 20);
  EXPECT_EQ(e.allocator(), "pool");
  EXPECT_EQ(e.current_bytes(), 1u << 20);
  EXPECT_EQ(e.peak_bytes(), 5u << 20);
  std::string const message = e.what();
  EXPECT_NE(message.find("pool could not allocate 3.00 MiB"), std::string::npos) << message;
  EXPECT_NE(message.find("peak 5.00 MiB"), std::string::npos) << message;
  EXPECT_NE(message.find("largest free block"), std::string::npos) << message;
}

TEST(errors, cuda_error_keeps_code_call_and_location) {
  gpumem::cuda_error const e(700, "cudaErrorIllegalAddress", "cudaMemcpy", "x.cpp", 12);
  EXPECT_EQ(e.code(), 700);
  EXPECT_EQ(e.call(), "cudaMemcpy");
  EXPECT_EQ(e.line(), 12);
  EXPECT_NE(std::string(e.what()).find("cudaErrorIllegalAddress (700)"), std::string::npos);
  EXPECT_NE(std::string(e.what()).find("x.cpp:12"), std::string::npos);
}

TEST(errors, hierarchy) {
  EXPECT_THROW(throw gpumem::out_of_memory(1, "a", 0, 0), gpumem::error);
  EXPECT_THROW(throw gpumem::not_supported("x"), gpumem::error);
  EXPECT_THROW(GPUMEM_EXPECTS(false, "bad value 3"), gpumem::logic_error);
}
