// Spill locks used against their grain: a lock that outlives the thread that made it, one
// destroyed by another thread while its own thread lives on, and locks destroyed out of order.
// Each must release what it holds and leave every thread's innermost lock right. A lock cannot be
// copied or moved, so there is no moved-from lock to misuse (checked at compile time).
#include "spill_test_support.hpp"

#include <gpumem/buffer/buffer.hpp>
#include <gpumem/buffer/spill_lock.hpp>
#include <gpumem/buffer/spill_manager.hpp>
#include <gpumem/cuda/device_backend.hpp>

#include <gtest/gtest.h>

#include <future>
#include <memory>
#include <thread>
#include <type_traits>

namespace gpumem {
namespace {

using test::pattern;
using test::quiet;

static_assert(!std::is_copy_constructible_v<spill_lock> &&
                  !std::is_move_constructible_v<spill_lock>,
              "a spill lock stays where it was made: there is no moved-from lock");
static_assert(!std::is_copy_assignable_v<spill_lock> && !std::is_move_assignable_v<spill_lock>);

TEST(spill_lock_misuse, a_lock_that_outlives_its_thread_releases_and_leaves_other_stacks_alone) {
  spill_manager m(quiet());
  buffer a = m.from_host(pattern(2000, 3).data(), 2000);
  buffer b = m.from_host(pattern(3000, 4).data(), 3000);
  std::unique_ptr<spill_lock> orphan;
  std::thread([&] {
    orphan = std::make_unique<spill_lock>();
    orphan->hold(a);
    (void)static_cast<buffer const&>(b).get_ptr(access::read);  // lent inside the lock
  }).join();
  EXPECT_EQ(spill_lock::current(), nullptr) << "another thread's lock is not this thread's";
  EXPECT_FALSE(m.spill(a)) << "still held by the lock of the thread that exited";
  EXPECT_FALSE(m.spill(b));
  {
    spill_lock mine;
    orphan.reset();  // destroyed here, on another thread than its own
    EXPECT_EQ(spill_lock::current(), &mine) << "this thread's stack is untouched";
  }
  EXPECT_EQ(spill_lock::current(), nullptr);
  EXPECT_TRUE(m.spill(a));
  EXPECT_TRUE(m.spill(b));
  EXPECT_FALSE(a.is_exposed());
  EXPECT_FALSE(b.is_exposed());
  EXPECT_EQ(a.to_host(), pattern(2000, 3));
  EXPECT_EQ(b.to_host(), pattern(3000, 4));
  m.check_invariants();
}

TEST(spill_lock_misuse, a_lock_destroyed_by_another_thread_while_its_own_lives_unlinks_itself) {
  spill_manager m(quiet());
  buffer a = m.allocate(4096);
  std::promise<spill_lock*> made;
  std::promise<void> destroyed;
  std::promise<bool> consistent;
  std::thread owner([&] {
    spill_lock outer;
    auto* inner = new spill_lock;  // handed to the main thread, which destroys it
    inner->hold(a);
    made.set_value(inner);
    destroyed.get_future().wait();
    bool ok = spill_lock::current() == &outer;
    {
      spill_lock next;
      ok = ok && spill_lock::current() == &next;
    }
    consistent.set_value(ok && spill_lock::current() == &outer);
  });
  spill_lock* inner = made.get_future().get();
  EXPECT_FALSE(m.spill(a));
  delete inner;
  destroyed.set_value();
  EXPECT_TRUE(consistent.get_future().get()) << "the owner's stack lost track of its locks";
  owner.join();
  EXPECT_TRUE(m.spill(a));
}

TEST(spill_lock_misuse, locks_destroyed_out_of_order_on_their_thread_keep_the_stack) {
  spill_manager m(quiet());
  buffer a = m.allocate(512);
  auto first = std::make_unique<spill_lock>();
  auto second = std::make_unique<spill_lock>();
  second->hold(a);
  first.reset();
  EXPECT_EQ(spill_lock::current(), second.get());
  EXPECT_FALSE(m.spill(a));
  second.reset();
  EXPECT_EQ(spill_lock::current(), nullptr);
  EXPECT_TRUE(m.spill(a));
}

}  // namespace
}  // namespace gpumem
