// gpumem/strings/string_list.hpp
//
// string_list: a growable device array of string_views — what split() and rsplit() return, what
// join() accepts. The views point into the strings that were split: the list owns its array of
// views, never the characters.
//
//   strings::string_list parts = strings::split(s, ",");     // (split.hpp)
//   if (parts.failed()) { /* out_of_memory */ }
//   for (size_type i = 0; i < parts.size(); ++i) use(parts[i]);
//
// Growth: push_back doubles the capacity (8 views first), so n pushes make O(log n)
// allocations; reserve(n) first when n is known. Storage comes from the NRT heap of the memory
// system nrt::launch made current, and goes back to it in the destructor.
//
// Errors: as udf_string — a failed allocation frees the array and leaves the list empty and failed
// with errc::out_of_memory (recorded by the heap for memsys::check()); set_error(e) does the same
// with any code; a failed list stays failed (push_back is a no-op) and keeps its first error.
// Ownership: move-only. Thread safety: one thread owns a list; const members may be read by
// several.
#pragma once

#include <gpumem/core/config.hpp>
#include <gpumem/strings/detail/heap.hpp>
#include <gpumem/strings/string_view.hpp>
#include <gpumem/strings/types.hpp>

namespace gpumem::strings {

class string_list {
 public:
  // The first allocation's capacity, in views.
  static constexpr size_type minimum_capacity = 8;

  string_list() = default;
  GPUMEM_HD string_list(string_list&& other) noexcept
      : items_(other.items_), size_(other.size_), capacity_(other.capacity_), error_(other.error_) {
    other.forget();
  }
  GPUMEM_HD string_list& operator=(string_list&& other) noexcept {
    if (this != &other) {
      if (items_ != nullptr) detail::heap_free(items_);
      items_ = other.items_;
      size_ = other.size_;
      capacity_ = other.capacity_;
      error_ = other.error_;
      other.forget();
    }
    return *this;
  }
  string_list(string_list const&) = delete;
  string_list& operator=(string_list const&) = delete;
  GPUMEM_HD ~string_list() {
    if (items_ != nullptr) detail::heap_free(items_);
  }

  GPUMEM_HD size_type size() const { return size_; }
  GPUMEM_HD size_type capacity() const { return capacity_; }
  GPUMEM_HD bool empty() const { return size_ == 0; }
  // 0 <= i < size().
  GPUMEM_HD string_view const& operator[](size_type i) const { return items_[i]; }
  GPUMEM_HD string_view& operator[](size_type i) { return items_[i]; }
  GPUMEM_HD string_view const* data() const { return items_; }
  GPUMEM_HD string_view const* begin() const { return items_; }
  GPUMEM_HD string_view const* end() const { return items_ + size_; }

  GPUMEM_HD errc error() const { return error_; }
  GPUMEM_HD bool failed() const { return error_ != errc::ok; }

  // Room for `count` views in all; false when the list is (or becomes) failed.
  GPUMEM_HD bool reserve(size_type count) {
    if (count <= capacity_) return !failed();
    return grow_to(count);
  }
  GPUMEM_HD void push_back(string_view s) {
    // A failed list has capacity 0, so it always takes the slow path, which refuses.
    if (size_ == capacity_ && !grow_to(size_ + 1)) return;
    items_[size_++] = s;
  }
  GPUMEM_HD void clear() { size_ = 0; }

  // Frees the array; the list becomes empty and failed with `e` (errc::ok: no effect; the first
  // error is kept).
  GPUMEM_STRINGS_NOINLINE GPUMEM_HD void set_error(errc e) {
    if (e == errc::ok) return;
    if (items_ != nullptr) detail::heap_free(items_);
    items_ = nullptr;
    size_ = 0;
    capacity_ = 0;
    if (error_ == errc::ok) error_ = e;
  }

 private:
  GPUMEM_HD void forget() {
    items_ = nullptr;
    size_ = 0;
    capacity_ = 0;
    error_ = errc::ok;
  }

  GPUMEM_STRINGS_NOINLINE GPUMEM_HD bool grow_to(size_type needed) {
    if (failed()) return false;
    constexpr size_type item = static_cast<size_type>(sizeof(string_view));
    size_type cap = capacity_ == 0 ? minimum_capacity : capacity_;
    if (capacity_ != 0) cap = capacity_ <= INT64_MAX / 2 ? capacity_ * 2 : needed;
    if (cap < needed) cap = needed;
    if (cap > INT64_MAX / item) {
      detail::fail_oversized(*this);
      return false;
    }
    auto* const p = static_cast<string_view*>(detail::heap_allocate(cap * item));
    if (p == nullptr) {
      set_error(errc::out_of_memory);
      return false;
    }
    for (size_type i = 0; i < size_; ++i)
      p[i] = items_[i];
    if (items_ != nullptr) detail::heap_free(items_);
    items_ = p;
    capacity_ = cap;
    return true;
  }

  string_view* items_ = nullptr;
  size_type size_ = 0;
  size_type capacity_ = 0;
  errc error_ = errc::ok;
};

}  // namespace gpumem::strings
