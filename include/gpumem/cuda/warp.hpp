// gpumem/cuda/warp.hpp
//
// Warp primitives for device code that also runs on the host backend. On the device they are the
// CUDA warp intrinsics (__activemask, __ballot_sync, __match_any_sync, __shfl_sync, %laneid); on
// the host a "warp" is one thread, so the active mask is 1, the lane is 0, a ballot is the
// predicate itself and a shuffle returns its own value. Algorithms written against these helpers
// (warp-aggregated atomics: elect a leader among lanes with the same key, one atomic for the
// group, broadcast the result) run unchanged on both backends, so CI exercises the algorithm.
//
// Masks name the lanes that take part; every lane in `mask` must call the same helper (CUDA's
// *_sync rule). Callers get `mask` from active_mask() at the point of divergence.
// Requires sm_70 or newer on the device (__match_any_sync).
#pragma once

#include <gpumem/core/config.hpp>

#include <cstdint>
#include <cstring>
#include <thread>

namespace gpumem::warp {

inline constexpr unsigned size = GPUMEM_DEVICE_PASS ? 32u : 1u;

GPUMEM_HD inline unsigned lane_id() {
#if GPUMEM_DEVICE_PASS
  unsigned lane;
  asm("mov.u32 %0, %%laneid;" : "=r"(lane));
  return lane;
#else
  return 0;
#endif
}

// The lanes executing this call together.
GPUMEM_HD inline unsigned active_mask() {
#if GPUMEM_DEVICE_PASS
  return __activemask();
#else
  return 1u;
#endif
}

// Lanes below the calling one.
GPUMEM_HD inline unsigned lanes_below() {
#if GPUMEM_DEVICE_PASS
  unsigned m;
  asm("mov.u32 %0, %%lanemask_lt;" : "=r"(m));
  return m;
#else
  return 0u;
#endif
}

GPUMEM_HD inline unsigned ballot(unsigned mask, bool predicate) {
#if GPUMEM_DEVICE_PASS
  return __ballot_sync(mask, predicate);
#else
  return predicate ? (mask & 1u) : 0u;
#endif
}

// The lanes of `mask` whose `key` equals the calling lane's.
GPUMEM_HD inline unsigned match_any(unsigned mask, std::uint64_t key) {
#if GPUMEM_DEVICE_PASS
  return __match_any_sync(mask, static_cast<unsigned long long>(key));
#else
  (void)key;
  return mask & 1u;
#endif
}

GPUMEM_HD inline int popcount(unsigned mask) {
#if GPUMEM_DEVICE_PASS
  return __popc(mask);
#else
  return __builtin_popcount(mask);
#endif
}

// Lowest lane of a non-empty mask (the usual leader).
GPUMEM_HD inline unsigned lowest_lane(unsigned mask) {
#if GPUMEM_DEVICE_PASS
  return static_cast<unsigned>(__ffs(static_cast<int>(mask)) - 1);
#else
  return static_cast<unsigned>(__builtin_ctz(mask));
#endif
}

// `value` of lane `source` (a lane in `mask`), for 4- and 8-byte trivially copyable values.
template <class T>
GPUMEM_HD T shuffle(unsigned mask, T value, unsigned source) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "warp::shuffle takes 4- or 8-byte values");
#if GPUMEM_DEVICE_PASS
  if constexpr (sizeof(T) == 4) {
    unsigned bits;
    memcpy(&bits, &value, 4);
    bits = __shfl_sync(mask, bits, static_cast<int>(source));
    memcpy(&value, &bits, 4);
  } else {
    unsigned long long bits;
    memcpy(&bits, &value, 8);
    bits = __shfl_sync(mask, bits, static_cast<int>(source));
    memcpy(&value, &bits, 8);
  }
  return value;
#else
  (void)mask;
  (void)source;
  return value;
#endif
}

// A short pause for spin loops: lets the lane that holds up the others make progress.
GPUMEM_HD inline void pause() {
#if GPUMEM_DEVICE_PASS
  __nanosleep(64);
#else
  std::this_thread::yield();  // host threads may outnumber cores (2-core CI, sanitizers)
#endif
}

}  // namespace gpumem::warp
