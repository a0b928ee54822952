// Shared by the device-heap test files: random sizes, block patterns, and the kernels in which
// thread i allocates (and later frees and checks) one block.
#pragma once

#include <gpumem/core/atomic.hpp>
#include <gpumem/core/config.hpp>
#include <gpumem/cuda/launch.hpp>
#include <gpumem/nrt/device_heap.hpp>

#include <cstddef>
#include <cstdint>

namespace gpumem::test::heap {

namespace nrt = gpumem::nrt;

inline GPUMEM_HD std::uint32_t next_random(std::uint32_t& state) {
  state = state * 1664525u + 1013904223u;
  return state >> 8;
}

inline GPUMEM_HD std::size_t pick_size(std::uint32_t& rng, std::size_t max) {
  return 1 + next_random(rng) % max;
}

inline GPUMEM_HD void fill_block(unsigned char* p, std::size_t bytes, unsigned char tag) {
  for (std::size_t i = 0; i < bytes; ++i)
    p[i] = static_cast<unsigned char>(tag + i);
}

inline GPUMEM_HD bool block_holds(unsigned char const* p, std::size_t bytes, unsigned char tag) {
  for (std::size_t i = 0; i < bytes; ++i)
    if (p[i] != static_cast<unsigned char>(tag + i)) return false;
  return true;
}

inline GPUMEM_HD std::size_t natural_alignment(std::size_t bytes) {
  std::size_t a = 16;
  while (a < bytes && a < 256)
    a <<= 1;
  return a;
}

// Thread i allocates one block of `bytes`; pointers go to out[i].
struct allocate_each {
  nrt::heap_ref heap;
  std::size_t bytes;
  unsigned n;
  void** out;
  unsigned long long* successes;
  GPUMEM_HD void operator()(gpumem::thread_index const& t) const {
    if (t.global() >= n) return;
    void* p = nrt::detail::heap_allocate(heap, bytes);
    out[t.global()] = p;
    if (p != nullptr) {
      gpumem::atomic_fetch_add(successes, 1ull);
      fill_block(static_cast<unsigned char*>(p), bytes < 64 ? bytes : 64,
                 static_cast<unsigned char>(t.global()));
    }
  }
};

struct free_each {
  nrt::heap_ref heap;
  unsigned n;
  void** out;
  unsigned long long* corrupt;
  std::size_t bytes;
  GPUMEM_HD void operator()(gpumem::thread_index const& t) const {
    if (t.global() >= n) return;
    void* p = out[t.global()];
    if (p != nullptr && !block_holds(static_cast<unsigned char*>(p), bytes < 64 ? bytes : 64,
                                     static_cast<unsigned char>(t.global())))
      gpumem::atomic_fetch_add(corrupt, 1ull);
    nrt::detail::heap_deallocate(heap, p);
  }
};

}  // namespace gpumem::test::heap
