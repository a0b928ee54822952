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
// than T's, lanes != 1 or a stride that is not representable is a logic_error naming it. On
// success the array owns the tensor and calls its deleter when the last view goes; on failure the
// caller still owns it.
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
#include <memory>
#include <type_traits>

namespace gpumem {

enum class memory_kind { device, pinned, mapped, managed };

template <class T>
constexpr dlpack::DLDataType dlpack_dtype() {
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
// An owner that calls the tensor's deleter when destroyed.
std::shared_ptr<void> dlpack_owner(dlpack::DLManagedTensor* t);
std::shared_ptr<void> dlpack_owner(dlpack::DLManagedTensorVersioned* t);

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
  auto const in = detail::check_dlpack_import(t->dl_tensor, dlpack_dtype<T>(), sizeof(T));
  // A trial wrap without an owner: every check that can fail runs before ownership moves.
  (void)wrap_device_array(static_cast<T*>(in.data), in.shape, in.strides, nullptr);
  // Take ownership only once nothing can throw any more.
  return wrap_device_array(static_cast<T*>(in.data), in.shape, in.strides, detail::dlpack_owner(t));
}

template <class T>
device_array<T> from_dlpack(dlpack::DLManagedTensorVersioned* t) {
  GPUMEM_EXPECTS(t != nullptr, "from_dlpack: null tensor");
  GPUMEM_EXPECTS(t->version.major == dlpack::major_version,
                 "from_dlpack: DLPack major version " + std::to_string(t->version.major) +
                     " is not supported (expected " + std::to_string(dlpack::major_version) + ")");
  auto const in = detail::check_dlpack_import(t->dl_tensor, dlpack_dtype<T>(), sizeof(T));
  // A trial wrap without an owner: every check that can fail runs before ownership moves.
  (void)wrap_device_array(static_cast<T*>(in.data), in.shape, in.strides, nullptr);
  return wrap_device_array(static_cast<T*>(in.data), in.shape, in.strides, detail::dlpack_owner(t));
}

}  // namespace gpumem
