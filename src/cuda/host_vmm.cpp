// The host backend's virtual-memory operations (see host_vmm.hpp).
#include "host_vmm.hpp"

#include "host_errors.hpp"

#include <gpumem/core/checked_arithmetic.hpp>

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

namespace gpumem::detail::host {

namespace {

constexpr int no_access_flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;

[[noreturn]] void system_call_failed(char const* call, char const* system_call, void* address,
                                     std::size_t bytes) {
  int const saved = errno;
  fail(map_failed, "cudaErrorMapBufferObjectFailed", call,
       std::string(system_call) + " of " + std::to_string(bytes) + " bytes at " +
           pointer_text(address) + " failed: " + std::strerror(saved));
}

class host_vmm_operations final : public vmm_operations {
 public:
  explicit host_vmm_operations(host_arena& arena) : arena_(arena) {}

  std::size_t granularity() override { return vmm_granularity; }

  void* reserve(std::size_t bytes) override {
    // Over-reserve by one granule, then trim both ends so that the base is aligned. A range that
    // large cannot exist: out of memory, as cuMemAddressReserve reports it.
    std::size_t padded = 0;
    if (bytes > max_allocation_bytes || !checked_add(bytes, vmm_granularity, padded))
      throw out_of_memory(bytes, "host backend (virtual address space)", 0, 0,
                          "cannot reserve " + std::to_string(bytes) + " bytes of addresses");
    void* const raw = ::mmap(nullptr, padded, PROT_NONE, no_access_flags, -1, 0);
    if (raw == MAP_FAILED) system_call_failed("reserve_address_range", "mmap", nullptr, padded);
    auto const start = reinterpret_cast<std::uintptr_t>(raw);
    auto const aligned = (start + vmm_granularity - 1) / vmm_granularity * vmm_granularity;
    std::size_t const head = aligned - start;
    std::size_t const tail = vmm_granularity - head;
    if (head != 0) ::munmap(raw, head);
    if (tail != 0) ::munmap(reinterpret_cast<void*>(aligned + bytes), tail);
    return reinterpret_cast<void*>(aligned);
  }

  void free_range(void* base, std::size_t bytes) override {
    if (::munmap(base, bytes) != 0)
      system_call_failed("release_address_range", "munmap", base, bytes);
  }

  std::uint64_t create(std::size_t bytes) override {
    std::size_t const page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    void* const chunk = arena_.allocate(bytes, "create_physical", page);
    return reinterpret_cast<std::uintptr_t>(chunk);
  }

  void release(std::uint64_t native, std::size_t) override {
    arena_.free(reinterpret_cast<void*>(static_cast<std::uintptr_t>(native)), "release_physical");
  }

  void map(void* address, std::size_t bytes, std::uint64_t native) override {
    void const* const chunk = reinterpret_cast<void const*>(static_cast<std::uintptr_t>(native));
    void* const mapped = ::mmap(address, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
                                arena_.fd(), static_cast<off_t>(arena_.offset_of(chunk)));
    if (mapped == MAP_FAILED) system_call_failed("map_physical", "mmap", address, bytes);
  }

  void unmap(void* address, std::size_t bytes) override {
    void* const mapped = ::mmap(address, bytes, PROT_NONE, no_access_flags | MAP_FIXED, -1, 0);
    if (mapped == MAP_FAILED) system_call_failed("unmap", "mmap", address, bytes);
  }

 private:
  host_arena& arena_;
};

}  // namespace

std::unique_ptr<vmm_operations> make_host_vmm_operations(host_arena& arena) {
  return std::make_unique<host_vmm_operations>(arena);
}

}  // namespace gpumem::detail::host
