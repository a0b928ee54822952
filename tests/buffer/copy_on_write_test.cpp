// Copy-on-write buffers: a write to a shallow copy leaves the original, a chain of shallow copies
// where each write unshares only the one written, deletion of any subset, exposure (export, then
// write; an exposed owner is shared by its copies and slices and never unshared, so the exported
// address stays the buffer's), slices copying only their range, and plain buffers keeping their
// sharing semantics.
#include <gpumem/buffer/buffer.hpp>
#include <gpumem/buffer/spill_lock.hpp>
#include <gpumem/cuda/device_backend.hpp>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <random>
#include <vector>

namespace gpumem {
namespace {

std::vector<std::byte> pattern(std::size_t n, unsigned seed) {
  std::vector<std::byte> out(n);
  for (std::size_t i = 0; i < n; ++i)
    out[i] = static_cast<std::byte>((i * 31 + seed * 7 + 1) & 0xff);
  return out;
}

// Writes `bytes` at `offset` of `b` as code inside gpumem does: under a spill lock.
void write(buffer& b, std::vector<std::byte> const& bytes, std::size_t offset = 0) {
  spill_lock lock;
  auto* p = static_cast<std::byte*>(b.get_ptr(access::write));
  backend().copy(p + offset, bytes.data(), bytes.size());
}

buffer_options cow() {
  buffer_options o;
  o.copy_on_write = true;
  return o;
}

TEST(copy_on_write, write_to_a_shallow_copy_leaves_the_original) {
  auto const original = pattern(4096, 1);
  buffer a = buffer::from_host(original.data(), original.size(), cow());
  ASSERT_TRUE(a.is_copy_on_write());
  buffer b = a.shallow_copy();
  EXPECT_TRUE(b.owns_same_memory(a));
  auto const changed = pattern(4096, 2);
  write(b, changed);
  EXPECT_FALSE(b.owns_same_memory(a));
  EXPECT_EQ(a.to_host(), original);
  EXPECT_EQ(b.to_host(), changed);
  // a is alone now: writing it changes it in place, no copy.
  void const* before = static_cast<buffer const&>(a).get_ptr(access::read);
  {
    spill_lock lock;
    EXPECT_EQ(a.get_ptr(access::write), before);
  }
}

TEST(copy_on_write, the_only_slice_writes_in_place) {
  buffer a(1024, cow());
  void* first = nullptr;
  {
    spill_lock lock;
    first = a.get_ptr(access::write);
  }
  buffer moved = std::move(a);
  spill_lock lock;
  EXPECT_EQ(moved.get_ptr(access::write), first);
}

TEST(copy_on_write, chain_of_seven_each_write_unshares_only_the_written_one) {
  auto const original = pattern(512, 3);
  std::vector<std::optional<buffer>> chain;
  chain.emplace_back(buffer::from_host(original.data(), original.size(), cow()));
  for (int i = 1; i < 7; ++i)
    chain.emplace_back(chain.back()->shallow_copy());
  std::vector<std::vector<std::byte>> expected(7, original);
  for (int i : {3, 0, 6}) {
    expected[i] = pattern(512, 10 + i);
    write(*chain[i], expected[i]);
    for (int j = 0; j < 7; ++j) {
      EXPECT_EQ(chain[j]->to_host(), expected[j]) << "after writing " << i << ", copy " << j;
      bool const written = j == 3 || j == 0 || j == 6;
      if (j != i && !written) {
        EXPECT_FALSE(chain[j]->owns_same_memory(*chain[i]));
      }
    }
  }
  // The untouched ones still share one owner.
  EXPECT_TRUE(chain[1]->owns_same_memory(*chain[2]));
  EXPECT_TRUE(chain[4]->owns_same_memory(*chain[5]));
}

TEST(copy_on_write, deleting_any_subset_never_corrupts_the_rest) {
  auto const original = pattern(256, 4);
  for (unsigned mask = 0; mask < 128; mask += 9) {
    std::vector<std::optional<buffer>> chain;
    chain.emplace_back(buffer::from_host(original.data(), original.size(), cow()));
    for (int i = 1; i < 7; ++i)
      chain.emplace_back(*chain.back());
    for (int i = 0; i < 7; ++i)
      if (mask & (1u << i)) chain[i].reset();
    // Write the first survivor; everyone else keeps the original.
    int first = -1;
    for (int i = 0; i < 7; ++i)
      if (chain[i]) {
        if (first < 0) {
          first = i;
          write(*chain[i], pattern(256, 99));
        }
      }
    for (int i = 0; i < 7; ++i) {
      if (!chain[i]) continue;
      EXPECT_EQ(chain[i]->to_host(), i == first ? pattern(256, 99) : original)
          << "mask " << mask << " copy " << i;
    }
  }
}

TEST(copy_on_write, a_slice_copies_only_its_range) {
  auto const original = pattern(1000, 5);
  buffer a = buffer::from_host(original.data(), original.size(), cow());
  buffer s = a.slice(100, 200);
  auto const changed = pattern(200, 6);
  write(s, changed);
  EXPECT_EQ(s.size(), 200u);
  EXPECT_FALSE(s.is_view());  // its own owner of exactly its range
  EXPECT_EQ(s.to_host(), changed);
  EXPECT_EQ(a.to_host(), original);
}

TEST(copy_on_write, copy_is_always_deep) {
  auto const original = pattern(300, 7);
  buffer a = buffer::from_host(original.data(), original.size(), cow());
  buffer d = a.copy();
  EXPECT_FALSE(d.owns_same_memory(a));
  EXPECT_TRUE(d.is_copy_on_write());
  EXPECT_EQ(d.to_host(), original);
}

TEST(copy_on_write, export_then_write) {
  auto const original = pattern(2048, 8);
  buffer a = buffer::from_host(original.data(), original.size(), cow());
  buffer b = a;  // a shallow copy
  // Handing the address out (outside any spill lock) exposes: a gets its own owner first.
  auto* exported = static_cast<std::byte*>(a.get_ptr(access::write));
  EXPECT_TRUE(a.is_exposed());
  EXPECT_FALSE(b.is_exposed());
  EXPECT_FALSE(a.owns_same_memory(b));
  // A copy of the exposed buffer is deep: the third party's later writes do not reach it.
  buffer c = a;
  EXPECT_FALSE(c.owns_same_memory(a));
  EXPECT_FALSE(c.is_exposed());
  auto const changed = pattern(2048, 9);
  backend().copy(exported, changed.data(), changed.size());
  EXPECT_EQ(a.to_host(), changed);
  EXPECT_EQ(b.to_host(), original);
  EXPECT_EQ(c.to_host(), original);
}

TEST(copy_on_write, an_exposed_owner_is_never_unshared) {
  auto const original = pattern(64, 20);
  buffer a = buffer::from_host(original.data(), original.size(), cow());
  auto* exported = static_cast<std::byte*>(a.get_ptr(access::write));  // a is exposed
  buffer s = a.slice(0, 16);
  EXPECT_TRUE(s.owns_same_memory(a));
  // Writes through any handle, inside a spill lock or not, go in place: every handle keeps the
  // exported address, so what the third party writes there stays the buffer's.
  {
    spill_lock lock;
    EXPECT_EQ(a.get_ptr(access::write), exported);
    EXPECT_EQ(s.get_ptr(access::write), exported);
  }
  EXPECT_EQ(s.get_ptr(access::write), exported);
  auto const changed = pattern(64, 21);
  backend().copy(exported, changed.data(), changed.size());
  EXPECT_EQ(a.to_host(), changed);
  EXPECT_EQ(s.to_host(), std::vector<std::byte>(changed.begin(), changed.begin() + 16));
  // A write through one handle is seen by the others, as for a plain buffer.
  write(s, pattern(16, 22));
  EXPECT_EQ(a.to_host()[0], pattern(16, 22)[0]);
  // copy() is still deep, and its result a fresh, unexposed copy-on-write buffer.
  buffer deep = a.copy();
  EXPECT_FALSE(deep.owns_same_memory(a));
  EXPECT_FALSE(deep.is_exposed());
  EXPECT_TRUE(deep.is_copy_on_write());
}

TEST(copy_on_write, a_read_export_exposes_the_shared_owner_for_every_handle) {
  auto const original = pattern(128, 23);
  buffer a = buffer::from_host(original.data(), original.size(), cow());
  buffer b = a;
  void const* exported = static_cast<buffer const&>(a).get_ptr(access::read);  // no unsharing
  EXPECT_TRUE(a.is_exposed());
  EXPECT_TRUE(b.is_exposed());
  spill_lock lock;
  EXPECT_EQ(b.get_ptr(access::write), exported);  // in place: the exporter may read it
}

TEST(copy_on_write, expose_inside_a_spill_lock_exposes_the_shared_owner) {
  // get_ptr inside a lock only lends the address; expose() hands it out for good, lock or not.
  auto const original = pattern(128, 29);
  buffer a = buffer::from_host(original.data(), original.size(), cow());
  buffer b = a;
  spill_lock lock;
  (void)a.get_ptr(access::read);
  EXPECT_FALSE(a.is_exposed());
  void* const exposed = a.expose();
  EXPECT_TRUE(a.is_exposed());
  EXPECT_TRUE(b.is_exposed());
  EXPECT_EQ(b.get_ptr(access::write), exposed);  // in place, where the address's holder sees it
  buffer none;
  EXPECT_EQ(none.expose(), nullptr);
}

TEST(copy_on_write, reads_do_not_unshare) {
  auto const original = pattern(64, 10);
  buffer a = buffer::from_host(original.data(), original.size(), cow());
  buffer const b = a;
  {
    spill_lock lock;
    EXPECT_EQ(b.get_ptr(access::read), static_cast<buffer const&>(a).get_ptr(access::read));
  }
  EXPECT_TRUE(a.owns_same_memory(b));
  EXPECT_FALSE(a.is_exposed());
}

TEST(copy_on_write, plain_buffers_still_share_on_copy) {
  auto const original = pattern(128, 11);
  buffer a = buffer::from_host(original.data(), original.size());
  EXPECT_FALSE(a.is_copy_on_write());
  buffer b = a;
  auto const changed = pattern(128, 12);
  backend().copy(b.get_ptr(access::write), changed.data(), changed.size());
  EXPECT_EQ(a.to_host(), changed);
  EXPECT_FALSE(a.is_exposed());
}

}  // namespace
}  // namespace gpumem
