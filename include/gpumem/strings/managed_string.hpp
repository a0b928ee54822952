// gpumem/strings/managed_string.hpp
//
// managed_string: a reference-counted device string with the layout of cuDF's ManagedUDFString
// (docs/strings.md, "Device strings"). A handle to ONE NRT heap
// block that holds {NRT_MemInfo, udf_string}, meminfo first; the meminfo's destructor destroys the
// udf_string, which frees the characters, and NRT then frees the block.
//
//   strings::udf_string s = strings::concat(a, b);            // (combine.hpp)
//   strings::managed_string m = strings::make_managed_string(std::move(s));   // count 1
//   if (!m) { /* s had failed, or the heap was exhausted: nothing was leaked */ }
//   out[row] = m.retain();        // another owner (count 2): e.g. the output array's slot
//   m.release();                  // this owner is done (count 1); m is now null
//   ...                           // later, the last NRT_decref(out[row]) frees everything
//
// Lifecycle (counts as the meminfo's refct): make_managed_string -> 1; retain() / NRT_incref
// +1; release() / NRT_decref -1; the decref that reaches 0 runs the dtor (~udf_string: NRT_Free of
// the characters) and then NRT_Free of the block. Memory-system statistics: make counts one
// alloc and one mi_alloc for the block (plus the string's own alloc), the last decref one mi_free
// and the frees.
//
// The handle is {NRT_MemInfo*, udf_string*} (both point into the block; the udf_string is also
// meminfo->data), trivially copyable like Numba's struct: copying a handle does NOT change the
// count — retain()/release() do, as NRT_incref/NRT_decref on meminfo() do. A null handle (both
// null) is what failures return; view() of it is empty, retain()/release() of it do nothing.
// Thread safety: the count is atomic (nrt/meminfo.hpp), so handles to one string may be retained
// and released by any threads; the string itself must not be modified once shared.
#pragma once

#include <gpumem/core/atomic.hpp>
#include <gpumem/core/config.hpp>
#include <gpumem/nrt/meminfo.hpp>
#include <gpumem/strings/detail/heap.hpp>
#include <gpumem/strings/string_view.hpp>
#include <gpumem/strings/types.hpp>
#include <gpumem/strings/udf_string.hpp>

#include <cstddef>
#include <new>
#include <utility>

namespace gpumem::strings {

namespace detail {

// The heap block behind a managed_string: the meminfo first, so NRT_Free(meminfo) frees it all.
struct managed_block {
  NRT_MemInfo meminfo;
  udf_string string;
};

// The meminfo's destructor: destroys the udf_string in place (freeing its characters).
GPUMEM_HD inline void destroy_managed_udf_string(void* data, std::size_t, void*) {
  static_cast<udf_string*>(data)->~udf_string();
}

}  // namespace detail

class managed_string {
 public:
  managed_string() = default;

  // The handle of an existing managed string's meminfo (count unchanged); null gives null.
  GPUMEM_HD static managed_string from_meminfo(NRT_MemInfo* mi) {
    if (mi == nullptr) return {};
    return managed_string(mi, static_cast<udf_string*>(mi->data));
  }

  GPUMEM_HD explicit operator bool() const { return meminfo_ != nullptr; }
  GPUMEM_HD bool is_null() const { return meminfo_ == nullptr; }
  GPUMEM_HD string_view view() const {
    return string_ == nullptr ? string_view{} : string_->view();
  }
  GPUMEM_HD NRT_MemInfo* meminfo() const { return meminfo_; }
  // The owned string (null for a null handle). Do not modify it once the string is shared.
  GPUMEM_HD udf_string* string() const { return string_; }
  // The current count (a snapshot; 0 for a null handle).
  GPUMEM_HD std::size_t use_count() const {
    return meminfo_ == nullptr ? 0 : atomic_load(&meminfo_->refct, mem_order::relaxed);
  }

  // Adds one reference (NRT_incref) and returns the meminfo, for the new owner to keep.
  GPUMEM_HD NRT_MemInfo* retain() const {
    NRT_incref(meminfo_);
    return meminfo_;
  }
  // Drops this handle's reference (NRT_decref: the last one frees the string) and makes this
  // handle null. Copies of the handle made before are not nulled.
  GPUMEM_HD void release() {
    NRT_decref(meminfo_);
    meminfo_ = nullptr;
    string_ = nullptr;
  }

 private:
  GPUMEM_HD managed_string(NRT_MemInfo* mi, udf_string* s) : meminfo_(mi), string_(s) {}

  NRT_MemInfo* meminfo_ = nullptr;
  udf_string* string_ = nullptr;
};

// Moves `s` into a new managed string with count 1: one NRT_Allocate of the block, the meminfo
// initialised in place with the udf_string as its data. If `s` has failed, or the block cannot be
// allocated, returns a null handle and frees s's characters (s is left empty and failed).
GPUMEM_STRINGS_NOINLINE GPUMEM_HD inline managed_string make_managed_string(udf_string&& s) {
  if (s.failed()) return {};
  auto* const block =
      static_cast<detail::managed_block*>(detail::heap_allocate(sizeof(detail::managed_block)));
  if (block == nullptr) {
    s.set_error(errc::out_of_memory);
    return {};
  }
  udf_string* const str = new (&block->string) udf_string(std::move(s));
  NRT_MemInfo_init(&block->meminfo, str, sizeof(udf_string), &detail::destroy_managed_udf_string,
                   nullptr);
  return managed_string::from_meminfo(&block->meminfo);
}

}  // namespace gpumem::strings
