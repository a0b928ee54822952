// The typed contract suite: every resource and adaptor of mr/ is a fixture
// below, and every fixture runs every test, on both backends. A new resource is a fixture plus one
// line in `contract_fixtures`.
//
// A fixture owns its stack and exposes:
//   memory_resource& resource();
//   static constexpr bool stream_ordered_free;   // free is enqueued, not waited for
//   static constexpr bool memory_info_supported; // get_memory_info() answers
//   static constexpr char const* name;           // the test name suffix
//   void forget_stream(stream_handle);           // optional: called before a test stream dies
#include "resource_test_support.hpp"

#include <gpumem/core/checked_arithmetic.hpp>
#include <gpumem/core/error.hpp>
#include <gpumem/core/units.hpp>
#include <gpumem/mr/async_resource.hpp>
#include <gpumem/mr/cuda_resource.hpp>
#include <gpumem/mr/failure_callback_adaptor.hpp>
#include <gpumem/mr/limit_adaptor.hpp>
#include <gpumem/mr/logging_adaptor.hpp>
#include <gpumem/mr/managed_resource.hpp>
#include <gpumem/mr/owning_adaptor.hpp>
#include <gpumem/mr/pinned_host_resource.hpp>
#include <gpumem/mr/pool_resource.hpp>
#include <gpumem/mr/statistics_adaptor.hpp>
#include <gpumem/mr/tracking_adaptor.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <limits>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
// The out-of-memory test asks pinned_host_resource for a petabyte: on the host backend that is
// aligned_alloc, which AddressSanitizer would report instead of returning null.
extern "C" char const* __asan_default_options() {
  return "allocator_may_return_null=1";
}
#endif

namespace gpumem {
namespace {

using test::fill_block;
using test::first_mismatch;
using test::scoped_stream;

// More than any device or host has: every stack must turn it into gpumem::out_of_memory.
constexpr std::size_t impossible_bytes = std::size_t{1} << 50;

// Sizes whose rounding (to 256 bytes, 4 KiB pages, 2 MiB chunks, a size class) or header would
// wrap past SIZE_MAX to a small size, and those just past 2^62 and 2^63: none can be served, and
// each must be gpumem::out_of_memory naming exactly that size, never a small block.
std::vector<std::size_t> sizes_that_wrap() {
  constexpr std::size_t top = std::numeric_limits<std::size_t>::max();
  constexpr std::size_t half = std::size_t{1} << 63;
  return {top,
          top - 1,
          top - 7,
          top - 255,
          top - 256,
          top - 4095,
          top - 4096,
          top - (2 * MiB - 1),
          top - 2 * MiB,
          half,
          half + 1,
          max_allocation_bytes,
          (std::size_t{1} << 62) + 1};
}

// Sizes just past the roundings that CAN be served: the pool's 256-byte steps and class
// boundaries, its cached limit (pool_options{}.max_cached_size, what the pool fixtures use), the
// 2 MiB growth granularity and its 32 MiB chunk.
std::vector<std::size_t> sizes_past_boundaries() {
  std::size_t const cached_limit = pool_options{}.max_cached_size;
  return {255,
          256,
          257,
          2048,
          2049,
          2304 + 1,
          cached_limit - 1,
          cached_limit,
          cached_limit + 1,
          2 * MiB + 1,
          8 * MiB + 1,
          32 * MiB + 1};
}

// --- fixtures
// -------------------------------------------------------------------------------------

struct cuda_fixture {
  static constexpr char const* name = "cuda";
  static constexpr bool stream_ordered_free = false;
  static constexpr bool memory_info_supported = true;
  cuda_resource upstream;
  memory_resource& resource() { return upstream; }
};

struct async_fixture {
  static constexpr char const* name = "async";
  static constexpr bool stream_ordered_free = true;
  static constexpr bool memory_info_supported = true;
  async_resource upstream{async_resource_options{std::size_t{64} << 20}};
  memory_resource& resource() { return upstream; }
};

struct managed_fixture {
  static constexpr char const* name = "managed";
  static constexpr bool stream_ordered_free = false;
  static constexpr bool memory_info_supported = true;
  managed_resource upstream;
  memory_resource& resource() { return upstream; }
};

struct pinned_fixture {
  static constexpr char const* name = "pinned";
  static constexpr bool stream_ordered_free = false;
  static constexpr bool memory_info_supported = false;
  pinned_host_resource upstream;
  memory_resource& resource() { return upstream; }
};

struct statistics_fixture {
  static constexpr char const* name = "statistics";
  static constexpr bool stream_ordered_free = false;
  static constexpr bool memory_info_supported = true;
  cuda_resource upstream;
  statistics_adaptor adaptor{upstream};
  memory_resource& resource() { return adaptor; }
};

struct logging_fixture {
  static constexpr char const* name = "logging";
  static constexpr bool stream_ordered_free = true;
  static constexpr bool memory_info_supported = true;
  async_resource upstream;
  std::ostringstream log;
  logging_adaptor adaptor{upstream, log};
  memory_resource& resource() { return adaptor; }
};

struct limit_fixture {
  static constexpr char const* name = "limit";
  static constexpr bool stream_ordered_free = false;
  static constexpr bool memory_info_supported = true;
  cuda_resource upstream;
  limit_adaptor adaptor{upstream, std::size_t{1} << 30};
  memory_resource& resource() { return adaptor; }
};

struct failure_callback_fixture {
  static constexpr char const* name = "failure_callback";
  static constexpr bool stream_ordered_free = false;
  static constexpr bool memory_info_supported = true;
  cuda_resource upstream;
  // Retries twice, then gives up: the out-of-memory test sees the exception after the retries.
  failure_callback_adaptor adaptor{upstream, [](std::size_t, int attempt) { return attempt < 2; }};
  memory_resource& resource() { return adaptor; }
};

struct tracking_fixture {
  static constexpr char const* name = "tracking";
  static constexpr bool stream_ordered_free = true;
  static constexpr bool memory_info_supported = true;
  async_resource upstream;
  tracking_adaptor adaptor{upstream};
  memory_resource& resource() { return adaptor; }
};

struct tracking_pinned_fixture {
  static constexpr char const* name = "tracking_pinned";
  static constexpr bool stream_ordered_free = false;
  static constexpr bool memory_info_supported = false;
  pinned_host_resource upstream;
  tracking_adaptor adaptor{upstream};
  memory_resource& resource() { return adaptor; }
};

// A deep stack, owned through owning_adaptor: logging(limit(statistics(async))).
struct stack_fixture {
  static constexpr char const* name = "stack";
  static constexpr bool stream_ordered_free = true;
  static constexpr bool memory_info_supported = true;
  std::ostringstream log;
  std::unique_ptr<memory_resource> stack = make_stack(log);
  memory_resource& resource() { return *stack; }

  static std::unique_ptr<memory_resource> make_stack(std::ostream& out) {
    auto stats = make_owning_adaptor<statistics_adaptor>(std::make_unique<async_resource>());
    auto limited = make_owning_adaptor<limit_adaptor>(std::move(stats), std::size_t{2} << 30);
    return make_owning_adaptor<logging_adaptor>(std::move(limited), out);
  }
};

struct pool_fixture {
  static constexpr char const* name = "pool";
  static constexpr bool stream_ordered_free = true;
  static constexpr bool memory_info_supported = true;
  cuda_resource upstream;
  pool_resource pool{upstream, pool_options{}};
  memory_resource& resource() { return pool; }
  void forget_stream(stream_handle stream) { pool.release_stream(stream); }
};
// Grows by mapping physical memory into one reserved range (pool_options::expandable).
struct expandable_pool_fixture {
  static constexpr char const* name = "expandable_pool";
  static constexpr bool stream_ordered_free = true;
  static constexpr bool memory_info_supported = true;
  static pool_options options() {
    pool_options o;
    o.expandable = true;
    return o;
  }
  cuda_resource upstream;
  pool_resource pool{upstream, options()};
  memory_resource& resource() { return pool; }
  void forget_stream(stream_handle stream) { pool.release_stream(stream); }
};

using contract_fixtures =
    ::testing::Types<cuda_fixture, async_fixture, managed_fixture, pinned_fixture,
                     statistics_fixture, logging_fixture, limit_fixture, failure_callback_fixture,
                     tracking_fixture, tracking_pinned_fixture, stack_fixture, pool_fixture,
                     expandable_pool_fixture>;

struct fixture_names {
  template <class T>
  static std::string GetName(int) {
    return T::name;
  }
};

template <class Fixture>
auto forget_stream(Fixture& f, stream_handle s, int) -> decltype(f.forget_stream(s), void()) {
  f.forget_stream(s);
}
template <class Fixture>
void forget_stream(Fixture&, stream_handle, long) {}

template <class Fixture>
class resource_contract : public ::testing::Test {
 protected:
  Fixture fixture_;
  memory_resource& mr() { return fixture_.resource(); }
  // A stream for the test, forgotten by the resource before it is destroyed.
  std::function<void(stream_handle)> forget() {
    return [this](stream_handle s) { forget_stream(fixture_, s, 0); };
  }
};

TYPED_TEST_SUITE(resource_contract, contract_fixtures, fixture_names);

// Holds a stream behind a host function until opened; opens itself when destroyed, so that a
// failing test never leaves a stream blocked.
class gate {
 public:
  explicit gate(bool open) : open_(open) {}
  ~gate() { open(); }
  gate(gate const&) = delete;
  gate& operator=(gate const&) = delete;
  void open() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      open_ = true;
    }
    cv_.notify_all();
  }
  void wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [this] { return open_; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool open_;
};

// --- the contract
// ---------------------------------------------------------------------------------

TYPED_TEST(resource_contract, zero_bytes_is_null_and_freeing_null_is_a_no_op) {
  memory_resource& mr = this->mr();
  EXPECT_EQ(mr.allocate(0, nullptr), nullptr);
  mr.deallocate(nullptr, 0, nullptr);
  EXPECT_EQ(mr.allocate_sync(0), nullptr);
  mr.deallocate_sync(nullptr, 0);
}

TYPED_TEST(resource_contract, alignment_is_at_least_256) {
  memory_resource& mr = this->mr();
  scoped_stream stream(this->forget());
  std::vector<std::pair<void*, std::size_t>> blocks;
  for (std::size_t bytes :
       {std::size_t{1}, std::size_t{3}, std::size_t{255}, std::size_t{256}, std::size_t{257},
        std::size_t{1000}, std::size_t{4096}, std::size_t{65537}, MiB + 7}) {
    void* p = mr.allocate(bytes, stream);
    ASSERT_NE(p, nullptr) << bytes;
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % default_alignment, 0u)
        << p << " for " << bytes << " bytes";
    blocks.emplace_back(p, bytes);
  }
  for (auto [p, bytes] : blocks)
    mr.deallocate(p, bytes, stream);
  backend().synchronize_stream(stream);
}

TYPED_TEST(resource_contract, live_blocks_are_distinct_and_keep_their_contents) {
  memory_resource& mr = this->mr();
  scoped_stream stream(this->forget());
  std::mt19937 rng(42);
  std::uniform_int_distribution<std::size_t> size(1, 64 * KiB);
  struct block {
    void* p;
    std::size_t bytes;
    std::uint8_t value;
  };
  std::vector<block> blocks;
  for (int i = 0; i < 48; ++i) {
    block b{nullptr, size(rng), static_cast<std::uint8_t>(i * 37 + 1)};
    b.p = mr.allocate(b.bytes, stream);
    ASSERT_NE(b.p, nullptr);
    fill_block(mr, b.p, b.bytes, b.value, stream);
    blocks.push_back(b);
  }
  std::map<std::uintptr_t, std::size_t> by_address;
  for (auto const& b : blocks)
    by_address.emplace(reinterpret_cast<std::uintptr_t>(b.p), b.bytes);
  ASSERT_EQ(by_address.size(), blocks.size()) << "a pointer was handed out twice";
  for (auto it = by_address.begin(); std::next(it) != by_address.end(); ++it)
    EXPECT_LE(it->first + it->second, std::next(it)->first) << "blocks overlap";
  for (auto const& b : blocks)
    EXPECT_EQ(first_mismatch(mr, b.p, b.bytes, b.value, stream), b.bytes)
        << "block of " << b.bytes << " bytes was overwritten";
  for (auto const& b : blocks)
    mr.deallocate(b.p, b.bytes, stream);
  backend().synchronize_stream(stream);
}

TYPED_TEST(resource_contract, out_of_memory_is_typed_and_names_the_request) {
  memory_resource& mr = this->mr();
  try {
    void* p = mr.allocate(impossible_bytes, nullptr);
    mr.deallocate(p, impossible_bytes, nullptr);
    FAIL() << mr.name() << " allocated " << impossible_bytes << " bytes";
  } catch (out_of_memory const& e) {
    EXPECT_EQ(e.requested_bytes(), impossible_bytes);
    std::string const what = e.what();
    EXPECT_NE(what.find("out of memory"), std::string::npos) << what;
    EXPECT_NE(what.find(std::to_string(impossible_bytes)), std::string::npos) << what;
    EXPECT_FALSE(e.allocator().empty());
  }
  // Still usable afterwards.
  void* p = mr.allocate(KiB, nullptr);
  EXPECT_NE(p, nullptr);
  mr.deallocate(p, KiB, nullptr);
  backend().synchronize_stream(nullptr);
}

TYPED_TEST(resource_contract, sizes_that_would_wrap_are_out_of_memory_and_touch_no_live_block) {
  memory_resource& mr = this->mr();
  scoped_stream stream(this->forget());
  constexpr std::size_t live_bytes = 64 * KiB;
  void* live = mr.allocate(live_bytes, stream);
  ASSERT_NE(live, nullptr);
  fill_block(mr, live, live_bytes, 0x3C, stream);
  for (std::size_t const bytes : sizes_that_wrap()) {
    try {
      void* p = mr.allocate(bytes, stream);
      // Not freed: a resource that served this size has already broken its bookkeeping.
      ADD_FAILURE() << mr.name() << " allocated " << bytes << " bytes at " << p;
    } catch (out_of_memory const& e) {
      EXPECT_EQ(e.requested_bytes(), bytes) << e.what();
      EXPECT_NE(std::string(e.what()).find(std::to_string(bytes)), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(first_mismatch(mr, live, live_bytes, 0x3C, stream), live_bytes)
      << "a refused request overwrote a live block";
  // Still usable, and a new block does not overlap the live one.
  void* next = mr.allocate(live_bytes, stream);
  ASSERT_NE(next, nullptr);
  auto const a = reinterpret_cast<std::uintptr_t>(live);
  auto const b = reinterpret_cast<std::uintptr_t>(next);
  EXPECT_TRUE(a + live_bytes <= b || b + live_bytes <= a) << "blocks overlap";
  mr.deallocate(next, live_bytes, stream);
  mr.deallocate(live, live_bytes, stream);
  backend().synchronize_stream(stream);
}

TYPED_TEST(resource_contract, sizes_just_past_rounding_boundaries_are_distinct_whole_blocks) {
  memory_resource& mr = this->mr();
  scoped_stream stream(this->forget());
  std::vector<std::size_t> const sizes = sizes_past_boundaries();
  std::vector<void*> blocks;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    void* p = mr.allocate(sizes[i], stream);
    ASSERT_NE(p, nullptr) << sizes[i];
    fill_block(mr, p, sizes[i], static_cast<std::uint8_t>(i + 1), stream);
    blocks.push_back(p);
  }
  std::map<std::uintptr_t, std::size_t> by_address;
  for (std::size_t i = 0; i < sizes.size(); ++i)
    by_address.emplace(reinterpret_cast<std::uintptr_t>(blocks[i]), sizes[i]);
  ASSERT_EQ(by_address.size(), sizes.size()) << "a pointer was handed out twice";
  for (auto it = by_address.begin(); std::next(it) != by_address.end(); ++it)
    EXPECT_LE(it->first + it->second, std::next(it)->first) << "blocks overlap";
  for (std::size_t i = 0; i < sizes.size(); ++i)
    EXPECT_EQ(first_mismatch(mr, blocks[i], sizes[i], static_cast<std::uint8_t>(i + 1), stream),
              sizes[i])
        << "block of " << sizes[i] << " bytes was overwritten";
  for (std::size_t i = 0; i < sizes.size(); ++i)
    mr.deallocate(blocks[i], sizes[i], stream);
  backend().synchronize_stream(stream);
}

TYPED_TEST(resource_contract, free_on_another_stream_is_ordered_after_that_streams_work) {
  memory_resource& mr = this->mr();
  scoped_stream a(this->forget()), b(this->forget());
  constexpr std::size_t bytes = 64 * KiB;
  constexpr std::uint8_t first = 0x5A, second = 0xA5;

  void* p = mr.allocate(bytes, a);
  ASSERT_NE(p, nullptr);
  fill_block(mr, p, bytes, first, a);
  // b's work on p comes after a's writes: record on a, wait on b.
  event_handle written = backend().create_event(false);
  backend().record_event(written, a);
  backend().stream_wait_event(b, written);

  // Hold b behind a gate when the free is only enqueued, so that reuse on `a` happens while b has
  // not reached the free: a resource that hands p to `a` now breaks the contract, and b's copy
  // below then reads the second pattern.
  bool const gated = TypeParam::stream_ordered_free;
  gate b_gate(!gated);
  if (gated) backend().enqueue_host_function(b, [&b_gate] { b_gate.wait(); });
  // Pinned: a copy into pageable memory would make copy_async wait for the gated stream.
  auto* seen_by_b = static_cast<std::uint8_t*>(backend().allocate_pinned(bytes, {}));
  backend().copy_async(seen_by_b, p, bytes, b);
  mr.deallocate(p, bytes, b);

  std::vector<void*> reused;
  for (int i = 0; i < 8; ++i) {
    void* q = mr.allocate(bytes, a);
    EXPECT_NE(q, nullptr);
    if (q == nullptr) break;
    fill_block(mr, q, bytes, second, a);
    reused.push_back(q);
  }
  // On the host backend a's work finishes before the gate opens (deterministic); the cuda
  // driver's pool may make `a` wait for b's free (internal dependencies), so there the gate opens
  // first.
  if (backend().kind() == backend_kind::host) backend().synchronize_stream(a);
  b_gate.open();
  backend().synchronize_stream(b);
  backend().synchronize_stream(a);
  std::size_t const bad = static_cast<std::size_t>(
      std::count_if(seen_by_b, seen_by_b + bytes, [&](std::uint8_t v) { return v != first; }));
  backend().deallocate_pinned(seen_by_b);
  EXPECT_EQ(bad, 0u) << "memory freed on stream b was reused on stream a before b reached the free";
  for (void* q : reused)
    mr.deallocate(q, bytes, a);
  backend().synchronize_stream(a);
  backend().destroy_event(written);
}

TYPED_TEST(resource_contract, four_threads_churn_without_corruption) {
  memory_resource& mr = this->mr();
  constexpr int threads = 4;
  constexpr int steps = 300;
  std::atomic<int> corrupted{0};
  std::atomic<int> failures{0};
  auto work = [&](int t) {
    try {
      scoped_stream stream(this->forget());
      std::mt19937 rng(1234 + t);
      std::uniform_int_distribution<std::size_t> size(1, 16 * KiB);
      struct block {
        void* p;
        std::size_t bytes;
        std::uint8_t value;
      };
      std::vector<block> live;
      auto release = [&](std::size_t i) {
        block const b = live[i];
        if (first_mismatch(mr, b.p, b.bytes, b.value, stream) != b.bytes) ++corrupted;
        mr.deallocate(b.p, b.bytes, stream);
        live[i] = live.back();
        live.pop_back();
      };
      for (int step = 0; step < steps; ++step) {
        if (live.size() < 32 && (live.empty() || rng() % 3 != 0)) {
          block b{nullptr, size(rng), static_cast<std::uint8_t>(t * 64 + step % 64 + 1)};
          b.p = mr.allocate(b.bytes, stream);
          fill_block(mr, b.p, b.bytes, b.value, stream);
          live.push_back(b);
        } else {
          release(rng() % live.size());
        }
      }
      while (!live.empty())
        release(live.size() - 1);
      backend().synchronize_stream(stream);
    } catch (std::exception const& e) {
      ADD_FAILURE() << "thread " << t << ": " << e.what();
      ++failures;
    }
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back(work, t);
  for (auto& th : pool)
    th.join();
  EXPECT_EQ(corrupted.load(), 0);
  EXPECT_EQ(failures.load(), 0);
}

TYPED_TEST(resource_contract, equal_to_itself_and_named) {
  memory_resource& mr = this->mr();
  EXPECT_TRUE(mr == mr);
  EXPECT_FALSE(mr.name().empty());
}

TYPED_TEST(resource_contract, memory_info_answers_or_says_not_supported) {
  memory_resource& mr = this->mr();
  if (TypeParam::memory_info_supported) {
    memory_info const info = mr.get_memory_info();
    EXPECT_GT(info.total, 0u);
    EXPECT_LE(info.free, info.total);
  } else {
    EXPECT_THROW(mr.get_memory_info(), not_supported);
  }
}

}  // namespace
}  // namespace gpumem
