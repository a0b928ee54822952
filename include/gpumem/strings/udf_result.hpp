// gpumem/strings/udf_result.hpp
//
// udf_result: what a string UDF given to strings::transform (strings/transform.hpp) returns for
// one row, and nullable_string, the argument type of UDFs that want to see null rows.
//
//   struct shout {
//     GPUMEM_HD gpumem::strings::udf_result operator()(gpumem::strings::string_view s) const {
//       if (s.length() < 3) return s;                    // a view of the input row: no copy yet
//       gpumem::strings::udf_string out(s);              // a new string: becomes managed
//       out += U'!';
//       return out;                                       // (moved)
//     }
//   };
//   struct keep_or_null {
//     GPUMEM_HD gpumem::strings::udf_result operator()(gpumem::strings::nullable_string s) const {
//       if (s.is_null() || s.value.empty()) return gpumem::strings::udf_result::null();
//       return s.value;
//     }
//   };
//
// A result is one of:
//   * a view (string_view): of an input row, or of memory that lives until transform returns (a
//     string literal, a column the functor captured). Nothing is allocated or copied until the
//     gather. A view of a udf_string that dies when the functor returns is a dangling pointer.
//   * a managed string: from `udf_string&&` (put under a meminfo with make_managed_string, one
//     NRT_Allocate) or from a managed_string, whose reference the result takes over (the caller
//     must not release it). transform drops that reference after copying the bytes.
//   * null: udf_result::null() (an output null).
//   * failed: a udf_string that failed (allocation: out_of_memory; or the error of the function
//     that made it), a null managed_string, or udf_result::failed(e). transform then throws.
//
// Ownership: a udf_result holding a managed string owns one reference until transform takes it;
// it is a plain value (no destructor), so a result that is made and then not returned leaks that
// reference: build it in the return statement. Thread safety: a per-thread value.
#pragma once

#include <gpumem/core/config.hpp>
#include <gpumem/nrt/meminfo.hpp>
#include <gpumem/strings/managed_string.hpp>
#include <gpumem/strings/string_view.hpp>
#include <gpumem/strings/types.hpp>
#include <gpumem/strings/udf_string.hpp>

#include <cstdint>
#include <utility>

namespace gpumem::strings {

// A row of an input column as a UDF that takes nulls sees it: `value` is empty for a null row.
struct nullable_string {
  string_view value;
  bool valid = false;
  GPUMEM_HD bool is_null() const { return !valid; }
};

class udf_result {
 public:
  enum class kind : std::uint8_t { null, view, managed, failed };

  // A null row.
  GPUMEM_HD udf_result() {}
  GPUMEM_HD udf_result(string_view v) : kind_(kind::view), view_(v) {}
  GPUMEM_HD udf_result(char const* literal) : udf_result(string_view(literal)) {}
  // Not from a named udf_string that stays the UDF's: that would be a view of a string the UDF
  // destroys when it returns. Return it (`return s;` moves it) or std::move it.
  GPUMEM_HD udf_result(udf_string&) = delete;
  GPUMEM_HD udf_result(udf_string const&) = delete;
  GPUMEM_HD udf_result(udf_string&& s) {
    if (s.failed()) {
      error_ = s.error();
      kind_ = kind::failed;
      return;
    }
    take(make_managed_string(std::move(s)));
  }
  GPUMEM_HD udf_result(managed_string m) { take(m); }

  GPUMEM_HD static udf_result null() { return udf_result(); }
  GPUMEM_HD static udf_result failed(errc e) {
    udf_result r;
    r.kind_ = kind::failed;
    r.error_ = e == errc::ok ? errc::value_error : e;
    return r;
  }

  GPUMEM_HD kind state() const { return kind_; }
  GPUMEM_HD bool is_null() const { return kind_ == kind::null; }
  GPUMEM_HD bool is_failed() const { return kind_ == kind::failed; }
  GPUMEM_HD errc error() const { return error_; }
  // The bytes (views and managed strings).
  GPUMEM_HD string_view view() const { return view_; }
  // The reference a managed result holds (null otherwise).
  GPUMEM_HD NRT_MemInfo* meminfo() const { return meminfo_; }

 private:
  GPUMEM_HD void take(managed_string m) {
    if (m.is_null()) {
      kind_ = kind::failed;
      error_ = errc::out_of_memory;
      return;
    }
    kind_ = kind::managed;
    view_ = m.view();
    meminfo_ = m.meminfo();
  }

  kind kind_ = kind::null;
  errc error_ = errc::ok;
  string_view view_{};
  NRT_MemInfo* meminfo_ = nullptr;
};

}  // namespace gpumem::strings
