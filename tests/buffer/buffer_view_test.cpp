// Views of existing memory: they keep their owner alive for as long as any handle or slice lives
// (also while an asynchronous copy is in flight), and report which buffers share memory.
#include "expect_error.hpp"
#include "stream_gate.hpp"
#include "tracked_device_buffer.hpp"

#include <gpumem/buffer/buffer.hpp>
#include <gpumem/manager/context.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <numeric>
#include <vector>

namespace gpumem {
namespace {

std::vector<std::byte> iota_bytes(std::size_t n) {
  std::vector<std::byte> out(n);
  for (std::size_t i = 0; i < n; ++i)
    out[i] = static_cast<std::byte>(i & 0xff);
  return out;
}

TEST(buffer_view, foreign_owner_lives_until_the_last_slice_goes) {
  test::tracked_device_buffer memory(256);
  auto const host = iota_bytes(256);
  backend().copy(memory.ptr, host.data(), host.size());
  buffer slice;
  {
    buffer const whole = buffer::view(memory.ptr, 256, memory.owner(), buffer_memory::device);
    EXPECT_TRUE(whole.is_view());
    EXPECT_EQ(whole.get_ptr(access::read), memory.ptr);
    slice = whole.slice(200, 56);
  }
  EXPECT_FALSE(memory.released->load());
  EXPECT_EQ(slice.to_host(), std::vector<std::byte>(host.begin() + 200, host.end()));
  slice = buffer();
  EXPECT_TRUE(memory.released->load());
}

TEST(buffer_view, memory_pointer_owner_lives_until_the_last_view_goes) {
  auto finalized = std::make_shared<std::atomic<int>>(0);
  void* raw = backend().allocate(128);
  buffer b;
  {
    memory_pointer p(current_context(), raw, 128, [raw, finalized] {
      backend().deallocate(raw);
      finalized->fetch_add(1);
    });
    b = buffer::view(p.view(64), buffer_memory::device);
    EXPECT_EQ(b.size(), 64u);
    EXPECT_EQ(b.get_ptr(access::read), static_cast<char*>(raw) + 64);
    EXPECT_EQ(p.use_count(), 2);
  }
  EXPECT_EQ(finalized->load(), 0);
  b = buffer();
  EXPECT_EQ(finalized->load(), 1);
}

TEST(buffer_view, views_of_manager_memory_of_each_kind) {
  memory_manager& manager = current_context().memory_manager();
  buffer const d = buffer::view(manager.memalloc(64));
  EXPECT_EQ(d.memory(), buffer_memory::device);
  buffer const m = buffer::view(manager.memallocmanaged(64, true));
  EXPECT_EQ(m.memory(), buffer_memory::managed);
  buffer const h = buffer::view(manager.memhostalloc(64, host_alloc_flags{}));
  EXPECT_EQ(h.memory(), buffer_memory::pinned);
  for (buffer const* b : {&d, &m, &h}) {
    EXPECT_TRUE(b->is_view());
    EXPECT_EQ(b->size(), 64u);
    EXPECT_NE(b->get_ptr(access::read), nullptr);
  }
  test::expect_logic_error([&] { buffer::view(manager.memalloc(8), buffer_memory::pinned); },
                           "not pinned");
  EXPECT_TRUE(buffer::view(memory_pointer()).empty());
}

TEST(buffer_view, owns_same_memory_follows_the_owner) {
  memory_manager& manager = current_context().memory_manager();
  memory_pointer p = manager.memalloc(100);
  buffer const a = buffer::view(p);
  buffer const b = buffer::view(p.view(10, 20));
  buffer const other = buffer::view(manager.memalloc(100));
  EXPECT_TRUE(a.owns_same_memory(b));  // two views of one allocation
  EXPECT_FALSE(a.owns_same_memory(other));
  EXPECT_TRUE(a.owns_same_memory(a.slice(1, 2)));

  auto owner = std::make_shared<int>(0);
  std::vector<std::byte> bytes(16);
  buffer const f1 = buffer::view(bytes.data(), 8, owner, buffer_memory::pinned);
  buffer const f2 = buffer::view(bytes.data() + 8, 8, owner, buffer_memory::pinned);
  buffer const unowned = buffer::view(bytes.data(), 8, nullptr, buffer_memory::pinned);
  EXPECT_TRUE(f1.owns_same_memory(f2));  // one foreign owner
  EXPECT_FALSE(f1.owns_same_memory(unowned));
  EXPECT_FALSE(f1.owns_same_memory(a));
  EXPECT_FALSE(a.owns_same_memory(f1));

  buffer const copied = a.copy();
  EXPECT_FALSE(copied.owns_same_memory(a));
  buffer const handle = copied;  // a copy of the handle shares the allocation and is no view
  EXPECT_TRUE(handle.owns_same_memory(copied));
  EXPECT_FALSE(handle.is_view());
}

TEST(buffer_view, bad_foreign_ranges_are_refused) {
  test::expect_logic_error([] { buffer::view(nullptr, 8, nullptr, buffer_memory::device); },
                           "buffer::view: null pointer for 8 bytes");
  auto* near_top = reinterpret_cast<void*>(std::numeric_limits<std::uintptr_t>::max() - 3);
  test::expect_logic_error([&] { buffer::view(near_top, 8, nullptr, buffer_memory::device); },
                           "8 bytes from address " +
                               std::to_string(std::numeric_limits<std::uintptr_t>::max() - 3) +
                               " wrap the address space");
  EXPECT_TRUE(buffer::view(nullptr, 0, nullptr, buffer_memory::device).empty());
}

// An asynchronous copy keeps its source alive: dropping every handle while the stream is held
// back must not free the memory under the copy.
TEST(buffer_view, asynchronous_copy_keeps_the_source_alive) {
  GPUMEM_SKIP_WHILE_GATES_SERIALISE();
  test::tracked_device_buffer memory(64);
  auto const host = iota_bytes(64);
  backend().copy(memory.ptr, host.data(), host.size());
  auto s = stream::create();
  test::stream_gate gate;
  gate.block(s.handle());
  buffer copy;
  {
    buffer const source = buffer::view(memory.ptr, 64, memory.owner(), buffer_memory::device);
    copy = source.copy(s);
  }
  EXPECT_FALSE(memory.released->load());  // the stream holds it
  gate.open();
  s.synchronize();
  EXPECT_TRUE(memory.released->load());
  EXPECT_EQ(copy.to_host(), host);
}

}  // namespace
}  // namespace gpumem
