// gpumem/core/atomic.hpp
//
// Small atomic operations on plain objects, callable from device code and host code alike
// (GPUMEM_HD). Device runtime state (reference counts, heap counters, statistics) lives in device
// memory as plain integers so that its layout is fixed (Numba's MemInfo has an 8-byte `refct`);
// these helpers make each access atomic at device scope:
//
//   * device pass (nvcc, __CUDA_ARCH__): cuda::atomic_ref<T, cuda::thread_scope_device> (libcu++);
//   * host code where <cuda/atomic> is reachable (translation units compiled by nvcc): the same
//     cuda::atomic_ref, which on the host uses the compiler's atomic builtins;
//   * otherwise (a host-only build without the toolkit): GCC/Clang __atomic builtins directly.
//
// The two host spellings are the same instructions; each lives in its own inline namespace so that
// translation units compiled both ways never share one inline definition (no ODR clash).
//
// T must be a 4- or 8-byte integer (or pointer-sized integer) aligned to its size.
// Thread safety: that is the point. Memory orders follow std::memory_order.
#pragma once

#include <gpumem/core/config.hpp>

#include <cstdint>

#if defined(__has_include)
#if __has_include(<cuda/atomic>)
#define GPUMEM_ATOMIC_USES_LIBCUDACXX 1
#endif
#endif
#ifndef GPUMEM_ATOMIC_USES_LIBCUDACXX
#define GPUMEM_ATOMIC_USES_LIBCUDACXX 0
#endif

#if GPUMEM_ATOMIC_USES_LIBCUDACXX
#include <cuda/atomic>
#endif

namespace gpumem {

enum class mem_order { relaxed, acquire, release, acq_rel, seq_cst };

#if GPUMEM_ATOMIC_USES_LIBCUDACXX
inline namespace atomic_libcudacxx {
namespace atomic_impl {
GPUMEM_HD constexpr cuda::std::memory_order to_cuda(mem_order o) {
  switch (o) {
    case mem_order::relaxed:
      return cuda::std::memory_order_relaxed;
    case mem_order::acquire:
      return cuda::std::memory_order_acquire;
    case mem_order::release:
      return cuda::std::memory_order_release;
    case mem_order::acq_rel:
      return cuda::std::memory_order_acq_rel;
    default:
      return cuda::std::memory_order_seq_cst;
  }
}
// The load half of an order (a load may not be release / acq_rel).
GPUMEM_HD constexpr cuda::std::memory_order load_part(mem_order o) {
  return o == mem_order::release   ? cuda::std::memory_order_relaxed
         : o == mem_order::acq_rel ? cuda::std::memory_order_acquire
                                   : to_cuda(o);
}
template <class T>
using device_ref = cuda::atomic_ref<T, cuda::thread_scope_device>;
}  // namespace atomic_impl

template <class T>
GPUMEM_HD T atomic_load(T const* p, mem_order o = mem_order::seq_cst) {
  return atomic_impl::device_ref<T>(*const_cast<T*>(p)).load(atomic_impl::load_part(o));
}
template <class T>
GPUMEM_HD void atomic_store(T* p, T v, mem_order o = mem_order::seq_cst) {
  atomic_impl::device_ref<T>(*p).store(v, o == mem_order::acquire || o == mem_order::acq_rel
                                              ? cuda::std::memory_order_release
                                              : atomic_impl::to_cuda(o));
}
template <class T>
GPUMEM_HD T atomic_fetch_add(T* p, T v, mem_order o = mem_order::seq_cst) {
  return atomic_impl::device_ref<T>(*p).fetch_add(v, atomic_impl::to_cuda(o));
}
template <class T>
GPUMEM_HD T atomic_fetch_sub(T* p, T v, mem_order o = mem_order::seq_cst) {
  return atomic_impl::device_ref<T>(*p).fetch_sub(v, atomic_impl::to_cuda(o));
}
template <class T>
GPUMEM_HD T atomic_fetch_or(T* p, T v, mem_order o = mem_order::seq_cst) {
  return atomic_impl::device_ref<T>(*p).fetch_or(v, atomic_impl::to_cuda(o));
}
template <class T>
GPUMEM_HD T atomic_fetch_and(T* p, T v, mem_order o = mem_order::seq_cst) {
  return atomic_impl::device_ref<T>(*p).fetch_and(v, atomic_impl::to_cuda(o));
}
template <class T>
GPUMEM_HD T atomic_exchange(T* p, T v, mem_order o = mem_order::seq_cst) {
  return atomic_impl::device_ref<T>(*p).exchange(v, atomic_impl::to_cuda(o));
}
// Strong compare-and-swap; on failure `expected` receives the current value.
template <class T>
GPUMEM_HD bool atomic_compare_exchange(T* p, T& expected, T desired,
                                       mem_order o = mem_order::seq_cst) {
  return atomic_impl::device_ref<T>(*p).compare_exchange_strong(
      expected, desired, atomic_impl::to_cuda(o), atomic_impl::load_part(o));
}
GPUMEM_HD inline void atomic_thread_fence(mem_order o) {
  cuda::atomic_thread_fence(atomic_impl::to_cuda(o), cuda::thread_scope_device);
}
}  // namespace atomic_libcudacxx
#else
inline namespace atomic_builtin {
namespace atomic_impl {
constexpr int to_builtin(mem_order o) {
  switch (o) {
    case mem_order::relaxed:
      return __ATOMIC_RELAXED;
    case mem_order::acquire:
      return __ATOMIC_ACQUIRE;
    case mem_order::release:
      return __ATOMIC_RELEASE;
    case mem_order::acq_rel:
      return __ATOMIC_ACQ_REL;
    default:
      return __ATOMIC_SEQ_CST;
  }
}
constexpr int load_part(mem_order o) {
  return o == mem_order::release   ? __ATOMIC_RELAXED
         : o == mem_order::acq_rel ? __ATOMIC_ACQUIRE
                                   : to_builtin(o);
}
}  // namespace atomic_impl

template <class T>
T atomic_load(T const* p, mem_order o = mem_order::seq_cst) {
  return __atomic_load_n(p, atomic_impl::load_part(o));
}
template <class T>
void atomic_store(T* p, T v, mem_order o = mem_order::seq_cst) {
  __atomic_store_n(p, v,
                   o == mem_order::acquire || o == mem_order::acq_rel ? __ATOMIC_RELEASE
                                                                      : atomic_impl::to_builtin(o));
}
template <class T>
T atomic_fetch_add(T* p, T v, mem_order o = mem_order::seq_cst) {
  return __atomic_fetch_add(p, v, atomic_impl::to_builtin(o));
}
template <class T>
T atomic_fetch_sub(T* p, T v, mem_order o = mem_order::seq_cst) {
  return __atomic_fetch_sub(p, v, atomic_impl::to_builtin(o));
}
template <class T>
T atomic_fetch_or(T* p, T v, mem_order o = mem_order::seq_cst) {
  return __atomic_fetch_or(p, v, atomic_impl::to_builtin(o));
}
template <class T>
T atomic_fetch_and(T* p, T v, mem_order o = mem_order::seq_cst) {
  return __atomic_fetch_and(p, v, atomic_impl::to_builtin(o));
}
template <class T>
T atomic_exchange(T* p, T v, mem_order o = mem_order::seq_cst) {
  return __atomic_exchange_n(p, v, atomic_impl::to_builtin(o));
}
template <class T>
bool atomic_compare_exchange(T* p, T& expected, T desired, mem_order o = mem_order::seq_cst) {
  return __atomic_compare_exchange_n(p, &expected, desired, false, atomic_impl::to_builtin(o),
                                     atomic_impl::load_part(o));
}
inline void atomic_thread_fence(mem_order o) {
  __atomic_thread_fence(atomic_impl::to_builtin(o));
}
}  // namespace atomic_builtin
#endif

// Raises *p to at least v; returns the previous value. (A CAS loop: used off the hot path.)
template <class T>
GPUMEM_HD T atomic_fetch_max(T* p, T v, mem_order o = mem_order::relaxed) {
  T current = atomic_load(p, mem_order::relaxed);
  while (current < v && !atomic_compare_exchange(p, current, v, o)) {
  }
  return current;
}

}  // namespace gpumem
