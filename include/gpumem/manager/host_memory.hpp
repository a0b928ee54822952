// gpumem/manager/host_memory.hpp
//
// What memhostalloc and mempin return: pinned host memory that is either mapped into the device
// address space (mapped_memory) or not (pinned_memory). The spec returns one of two classes
// depending on the `mapped` flag; host_memory holds exactly one of them, so the caller asks
// is_mapped() instead of testing a type, and a device pointer cannot be taken from memory that
// has none. (Two members and a flag rather than a std::variant: GCC 12 at -O3 -Wall warned of a
// maybe-uninitialized shared_ptr in every destructor of a variant of the two, and a consumer that
// builds with -Werror could not include this header.)
//
// Ownership: shares the owner of the held pointer (copy shares, move transfers).
// Thread safety: as the held pointer type (std::shared_ptr rules).
#pragma once

#include <gpumem/manager/memory_pointer.hpp>

#include <cstddef>
#include <utility>

namespace gpumem {

class host_memory {
 public:
  host_memory() = default;
  host_memory(pinned_memory memory) : pinned_(std::move(memory)) {}  // NOLINT: implicit by design
  host_memory(mapped_memory memory)                                  // NOLINT: implicit by design
      : mapped_(std::move(memory)), is_mapped_(true) {}

  bool is_mapped() const noexcept { return is_mapped_; }
  void* host_pointer() const noexcept;
  std::size_t size() const noexcept;
  long use_count() const noexcept;
  // The device address of mapped memory. Throws gpumem::logic_error when the memory is not mapped.
  void* device_pointer() const;

  // The held object; each throws gpumem::logic_error when the other alternative is held.
  mapped_memory const& mapped() const;
  pinned_memory const& pinned() const;

  explicit operator bool() const noexcept { return use_count() > 0; }

 private:
  pinned_memory pinned_;  // empty when is_mapped_
  mapped_memory mapped_;  // empty unless is_mapped_
  bool is_mapped_ = false;
};

}  // namespace gpumem
