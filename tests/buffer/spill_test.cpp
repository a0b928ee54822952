// spill_manager: LRU victims and access refreshing the order, spilling exactly one whole buffer,
// a device limit of 0, exposure (refused spills, unspill on expose), slices after an unspill, spill
// on demand on a full device and its end with the manager, statistics at each level, the
// environment, the global manager, and copy-on-write of spilled shared buffers.
#include "scoped_backend.hpp"
#include "spill_test_support.hpp"

#include <gpumem/buffer/buffer.hpp>
#include <gpumem/buffer/spill_lock.hpp>
#include <gpumem/buffer/spill_manager.hpp>
#include <gpumem/core/environment.hpp>
#include <gpumem/core/error.hpp>
#include <gpumem/core/units.hpp>
#include <gpumem/cuda/device_backend.hpp>
#include <gpumem/manager/out_of_memory_handlers.hpp>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace gpumem {
namespace {

using test::pattern;
using test::quiet;
using test::touch;

TEST(spill, least_recently_used_first_and_access_refreshes) {
  spill_manager m(quiet());
  buffer a = m.from_host(pattern(4096, 1).data(), 4096);
  buffer b = m.from_host(pattern(4096, 2).data(), 4096);
  buffer c = m.from_host(pattern(4096, 3).data(), 4096);
  touch(a);  // order now: b, c, a
  EXPECT_EQ(m.spill_device_memory(1), 4096u);
  EXPECT_TRUE(b.is_spilled());
  EXPECT_FALSE(a.is_spilled());
  EXPECT_FALSE(c.is_spilled());
  EXPECT_EQ(m.spill_device_memory(1), 4096u);
  EXPECT_TRUE(c.is_spilled());
  EXPECT_FALSE(a.is_spilled());
  // Reading b back unspills it and makes it the most recent.
  EXPECT_EQ(b.to_host(), pattern(4096, 2));
  EXPECT_FALSE(b.is_spilled());
  EXPECT_EQ(m.spill_device_memory(1), 4096u);
  EXPECT_TRUE(a.is_spilled());
  EXPECT_EQ(a.to_host(), pattern(4096, 1));
  EXPECT_EQ(c.to_host(), pattern(4096, 3));
}

TEST(spill, spill_device_memory_one_spills_exactly_one_whole_buffer) {
  spill_manager m(quiet());
  buffer big = m.from_host(pattern(100000, 4).data(), 100000);
  buffer small = m.from_host(pattern(300, 5).data(), 300);
  EXPECT_EQ(m.device_bytes(), 100300u);
  EXPECT_EQ(m.buffer_count(), 2u);
  EXPECT_EQ(m.spill_device_memory(1), 100000u);
  EXPECT_TRUE(big.is_spilled());
  EXPECT_FALSE(small.is_spilled());
  EXPECT_EQ(m.device_bytes(), 300u);
  EXPECT_EQ(m.host_bytes(), 100000u);
  EXPECT_EQ(big.to_host(), pattern(100000, 4));
  EXPECT_EQ(m.host_bytes(), 0u);
}

TEST(spill, a_limit_of_zero_spills_on_creation_and_an_operation_unspills_its_inputs) {
  spill_options o = quiet();
  o.device_limit = 0;
  spill_manager m(o);
  buffer a = m.from_host(pattern(5000, 6).data(), 5000);
  buffer b = m.allocate(7000);
  EXPECT_TRUE(a.is_spilled());
  EXPECT_TRUE(b.is_spilled());
  EXPECT_EQ(m.device_bytes(), 0u);
  {
    spill_lock lock;  // an operation: inputs come back and stay while it runs
    auto const* in =
        static_cast<std::byte const*>(static_cast<buffer const&>(a).get_ptr(access::read));
    auto* out = static_cast<std::byte*>(b.get_ptr(access::write));
    EXPECT_FALSE(a.is_spilled());
    EXPECT_FALSE(b.is_spilled());
    EXPECT_EQ(m.spill_device_memory(1 << 20), 0u);  // both held
    backend().copy(out, in, 5000);
  }
  // The lock's end brings the manager back under its limit: both went again, neither exposed.
  EXPECT_EQ(m.spill_to_device_limit(), 0u);
  EXPECT_FALSE(a.is_exposed());
  EXPECT_FALSE(b.is_exposed());
  EXPECT_TRUE(a.is_spilled());
  EXPECT_TRUE(b.is_spilled());
  EXPECT_EQ(b.slice(0, 5000).to_host(), pattern(5000, 6));
}

TEST(spill, spilling_an_exposed_buffer_is_refused_and_exposing_a_spilled_one_unspills_it) {
  spill_manager m(quiet(2));
  buffer a = m.from_host(pattern(2048, 7).data(), 2048);
  buffer b = m.from_host(pattern(1024, 8).data(), 1024);
  void* exported = a.get_ptr(access::read);  // outside a spill lock: exposed
  EXPECT_TRUE(a.is_exposed());
  EXPECT_FALSE(m.spill(a));
  EXPECT_EQ(m.spill_device_memory(1 << 20), 1024u);  // only b could go
  EXPECT_FALSE(a.is_spilled());
  EXPECT_EQ(static_cast<buffer const&>(a).get_ptr(access::read), exported);
  ASSERT_TRUE(b.is_spilled());
  void* b_exported = b.get_ptr(access::write);
  EXPECT_NE(b_exported, nullptr);
  EXPECT_FALSE(b.is_spilled());
  EXPECT_TRUE(b.is_exposed());
  EXPECT_FALSE(m.spill(b));
  EXPECT_EQ(b.to_host(), pattern(1024, 8));
}

TEST(spill, slices_keep_their_identity_and_see_the_new_address) {
  spill_manager m(quiet());
  auto const bytes = pattern(9000, 9);
  buffer a = m.from_host(bytes.data(), bytes.size());
  buffer tail = a.slice(1000, 8000);
  void const* before = nullptr;
  {
    spill_lock lock;
    before = static_cast<buffer const&>(tail).get_ptr(access::read);
  }
  ASSERT_TRUE(m.spill(tail));  // the whole storage goes, for every slice of it
  EXPECT_TRUE(a.is_spilled());
  EXPECT_TRUE(tail.is_spilled());
  std::vector<std::byte> expected(bytes.begin() + 1000, bytes.end());
  EXPECT_EQ(tail.to_host(), expected);
  EXPECT_FALSE(a.is_spilled());
  {
    spill_lock lock;
    auto const* base =
        static_cast<std::byte const*>(static_cast<buffer const&>(a).get_ptr(access::read));
    EXPECT_EQ(static_cast<buffer const&>(tail).get_ptr(access::read), base + 1000);
  }
  (void)before;
}

TEST(spill, a_spill_lock_holds_a_buffer_on_the_device) {
  spill_manager m(quiet());
  buffer a = m.allocate(4096);
  {
    spill_lock outer;
    outer.hold(a);
    EXPECT_EQ(outer.size(), 1u);
    {
      spill_lock inner;
      touch(a);
    }
    EXPECT_FALSE(m.spill(a));
    EXPECT_EQ(m.spill_device_memory(1), 0u);
  }
  EXPECT_TRUE(m.spill(a));
  EXPECT_FALSE(a.is_exposed());
}

TEST(spill, on_demand_lets_an_allocation_succeed_on_a_full_device_until_the_manager_goes) {
  test::scoped_backend device(16 * MiB);
  auto const before = out_of_memory_handler_count(backend().current_device());
  std::vector<buffer> filler;
  {
    spill_options o = quiet();
    o.spill_on_demand = true;
    spill_manager m(o);
    EXPECT_EQ(out_of_memory_handler_count(backend().current_device()), before + 1);
    for (int i = 0; i < 7; ++i)
      filler.push_back(m.from_host(pattern(2 * MiB, static_cast<unsigned>(i)).data(), 2 * MiB));
    // The device holds 14 MiB of spillable buffers; 6 MiB more do not fit without spilling.
    buffer plain(6 * MiB);
    EXPECT_EQ(plain.size(), 6 * MiB);
    EXPECT_GE(m.host_bytes(), 4 * MiB);
    EXPECT_TRUE(filler.front().is_spilled());  // the least recently used went first
    EXPECT_FALSE(filler.back().is_spilled());
  }
  EXPECT_EQ(out_of_memory_handler_count(backend().current_device()), before);
  // Without the manager nothing is spilled any more: filling the device fails.
  for (std::size_t i = 0; i < filler.size(); ++i) {
    touch(filler[i]);
    EXPECT_EQ(filler[i].to_host(), pattern(2 * MiB, static_cast<unsigned>(i)));
  }
  std::vector<buffer> more;
  EXPECT_THROW(
      {
        for (int i = 0; i < 8; ++i)
          more.emplace_back(2 * MiB);
      },
      out_of_memory);
  more.clear();
  filler.clear();
}

TEST(spill, statistics_at_each_level) {
  for (int level = 0; level <= 2; ++level) {
    spill_manager m(quiet(level));
    buffer a = m.from_host(pattern(4096, 10).data(), 4096);
    ASSERT_TRUE(m.spill(a));
    (void)a.get_ptr(access::read);  // unspills and exposes, on this line
    int const exposure_line = __LINE__ - 1;
    spill_statistics const s = m.statistics();
    std::string const text = to_string(s);
    EXPECT_EQ(s.level, level);
    EXPECT_EQ(text.rfind("Spill Statistics (level=" + std::to_string(level) + "):", 0), 0u) << text;
    if (level == 0) {
      EXPECT_EQ(s.spilled_bytes, 0u);
      EXPECT_EQ(s.pinned_bytes, 0u);
      EXPECT_EQ(text.find("gpu => cpu"), std::string::npos);
    } else {
      EXPECT_EQ(s.spilled_bytes, 4096u);
      EXPECT_EQ(s.unspilled_bytes, 4096u);
      EXPECT_NE(text.find(" Spilling (level >= 1):\n  gpu => cpu: 4096B in "), std::string::npos)
          << text;
      EXPECT_NE(text.find("s (1 batch, 1 buffer)\n  cpu => gpu: 4096B in "), std::string::npos)
          << text;
      EXPECT_NE(text.find("s (1 buffer)\n  host memory pinned: "), std::string::npos) << text;
      EXPECT_EQ(text.find("synchronisations"), std::string::npos) << "nothing was lent: " << text;
      EXPECT_EQ(s.spill_count, 1u);
      EXPECT_EQ(s.spilled_buffers, 1u);
      EXPECT_EQ(s.unspill_count, 1u);
      EXPECT_EQ(s.synchronizations, 0u);
      EXPECT_GE(s.pinned_bytes, 4096u);
    }
    if (level == 2) {
      ASSERT_EQ(s.exposures.size(), 1u);
      std::string const where = "spill_test.cpp:" + std::to_string(exposure_line);
      EXPECT_NE(s.exposures[0].where.find(where), std::string::npos) << s.exposures[0].where;
      EXPECT_EQ(s.exposures[0].bytes, 4096u);
      EXPECT_NE(text.find(" Exposed buffers (level >= 2):\n  4096B in 1 exposure at "),
                std::string::npos)
          << text;
    } else {
      EXPECT_TRUE(s.exposures.empty());
      EXPECT_EQ(text.find("Exposed"), std::string::npos);
    }
  }
}

class scoped_env {
 public:
  scoped_env(char const* name, char const* value) : name_(name) {
    ::setenv(name, value, 1);
    reload_environment();
  }
  ~scoped_env() {
    ::unsetenv(name_);
    reload_environment();
  }

 private:
  char const* name_;
};

TEST(spill, options_from_the_environment) {
  {
    scoped_env limit("GPUMEM_SPILL_DEVICE_LIMIT", "3MiB");
    scoped_env stats("GPUMEM_SPILL_STATS", "2");
    scoped_env demand("GPUMEM_SPILL_ON_DEMAND", "off");
    spill_options const o = spill_options::from_environment();
    EXPECT_EQ(o.device_limit, std::optional<std::size_t>(3 * MiB));
    EXPECT_EQ(o.statistics_level, 2);
    EXPECT_FALSE(o.spill_on_demand);
  }
  EXPECT_FALSE(spill_options::from_environment().device_limit.has_value());
  EXPECT_TRUE(spill_options::from_environment().spill_on_demand);
  for (auto const& bad : {std::pair<char const*, char const*>{"GPUMEM_SPILL_STATS", "3"},
                          {"GPUMEM_SPILL", "maybe"},
                          {"GPUMEM_SPILL_DEVICE_LIMIT", "lots"},
                          {"GPUMEM_SPILL_ON_DEMAND", "2"}}) {
    ::setenv(bad.first, bad.second, 1);
    try {
      reload_environment();
      (void)spill_options::from_environment();
      ADD_FAILURE() << bad.first << "=" << bad.second << " was accepted";
    } catch (logic_error const& e) {
      EXPECT_NE(std::string(e.what()).find(bad.first), std::string::npos) << e.what();
    }
    ::unsetenv(bad.first);
    reload_environment();
  }
}

TEST(spill, the_global_manager_makes_device_buffers_spillable) {
  auto m = std::make_shared<spill_manager>(quiet());
  set_global_spill_manager(m);
  buffer a = buffer::from_host(pattern(777, 11).data(), 777);
  buffer pinned(64, buffer_memory::pinned);
  buffer_options opt_out;
  opt_out.spillable = false;
  buffer plain(64, opt_out);
  set_global_spill_manager(nullptr);
  EXPECT_TRUE(a.is_spillable());
  EXPECT_FALSE(pinned.is_spillable());
  EXPECT_FALSE(plain.is_spillable());
  EXPECT_TRUE(m->spill(a));
  EXPECT_EQ(a.to_host(), pattern(777, 11));
  buffer later(64);
  EXPECT_FALSE(later.is_spillable());
}

TEST(spill, copies_keep_an_opt_out_of_spilling) {
  auto m = std::make_shared<spill_manager>(quiet());
  set_global_spill_manager(m);
  buffer_options opt_out;
  opt_out.spillable = false;
  buffer const a = buffer::from_host(pattern(500, 15).data(), 500, opt_out);
  buffer const a_copy = a.copy();
  stream s;
  buffer const a_async = a.copy(s);
  s.synchronize();
  buffer const a_cow = a.as_copy_on_write();
  opt_out.copy_on_write = true;
  buffer const b = buffer::from_host(pattern(300, 16).data(), 300, opt_out);
  buffer const b_copy = b.copy();
  buffer const plain = buffer::from_host(pattern(200, 17).data(), 200);
  buffer const plain_copy = plain.copy();
  set_global_spill_manager(nullptr);
  for (buffer const* x : {&a, &a_copy, &a_async, &a_cow, &b, &b_copy})
    EXPECT_FALSE(x->is_spillable());
  EXPECT_TRUE(plain.is_spillable());
  EXPECT_TRUE(plain_copy.is_spillable());  // no opt-out: the global manager adopts the copy
  EXPECT_EQ(m->buffer_count(), 2u);
  EXPECT_EQ(a_copy.to_host(), pattern(500, 15));
  EXPECT_EQ(b_copy.to_host(), pattern(300, 16));
}

// A copy is a buffer made when it is made, by one rule whichever call makes it (copy(),
// as_copy_on_write(), a write that unshares a copy-on-write slice): made while a global spill
// manager is set, it is adopted by that manager as any device buffer made then is, also when the
// original was made before the manager was set, unless the original opted out; a copy of a buffer
// of a manager of its own stays with that manager.
TEST(spill, copies_made_under_a_global_manager_follow_one_rule_whichever_call_makes_them) {
  buffer const plain = buffer::from_host(pattern(400, 18).data(), 400);
  buffer_options cow;
  cow.copy_on_write = true;
  buffer const shared = buffer::from_host(pattern(200, 19).data(), 200, cow);
  buffer_options opt_out;
  opt_out.spillable = false;
  buffer const opted_out = buffer::from_host(pattern(300, 20).data(), 300, opt_out);
  spill_manager own(quiet());
  buffer const owned = own.from_host(pattern(100, 21).data(), 100);
  ASSERT_FALSE(plain.is_spillable());
  ASSERT_FALSE(shared.is_spillable());
  ASSERT_EQ(own.buffer_count(), 1u);

  auto m = std::make_shared<spill_manager>(quiet());
  set_global_spill_manager(m);
  buffer const plain_copy = plain.copy();
  buffer const plain_cow = plain.as_copy_on_write();
  buffer const shared_copy = shared.copy();
  buffer unshared = shared;  // a slice of the same owner: a write gives it its own
  {
    spill_lock lock;
    (void)unshared.get_ptr(access::write);
  }
  buffer const opted_out_copy = opted_out.copy();
  buffer const opted_out_cow = opted_out.as_copy_on_write();
  buffer const owned_copy = owned.copy();
  buffer const owned_cow = owned.as_copy_on_write();
  set_global_spill_manager(nullptr);

  EXPECT_TRUE(plain_copy.is_spillable());
  EXPECT_TRUE(plain_cow.is_spillable()) << "as_copy_on_write() must follow copy()'s rule";
  EXPECT_TRUE(plain_cow.is_copy_on_write());
  EXPECT_TRUE(shared_copy.is_spillable());
  EXPECT_TRUE(shared_copy.is_copy_on_write());
  EXPECT_FALSE(unshared.owns_same_memory(shared));
  EXPECT_TRUE(unshared.is_spillable());
  EXPECT_FALSE(opted_out_copy.is_spillable());
  EXPECT_FALSE(opted_out_cow.is_spillable());
  EXPECT_TRUE(opted_out_cow.is_copy_on_write());
  EXPECT_EQ(m->buffer_count(), 4u) << "the copies of the buffers that had no manager";
  EXPECT_EQ(own.buffer_count(), 3u) << "the copies of a manager's buffer stay with it";
  EXPECT_FALSE(plain.is_spillable()) << "the originals are as they were made";
  EXPECT_FALSE(shared.is_spillable());

  EXPECT_TRUE(m->spill(plain_cow));
  EXPECT_TRUE(m->spill(unshared));
  EXPECT_TRUE(own.spill(owned_cow));
  EXPECT_EQ(plain_cow.to_host(), pattern(400, 18));
  EXPECT_EQ(plain_copy.to_host(), pattern(400, 18));
  EXPECT_EQ(shared_copy.to_host(), pattern(200, 19));
  EXPECT_EQ(unshared.to_host(), pattern(200, 19));
  EXPECT_EQ(opted_out_cow.to_host(), pattern(300, 20));
  EXPECT_EQ(owned_cow.to_host(), pattern(100, 21));
  EXPECT_EQ(owned_copy.to_host(), pattern(100, 21));
}

TEST(spill, a_spilled_shared_buffer_is_unspilled_then_copied_on_write) {
  spill_manager m(quiet(1));
  auto const original = pattern(6000, 12);
  buffer a = m.from_host(original.data(), original.size(), /*copy_on_write=*/true);
  buffer b = a;
  ASSERT_TRUE(m.spill(a));
  EXPECT_TRUE(b.is_spilled());
  auto const changed = pattern(6000, 13);
  {
    spill_lock lock;
    backend().copy(b.get_ptr(access::write), changed.data(), changed.size());
  }
  EXPECT_FALSE(a.owns_same_memory(b));
  EXPECT_TRUE(b.is_spillable());
  EXPECT_EQ(a.to_host(), original);
  EXPECT_EQ(b.to_host(), changed);
  EXPECT_EQ(m.statistics().unspilled_bytes, 6000u);  // the owner came back once, for the copy
  EXPECT_EQ(m.buffer_count(), 2u);
}

TEST(spill, buffers_outlive_their_manager) {
  std::optional<spill_manager> m(std::in_place, quiet());
  buffer a = m->from_host(pattern(1234, 14).data(), 1234);
  ASSERT_TRUE(m->spill(a));
  m.reset();
  EXPECT_EQ(a.to_host(), pattern(1234, 14));
}

TEST(spill, only_device_memory_is_spillable) {
  spill_manager m(quiet());
  buffer_options o;
  o.memory = buffer_memory::pinned;
  o.spill = &m;
  EXPECT_THROW(buffer(64, o), logic_error);
}

TEST(spill, bad_options_are_refused_naming_the_option) {
  spill_options o = quiet();
  o.statistics_level = 3;
  EXPECT_THROW(spill_manager{o}, logic_error);
  o = quiet();
  o.copy_piece = 0;
  EXPECT_THROW(spill_manager{o}, logic_error);
  o = quiet();
  o.host_pool_growth = ~std::size_t{0};
  try {
    spill_manager m(o);
    FAIL() << "no logic_error";
  } catch (logic_error const& e) {
    EXPECT_NE(std::string(e.what()).find("host_pool_growth 18446744073709551615"),
              std::string::npos)
        << e.what();
  }
}

TEST(spill, a_buffer_never_spillable_with_a_spill_manager_named_is_refused) {
  spill_manager m(quiet());
  buffer_options o;
  o.spill = &m;
  o.spillable = false;
  try {
    buffer b(64, o);
    FAIL() << "no logic_error";
  } catch (logic_error const& e) {
    EXPECT_NE(std::string(e.what()).find("spillable is false"), std::string::npos) << e.what();
  }
  EXPECT_EQ(m.device_bytes(), 0u);
}

}  // namespace
}  // namespace gpumem
