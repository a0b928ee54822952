// gpumem/mr/cccl_resource_adaptor.hpp
//
// Lets a gpumem resource stand wherever CCCL's cuda::mr resource concept is accepted (thrust,
// cub, cudax containers, cuda::mr::resource_ref, RMM's newer API).
//
// CCCL changed spellings between releases and this header hides the difference: CCCL 3.0 (CUDA
// 13.0) has cuda::mr::async_resource with allocate_async(bytes, align, stream) /
// deallocate_async(ptr, bytes, align, stream) and the synchronous allocate(bytes, align) /
// deallocate(ptr, bytes, align); CCCL 3.1 renamed them to cuda::mr::resource with
// allocate(stream, bytes, align) / deallocate(stream, ptr, bytes, align) and
// allocate_sync / deallocate_sync. The adaptor has all of them (the overloads do not collide), so
// one type satisfies whichever concept the CCCL in use defines; gpumem::cccl_resource_concept<R>
// names the right check.
//
// Availability: CCCL's cuda::stream_ref includes cuda_runtime_api.h, so this header is only
// useful where the toolkit's CCCL headers are on the include path (nvcc puts them there). Elsewhere
// (host-only builds) it declares nothing and GPUMEM_HAS_CCCL_RESOURCE is 0. Before CCCL 3.1 the
// resource concepts are experimental: this header defines
// LIBCUDACXX_ENABLE_EXPERIMENTAL_MEMORY_RESOURCE, so include it before any other
// <cuda/memory_resource> include of the translation unit.
#pragma once

#if defined(__has_include)
#if __has_include(<cuda/memory_resource>) && __has_include(<cuda/stream_ref>)
#define GPUMEM_HAS_CCCL_RESOURCE 1
#endif
#endif
#ifndef GPUMEM_HAS_CCCL_RESOURCE
#define GPUMEM_HAS_CCCL_RESOURCE 0
#endif

#if GPUMEM_HAS_CCCL_RESOURCE

#ifndef LIBCUDACXX_ENABLE_EXPERIMENTAL_MEMORY_RESOURCE
#define LIBCUDACXX_ENABLE_EXPERIMENTAL_MEMORY_RESOURCE
#endif

#include <gpumem/core/error.hpp>
#include <gpumem/mr/memory_resource.hpp>

#include <cuda/memory_resource>
#include <cuda/stream_ref>

#include <cstddef>
#include <string>
#include <type_traits>

namespace gpumem {

// True for CCCL releases with the stream-first spelling (3.1 and later).
inline constexpr bool cccl_stream_first = CCCL_VERSION >= 3001000;

// A gpumem resource seen through CCCL's concept. `Properties` are the CCCL property tags the
// adaptor advertises (default: cuda::mr::device_accessible); the constructor checks them against
// the wrapped resource's properties() and throws gpumem::logic_error on a mismatch.
//
// Ownership: references the resource, which must outlive every copy of the adaptor. Copies are
// cheap and compare equal when the wrapped resources do.
// Thread safety and stream semantics: the wrapped resource's. The cuda::stream_ref is the
// cudaStream_t, which is what gpumem's stream_handle holds on the cuda backend; on the host
// backend only the default stream (a null cudaStream_t) is meaningful.
// Alignment: gpumem resources align to 256 bytes; a request for more (or a non-power-of-two)
// throws gpumem::logic_error naming it.
template <class... Properties>
class cccl_resource_adaptor {
 public:
  explicit cccl_resource_adaptor(memory_resource& resource) : resource_(&resource) {
    resource_properties const p = resource.properties();
    constexpr bool device = (std::is_same_v<Properties, cuda::mr::device_accessible> || ...);
    constexpr bool host = (std::is_same_v<Properties, cuda::mr::host_accessible> || ...);
    GPUMEM_EXPECTS((!device || p.device_accessible) && (!host || p.host_accessible),
                   "cccl_resource_adaptor: " + resource.name() + " is not " +
                       std::string(device && !p.device_accessible ? "device" : "host") +
                       " accessible, but the adaptor claims it");
  }

  memory_resource& resource() const noexcept { return *resource_; }

  // --- stream-ordered (CCCL 3.1: allocate/deallocate; CCCL 3.0: allocate_async/...) ---
  void* allocate(cuda::stream_ref stream, std::size_t bytes,
                 std::size_t alignment = default_alignment) {
    check_alignment(alignment);
    return resource_->allocate(bytes, to_handle(stream));
  }
  void deallocate(cuda::stream_ref stream, void* ptr, std::size_t bytes,
                  std::size_t alignment = default_alignment) noexcept {
    static_cast<void>(alignment);
    resource_->deallocate(ptr, bytes, to_handle(stream));
  }
  void* allocate_async(std::size_t bytes, std::size_t alignment, cuda::stream_ref stream) {
    return allocate(stream, bytes, alignment);
  }
  void deallocate_async(void* ptr, std::size_t bytes, std::size_t alignment,
                        cuda::stream_ref stream) noexcept {
    deallocate(stream, ptr, bytes, alignment);
  }

  // --- synchronous (CCCL 3.1: allocate_sync/deallocate_sync; CCCL 3.0: allocate/deallocate) ---
  void* allocate_sync(std::size_t bytes, std::size_t alignment = default_alignment) {
    check_alignment(alignment);
    return resource_->allocate_sync(bytes);
  }
  void deallocate_sync(void* ptr, std::size_t bytes,
                       std::size_t alignment = default_alignment) noexcept {
    static_cast<void>(alignment);
    resource_->deallocate_sync(ptr, bytes);
  }
  void* allocate(std::size_t bytes, std::size_t alignment = default_alignment) {
    return allocate_sync(bytes, alignment);
  }
  void deallocate(void* ptr, std::size_t bytes,
                  std::size_t alignment = default_alignment) noexcept {
    deallocate_sync(ptr, bytes, alignment);
  }

  friend bool operator==(cccl_resource_adaptor const& a, cccl_resource_adaptor const& b) noexcept {
    return a.resource_->is_equal(*b.resource_);
  }
  friend bool operator!=(cccl_resource_adaptor const& a, cccl_resource_adaptor const& b) noexcept {
    return !(a == b);
  }

  // CCCL finds properties through this friend (has_property<R, P>).
  template <class Property,
            std::enable_if_t<(std::is_same_v<Property, Properties> || ...), int> = 0>
  friend constexpr void get_property(cccl_resource_adaptor const&, Property) noexcept {}

 private:
  static stream_handle to_handle(cuda::stream_ref stream) noexcept {
    return reinterpret_cast<stream_handle>(stream.get());
  }
  static void check_alignment(std::size_t alignment) {
    GPUMEM_EXPECTS(
        alignment != 0 && (alignment & (alignment - 1)) == 0 && alignment <= default_alignment,
        "cccl_resource_adaptor: alignment " + std::to_string(alignment) +
            " is not a power of two of at most " + std::to_string(default_alignment));
  }

  memory_resource* resource_;
};

// The concept of the CCCL in use that stream-ordered resources satisfy.
template <class Resource>
inline constexpr bool cccl_resource_concept =
#if CCCL_VERSION >= 3001000
    cuda::mr::resource<Resource>&& cuda::mr::synchronous_resource<Resource>;
#else
    cuda::mr::async_resource<Resource>&& cuda::mr::resource<Resource>;
#endif

using cccl_device_resource = cccl_resource_adaptor<cuda::mr::device_accessible>;

}  // namespace gpumem

#endif  // GPUMEM_HAS_CCCL_RESOURCE
