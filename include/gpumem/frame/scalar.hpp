// gpumem/frame/scalar.hpp
//
// scalar: one typed value that may be null — what a reduction returns (cuDF's scalar, pandas'
// value or <NA>).
//
//   frame::scalar s = frame::reduce(c, frame::reduction::sum);   // int64 for an int32 column
//   s.type();                          // type_id::int64
//   s.is_valid();                      // false for the min of an empty column
//   s.value<std::int64_t>();           // std::optional<std::int64_t>; T must be the type
//   s.to_string();                     // "42", "2.5", "True", "<NA>"
//
// Holds int8..int64 as int64, unsigned types as uint64, float32/float64 as double, bool8 as 0/1.
// Errors: value<T>() with a T that is not the scalar's type is gpumem::logic_error naming both;
// string scalars do not exist (logic_error). A value type, thread safety as an int.
#pragma once

#include <gpumem/column/data_type.hpp>

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <type_traits>

namespace gpumem::frame {

class scalar {
 public:
  // A null int64.
  scalar() = default;
  static scalar null(data_type type);
  template <class T>
  static scalar of(T value) {
    scalar s(type_to_id<T>());
    s.valid_ = true;
    if constexpr (std::is_floating_point_v<T>) {
      s.floating_ = static_cast<double>(value);
    } else if constexpr (std::is_same_v<T, bool> || std::is_unsigned_v<T>) {
      s.unsigned_ = static_cast<std::uint64_t>(value);
    } else {
      s.signed_ = static_cast<std::int64_t>(value);
    }
    return s;
  }

  data_type type() const noexcept { return type_; }
  bool is_valid() const noexcept { return valid_; }

  // The value (empty when null). T must match type() (bool for bool8).
  template <class T>
  std::optional<T> value() const {
    check_type(type_to_id<T>());
    if (!valid_) return std::nullopt;
    if constexpr (std::is_floating_point_v<T>) {
      return static_cast<T>(floating_);
    } else if constexpr (std::is_same_v<T, bool>) {
      return unsigned_ != 0;
    } else if constexpr (std::is_unsigned_v<T>) {
      return static_cast<T>(unsigned_);
    } else {
      return static_cast<T>(signed_);
    }
  }
  // The value converted to double (empty when null), whatever the type.
  std::optional<double> as_double() const noexcept;

  // As a series prints it (format.hpp): "42", "2.5", "True", "<NA>" when null.
  std::string to_string() const;

 private:
  explicit scalar(data_type type);
  void check_type(type_id asked) const;

  data_type type_ = type_id::int64;
  bool valid_ = false;
  std::int64_t signed_ = 0;
  std::uint64_t unsigned_ = 0;
  double floating_ = 0;
};

std::ostream& operator<<(std::ostream& out, scalar const& s);

}  // namespace gpumem::frame
