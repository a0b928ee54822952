#include <gpumem/core/error.hpp>
#include <gpumem/core/units.hpp>
#include <gpumem/mr/cuda_resource.hpp>
#include <gpumem/mr/failure_callback_adaptor.hpp>
#include <gpumem/mr/limit_adaptor.hpp>

#include <gtest/gtest.h>

#include <vector>

namespace gpumem {
namespace {

// A 1 MiB device (limit over the backend) with a spill-like callback.
struct small_device {
  cuda_resource device;
  limit_adaptor limited{device, 1 * MiB};
};

TEST(failure_callback_adaptor, callback_makes_room_and_the_retry_succeeds) {
  small_device d;
  void* hog = d.limited.allocate(1 * MiB, nullptr);
  std::vector<std::pair<std::size_t, int>> calls;
  failure_callback_adaptor mr(d.limited, [&](std::size_t bytes, int attempt) {
    calls.emplace_back(bytes, attempt);
    if (hog != nullptr) {
      d.limited.deallocate(hog, 1 * MiB, nullptr);
      hog = nullptr;
    }
    return true;
  });
  void* p = mr.allocate(512 * KiB, nullptr);
  EXPECT_NE(p, nullptr);
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].first, 512 * KiB);
  EXPECT_EQ(calls[0].second, 0);
  mr.deallocate(p, 512 * KiB, nullptr);
}

TEST(failure_callback_adaptor, retries_are_bounded) {
  small_device d;
  int calls = 0;
  failure_callback_adaptor mr(
      d.limited, [&](std::size_t, int attempt) { return ++calls, attempt >= 0; },
      failure_callback_options{3});
  EXPECT_THROW(mr.allocate(2 * MiB, nullptr), out_of_memory);
  EXPECT_EQ(calls, 3);
}

TEST(failure_callback_adaptor, callback_saying_no_gives_up_at_once) {
  small_device d;
  std::vector<int> attempts;
  failure_callback_adaptor mr(d.limited, [&](std::size_t, int attempt) {
    attempts.push_back(attempt);
    return false;
  });
  try {
    mr.allocate(2 * MiB, nullptr);
    FAIL();
  } catch (out_of_memory const& e) {
    EXPECT_EQ(e.requested_bytes(), 2 * MiB);  // the upstream's exception, unchanged
  }
  EXPECT_EQ(attempts, std::vector<int>{0});
}

TEST(failure_callback_adaptor, callback_that_allocates_through_the_same_adaptor_does_not_recurse) {
  small_device d;
  int calls = 0;
  int inner_failures = 0;
  failure_callback_adaptor* self = nullptr;
  failure_callback_adaptor mr(d.limited, [&](std::size_t, int) {
    ++calls;
    try {
      // A spill that needs a staging buffer bigger than what is left: fails, and must not call
      // this callback again.
      void* staging = self->allocate(4 * MiB, nullptr);
      self->deallocate(staging, 4 * MiB, nullptr);
    } catch (out_of_memory const&) {
      ++inner_failures;
    }
    // A small staging buffer that fits goes through.
    void* small = self->allocate(1 * KiB, nullptr);
    self->deallocate(small, 1 * KiB, nullptr);
    return false;
  });
  self = &mr;
  EXPECT_THROW(mr.allocate(2 * MiB, nullptr), out_of_memory);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(inner_failures, 1);
  // After the callback returned, the adaptor calls it again for a new failure.
  EXPECT_THROW(mr.allocate(2 * MiB, nullptr), out_of_memory);
  EXPECT_EQ(calls, 2);
}

// An upstream whose allocations fail with a device error that is not out-of-memory.
class broken_device final : public memory_resource {
 public:
  std::string name() const override { return "broken_device"; }

 private:
  void* do_allocate(std::size_t, stream_handle) override {
    throw cuda_error(700, "cudaErrorIllegalAddress", "test", __FILE__, __LINE__);
  }
  void do_deallocate(void*, std::size_t, stream_handle) noexcept override {}
};

TEST(failure_callback_adaptor, other_exceptions_pass_through_without_the_callback) {
  broken_device broken;
  int calls = 0;
  failure_callback_adaptor mr(broken, [&](std::size_t, int) { return ++calls, true; });
  EXPECT_THROW(mr.allocate(1 * KiB, nullptr), cuda_error);
  EXPECT_EQ(calls, 0);
}

TEST(failure_callback_adaptor, bad_options_are_rejected) {
  small_device d;
  EXPECT_THROW(failure_callback_adaptor(d.limited, allocation_failure_callback{}), logic_error);
  EXPECT_THROW(failure_callback_adaptor(
                   d.limited, [](std::size_t, int) { return true; }, failure_callback_options{-1}),
               logic_error);
}

}  // namespace
}  // namespace gpumem
