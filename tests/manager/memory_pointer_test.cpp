// Ownership of the pointer types: shared owner, views, finalizer exactly once, host_memory.
#include "log_capture.hpp"

#include <gpumem/core/error.hpp>
#include <gpumem/manager/context.hpp>
#include <gpumem/manager/default_memory_manager.hpp>
#include <gpumem/manager/host_memory.hpp>
#include <gpumem/manager/memory_pointer.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

namespace gpumem {
namespace {

memory_manager_factory default_factory() {
  return [](context& c) { return std::make_unique<default_memory_manager>(c); };
}

class memory_pointer_test : public ::testing::Test {
 protected:
  context ctx{0, default_factory()};
  char storage[1024] = {};
};

TEST_F(memory_pointer_test, view_refcounts_go_one_two_three_two_one) {
  memory_pointer owner(ctx, storage, sizeof storage);
  EXPECT_EQ(owner.use_count(), 1);
  {
    memory_pointer v1 = owner.view(100, 200);
    EXPECT_EQ(owner.use_count(), 2);
    {
      memory_pointer v2 = v1.view(50, 10);  // a view of a view
      EXPECT_EQ(owner.use_count(), 3);
      EXPECT_EQ(v2.use_count(), 3);
      EXPECT_EQ(v2.device_pointer(), storage + 150);
      EXPECT_EQ(v2.size(), 10u);
      EXPECT_EQ(v2.offset_in_owner(), 150u);
      EXPECT_TRUE(v2.shares_owner_with(owner));
    }
    EXPECT_EQ(owner.use_count(), 2);
  }
  EXPECT_EQ(owner.use_count(), 1);
}

TEST_F(memory_pointer_test, finalizer_runs_exactly_once_when_the_last_owner_goes) {
  int runs = 0;
  memory_pointer view;
  {
    memory_pointer owner(ctx, storage, sizeof storage, [&runs] { ++runs; });
    memory_pointer copy = owner;
    memory_pointer moved = std::move(copy);
    EXPECT_EQ(copy.use_count(), 0);  // NOLINT(bugprone-use-after-move): moved-from is empty
    EXPECT_EQ(owner.use_count(), 2);
    view = moved.view(8);
    EXPECT_EQ(owner.use_count(), 3);
  }
  EXPECT_EQ(runs, 0) << "the view still owns the buffer";
  EXPECT_EQ(view.use_count(), 1);
  view = memory_pointer();
  EXPECT_EQ(runs, 1);
}

// A moved-from pointer is empty as a default-constructed one is: no owner, null address, device
// -1 and no context (it used to keep all but the owner, so device() named a device and
// owning_context() a context, possibly closed since, of a pointer that owns nothing). A copy
// keeps everything; the pointer moved to has what the source had.
// The same for pinned and mapped host memory: a moved-from one kept its host address, size and
// context (owning_context() named a context, possibly closed since, of memory it no longer owns).
TEST_F(memory_pointer_test, moved_from_pinned_and_mapped_memory_are_empty) {
  pinned_memory pinned(ctx, storage, 64);
  pinned_memory pinned_to = std::move(pinned);
  EXPECT_EQ(pinned_to.host_pointer(), storage);
  EXPECT_EQ(pinned_to.size(), 64u);
  EXPECT_EQ(&pinned_to.owning_context(), &ctx);
  EXPECT_FALSE(pinned);  // NOLINT(bugprone-use-after-move): what is checked
  EXPECT_EQ(pinned.host_pointer(), nullptr);
  EXPECT_EQ(pinned.size(), 0u);
  EXPECT_THROW((void)pinned.owning_context(), logic_error);
  pinned_memory pinned_assigned;
  pinned_assigned = std::move(pinned_to);
  EXPECT_EQ(pinned_assigned.host_pointer(), storage);
  EXPECT_EQ(pinned_to.host_pointer(), nullptr);  // NOLINT(bugprone-use-after-move)

  mapped_memory mapped(ctx, storage, storage + 8, 32);
  mapped_memory mapped_to = std::move(mapped);
  EXPECT_EQ(mapped_to.host_pointer(), storage);
  EXPECT_EQ(mapped_to.device_pointer(), storage + 8);
  EXPECT_FALSE(mapped);  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(mapped.host_pointer(), nullptr);
  EXPECT_EQ(mapped.device_pointer(), nullptr);
  mapped_memory mapped_assigned;
  mapped_assigned = std::move(mapped_to);
  EXPECT_EQ(mapped_assigned.host_pointer(), storage);
  EXPECT_EQ(mapped_to.host_pointer(), nullptr);  // NOLINT(bugprone-use-after-move)
  mapped_memory const copy = mapped_assigned;    // copies keep everything
  EXPECT_EQ(copy.host_pointer(), storage);
  EXPECT_EQ(mapped_assigned.use_count(), 2);
}

TEST_F(memory_pointer_test, a_moved_from_pointer_is_empty_as_a_default_constructed_one) {
  auto expect_empty = [](memory_pointer const& p) {
    EXPECT_FALSE(p);
    EXPECT_EQ(p.use_count(), 0);
    EXPECT_EQ(p.device(), -1);
    EXPECT_EQ(p.device_pointer(), nullptr);
    EXPECT_EQ(p.size(), 0u);
    EXPECT_EQ(p.offset_in_owner(), 0u);
    EXPECT_THROW((void)p.owning_context(), logic_error);
  };
  auto expect_view = [&](memory_pointer const& p) {
    EXPECT_TRUE(p);
    EXPECT_EQ(p.device(), ctx.device());
    EXPECT_EQ(p.device_pointer(), storage + 16);
    EXPECT_EQ(p.size(), 32u);
    EXPECT_EQ(p.offset_in_owner(), 16u);
    EXPECT_EQ(&p.owning_context(), &ctx);
  };
  expect_empty(memory_pointer());
  memory_pointer const owner(ctx, storage, sizeof storage);
  memory_pointer source = owner.view(16, 32);
  memory_pointer const copy = source;  // NOLINT(performance-unnecessary-copy-initialization)
  expect_view(copy);
  expect_view(source);

  memory_pointer constructed = std::move(source);
  expect_view(constructed);
  expect_empty(source);  // NOLINT(bugprone-use-after-move): what is checked

  memory_pointer assigned = owner;
  assigned = std::move(constructed);
  expect_view(assigned);
  expect_empty(constructed);        // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(owner.use_count(), 3);  // owner, copy, assigned

  memory_pointer& alias = assigned;
  assigned = std::move(alias);  // self-move leaves it as it was
  expect_view(assigned);
}

TEST_F(memory_pointer_test, finalizer_runs_once_when_owners_die_on_many_threads) {
  std::atomic<int> runs{0};
  {
    memory_pointer owner(ctx, storage, sizeof storage, [&runs] { runs.fetch_add(1); });
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([copy = owner.view(static_cast<std::size_t>(t))]() mutable {
        for (int i = 0; i < 1000; ++i) {
          memory_pointer inner = copy.view(0, 1);
          (void)inner;
        }
        copy = memory_pointer();
      });
    }
    for (auto& t : threads)
      t.join();
    EXPECT_EQ(runs.load(), 0);
  }
  EXPECT_EQ(runs.load(), 1);
}

TEST_F(memory_pointer_test, view_outside_the_buffer_names_offset_and_size) {
  memory_pointer owner(ctx, storage, 100);
  try {
    (void)owner.view(90, 20);
    FAIL() << "expected logic_error";
  } catch (logic_error const& e) {
    std::string const what = e.what();
    EXPECT_NE(what.find("offset=90"), std::string::npos) << what;
    EXPECT_NE(what.find("size=20"), std::string::npos) << what;
    EXPECT_NE(what.find("100 bytes"), std::string::npos) << what;
  }
  EXPECT_THROW((void)owner.view(101), logic_error);
  EXPECT_EQ(owner.view(100).size(), 0u);  // an empty view at the end is allowed
  EXPECT_THROW((void)memory_pointer().view(0, 0), logic_error);
}

TEST_F(memory_pointer_test, owning_context_is_the_allocating_context) {
  memory_pointer owner(ctx, storage, 10);
  EXPECT_EQ(&owner.owning_context(), &ctx);
  EXPECT_EQ(&owner.view(1, 1).owning_context(), &ctx);
  EXPECT_THROW((void)memory_pointer().owning_context(), logic_error);
}

TEST_F(memory_pointer_test, host_memory_holds_pinned_or_mapped) {
  int runs = 0;
  host_memory pinned = pinned_memory(ctx, storage, 64, [&runs] { ++runs; });
  EXPECT_FALSE(pinned.is_mapped());
  EXPECT_EQ(pinned.host_pointer(), storage);
  EXPECT_EQ(pinned.size(), 64u);
  EXPECT_THROW((void)pinned.device_pointer(), logic_error);
  EXPECT_THROW((void)pinned.mapped(), logic_error);

  host_memory mapped = mapped_memory(ctx, storage, storage + 1, 32, [&runs] { ++runs; });
  EXPECT_TRUE(mapped.is_mapped());
  EXPECT_EQ(mapped.host_pointer(), storage);
  EXPECT_EQ(mapped.device_pointer(), storage + 1);
  EXPECT_THROW((void)mapped.pinned(), logic_error);

  host_memory copy = mapped;
  EXPECT_EQ(mapped.use_count(), 2);
  pinned = host_memory();
  EXPECT_EQ(runs, 1);
  mapped = host_memory();
  EXPECT_EQ(runs, 1) << "the copy still owns the mapped memory";
  copy = host_memory();
  EXPECT_EQ(runs, 2);
}

TEST_F(memory_pointer_test, pinned_memory_keeps_its_owner_until_the_finalizer_ran) {
  auto owner = std::make_shared<std::vector<char>>(16);
  std::weak_ptr<std::vector<char>> watch = owner;
  bool owner_alive_in_finalizer = false;
  {
    pinned_memory pin(
        ctx, owner->data(), 16, [&] { owner_alive_in_finalizer = !watch.expired(); }, owner);
    owner.reset();
    EXPECT_FALSE(watch.expired());
    EXPECT_EQ(pin.owner().get(), watch.lock().get());
  }
  EXPECT_TRUE(owner_alive_in_finalizer);
  EXPECT_TRUE(watch.expired());
}

TEST_F(memory_pointer_test, a_throwing_finalizer_is_logged_not_propagated) {
  test::error_log_capture capture;
  EXPECT_NO_THROW({
    memory_pointer p(ctx, storage, 1, [] { throw std::runtime_error("boom"); });
    (void)p;
  });
  std::vector<std::string> const errors = capture.errors();
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("finalizer failed: boom"), std::string::npos) << errors[0];
}

}  // namespace
}  // namespace gpumem
