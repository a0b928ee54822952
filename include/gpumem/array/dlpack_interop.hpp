// gpumem/array/dlpack_interop.hpp
//
// Export of gpumem arrays to DLPack and import of DLPack tensors as device arrays, so arrays move
// to and from other libraries (PyTorch, CuPy, JAX, NumPy) without copies.
//
//   dlpack::DLManagedTensor* t = gpumem::to_dlpack(d);   // the consumer calls t->deleter(t)
//   auto back = gpumem::from_dlpack<float>(t);          // gpumem now owns t
//
// Device types: on the cuda backend device arrays are kDLCUDA, pinned and mapped arrays
// kDLCUDAHost, managed arrays kDLCUDAManaged, with the context's device ordinal. On the host
// backend every array is plain host memory and exported as kDLCPU (device 0); consumers such as
// NumPy can read it. Strides are exported in elements (DLPack's unit).
//
// Import (from_dlpack) accepts memory the device can address: kDLCUDA and kDLCUDAManaged on the
// current context's device (cuda backend), kDLCPU (host backend); anything else, a dtype other
// than T's, lanes != 1, a stride that is not representable, or (DLPack 1.0) a tensor flagged
// read-only (gpumem arrays are always writable) is a logic_error naming it. On success the array
// owns the tensor and calls its deleter when the last view goes; on any failure — a logic_error
// or an exception such as std::bad_alloc — the deleter has not run and the caller still owns it.
//
// Element types: bool, integers, std::complex<float|double>, and floating types that are IEEE 754
// interchange formats (binary16/32/64/128), the only floats kDLFloat describes. x86's 80-bit
// extended long double (16 bytes of storage, 64-bit significand) is not one: exporting or
// importing it does not compile (has_dlpack_dtype_v<T> tells which types are accepted).
//
// Ownership: an exported tensor shares the array's memory; it stays alive until the deleter runs.
// Thread safety: the deleter may be called from any thread.
#pragma once

#include <gpumem/array/device_array.hpp>
#include <gpumem/array/dlpack.hpp>
#include <gpumem/array/managed_array.hpp>
#include <gpumem/array/mapped_array.hpp>
#include <gpumem/array/pinned_array.hpp>

#include <complex>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>

namespace gpumem {

enum class memory_kind { device, pinned, mapped, managed };

namespace detail {
// Whether the floating type F is an IEEE 754 interchange format of sizeof(F) * 8 bits: kDLFloat
// with `bits` means exactly that format. Its significand (numeric_limits::digits, with the hidden
// bit) must be the format's: 11, 24, 53, 113 for 16, 32, 64, 128 bits. x86's long double fills 16
// bytes with the 80-bit extended format (digits 64) and is not binary128.
template <class F>
constexpr bool is_ieee_interchange_float() {
  using limits = std::numeric_limits<F>;
  if (!limits::is_iec559) return false;
  switch (sizeof(F) * 8) {
    case 16:
      return limits::digits == 11;
    case 32:
      return limits::digits == 24;
    case 64:
      return limits::digits == 53;
    case 128:
      return limits::digits == 113;
    default:
      return false;
  }
}
}  // namespace detail

// Whether T has a DLPack data type, i.e. whether to_dlpack and from_dlpack accept arrays of T.
template <class T>
inline constexpr bool has_dlpack_dtype_v = [] {
  if constexpr (std::is_same_v<T, bool> || std::is_integral_v<T>) {
    return true;
  } else if constexpr (std::is_floating_point_v<T>) {
    return detail::is_ieee_interchange_float<T>();
  } else {
    return std::is_same_v<T, std::complex<float>> || std::is_same_v<T, std::complex<double>>;
  }
}();

template <class T>
constexpr dlpack::DLDataType dlpack_dtype() {
  static_assert(!std::is_floating_point_v<T> || has_dlpack_dtype_v<T>,
                "this floating type is not an IEEE 754 interchange format (e.g. x86's 80-bit "
                "long double): DLPack's kDLFloat cannot describe it");
  constexpr auto bits = static_cast<std::uint8_t>(sizeof(T) * 8);
  if constexpr (std::is_same_v<T, bool>) {
    return {dlpack::kDLBool, 8, 1};
  } else if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
    return {dlpack::kDLInt, bits, 1};
  } else if constexpr (std::is_integral_v<T>) {
    return {dlpack::kDLUInt, bits, 1};
  } else if constexpr (std::is_floating_point_v<T>) {
    return {dlpack::kDLFloat, bits, 1};
  } else if constexpr (std::is_same_v<T, std::complex<float>> ||
                       std::is_same_v<T, std::complex<double>>) {
    return {dlpack::kDLComplex, bits, 1};
  } else {
    static_assert(sizeof(T) == 0, "no DLPack data type for this element type");
    return {};
  }
}

namespace detail {

template <class Array>
struct memory_kind_of;
template <class T>
struct memory_kind_of<device_array<T>> : std::integral_constant<memory_kind, memory_kind::device> {
};
template <class T>
struct memory_kind_of<pinned_array<T>> : std::integral_constant<memory_kind, memory_kind::pinned> {
};
template <class T>
struct memory_kind_of<mapped_array<T>> : std::integral_constant<memory_kind, memory_kind::mapped> {
};
template <class T>
struct memory_kind_of<managed_array<T>>
    : std::integral_constant<memory_kind, memory_kind::managed> {};

dlpack::DLDevice dlpack_device(memory_kind kind);
dlpack::DLManagedTensor* make_dlpack(void* data, array_layout const& layout,
                                     dlpack::DLDataType dtype, dlpack::DLDevice device,
                                     std::shared_ptr<void> owner);
dlpack::DLManagedTensorVersioned* make_dlpack_versioned(void* data, array_layout const& layout,
                                                        dlpack::DLDataType dtype,
                                                        dlpack::DLDevice device,
                                                        std::shared_ptr<void> owner);

struct imported_tensor {
  void* data;  // element (0, ..., 0), byte_offset applied
  shape_type shape;
  strides_type strides;  // bytes
};
// Validates `t` for import as elements of `dtype` (see the file comment).
imported_tensor check_dlpack_import(dlpack::DLTensor const& t, dlpack::DLDataType dtype,
                                    std::size_t itemsize);
// The owner of an imported tensor: once armed, it calls the tensor's deleter when destroyed.
// from_dlpack arms it only after the last step that can throw, so that a failed import (even a
// std::bad_alloc while the array is built around it) drops an unarmed owner and leaves the tensor
// with the caller.
class dlpack_import_owner {
 public:
  dlpack_import_owner() = default;
  dlpack_import_owner(dlpack_import_owner const&) = delete;
  dlpack_import_owner& operator=(dlpack_import_owner const&) = delete;
  virtual ~dlpack_import_owner() = default;
  void arm() noexcept { armed_ = true; }

 protected:
  bool armed_ = false;
};
std::shared_ptr<dlpack_import_owner> dlpack_owner(dlpack::DLManagedTensor* t);
std::shared_ptr<dlpack_import_owner> dlpack_owner(dlpack::DLManagedTensorVersioned* t);

// The import itself, for both tensor structs: validate, wrap with an unarmed owner, then arm it.
template <class T, class Managed>
device_array<T> import_dlpack(Managed* t) {
  auto const in = check_dlpack_import(t->dl_tensor, dlpack_dtype<T>(), sizeof(T));
  std::shared_ptr<dlpack_import_owner> owner = dlpack_owner(t);
  device_array<T> out = wrap_device_array(static_cast<T*>(in.data), in.shape, in.strides, owner);
  owner->arm();  // nothing below can throw: from here on the array owns the tensor
  return out;
}

}  // namespace detail

// A DLPack 0.8 tensor sharing `a`'s memory.
template <class Array>
dlpack::DLManagedTensor* to_dlpack(Array const& a) {
  using T = typename Array::value_type;
  return detail::make_dlpack(a.data(), a.layout(), dlpack_dtype<T>(),
                             detail::dlpack_device(detail::memory_kind_of<Array>::value),
                             a.share_owner());
}

// A DLPack 1.0 tensor sharing `a`'s memory (flags 0: writable, not a copy).
template <class Array>
dlpack::DLManagedTensorVersioned* to_dlpack_versioned(Array const& a) {
  using T = typename Array::value_type;
  return detail::make_dlpack_versioned(a.data(), a.layout(), dlpack_dtype<T>(),
                                       detail::dlpack_device(detail::memory_kind_of<Array>::value),
                                       a.share_owner());
}

template <class T>
device_array<T> from_dlpack(dlpack::DLManagedTensor* t) {
  GPUMEM_EXPECTS(t != nullptr, "from_dlpack: null tensor");
  return detail::import_dlpack<T>(t);
}

template <class T>
device_array<T> from_dlpack(dlpack::DLManagedTensorVersioned* t) {
  GPUMEM_EXPECTS(t != nullptr, "from_dlpack: null tensor");
  GPUMEM_EXPECTS(t->version.major == dlpack::major_version,
                 "from_dlpack: DLPack major version " + std::to_string(t->version.major) +
                     " is not supported (expected " + std::to_string(dlpack::major_version) + ")");
  // gpumem arrays have no read-only form: importing would let the consumer write into memory
  // the producer promised nobody writes (a shared NumPy buffer, a constant tensor).
  GPUMEM_EXPECTS((t->flags & dlpack::flag_read_only) == 0,
                 "from_dlpack: the tensor is read-only (flags " + std::to_string(t->flags) +
                     " include DLPACK_FLAG_BITMASK_READ_ONLY), gpumem arrays are writable");
  return detail::import_dlpack<T>(t);
}

}  // namespace gpumem
