// gpumem/nrt/ref.hpp
//
// nrt::ref<T>: the RAII handle on an NRT meminfo whose data is a T, for device code (and host code
// on the host backend). It is the C++ form of the reference counting Numba weaves into compiled
// code: copying increfs, destruction decrefs, moving does neither. The last decref runs the
// meminfo's destructor exactly once, in whichever thread drops it.
//
//   auto s = nrt::make_ref<payload>(args...);   // meminfo + T in one heap block, count 1
//   nrt::ref<payload> t = s;                    // count 2
//   out[i] = t.retain();                        // a raw owning reference for an output array: 3
//   // scope exit: t, s decref -> 1; a later kernel: NRT_decref(out[i]) -> ~payload, block freed
//
// A null ref (default, or make_ref on an exhausted heap) owns nothing; check it with `bool`.
// Thread safety: one ref object is used by one thread; refs to the same meminfo may live in many
// threads (the count is atomic). A shared object that every thread increfs serialises on one
// counter (70x slower than spread-out counts on an H100): hand threads their own objects, or keep
// one reference per block, not per thread.
#pragma once

#include <gpumem/core/atomic.hpp>
#include <gpumem/core/config.hpp>
#include <gpumem/nrt/meminfo.hpp>

#include <cstddef>
#include <new>
#include <type_traits>
#include <utility>

namespace gpumem::nrt {

template <class T>
class ref {
 public:
  GPUMEM_HD ref() noexcept {}
  // Takes over one reference the caller owns (a new meminfo, or one read from an output array).
  GPUMEM_HD static ref adopt(NRT_MemInfo* mi) noexcept { return ref(mi); }
  // Adds a reference of its own.
  GPUMEM_HD static ref share(NRT_MemInfo* mi) noexcept {
    NRT_incref(mi);
    return ref(mi);
  }

  GPUMEM_HD ref(ref const& other) noexcept : mi_(other.mi_) { NRT_incref(mi_); }
  GPUMEM_HD ref(ref&& other) noexcept : mi_(other.mi_) { other.mi_ = nullptr; }
  GPUMEM_HD ref& operator=(ref const& other) noexcept {
    if (mi_ != other.mi_) {
      NRT_incref(other.mi_);
      NRT_decref(mi_);
      mi_ = other.mi_;
    }
    return *this;
  }
  GPUMEM_HD ref& operator=(ref&& other) noexcept {
    if (this != &other) {
      NRT_decref(mi_);
      mi_ = other.mi_;
      other.mi_ = nullptr;
    }
    return *this;
  }
  GPUMEM_HD ~ref() { NRT_decref(mi_); }

  GPUMEM_HD T* get() const noexcept {
    return mi_ == nullptr ? nullptr : static_cast<T*>(NRT_MemInfo_data_fast(mi_));
  }
  GPUMEM_HD T& operator*() const noexcept { return *get(); }
  GPUMEM_HD T* operator->() const noexcept { return get(); }
  GPUMEM_HD explicit operator bool() const noexcept { return mi_ != nullptr; }
  GPUMEM_HD NRT_MemInfo* meminfo() const noexcept { return mi_; }
  // The current count (a snapshot: other threads may change it at once).
  GPUMEM_HD std::size_t use_count() const noexcept {
    return mi_ == nullptr ? 0 : atomic_load(&mi_->refct, mem_order::relaxed);
  }
  // A new owning raw reference (incref) for storage, e.g. an output array slot.
  GPUMEM_HD NRT_MemInfo* retain() const noexcept {
    NRT_incref(mi_);
    return mi_;
  }
  // Gives up this handle's reference without a decref; the caller now owns it.
  GPUMEM_HD NRT_MemInfo* release() noexcept {
    NRT_MemInfo* const mi = mi_;
    mi_ = nullptr;
    return mi;
  }

 private:
  GPUMEM_HD explicit ref(NRT_MemInfo* mi) noexcept : mi_(mi) {}
  NRT_MemInfo* mi_ = nullptr;
};

namespace detail {
// What every heap's blocks are aligned to: gpumem's slab heap aligns them to their size class up
// to 256 bytes (docs/nrt.md), but CUDA's in-kernel malloc heap (heap_kind::cuda_malloc) only to 16.
inline constexpr std::size_t heap_block_alignment = 16;

// The meminfo and its object in one heap block, as cuDF's managed UDF strings are.
template <class T>
struct co_allocated {
  NRT_MemInfo mi;
  T value;
};

template <class T>
GPUMEM_HD void destroy_object(void* data, std::size_t, void*) {
  static_cast<T*>(data)->~T();
}
}  // namespace detail

// Constructs a T in a new heap block that also holds its meminfo (count 1). Returns a null ref
// when the heap is exhausted (the memory system records it for check()). A T aligned beyond what
// every heap's blocks are (16 bytes) is placed at its alignment inside a larger block
// (NRT_MemInfo_alloc_aligned's layout).
template <class T, class... Args>
GPUMEM_HD ref<T> make_ref(Args&&... args) {
  NRT_dtor_function const dtor =
      std::is_trivially_destructible<T>::value ? nullptr : &detail::destroy_object<T>;
  if constexpr (alignof(T) > detail::heap_block_alignment) {
    NRT_MemInfo* const mi = NRT_MemInfo_alloc_aligned(sizeof(T), alignof(T));
    if (mi == nullptr) return ref<T>();
    ::new (mi->data) T(std::forward<Args>(args)...);
    mi->dtor = dtor;  // not shared yet: a plain store
    return ref<T>::adopt(mi);
  } else {
    void* const block = NRT_Allocate(sizeof(detail::co_allocated<T>));
    if (block == nullptr) return ref<T>();
    auto* const both = static_cast<detail::co_allocated<T>*>(block);
    T* const value = ::new (static_cast<void*>(&both->value)) T(std::forward<Args>(args)...);
    // The meminfo is the first member, so freeing it frees the whole block.
    NRT_MemInfo* const mi = &both->mi;
    NRT_MemInfo_init(mi, value, sizeof(T), dtor, nullptr);
    return ref<T>::adopt(mi);
  }
}

}  // namespace gpumem::nrt
