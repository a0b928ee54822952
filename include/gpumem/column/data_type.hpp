// gpumem/column/data_type.hpp
//
// The element types a column can hold: fixed-width numbers and booleans, and UTF-8 strings.
//
//   data_type t = type_id::int32;
//   size_of(t);                       // 4
//   type_to_id<double>();             // type_id::float64
//   to_string(type_id::string);       // "string"
//
// bool8 is one byte per element holding 0 or 1 (a validity bitmask is a separate thing, see
// bitmask.hpp). A string column has no element width: its characters and offsets live in
// buffers of their own (strings_column.hpp), so size_of(string) is an error.
//
// Everything here is a value type and free of state; the GPUMEM_HD functions may run in kernels.
#pragma once

#include <gpumem/core/config.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

namespace gpumem {

enum class type_id : std::int32_t {
  int8,
  int16,
  int32,
  int64,
  uint8,
  uint16,
  uint32,
  uint64,
  float32,
  float64,
  bool8,
  string,
};

// The type of a column's elements. A class rather than the bare enum so that types with
// parameters (decimals with a scale, timestamps with a unit) can join without changing callers.
class data_type {
 public:
  constexpr data_type(type_id id) noexcept : id_(id) {}  // NOLINT: implicit by design
  GPUMEM_HD constexpr type_id id() const noexcept { return id_; }
  friend constexpr bool operator==(data_type a, data_type b) noexcept { return a.id_ == b.id_; }
  friend constexpr bool operator!=(data_type a, data_type b) noexcept { return !(a == b); }

 private:
  type_id id_;
};

// Bytes per element of a fixed-width type; 0 for string (no fixed width).
GPUMEM_HD constexpr std::size_t fixed_width_bytes(type_id id) noexcept {
  switch (id) {
    case type_id::int8:
    case type_id::uint8:
    case type_id::bool8:
      return 1;
    case type_id::int16:
    case type_id::uint16:
      return 2;
    case type_id::int32:
    case type_id::uint32:
    case type_id::float32:
      return 4;
    case type_id::int64:
    case type_id::uint64:
    case type_id::float64:
      return 8;
    case type_id::string:
      return 0;
  }
  return 0;
}

GPUMEM_HD constexpr bool is_fixed_width(data_type type) noexcept {
  return fixed_width_bytes(type.id()) != 0;
}

// Bytes per element. Throws gpumem::logic_error for string, which has no fixed width.
std::size_t size_of(data_type type);

// "int32", "float64", "bool8", "string".
char const* to_string(type_id id) noexcept;
std::string to_string(data_type type);

// The type_id of a C++ element type (bool is bool8). Other types do not compile.
template <class T>
constexpr type_id type_to_id() noexcept {
  using std::is_same_v;
  constexpr type_id id = is_same_v<T, std::int8_t>     ? type_id::int8
                         : is_same_v<T, std::int16_t>  ? type_id::int16
                         : is_same_v<T, std::int32_t>  ? type_id::int32
                         : is_same_v<T, std::int64_t>  ? type_id::int64
                         : is_same_v<T, std::uint8_t>  ? type_id::uint8
                         : is_same_v<T, std::uint16_t> ? type_id::uint16
                         : is_same_v<T, std::uint32_t> ? type_id::uint32
                         : is_same_v<T, std::uint64_t> ? type_id::uint64
                         : is_same_v<T, float>         ? type_id::float32
                         : is_same_v<T, double>        ? type_id::float64
                         : is_same_v<T, bool>          ? type_id::bool8
                                                       : type_id::string;
  static_assert(id != type_id::string, "not a fixed-width column element type");
  static_assert(sizeof(T) == fixed_width_bytes(id), "the C++ type and its column type differ");
  return id;
}

}  // namespace gpumem
