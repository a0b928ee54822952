// nrt::launch makes its memory system the current one of the launched code whatever stream or
// device the launch goes to. On the GPU the current memory system is a __device__ pointer of this
// translation unit's module (one per device); a launch used to skip setting it when the same memsys
// had been set last (on another stream: not ordered before this launch; on another device: never
// set there), and NRT_Allocate then used another memory system or returned null. A translation
// unit of its own, so that no other test's launches set the pointer first.
#include "nrt_support.hpp"

#include <gpumem/core/config.hpp>
#include <gpumem/core/error.hpp>
#include <gpumem/cuda/device_backend.hpp>
#include <gpumem/manager/context.hpp>
#include <gpumem/manager/resource_memory_manager.hpp>
#include <gpumem/mr/managed_resource.hpp>
#include <gpumem/nrt/launch.hpp>
#include <gpumem/nrt/meminfo.hpp>

#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "stream_gate.hpp"

using gpumem::test::device_array;
namespace nrt = gpumem::nrt;

namespace {

struct allocate_one {
  void** out;
  GPUMEM_HD void operator()(gpumem::thread_index const&) const { *out = NRT_Allocate(64); }
};

// Throws on the host backend (device code cannot).
struct throw_in_launched_code {
  GPUMEM_HD void operator()(gpumem::thread_index const&) const {
#if !GPUMEM_DEVICE_PASS
    throw std::runtime_error("thrown by the launched code (test)");
#endif
  }
};

struct free_all {
  void** blocks;
  unsigned n;
  GPUMEM_HD void operator()(gpumem::thread_index const& t) const {
    if (t.global() < n) NRT_Free(blocks[t.global()]);
  }
};

// Whether `p` lies in the slabs of `ms`'s heap.
bool in_heap_of(nrt::memsys& ms, void const* p) {
  nrt::heap_ref const h = ms.heap().handle();
  auto const* c = static_cast<char const*>(p);
  return p != nullptr && c >= h.slabs &&
         c < h.slabs + (static_cast<std::size_t>(h.slab_count) << h.slab_shift);
}

// A stream for the test, destroyed with it.
class test_stream {
 public:
  test_stream() : stream_(gpumem::backend().create_stream(true)) {}
  ~test_stream() { gpumem::backend().destroy_stream(stream_); }
  test_stream(test_stream const&) = delete;
  test_stream& operator=(test_stream const&) = delete;
  operator gpumem::stream_handle() const noexcept { return stream_; }

 private:
  gpumem::stream_handle stream_;
};

// `other` is the memory system launched last; then `ms` is launched on stream 1, held behind a
// gate, and on stream 2, which runs at once. The launch on stream 2 must allocate from `ms`.
TEST(nrt_launch, a_memsys_set_on_a_held_stream_is_current_on_another_stream) {
  GPUMEM_SKIP_WHILE_GATES_SERIALISE();
  nrt::memsys other(nrt::heap_options{8 * gpumem::MiB}, nrt::memsys_options{true});
  nrt::memsys ms(nrt::heap_options{8 * gpumem::MiB}, nrt::memsys_options{true});
  device_array<void*> out(3);
  nrt::launch(other, {1, 1}, allocate_one{out.data() + 2});
  gpumem::backend().synchronize();
  {
    test_stream held, free_running;
    gpumem::test::stream_gate gate;
    gate.block(held);
    nrt::launch(ms, {1, 1, held}, allocate_one{out.data()});
    nrt::launch(ms, {1, 1, free_running}, allocate_one{out.data() + 1});
    // Completes while `held` has not reached its launch (nothing here waits for `held`).
    gpumem::backend().synchronize_stream(free_running);
    gate.open();
    gpumem::backend().synchronize_stream(held);
  }
  std::vector<void*> const got = out.to_host();
  EXPECT_TRUE(in_heap_of(ms, got[0])) << "the launch on the held stream: " << got[0];
  EXPECT_TRUE(in_heap_of(ms, got[1]))
      << "the launch on the other stream did not allocate from its own memory system: " << got[1]
      << (in_heap_of(other, got[1]) ? " (from the one launched before)" : "");
  EXPECT_TRUE(in_heap_of(other, got[2])) << got[2];
  std::vector<void*> mine;
  for (void* p : {got[0], got[1]})
    if (in_heap_of(ms, p)) mine.push_back(p);
  device_array<void*> blocks(2);
  gpumem::backend().copy(blocks.data(), mine.data(), mine.size() * sizeof(void*));
  nrt::launch(ms, {1, 2}, free_all{blocks.data(), static_cast<unsigned>(mine.size())});
  nrt::launch(other, {1, 1}, free_all{out.data() + 2, in_heap_of(other, got[2]) ? 1u : 0u});
  EXPECT_NO_THROW(ms.check());
  EXPECT_NO_THROW(other.check());
  EXPECT_TRUE(ms.statistics().balanced());
  EXPECT_TRUE(other.statistics().balanced());
}

// One memory system (in managed memory, so that both devices reach it) launched on device 0, then
// on device 1: the launch on device 1 must find it although that device's copy of the pointer was
// never set before.
TEST(nrt_launch, code_that_throws_leaves_no_memory_system_current) {
  gpumem::device_backend& b = gpumem::backend();
  if (b.kind() != gpumem::backend_kind::host)
    GTEST_SKIP() << "device code cannot throw; the host backend's simulated threads can";
  auto* const out = static_cast<void**>(b.allocate_managed(sizeof(void*), true));
  {
    nrt::memsys ms(nrt::heap_options{8 * gpumem::MiB}, nrt::memsys_options{true});
    nrt::launch(ms, {1, 1}, throw_in_launched_code{});  // the backend logs the exception
    b.synchronize();
  }
  // The same simulated thread (one block on the same stream) runs plain NRT code next: it has no
  // memory system, not the destroyed one.
  *out = out;
  gpumem::launch({1, 1}, allocate_one{out});
  b.synchronize();
  EXPECT_EQ(*out, nullptr) << "a destroyed memory system stayed current";
  b.deallocate_managed(out);
}

TEST(nrt_launch, one_memsys_is_current_on_every_device_it_is_launched_on) {
  gpumem::device_backend& b = gpumem::backend();
  int const devices = b.device_count();
  if (devices < 2)
    GTEST_SKIP() << "needs two devices; this backend has " << devices << " (" << b.description()
                 << ")";
  gpumem::set_memory_manager([](gpumem::context& c) {
    return std::make_unique<gpumem::resource_memory_manager>(
        c, std::make_shared<gpumem::managed_resource>());
  });
  gpumem::close();
  int const previous = b.current_device();
  b.set_current_device(0);
  {
    nrt::memsys ms(nrt::heap_options{8 * gpumem::MiB}, nrt::memsys_options{true});
    auto* const out = static_cast<void**>(b.allocate_managed(2 * sizeof(void*), true));
    for (int device = 0; device < 2; ++device) {
      b.set_current_device(device);
      nrt::launch(ms, {1, 1}, allocate_one{out + device});
      b.synchronize();
    }
    b.set_current_device(0);
    EXPECT_TRUE(in_heap_of(ms, out[0])) << "device 0: " << out[0];
    EXPECT_TRUE(in_heap_of(ms, out[1])) << "device 1 did not see the memory system: " << out[1];
    unsigned const n = in_heap_of(ms, out[0]) && in_heap_of(ms, out[1]) ? 2u : 0u;
    nrt::launch(ms, {1, 2}, free_all{out, n});
    b.synchronize();
    if (n == 2) {
      EXPECT_NO_THROW(ms.check());
      EXPECT_TRUE(ms.statistics().balanced());
    }
    b.deallocate_managed(out);
  }
  b.set_current_device(previous);
  gpumem::set_memory_manager({});
  gpumem::close();
}

}  // namespace
