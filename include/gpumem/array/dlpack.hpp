// gpumem/array/dlpack.hpp
//
// The DLPack C ABI (dlpack.h, versions 0.8 and 1.0), declared here so that gpumem needs no
// external header. The structs are layout-compatible with dlpack.h's; they live in namespace
// gpumem::dlpack so that a program may include the real dlpack.h as well and convert pointers
// with reinterpret_cast.
//
// Ownership (the DLPack protocol): the producer allocates a managed tensor; the consumer calls its
// `deleter` exactly once when done (the producer's memory stays alive until then).
#pragma once

#include <cstdint>

namespace gpumem::dlpack {

inline constexpr std::uint32_t major_version = 1;
inline constexpr std::uint32_t minor_version = 0;

enum DLDeviceType : std::int32_t {
  kDLCPU = 1,
  kDLCUDA = 2,
  kDLCUDAHost = 3,
  kDLOpenCL = 4,
  kDLVulkan = 7,
  kDLMetal = 8,
  kDLVPI = 9,
  kDLROCM = 10,
  kDLROCMHost = 11,
  kDLExtDev = 12,
  kDLCUDAManaged = 13,
  kDLOneAPI = 14,
};

struct DLDevice {
  DLDeviceType device_type;
  std::int32_t device_id;
};

enum DLDataTypeCode : std::uint8_t {
  kDLInt = 0,
  kDLUInt = 1,
  kDLFloat = 2,
  kDLOpaqueHandle = 3,
  kDLBfloat = 4,
  kDLComplex = 5,
  kDLBool = 6,
};

struct DLDataType {
  std::uint8_t code;
  std::uint8_t bits;
  std::uint16_t lanes;
};

struct DLPackVersion {
  std::uint32_t major;
  std::uint32_t minor;
};

struct DLTensor {
  void* data;
  DLDevice device;
  std::int32_t ndim;
  DLDataType dtype;
  std::int64_t* shape;
  std::int64_t* strides;  // in elements; null means C-contiguous
  std::uint64_t byte_offset;
};

// DLPack 0.8 (the form most libraries exchange through __dlpack__ without a version).
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};

inline constexpr std::uint64_t flag_read_only = 1u << 0;
inline constexpr std::uint64_t flag_is_copied = 1u << 1;

// DLPack 1.0.
struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(DLManagedTensorVersioned* self);
  std::uint64_t flags;
  DLTensor dl_tensor;
};

}  // namespace gpumem::dlpack
