// DLPack export and import (see dlpack_interop.hpp).
#include <gpumem/array/dlpack_interop.hpp>
#include <gpumem/core/checked_arithmetic.hpp>
#include <gpumem/core/error.hpp>
#include <gpumem/manager/context.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace gpumem::detail {
namespace {

// What an exported tensor's manager_ctx points at: the tensor itself, the arrays its shape and
// strides point into, and the share of the array's memory.
template <class Managed>
struct export_state {
  Managed tensor{};
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;
  std::shared_ptr<void> owner;
};

template <class Managed>
void delete_export(Managed* self) {
  delete static_cast<export_state<Managed>*>(self->manager_ctx);
}

template <class Managed>
export_state<Managed>* make_export(void* data, array_layout const& layout, dlpack::DLDataType dtype,
                                   dlpack::DLDevice device, std::shared_ptr<void> owner) {
  auto state = std::make_unique<export_state<Managed>>();
  state->owner = std::move(owner);
  for (int d = 0; d < layout.rank; ++d) {
    state->shape.push_back(static_cast<std::int64_t>(layout.shape[d]));
    state->strides.push_back(layout.strides[d] / static_cast<std::ptrdiff_t>(layout.itemsize));
  }
  dlpack::DLTensor& t = state->tensor.dl_tensor;
  t.data = data;
  t.device = device;
  t.ndim = layout.rank;
  t.dtype = dtype;
  t.shape = state->shape.empty() ? nullptr : state->shape.data();
  t.strides = state->strides.empty() ? nullptr : state->strides.data();
  t.byte_offset = 0;
  state->tensor.manager_ctx = state.get();
  state->tensor.deleter = &delete_export<Managed>;
  return state.release();
}

std::string device_type_name(std::int32_t type) {
  switch (type) {
    case dlpack::kDLCPU:
      return "kDLCPU";
    case dlpack::kDLCUDA:
      return "kDLCUDA";
    case dlpack::kDLCUDAHost:
      return "kDLCUDAHost";
    case dlpack::kDLCUDAManaged:
      return "kDLCUDAManaged";
    case dlpack::kDLROCM:
      return "kDLROCM";
    default:
      return "device type " + std::to_string(type);
  }
}

template <class Managed>
class import_owner final : public dlpack_import_owner {
 public:
  explicit import_owner(Managed* t) noexcept : tensor_(t) {}
  ~import_owner() override {
    if (armed_ && tensor_->deleter != nullptr) tensor_->deleter(tensor_);
  }

 private:
  Managed* tensor_;
};

}  // namespace

dlpack::DLDevice dlpack_device(memory_kind kind) {
  if (backend().kind() == backend_kind::host) return {dlpack::kDLCPU, 0};
  std::int32_t const id = current_context().device();
  switch (kind) {
    case memory_kind::device:
      return {dlpack::kDLCUDA, id};
    case memory_kind::pinned:
    case memory_kind::mapped:
      return {dlpack::kDLCUDAHost, id};
    case memory_kind::managed:
      return {dlpack::kDLCUDAManaged, id};
  }
  return {dlpack::kDLCUDA, id};
}

dlpack::DLManagedTensor* make_dlpack(void* data, array_layout const& layout,
                                     dlpack::DLDataType dtype, dlpack::DLDevice device,
                                     std::shared_ptr<void> owner) {
  return &make_export<dlpack::DLManagedTensor>(data, layout, dtype, device, std::move(owner))
              ->tensor;
}

dlpack::DLManagedTensorVersioned* make_dlpack_versioned(void* data, array_layout const& layout,
                                                        dlpack::DLDataType dtype,
                                                        dlpack::DLDevice device,
                                                        std::shared_ptr<void> owner) {
  auto* state =
      make_export<dlpack::DLManagedTensorVersioned>(data, layout, dtype, device, std::move(owner));
  state->tensor.version = {dlpack::major_version, dlpack::minor_version};
  state->tensor.flags = 0;
  return &state->tensor;
}

imported_tensor check_dlpack_import(dlpack::DLTensor const& t, dlpack::DLDataType dtype,
                                    std::size_t itemsize) {
  bool const host = backend().kind() == backend_kind::host;
  if (host) {
    GPUMEM_EXPECTS(t.device.device_type == dlpack::kDLCPU,
                   "from_dlpack: " + device_type_name(t.device.device_type) +
                       " memory cannot be imported on the host backend (expected kDLCPU)");
  } else {
    GPUMEM_EXPECTS(
        t.device.device_type == dlpack::kDLCUDA || t.device.device_type == dlpack::kDLCUDAManaged,
        "from_dlpack: " + device_type_name(t.device.device_type) +
            " memory is not device memory (expected kDLCUDA or kDLCUDAManaged)");
    int const here = current_context().device();
    GPUMEM_EXPECTS(t.device.device_id == here,
                   "from_dlpack: the tensor is on device " + std::to_string(t.device.device_id) +
                       ", the current context is on device " + std::to_string(here));
  }
  GPUMEM_EXPECTS(t.dtype.code == dtype.code && t.dtype.bits == dtype.bits && t.dtype.lanes == 1,
                 "from_dlpack: dtype (code " + std::to_string(t.dtype.code) + ", bits " +
                     std::to_string(t.dtype.bits) + ", lanes " + std::to_string(t.dtype.lanes) +
                     ") does not match the element type (code " + std::to_string(dtype.code) +
                     ", bits " + std::to_string(dtype.bits) + ", lanes 1)");
  GPUMEM_EXPECTS(t.ndim >= 0 && t.ndim <= max_array_rank,
                 "from_dlpack: ndim " + std::to_string(t.ndim) + " is outside [0, " +
                     std::to_string(max_array_rank) + "]");
  GPUMEM_EXPECTS(t.ndim == 0 || t.shape != nullptr,
                 "from_dlpack: null shape for ndim " + std::to_string(t.ndim));
  // A null data pointer has no bytes to offset into: with a byte_offset it used to become a small
  // non-null address (null + offset, undefined), which passed the null check of a non-empty array.
  GPUMEM_EXPECTS(
      t.data != nullptr || t.byte_offset == 0,
      "from_dlpack: byte_offset " + std::to_string(t.byte_offset) + " from a null data pointer");
  std::size_t first_byte = 0;
  GPUMEM_EXPECTS(checked_add(reinterpret_cast<std::uintptr_t>(t.data),
                             static_cast<std::size_t>(t.byte_offset), first_byte),
                 "from_dlpack: byte_offset " + std::to_string(t.byte_offset) +
                     " from the data pointer wraps the address space");
  imported_tensor out;
  out.data = static_cast<unsigned char*>(t.data) + t.byte_offset;
  for (int d = 0; d < t.ndim; ++d) {
    GPUMEM_EXPECTS(t.shape[d] >= 0, "from_dlpack: shape[" + std::to_string(d) +
                                        "] = " + std::to_string(t.shape[d]) + " is negative");
    out.shape.push_back(static_cast<std::size_t>(t.shape[d]));
  }
  if (t.strides != nullptr) {
    for (int d = 0; d < t.ndim; ++d) {
      std::int64_t const s = t.strides[d];
      std::int64_t const limit =
          std::numeric_limits<std::int64_t>::max() / static_cast<std::int64_t>(itemsize);
      GPUMEM_EXPECTS(s <= limit && s >= -limit, "from_dlpack: strides[" + std::to_string(d) +
                                                    "] = " + std::to_string(s) +
                                                    " elements overflows in bytes");
      out.strides.push_back(static_cast<std::ptrdiff_t>(s * static_cast<std::int64_t>(itemsize)));
    }
  } else {
    out.strides = array_layout::contiguous(out.shape, itemsize).strides_vector();
  }
  return out;
}

std::shared_ptr<dlpack_import_owner> dlpack_owner(dlpack::DLManagedTensor* t) {
  return std::make_shared<import_owner<dlpack::DLManagedTensor>>(t);
}
std::shared_ptr<dlpack_import_owner> dlpack_owner(dlpack::DLManagedTensorVersioned* t) {
  return std::make_shared<import_owner<dlpack::DLManagedTensorVersioned>>(t);
}

}  // namespace gpumem::detail
