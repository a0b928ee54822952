// gpumem/array/transfer.hpp
//
// Numba's data-transfer functions in C++: to_device (host -> new device array) and copy (between
// any two gpumem arrays of one shape: device, pinned, mapped, managed). Each has a synchronous
// form and one that is asynchronous on a stream; see device_array.hpp for the lifetime rules.
//
//   auto d = gpumem::to_device(values);                           // 1-D, synchronous
//   auto m = gpumem::to_device(values, {rows, cols}, array_order::fortran, s);  // async on s
//   gpumem::copy(pinned, d, s);                                   // device -> pinned on s
//
// Host buffers are dense arrays in the array's natural order (C unless the array is Fortran-
// but not C-contiguous).
#pragma once

#include <gpumem/array/device_array.hpp>
#include <gpumem/array/host_span.hpp>
#include <gpumem/array/stream.hpp>

#include <vector>

namespace gpumem {

template <class T>
device_array<T> to_device(host_span<T const> host, shape_type const& shape,
                          array_order order = array_order::c) {
  device_array<T> d(shape, order);
  d.copy_to_device(host);
  return d;
}
template <class T>
device_array<T> to_device(host_span<T const> host, shape_type const& shape, array_order order,
                          stream const& s) {
  device_array<T> d(shape, order);
  d.copy_to_device(host, s);
  return d;
}
template <class T>
device_array<T> to_device(host_span<T const> host) {
  return to_device(host, shape_type{host.size()});
}
template <class T>
device_array<T> to_device(host_span<T const> host, stream const& s) {
  return to_device(host, shape_type{host.size()}, array_order::c, s);
}

// The same for std::vector (template deduction does not see through host_span's converting
// constructor).
template <class T, class A>
device_array<T> to_device(std::vector<T, A> const& host) {
  return to_device(host_span<T const>(host));
}
template <class T, class A>
device_array<T> to_device(std::vector<T, A> const& host, stream const& s) {
  return to_device(host_span<T const>(host), s);
}
template <class T, class A>
device_array<T> to_device(std::vector<T, A> const& host, shape_type const& shape,
                          array_order order = array_order::c) {
  return to_device(host_span<T const>(host), shape, order);
}
template <class T, class A>
device_array<T> to_device(std::vector<T, A> const& host, shape_type const& shape, array_order order,
                          stream const& s) {
  return to_device(host_span<T const>(host), shape, order, s);
}

// Copies every element of `src` into `dst` (same shape and element type). Overlapping views of
// one array give NumPy's result: the source is read as it was before the copy (detail/transfer.hpp
// stages it through a temporary).
template <class Dst, class Src>
void copy(Dst const& dst, Src const& src) {
  static_assert(std::is_same_v<typename Dst::value_type, typename Src::value_type>,
                "copy between arrays of different element types");
  detail::transfer(detail::array_side(dst), detail::array_side(src), nullptr);
}
template <class Dst, class Src>
void copy(Dst const& dst, Src const& src, stream const& s) {
  static_assert(std::is_same_v<typename Dst::value_type, typename Src::value_type>,
                "copy between arrays of different element types");
  detail::transfer(detail::array_side(dst), detail::array_side(src), &s);
}

}  // namespace gpumem
