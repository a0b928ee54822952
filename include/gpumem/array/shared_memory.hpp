// gpumem/array/shared_memory.hpp
//
// Typed, disjoint views of ONE dynamic shared-memory buffer. In CUDA every `extern __shared__`
// array of a kernel starts at the same address, so two of them alias (the spec's example: a
// float32 and an int32 array of 4 bytes print 3.14 and 1078523331). The carver hands out
// consecutive, correctly aligned pieces instead, and the same computation on the host gives the
// byte count to launch with:
//
//   // host: the plan
//   gpumem::shared_memory_carver plan;           // no buffer: only counts
//   plan.take<float>(block);
//   plan.take<int>(block);
//   launch({grid, block, s, plan.bytes()}, kernel);
//
//   // device: the same calls in the same order
//   gpumem::shared_memory_carver c(gpumem::dynamic_shared_memory(), bytes);
//   auto f = c.take<float>(block);               // array_view<float>, disjoint from i
//   auto i = c.take<int>(block);
//
// Every piece starts at a multiple of alignof(T) relative to the buffer, whose base is aligned to
// shared_memory_alignment (16) bytes; types needing more are rejected at compile time. A request
// that does not fit returns an empty view and sets failed() — device code never traps.
// dynamic_shared_memory() is null on the host (the host backend has no shared memory).
//
// Thread safety: a carver is a per-thread value (every thread carves the same layout).
#pragma once

#include <gpumem/array/array_layout.hpp>
#include <gpumem/array/array_view.hpp>
#include <gpumem/core/checked_arithmetic.hpp>
#include <gpumem/core/config.hpp>

#include <cstddef>

namespace gpumem {

inline constexpr std::size_t shared_memory_alignment = 16;

// The kernel's dynamic shared memory (null on the host).
GPUMEM_HD inline unsigned char* dynamic_shared_memory() {
#if GPUMEM_DEVICE_PASS
  extern __shared__ __align__(16) unsigned char gpumem_dynamic_shared[];
  return gpumem_dynamic_shared;
#else
  return nullptr;
#endif
}

class shared_memory_carver {
 public:
  static constexpr std::size_t unlimited = ~std::size_t{0};

  // A carver that only computes offsets and the total (host planning).
  GPUMEM_HD shared_memory_carver() {}
  // A carver over `capacity` bytes at `base`.
  GPUMEM_HD shared_memory_carver(void* base, std::size_t capacity)
      : base_(static_cast<unsigned char*>(base)), capacity_(capacity) {}

  // The byte offset where the next piece of `count` T would start; `unlimited` when even that
  // would pass SIZE_MAX (a planning carver asked for absurd counts): no piece fits there.
  template <class T>
  GPUMEM_HD std::size_t next_offset() const {
    static_assert(alignof(T) <= shared_memory_alignment,
                  "shared_memory_carver: the element type needs more than 16-byte alignment");
    std::size_t offset = 0;
    return round_up_checked(used_, alignof(T), offset) ? offset : unlimited;
  }

  // A one-dimensional view of `count` T, disjoint from every other piece of this carver. For a
  // planning carver (no base) the view's data is null but the offsets are those of the kernel.
  template <class T>
  GPUMEM_HD array_view<T> take(std::size_t count) {
    std::size_t const offset = next_offset<T>();
    if (offset == unlimited || offset > capacity_ || count > (capacity_ - offset) / sizeof(T)) {
      failed_ = true;
      return array_view<T>(nullptr, make_layout<T>(0));
    }
    used_ = offset + count * sizeof(T);
    last_offset_ = offset;
    T* data = base_ == nullptr ? nullptr : reinterpret_cast<T*>(base_ + offset);
    return array_view<T>(data, make_layout<T>(count));
  }

  // Bytes used so far: the dynamic shared memory size to launch with.
  GPUMEM_HD std::size_t bytes() const { return used_; }
  // Offset of the most recent piece.
  GPUMEM_HD std::size_t last_offset() const { return last_offset_; }
  // True once a request did not fit.
  GPUMEM_HD bool failed() const { return failed_; }

 private:
  template <class T>
  GPUMEM_HD static array_layout make_layout(std::size_t count) {
    array_layout l;
    l.rank = 1;
    l.itemsize = sizeof(T);
    l.shape[0] = count;
    l.strides[0] = static_cast<std::ptrdiff_t>(sizeof(T));
    return l;
  }

  unsigned char* base_ = nullptr;
  std::size_t capacity_ = unlimited;
  std::size_t used_ = 0;
  std::size_t last_offset_ = 0;
  bool failed_ = false;
};

}  // namespace gpumem
