// The typed contract suite: every fixture of resource_contract_fixtures.hpp runs every test
// below (and those of resource_sizes_test.cpp), on both backends.
#include "resource_contract_fixtures.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <random>
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

using namespace contract;

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
  std::vector<patterned_block> blocks;
  for (int i = 0; i < 48; ++i) {
    std::size_t const bytes = size(rng);
    blocks.push_back(allocate_patterned(mr, bytes, static_cast<std::uint8_t>(i * 37 + 1), stream));
    ASSERT_NE(blocks.back().p, nullptr);
  }
  ASSERT_NO_FATAL_FAILURE(expect_distinct_and_intact(mr, blocks, stream));
  for (patterned_block const& b : blocks)
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
      std::vector<patterned_block> live;
      auto release = [&](std::size_t i) {
        patterned_block const b = live[i];
        if (first_mismatch(mr, b.p, b.bytes, b.value, stream) != b.bytes) ++corrupted;
        mr.deallocate(b.p, b.bytes, stream);
        live[i] = live.back();
        live.pop_back();
      };
      for (int step = 0; step < steps; ++step) {
        if (live.size() < 32 && (live.empty() || rng() % 3 != 0)) {
          std::size_t const bytes = size(rng);
          live.push_back(allocate_patterned(
              mr, bytes, static_cast<std::uint8_t>(t * 64 + step % 64 + 1), stream));
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
