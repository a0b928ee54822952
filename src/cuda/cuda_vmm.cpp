// The cuda backend's virtual-memory operations through the driver's VMM API (see cuda_vmm.hpp).
#include "cuda_vmm.hpp"

#if GPUMEM_HAS_CUDA

#include "cuda_check.hpp"
#include "cuda_driver.hpp"

#include <gpumem/core/checked_arithmetic.hpp>

#include <cuda.h>  // driver types only: the functions are fetched at run time

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>

namespace gpumem::detail {

namespace {

// The entry points, typed after the declarations in cuda.h (decltype does not link them).
struct vmm_entry_points {
  decltype(&::cuDeviceGet) device_get = nullptr;
  decltype(&::cuDeviceGetAttribute) device_get_attribute = nullptr;
  decltype(&::cuMemGetAllocationGranularity) get_granularity = nullptr;
  decltype(&::cuMemAddressReserve) address_reserve = nullptr;
  decltype(&::cuMemAddressFree) address_free = nullptr;
  decltype(&::cuMemCreate) create = nullptr;
  decltype(&::cuMemRelease) release = nullptr;
  decltype(&::cuMemMap) map = nullptr;
  decltype(&::cuMemSetAccess) set_access = nullptr;
  decltype(&::cuMemUnmap) unmap = nullptr;

  bool complete() const noexcept {
    return device_get && device_get_attribute && get_granularity && address_reserve &&
           address_free && create && release && map && set_access && unmap;
  }
};

template <class Function>
void fetch(Function& slot, char const* symbol) noexcept {
  slot = reinterpret_cast<Function>(driver_entry_point(symbol));
}

// Looked up once. A driver without one of them (none that a CUDA 13 runtime accepts) makes virtual
// memory unsupported rather than the backend unusable.
vmm_entry_points const& entry_points() {
  static vmm_entry_points const entries = [] {
    vmm_entry_points e;
    fetch(e.device_get, "cuDeviceGet");
    fetch(e.device_get_attribute, "cuDeviceGetAttribute");
    fetch(e.get_granularity, "cuMemGetAllocationGranularity");
    fetch(e.address_reserve, "cuMemAddressReserve");
    fetch(e.address_free, "cuMemAddressFree");
    fetch(e.create, "cuMemCreate");
    fetch(e.release, "cuMemRelease");
    fetch(e.map, "cuMemMap");
    fetch(e.set_access, "cuMemSetAccess");
    fetch(e.unmap, "cuMemUnmap");
    return e;
  }();
  return entries;
}

// Pinned (non-migratable) device memory on device `ordinal`, not exportable to other processes.
CUmemAllocationProp device_memory_properties(int ordinal) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = ordinal;
  return prop;
}

std::string range_text(void const* address, std::size_t bytes) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%p", address);
  return std::string("[") + buffer + ", +" + std::to_string(bytes) + " bytes)";
}

CUdeviceptr device_pointer(void const* address) noexcept {
  return reinterpret_cast<CUdeviceptr>(address);
}

class cuda_vmm_operations final : public vmm_operations {
 public:
  std::size_t granularity() override {
    int const ordinal = bind_current_device();
    std::lock_guard<std::mutex> lock(mutex_);
    auto const known = granularity_.find(ordinal);
    if (known != granularity_.end()) return known->second;
    std::size_t const granularity = query_granularity(ordinal);
    granularity_.emplace(ordinal, granularity);
    return granularity;
  }

  // A range no address space holds (above max_allocation_bytes, where the driver's own round-ups
  // could wrap) or one the driver cannot find room for is out of memory, as on the host backend.
  void* reserve(std::size_t bytes) override {
    if (bytes > max_allocation_bytes)
      throw_driver_allocation_failure(CUDA_ERROR_OUT_OF_MEMORY, bytes, 0, "cuMemAddressReserve",
                                      __FILE__, __LINE__);
    std::size_t const alignment = granularity();
    CUdeviceptr base = 0;
    CUresult const status = entry_points().address_reserve(&base, bytes, alignment, 0, 0);
    if (status == CUDA_ERROR_OUT_OF_MEMORY)
      throw_driver_allocation_failure(status, bytes, 0, "cuMemAddressReserve", __FILE__, __LINE__);
    if (status != CUDA_SUCCESS)
      throw_driver_error(
          status, "cuMemAddressReserve", __FILE__, __LINE__,
          "reserving " + std::to_string(bytes) + " bytes aligned to " + std::to_string(alignment));
    return reinterpret_cast<void*>(base);
  }

  void free_range(void* base, std::size_t bytes) override {
    bind_current_device();
    CUresult const status = entry_points().address_free(device_pointer(base), bytes);
    if (status != CUDA_SUCCESS)
      throw_driver_error(status, "cuMemAddressFree", __FILE__, __LINE__, range_text(base, bytes));
  }

  std::uint64_t create(std::size_t bytes) override {
    int const ordinal = bind_current_device();
    CUmemAllocationProp const prop = device_memory_properties(ordinal);
    CUmemGenericAllocationHandle handle = 0;
    CUresult const status = entry_points().create(&handle, bytes, &prop, 0);
    if (status != CUDA_SUCCESS) {
      std::size_t peak = 0;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        peak = peak_bytes_;
      }
      throw_driver_allocation_failure(status, bytes, peak, "cuMemCreate", __FILE__, __LINE__);
    }
    std::lock_guard<std::mutex> lock(mutex_);
    physical_bytes_ += bytes;
    peak_bytes_ = std::max(peak_bytes_, physical_bytes_);
    return static_cast<std::uint64_t>(handle);
  }

  void release(std::uint64_t native, std::size_t bytes) override {
    bind_current_device();
    CUresult const status =
        entry_points().release(static_cast<CUmemGenericAllocationHandle>(native));
    if (status != CUDA_SUCCESS)
      throw_driver_error(status, "cuMemRelease", __FILE__, __LINE__,
                         "releasing a chunk of " + std::to_string(bytes) + " bytes");
    std::lock_guard<std::mutex> lock(mutex_);
    physical_bytes_ -= std::min(physical_bytes_, bytes);
  }

  void map(void* address, std::size_t bytes, std::uint64_t native) override {
    int const ordinal = bind_current_device();
    vmm_entry_points const& d = entry_points();
    CUresult status = d.map(device_pointer(address), bytes, 0,
                            static_cast<CUmemGenericAllocationHandle>(native), 0);
    if (status != CUDA_SUCCESS)
      throw_driver_error(status, "cuMemMap", __FILE__, __LINE__, range_text(address, bytes));
    // A new mapping is inaccessible until its access is set, for every device that uses it.
    CUmemAccessDesc access{};
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = ordinal;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    status = d.set_access(device_pointer(address), bytes, &access, 1);
    if (status != CUDA_SUCCESS) {
      (void)d.unmap(device_pointer(address), bytes);  // the access error is the one to report
      throw_driver_error(status, "cuMemSetAccess", __FILE__, __LINE__,
                         range_text(address, bytes) + " for device " + std::to_string(ordinal));
    }
  }

  void unmap(void* address, std::size_t bytes) override {
    bind_current_device();
    CUresult const status = entry_points().unmap(device_pointer(address), bytes);
    if (status != CUDA_SUCCESS)
      throw_driver_error(status, "cuMemUnmap", __FILE__, __LINE__, range_text(address, bytes));
  }

 private:
  // Caller holds mutex_ (the answer is cached per device).
  static std::size_t query_granularity(int ordinal) {
    vmm_entry_points const& d = entry_points();
    if (!d.complete()) return 0;
    CUdevice device = 0;
    CUresult status = d.device_get(&device, ordinal);
    if (status != CUDA_SUCCESS)
      throw_driver_error(status, "cuDeviceGet", __FILE__, __LINE__,
                         "device " + std::to_string(ordinal));
    int supported = 0;
    status = d.device_get_attribute(
        &supported, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, device);
    if (status != CUDA_SUCCESS)
      throw_driver_error(status, "cuDeviceGetAttribute", __FILE__, __LINE__,
                         "CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED of device " +
                             std::to_string(ordinal));
    if (supported == 0) return 0;
    CUmemAllocationProp const prop = device_memory_properties(ordinal);
    std::size_t granularity = 0;
    status = d.get_granularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    if (status != CUDA_SUCCESS)
      throw_driver_error(status, "cuMemGetAllocationGranularity", __FILE__, __LINE__,
                         "pinned memory on device " + std::to_string(ordinal));
    return granularity;
  }

  std::mutex mutex_;
  std::map<int, std::size_t> granularity_;  // device ordinal -> granularity (0: unsupported)
  std::size_t physical_bytes_ = 0;
  std::size_t peak_bytes_ = 0;
};

}  // namespace

std::unique_ptr<vmm_operations> make_cuda_vmm_operations() {
  return std::make_unique<cuda_vmm_operations>();
}

}  // namespace gpumem::detail

#endif  // GPUMEM_HAS_CUDA
