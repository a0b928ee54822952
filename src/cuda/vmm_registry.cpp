// The checks and records of the virtual-memory calls, shared by both backends (vmm_registry.hpp).
#include "vmm_registry.hpp"

#include <gpumem/core/error.hpp>

#include <cstdio>
#include <iterator>
#include <string>
#include <utility>

namespace gpumem::detail {

namespace {

std::uintptr_t address_of(void const* p) noexcept {
  return reinterpret_cast<std::uintptr_t>(p);
}

std::string address_text(std::uintptr_t address) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%p", reinterpret_cast<void*>(address));
  return buffer;
}

std::string handle_text(physical_handle chunk) {
  return "physical handle " + std::to_string(static_cast<std::uint64_t>(chunk));
}

std::string bytes_text(std::size_t bytes) {
  return std::to_string(bytes) + " bytes";
}

}  // namespace

vmm_registry::vmm_registry(std::unique_ptr<vmm_operations> operations)
    : operations_(std::move(operations)) {}

vmm_registry::~vmm_registry() = default;

std::size_t vmm_registry::supported_granularity(char const* call) {
  std::size_t const granularity = operations_->granularity();
  if (granularity == 0)
    throw not_supported(std::string(call) +
                        ": the current device does not support virtual memory management");
  return granularity;
}

std::size_t vmm_registry::checked_size(std::size_t bytes, char const* call) {
  std::size_t const granularity = supported_granularity(call);
  GPUMEM_EXPECTS(bytes != 0 && bytes % granularity == 0,
                 std::string(call) + ": the size " + bytes_text(bytes) +
                     " is not a non-zero multiple of the granularity " + bytes_text(granularity));
  return granularity;
}

vmm_registry::chunk_record& vmm_registry::known_chunk(physical_handle chunk, char const* call) {
  auto it = chunks_.find(static_cast<std::uint64_t>(chunk));
  GPUMEM_EXPECTS(it != chunks_.end(), std::string(call) + ": " + handle_text(chunk) +
                                          " is not a live chunk of this backend");
  return it->second;
}

vmm_registry::reservation& vmm_registry::reservation_holding(std::uintptr_t address,
                                                             std::size_t bytes, char const* call) {
  auto it = reservations_.upper_bound(address);
  bool inside = it != reservations_.begin();
  if (inside) {
    --it;
    std::size_t const offset = address - it->first;
    inside = offset < it->second.size && bytes <= it->second.size - offset;
  }
  GPUMEM_EXPECTS(inside, std::string(call) + ": [" + address_text(address) + ", +" +
                             bytes_text(bytes) + ") is not inside a reserved address range");
  return it->second;
}

std::size_t vmm_registry::granularity() {
  return operations_->granularity();
}

void* vmm_registry::reserve_address_range(std::size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  checked_size(bytes, "reserve_address_range");
  void* base = operations_->reserve(bytes);
  try {
    reservations_.emplace(address_of(base), reservation{bytes, {}});
  } catch (...) {
    operations_->free_range(base, bytes);
    throw;
  }
  return base;
}

void vmm_registry::release_address_range(void* base, std::size_t bytes) {
  char const* const call = "release_address_range";
  std::lock_guard<std::mutex> lock(mutex_);
  checked_size(bytes, call);
  auto it = reservations_.find(address_of(base));
  GPUMEM_EXPECTS(it != reservations_.end(), std::string(call) + ": " +
                                                address_text(address_of(base)) +
                                                " is not the base of a reserved address range");
  GPUMEM_EXPECTS(it->second.size == bytes,
                 std::string(call) + ": the range at " + address_text(it->first) + " has " +
                     bytes_text(it->second.size) + ", not " + bytes_text(bytes));
  GPUMEM_EXPECTS(it->second.mappings.empty(),
                 std::string(call) + ": the range at " + address_text(it->first) + " still has " +
                     std::to_string(it->second.mappings.size()) + " mapping(s), the first at " +
                     address_text(it->second.mappings.begin()->first) + "; unmap them first");
  operations_->free_range(base, bytes);
  reservations_.erase(it);
}

physical_handle vmm_registry::create_physical(std::size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  checked_size(bytes, "create_physical");
  std::uint64_t const native = operations_->create(bytes);
  physical_handle const chunk{next_handle_};
  try {
    chunks_.emplace(next_handle_, chunk_record{native, bytes});
  } catch (...) {
    operations_->release(native, bytes);
    throw;
  }
  ++next_handle_;
  return chunk;
}

void vmm_registry::release_physical(physical_handle chunk) {
  char const* const call = "release_physical";
  std::lock_guard<std::mutex> lock(mutex_);
  supported_granularity(call);
  chunk_record const& record = known_chunk(chunk, call);
  GPUMEM_EXPECTS(record.mapped == 0, std::string(call) + ": " + handle_text(chunk) + " is still " +
                                         "mapped " + std::to_string(record.mapped) +
                                         " time(s); unmap it first");
  operations_->release(record.native, record.size);
  chunks_.erase(static_cast<std::uint64_t>(chunk));
}

void vmm_registry::map_physical(void* address, std::size_t bytes, physical_handle chunk) {
  char const* const call = "map_physical";
  std::lock_guard<std::mutex> lock(mutex_);
  std::size_t const granularity = checked_size(bytes, call);
  chunk_record& record = known_chunk(chunk, call);
  GPUMEM_EXPECTS(record.size == bytes, std::string(call) + ": " + handle_text(chunk) + " has " +
                                           bytes_text(record.size) + ", not " + bytes_text(bytes) +
                                           " (a mapping covers the whole chunk)");
  std::uintptr_t const start = address_of(address);
  GPUMEM_EXPECTS(start % granularity == 0,
                 std::string(call) + ": the address " + address_text(start) +
                     " is not a multiple of the granularity " + bytes_text(granularity));
  reservation& range = reservation_holding(start, bytes, call);
  // Overlap: the first mapping at or after `start` must begin at or after the end, and the one
  // before it must end at or before `start`.
  auto next = range.mappings.lower_bound(start);
  GPUMEM_EXPECTS(next == range.mappings.end() || next->first - start >= bytes,
                 std::string(call) + ": [" + address_text(start) + ", +" + bytes_text(bytes) +
                     ") overlaps the mapping at " + address_text(next->first));
  if (next != range.mappings.begin()) {
    auto const previous = std::prev(next);
    GPUMEM_EXPECTS(start - previous->first >= previous->second.size,
                   std::string(call) + ": " + address_text(start) + " is inside the mapping at " +
                       address_text(previous->first) + " (" + bytes_text(previous->second.size) +
                       ")");
  }
  operations_->map(address, bytes, record.native);
  try {
    range.mappings.emplace_hint(next, start, mapping{bytes, chunk});
  } catch (...) {
    operations_->unmap(address, bytes);
    throw;
  }
  ++record.mapped;
}

void vmm_registry::unmap(void* address, std::size_t bytes) {
  char const* const call = "unmap";
  std::lock_guard<std::mutex> lock(mutex_);
  checked_size(bytes, call);
  std::uintptr_t const start = address_of(address);
  reservation& range = reservation_holding(start, bytes, call);
  auto it = range.mappings.find(start);
  GPUMEM_EXPECTS(it != range.mappings.end(),
                 std::string(call) + ": nothing is mapped at " + address_text(start));
  GPUMEM_EXPECTS(it->second.size == bytes,
                 std::string(call) + ": the mapping at " + address_text(start) + " has " +
                     bytes_text(it->second.size) + ", not " + bytes_text(bytes) +
                     " (unmap removes exactly one mapping)");
  operations_->unmap(address, bytes);
  auto const chunk = chunks_.find(static_cast<std::uint64_t>(it->second.chunk));
  if (chunk != chunks_.end()) --chunk->second.mapped;
  range.mappings.erase(it);
}

void vmm_registry::release_all() noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [base, range] : reservations_) {
    for (auto const& [address, m] : range.mappings) {
      try {
        operations_->unmap(reinterpret_cast<void*>(address), m.size);
      } catch (...) {
        // best effort: the backend is going away
      }
    }
    try {
      operations_->free_range(reinterpret_cast<void*>(base), range.size);
    } catch (...) {
    }
  }
  reservations_.clear();
  for (auto const& [handle, record] : chunks_) {
    try {
      operations_->release(record.native, record.size);
    } catch (...) {
    }
  }
  chunks_.clear();
}

}  // namespace gpumem::detail
