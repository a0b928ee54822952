#include "forwarding_backend.hpp"
#include "log_capture.hpp"
#include "resource_test_support.hpp"
#include "stream_gate.hpp"

#include <gpumem/core/environment.hpp>
#include <gpumem/core/error.hpp>
#include <gpumem/core/logging.hpp>
#include <gpumem/core/units.hpp>
#include <gpumem/mr/cuda_resource.hpp>
#include <gpumem/mr/debug_memory.hpp>
#include <gpumem/mr/limit_adaptor.hpp>
#include <gpumem/mr/owning_adaptor.hpp>
#include <gpumem/mr/statistics_adaptor.hpp>
#include <gpumem/mr/tracking_adaptor.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace gpumem {
namespace {

// Captures what gpumem logs while it lives.
class captured_log {
 public:
  captured_log() {
    previous_ = set_log_sink([this](log_level level, std::string_view message) {
      std::lock_guard<std::mutex> lock(mutex_);
      lines_.push_back(std::string(to_string(level)) + ": " + std::string(message));
    });
  }
  ~captured_log() { set_log_sink(previous_); }
  captured_log(captured_log const&) = delete;
  captured_log& operator=(captured_log const&) = delete;
  std::size_t count(std::string const& needle) const {
    std::lock_guard<std::mutex> lock(mutex_);
    std::size_t n = 0;
    for (auto const& line : lines_)
      n += line.find(needle) != std::string::npos ? 1 : 0;
    return n;
  }

 private:
  log_sink previous_;
  mutable std::mutex mutex_;
  std::vector<std::string> lines_;
};

struct tracked_stack {
  cuda_resource device;
  statistics_adaptor upstream{device};  // shows what reached the upstream
  tracking_adaptor tracking{upstream, tracking_options{}};
};

TEST(tracking_adaptor, double_free_is_reported_and_not_passed_upstream) {
  captured_log log;
  tracked_stack s;
  void* p = s.tracking.allocate(1000, nullptr);
  s.tracking.deallocate(p, 1000, nullptr);
  EXPECT_EQ(s.upstream.allocations().current, 0);
  s.tracking.deallocate(p, 1000, nullptr);
  EXPECT_EQ(s.tracking.double_frees(), 1u);
  EXPECT_EQ(s.upstream.allocations().current, 0) << "the second free reached the upstream";
  EXPECT_EQ(
      log.count("error: tracking_adaptor over statistics_adaptor over cuda_resource: double free"),
      1u);
}

TEST(tracking_adaptor, wrong_size_free_is_reported_and_the_block_stays_live) {
  captured_log log;
  tracked_stack s;
  void* p = s.tracking.allocate(100, nullptr);
  s.tracking.deallocate(p, 50, nullptr);
  EXPECT_EQ(s.tracking.wrong_size_frees(), 1u);
  EXPECT_EQ(s.upstream.allocations().current, 1);
  EXPECT_EQ(log.count("wrong-size free"), 1u);
  EXPECT_EQ(log.count("allocated 100 bytes"), 1u);
  ASSERT_EQ(s.tracking.outstanding().size(), 1u);
  EXPECT_EQ(s.tracking.outstanding()[0].pointer, p);
  EXPECT_EQ(s.tracking.outstanding()[0].bytes, 100u);
  s.tracking.deallocate(p, 100, nullptr);
  EXPECT_EQ(s.upstream.allocations().current, 0);
  EXPECT_TRUE(s.tracking.outstanding().empty());
}

TEST(tracking_adaptor, free_of_a_foreign_pointer_is_reported) {
  captured_log log;
  tracked_stack s;
  void* foreign = s.device.allocate(256, nullptr);
  s.tracking.deallocate(foreign, 256, nullptr);
  EXPECT_EQ(s.tracking.unknown_frees(), 1u);
  EXPECT_EQ(s.tracking.double_frees(), 0u);
  EXPECT_EQ(log.count("did not allocate"), 1u);
  s.device.deallocate(foreign, 256, nullptr);
}

// Keeps freed memory (so the test can look at it) and frees it for real when destroyed.
class keeping_resource final : public memory_resource {
 public:
  explicit keeping_resource(memory_resource& upstream) : upstream_(upstream) {}
  ~keeping_resource() override {
    for (auto [p, n] : kept_)
      upstream_.deallocate(p, n, nullptr);
  }
  std::string name() const override { return "keeping_resource"; }
  resource_properties properties() const noexcept override { return upstream_.properties(); }

 private:
  void* do_allocate(std::size_t bytes, stream_handle stream) override {
    return upstream_.allocate(bytes, stream);
  }
  void do_deallocate(void* p, std::size_t bytes, stream_handle) noexcept override {
    kept_.emplace_back(p, bytes);
  }
  memory_resource& upstream_;
  std::vector<std::pair<void*, std::size_t>> kept_;
};

TEST(tracking_adaptor, freed_memory_is_poisoned_in_stream_order) {
  cuda_resource device;
  keeping_resource keeper(device);
  tracking_options options;
  options.poison_byte = 0xDB;
  tracking_adaptor tracking(keeper, options);
  test::scoped_stream stream;
  void* p = tracking.allocate(4 * KiB, stream);
  test::fill_block(tracking, p, 4 * KiB, 0x11, stream);
  tracking.deallocate(p, 4 * KiB, stream);
  EXPECT_EQ(test::first_mismatch(device, p, 4 * KiB, 0xDB, stream), 4 * KiB);
}

TEST(tracking_adaptor, outstanding_allocations_are_reported_as_leaks) {
  captured_log log;
  cuda_resource device;
  void* leaked = nullptr;
  {
    tracking_adaptor tracking(device);
    void* freed = tracking.allocate(10, nullptr);
    leaked = tracking.allocate(20, nullptr);
    tracking.deallocate(freed, 10, nullptr);
    EXPECT_EQ(tracking.outstanding_bytes(), 20u);
    EXPECT_EQ(tracking.report_outstanding(log_level::error), 1u);
    EXPECT_EQ(log.count("error: tracking_adaptor over cuda_resource: outstanding allocation #2"),
              1u);
  }  // the destructor reports it again, at warn
  EXPECT_EQ(log.count("warn: tracking_adaptor over cuda_resource: outstanding allocation #2"), 1u);
  device.deallocate(leaked, 20, nullptr);
}

class debug_memory_environment : public ::testing::Test {
 protected:
  void TearDown() override {
    ::unsetenv("GPUMEM_DEBUG_MEMORY");
    reload_environment();
  }
  static void set(char const* value) {
    ::setenv("GPUMEM_DEBUG_MEMORY", value, 1);
    reload_environment();
  }
};

TEST_F(debug_memory_environment, wraps_only_when_enabled) {
  set("0");
  auto plain = std::make_unique<cuda_resource>();
  memory_resource* raw = plain.get();
  auto same = wrap_for_debug_if_enabled(std::move(plain));
  EXPECT_EQ(same.get(), raw);
  EXPECT_EQ(make_debug_adaptor_if_enabled(*raw), nullptr);

  set("1");
  auto wrapped = wrap_for_debug_if_enabled(std::move(same));
  auto* tracked = dynamic_cast<owning_adaptor<tracking_adaptor>*>(wrapped.get());
  ASSERT_NE(tracked, nullptr);
  EXPECT_EQ(&tracked->upstream(), raw);
  void* p = wrapped->allocate(64, nullptr);
  EXPECT_EQ(tracked->adaptor().outstanding_bytes(), 64u);
  wrapped->deallocate(p, 64, nullptr);
  EXPECT_NE(make_debug_adaptor_if_enabled(*raw), nullptr);
}

// The poison is queued on the stream of the freeing call, which belongs to the upstream's backend:
// on the process-wide backend's stream of the same name it ran whenever that stream got to it,
// after the private backend had freed the block and handed it out again.
TEST(tracking_adaptor, poisons_on_the_upstreams_backend) {
  GPUMEM_SKIP_WHILE_GATES_SERIALISE();
  auto small = make_host_backend({64 * KiB});
  cuda_resource device(small.get());
  tracking_adaptor tracking(device);
  test::error_log_capture errors;
  test::stream_gate gate;
  gate.block(nullptr);  // the process-wide default stream: a poison queued there waits
  auto* a = static_cast<unsigned char*>(tracking.allocate(4096, nullptr));
  tracking.deallocate(a, 4096, nullptr);
  // cuda_resource waited for the stream before freeing: the poison has landed (the host
  // backend's arena stays mapped after a free).
  EXPECT_EQ(a[0], 0xDB);
  auto* b = static_cast<unsigned char*>(tracking.allocate(4096, nullptr));
  std::memset(b, 0x11, 4096);
  gate.open();
  backend().synchronize_stream(nullptr);
  small->synchronize_stream(nullptr);
  EXPECT_EQ(std::count(b, b + 4096, 0x11), 4096) << "a live block was poisoned";
  tracking.deallocate(b, 4096, nullptr);

  // A stream of the private backend, which the process-wide one does not know.
  stream_handle const s = small->create_stream(true);
  void* c = tracking.allocate(256, s);
  tracking.deallocate(c, 256, s);
  small->synchronize_stream(s);
  small->destroy_stream(s);
  EXPECT_TRUE(errors.errors().empty()) << errors.errors().front();
}

// A backend whose fills fail: tracking_adaptor's poisoning throws.
class failing_fill_backend final : public test::forwarding_backend {
 public:
  using test::forwarding_backend::forwarding_backend;
  void fill_async(void*, int, std::size_t, stream_handle) override {
    throw cuda_error(700, "cudaErrorIllegalAddress", "cudaMemsetAsync", __FILE__, __LINE__, "");
  }
};

// A failed poisoning is logged, and the free still goes upstream: it is no refused free, so the
// adaptors above uncount it (a limit_adaptor that kept counting it lost that room for good).
TEST(tracking_adaptor, failed_poisoning_still_frees_and_is_not_reported_as_refused) {
  auto inner = make_host_backend({64 * KiB});
  failing_fill_backend failing(*inner);
  cuda_resource device(&failing);
  tracking_adaptor tracking(device);
  statistics_adaptor stats(tracking);
  limit_adaptor limited(stats, 8 * KiB);
  test::error_log_capture errors;
  void* p = limited.allocate(8 * KiB, nullptr);
  limited.deallocate(p, 8 * KiB, nullptr);
  ASSERT_FALSE(errors.errors().empty());
  EXPECT_NE(errors.errors().front().find("poisoning"), std::string::npos)
      << errors.errors().front();
  memory_info const info = inner->get_memory_info();
  EXPECT_EQ(info.free, info.total);  // the upstream freed it
  EXPECT_EQ(tracking.outstanding_bytes(), 0u);
  EXPECT_EQ(stats.bytes().current, 0);
  EXPECT_EQ(limited.used_bytes(), 0u);
  void* again = limited.allocate(8 * KiB, nullptr);  // the whole limit is free again
  limited.deallocate(again, 8 * KiB, nullptr);
}

// CCCL compares resources both ways (cccl_resource_adaptor::operator==).
TEST(owning_adaptor, equality_is_symmetric) {
  auto own = make_owning_adaptor<statistics_adaptor>(std::make_unique<cuda_resource>());
  auto other = make_owning_adaptor<statistics_adaptor>(std::make_unique<cuda_resource>());
  memory_resource const& whole = *own;
  memory_resource const& inner = own->adaptor();
  EXPECT_EQ(whole == inner, inner == whole);
  EXPECT_EQ(whole == own->upstream(), own->upstream() == whole);
  EXPECT_TRUE(whole == whole);
  EXPECT_FALSE(whole == *other);
  EXPECT_FALSE(*other == whole);
  // Over equal adaptors (cuda_resource: equal when over the same backend), equal both ways.
  auto a = make_owning_adaptor<tracking_adaptor>(std::make_unique<cuda_resource>());
  auto b = make_owning_adaptor<tracking_adaptor>(std::make_unique<cuda_resource>());
  EXPECT_FALSE(*a == *b);  // tracking adaptors are equal only to themselves
  EXPECT_FALSE(*b == *a);
}

}  // namespace
}  // namespace gpumem
