// The spill layer against hostile use: spillable buffers of SIZE_MAX and SIZE_MAX - k bytes (a
// typed error naming the size, nothing registered or leaked), requests larger than the whole
// device (out of memory without spilling anything first), spill_device_memory(SIZE_MAX) and
// spill_to_device_limit(0) on an empty and a full manager, and a manager destroyed while its
// buffers live in every state. Spill locks used against their grain: spill_lock_test.cpp.
#include "spill_test_support.hpp"

#include <gpumem/buffer/buffer.hpp>
#include <gpumem/buffer/spill_lock.hpp>
#include <gpumem/buffer/spill_manager.hpp>
#include <gpumem/core/error.hpp>
#include <gpumem/core/units.hpp>
#include <gpumem/cuda/device_backend.hpp>
#include <gpumem/manager/context.hpp>

#include <gtest/gtest.h>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace gpumem {
namespace {

using test::pattern;
using test::quiet;
using test::touch;

constexpr std::size_t size_max = ~std::size_t{0};

TEST(spill_hostile, a_buffer_of_size_max_or_just_below_is_a_typed_error_and_leaks_nothing) {
  for (char const* manager : {"default", "pool"}) {
    test::scoped_manager scope(manager);
    spill_options o = quiet(1);
    o.spill_on_demand = true;  // asked for nothing: no request this large can be served
    spill_manager m(o);
    buffer kept = m.allocate(4096);
    std::size_t const in_use =
        current_context().memory_manager().get_memory_statistics().bytes_in_use;
    std::vector<std::byte> const small(64);
    for (std::size_t k : {std::size_t{0}, std::size_t{1}, std::size_t{255}, std::size_t{256},
                          std::size_t{4096}, std::size_t{1} << 20}) {
      std::size_t const bytes = size_max - k;
      std::string const named = std::to_string(bytes);
      try {
        buffer b = m.allocate(bytes);
        ADD_FAILURE() << manager << ": a buffer of " << bytes << " bytes was made";
      } catch (out_of_memory const& e) {
        EXPECT_NE(std::string(e.what()).find(named), std::string::npos) << e.what();
      }
      // The host bytes are never read: the device allocation fails first.
      EXPECT_THROW(m.from_host(small.data(), bytes, /*copy_on_write=*/true), out_of_memory);
    }
    EXPECT_EQ(m.buffer_count(), 1u) << manager;
    EXPECT_EQ(m.device_bytes(), 4096u);
    EXPECT_EQ(m.host_bytes(), 0u);
    EXPECT_EQ(m.statistics().spill_count, 0u) << "nothing was spilled for an impossible request";
    EXPECT_FALSE(kept.is_spilled());
    current_context().pending_deallocations().flush();
    EXPECT_EQ(current_context().memory_manager().get_memory_statistics().bytes_in_use, in_use)
        << manager << ": a failed buffer left memory behind";
  }
}

TEST(spill_hostile, a_request_above_the_whole_device_spills_nothing) {
  for (char const* manager : {"default", "pool"}) {
    test::scoped_manager scope(manager);
    spill_options o = quiet(1);
    o.spill_on_demand = true;
    spill_manager m(o);
    std::vector<buffer> kept;
    for (unsigned i = 0; i < 4; ++i)
      kept.push_back(m.from_host(pattern(64 * KiB, i).data(), 64 * KiB));
    std::size_t const total = backend().get_memory_info().total;
    for (std::size_t bytes : {total + 1, 2 * total}) {
      for (bool spillable : {false, true}) {
        try {
          buffer b = spillable ? m.allocate(bytes) : buffer(bytes);
          ADD_FAILURE() << manager << ": a buffer of " << bytes << " bytes was made";
        } catch (out_of_memory const& e) {
          EXPECT_EQ(e.requested_bytes(), bytes);
        }
      }
    }
    EXPECT_EQ(m.statistics().spill_count, 0u) << manager << ": spilled for a hopeless request";
    EXPECT_EQ(m.host_bytes(), 0u);
    for (buffer const& b : kept)
      EXPECT_FALSE(b.is_spilled());
    EXPECT_EQ(m.buffer_count(), 4u);
  }
}

TEST(spill_hostile, spilling_everything_on_an_empty_and_a_full_manager) {
  spill_manager m(quiet());
  EXPECT_EQ(m.spill_device_memory(size_max), 0u);
  EXPECT_EQ(m.spill_to_device_limit(0), 0u);
  EXPECT_EQ(m.spill_to_device_limit(), 0u) << "no configured limit: nothing to do";
  EXPECT_EQ(m.spill_device_memory(0), 0u);
  std::vector<buffer> buffers;
  for (unsigned i = 0; i < 5; ++i)
    buffers.push_back(m.from_host(pattern(1000 + i, i).data(), 1000 + i));
  std::size_t const all = m.device_bytes();
  EXPECT_EQ(m.spill_device_memory(size_max), all);
  EXPECT_EQ(m.device_bytes(), 0u);
  EXPECT_EQ(m.host_bytes(), all);
  EXPECT_EQ(m.spill_device_memory(size_max), 0u) << "everything is spilled already";
  EXPECT_EQ(m.spill_to_device_limit(0), 0u);
  for (buffer const& b : buffers)
    touch(b);
  EXPECT_EQ(m.spill_to_device_limit(0), all);
  EXPECT_EQ(m.spill_to_device_limit(size_max), 0u);
  for (unsigned i = 0; i < 5; ++i)
    EXPECT_EQ(buffers[i].to_host(), pattern(1000 + i, i));
  m.check_invariants();
}

TEST(spill_hostile, buffers_in_every_state_keep_working_after_their_manager_is_destroyed) {
  std::optional<spill_manager> m(std::in_place, quiet(1));
  buffer on_device = m->from_host(pattern(1500, 5).data(), 1500);
  buffer spilled = m->from_host(pattern(2500, 6).data(), 2500);
  buffer exposed = m->from_host(pattern(500, 7).data(), 500);
  buffer shared = m->from_host(pattern(800, 8).data(), 800, /*copy_on_write=*/true);
  buffer shared_copy = shared;
  buffer held = m->from_host(pattern(700, 9).data(), 700);
  ASSERT_TRUE(m->spill(spilled));
  ASSERT_TRUE(m->spill(shared));
  void const* address = static_cast<buffer const&>(exposed).get_ptr(access::read);
  {
    spill_lock lock;
    lock.hold(held);
    m.reset();  // while a lock holds one of its buffers
  }
  EXPECT_EQ(on_device.to_host(), pattern(1500, 5));
  EXPECT_EQ(spilled.to_host(), pattern(2500, 6)) << "a spilled buffer comes back on use";
  EXPECT_FALSE(spilled.is_spilled());
  EXPECT_EQ(static_cast<buffer const&>(exposed).get_ptr(access::read), address);
  EXPECT_EQ(held.to_host(), pattern(700, 9));
  std::vector<std::byte> const changed = pattern(800, 10);
  {
    spill_lock lock;
    backend().copy(shared_copy.get_ptr(access::write), changed.data(), changed.size());
  }
  EXPECT_EQ(shared.to_host(), pattern(800, 8)) << "copy-on-write still unshares";
  EXPECT_EQ(shared_copy.to_host(), changed);
  buffer deep = held.copy();
  EXPECT_TRUE(deep.is_spillable());
  EXPECT_EQ(deep.to_host(), pattern(700, 9));
}

}  // namespace
}  // namespace gpumem
