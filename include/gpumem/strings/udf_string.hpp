// gpumem/strings/udf_string.hpp
//
// udf_string: an owning UTF-8 string made in device code (the result of concat, replace, upper,
// ...), its buffer from the NRT heap of the memory system nrt::launch made current.
//
//   strings::udf_string out;                 // empty: no allocation yet
//   out.reserve(a.size_bytes() + b.size_bytes());
//   out += a;                                // a capacity check and a memcpy
//   out += U'!';
//   if (out.failed()) { /* out.error() == errc::out_of_memory: the heap was exhausted */ }
//   strings::string_view v = out;            // valid until the string changes or dies
//
// Growth: the capacity at least doubles on every reallocation and is rounded to a power of two up
// to 64 KiB (the heap's size classes), so n appends make O(log n) allocations. reserve() once when
// the final size is known: then appends never allocate.
//
// Errors: nothing throws or traps. A failed allocation (or a size past INT64_MAX) frees the buffer
// and leaves the string empty and failed with errc::out_of_memory; set_error(e) does the same with
// any code (the string functions report value_error this way). A failed string stays failed: later
// appends and reserves are no-ops, and its first error is kept. The heap records the failed
// allocation too, so memsys::check() on the host reports out_of_memory.
//
// Ownership: move-only; the destructor (and set_error) returns the buffer with NRT_Free, so a
// udf_string must be created and destroyed in code run by nrt::launch with the same memory system
// (without one every allocation fails). release() hands the buffer to the caller, who then frees
// it with NRT_Free. Layout: {data, bytes, capacity, error}, 32 bytes.
// Thread safety: one thread owns a udf_string; const members may be read by several.
#pragma once

#include <gpumem/core/config.hpp>
#include <gpumem/strings/detail/heap.hpp>
#include <gpumem/strings/string_view.hpp>
#include <gpumem/strings/types.hpp>
#include <gpumem/strings/utf8.hpp>

#include <cstring>

namespace gpumem::strings {

class udf_string {
 public:
  // The first allocation's capacity in bytes.
  static constexpr size_type minimum_capacity = 16;

  udf_string() = default;
  GPUMEM_HD explicit udf_string(string_view s) { append(s.data(), s.size_bytes()); }
  // `count` copies of `fill` (Python's fill * count); count <= 0 gives the empty string.
  GPUMEM_HD udf_string(size_type count, char32_t fill) { fill_with(count, fill); }

  GPUMEM_HD udf_string(udf_string&& other) noexcept
      : data_(other.data_), bytes_(other.bytes_), capacity_(other.capacity_), error_(other.error_) {
    other.forget();
  }
  GPUMEM_HD udf_string& operator=(udf_string&& other) noexcept {
    if (this != &other) {
      if (data_ != nullptr) detail::heap_free(data_);
      data_ = other.data_;
      bytes_ = other.bytes_;
      capacity_ = other.capacity_;
      error_ = other.error_;
      other.forget();
    }
    return *this;
  }
  udf_string(udf_string const&) = delete;
  udf_string& operator=(udf_string const&) = delete;
  GPUMEM_HD ~udf_string() {
    if (data_ != nullptr) detail::heap_free(data_);
  }

  GPUMEM_HD char* data() { return data_; }
  GPUMEM_HD char const* data() const { return data_; }
  GPUMEM_HD size_type size_bytes() const { return bytes_; }
  GPUMEM_HD size_type capacity() const { return capacity_; }
  GPUMEM_HD size_type length() const { return utf8::count_characters(data_, bytes_); }
  GPUMEM_HD bool empty() const { return bytes_ == 0; }
  GPUMEM_HD string_view view() const { return {data_, bytes_}; }
  GPUMEM_HD operator string_view() const { return {data_, bytes_}; }

  GPUMEM_HD errc error() const { return error_; }
  GPUMEM_HD bool failed() const { return error_ != errc::ok; }

  // Room for `bytes` bytes in all; false when the string is (or becomes) failed.
  GPUMEM_HD bool reserve(size_type bytes) {
    if (bytes <= capacity_) return !failed();
    return grow_to(bytes);
  }

  GPUMEM_HD void append(char const* p, size_type n) {
    // A failed string has capacity 0, so it always takes the slow path, which refuses.
    if (n <= 0) return;
    if (n > capacity_ - bytes_) {
      // `p` may point into this string (s += s): growing frees the old buffer, so keep its place.
      bool const inside = data_ != nullptr && p >= data_ && p < data_ + capacity_;
      size_type const at = inside ? p - data_ : 0;
      if (!grow_by(n)) return;
      if (inside) p = data_ + at;
    }
    std::memcpy(data_ + bytes_, p, static_cast<std::size_t>(n));
    bytes_ += n;
  }
  GPUMEM_HD void append(string_view s) { append(s.data(), s.size_bytes()); }
  GPUMEM_HD void append(char32_t cp) {
    if (cp < 0x80) {
      if (capacity_ == bytes_ && !grow_by(1)) return;
      data_[bytes_++] = static_cast<char>(cp);
      return;
    }
    int const n = utf8::encoded_bytes(cp);
    if (n > capacity_ - bytes_ && !grow_by(n)) return;
    bytes_ += utf8::encode(cp, data_ + bytes_);
  }
  GPUMEM_HD udf_string& operator+=(string_view s) {
    append(s);
    return *this;
  }
  GPUMEM_HD udf_string& operator+=(char32_t cp) {
    append(cp);
    return *this;
  }

  // Empty, keeping the capacity (and the error, if any).
  GPUMEM_HD void clear() { bytes_ = 0; }

  // Sets the size to `bytes` (growing the capacity if needed). Bytes past the old size are
  // unspecified until the caller writes them (through data()). False when failed.
  GPUMEM_HD bool resize_bytes(size_type bytes) {
    if (bytes < 0) bytes = 0;
    if (!reserve(bytes)) return false;
    bytes_ = bytes;
    return true;
  }

  // Frees the buffer; the string becomes empty and failed with `e` (errc::ok: no effect; a string
  // already failed keeps its first error).
  GPUMEM_STRINGS_NOINLINE GPUMEM_HD void set_error(errc e) {
    if (e == errc::ok) return;
    if (data_ != nullptr) detail::heap_free(data_);
    data_ = nullptr;
    bytes_ = 0;
    capacity_ = 0;
    if (error_ == errc::ok) error_ = e;
  }

  // Hands the buffer (null when there is none) to the caller, who frees it with NRT_Free; the
  // string becomes empty. The error is kept.
  GPUMEM_HD char* release() {
    char* const p = data_;
    data_ = nullptr;
    bytes_ = 0;
    capacity_ = 0;
    return p;
  }

 private:
  GPUMEM_HD void forget() {
    data_ = nullptr;
    bytes_ = 0;
    capacity_ = 0;
    error_ = errc::ok;
  }

  GPUMEM_HD bool grow_by(size_type n) {
    if (n > INT64_MAX - bytes_) {
      detail::fail_oversized(*this);
      return false;
    }
    return grow_to(bytes_ + n);
  }

  // Reallocates to hold `needed` bytes (> capacity_): one allocation, the old bytes copied.
  GPUMEM_STRINGS_NOINLINE GPUMEM_HD bool grow_to(size_type needed) {
    if (failed()) return false;
    size_type const cap = detail::grown_capacity(capacity_, needed, minimum_capacity);
    char* const p = static_cast<char*>(detail::heap_allocate(cap));
    if (p == nullptr) {
      set_error(errc::out_of_memory);
      return false;
    }
    if (bytes_ > 0) std::memcpy(p, data_, static_cast<std::size_t>(bytes_));
    if (data_ != nullptr) detail::heap_free(data_);
    data_ = p;
    capacity_ = cap;
    return true;
  }

  GPUMEM_STRINGS_NOINLINE GPUMEM_HD void fill_with(size_type count, char32_t fill) {
    if (count <= 0) return;
    char unit[4];
    int const n = utf8::encode(fill, unit);
    if (count > INT64_MAX / n) {
      detail::fail_oversized(*this);
      return;
    }
    if (!reserve(count * n)) return;
    if (n == 1) {
      std::memset(data_, unit[0], static_cast<std::size_t>(count));
    } else {
      for (size_type i = 0; i < count; ++i)
        for (int k = 0; k < n; ++k)
          data_[i * n + k] = unit[k];
    }
    bytes_ = count * n;
  }

  char* data_ = nullptr;
  size_type bytes_ = 0;
  size_type capacity_ = 0;
  errc error_ = errc::ok;
};

}  // namespace gpumem::strings
