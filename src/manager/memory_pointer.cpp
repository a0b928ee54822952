#include <gpumem/core/error.hpp>
#include <gpumem/core/logging.hpp>
#include <gpumem/manager/context.hpp>
#include <gpumem/manager/host_memory.hpp>
#include <gpumem/manager/memory_pointer.hpp>

#include <exception>
#include <string>

namespace gpumem {

namespace detail {

allocation_owner::allocation_owner(std::function<void()> finalizer,
                                   std::shared_ptr<void> keep_alive) noexcept
    : finalizer_(std::move(finalizer)), keep_alive_(std::move(keep_alive)) {}

allocation_owner::~allocation_owner() {
  if (!finalizer_) return;
  try {
    finalizer_();
  } catch (std::exception const& e) {
    log(log_level::error, std::string("memory pointer finalizer failed: ") + e.what());
  } catch (...) {
    log(log_level::error, "memory pointer finalizer failed with a non-standard exception");
  }
}

int context_device(context const& ctx) noexcept {
  return ctx.device();
}

}  // namespace detail

namespace {
std::shared_ptr<detail::allocation_owner> make_owner(std::function<void()> finalizer,
                                                     std::shared_ptr<void> keep_alive = {}) {
  return std::make_shared<detail::allocation_owner>(std::move(finalizer), std::move(keep_alive));
}
}  // namespace

// --- memory_pointer ---

memory_pointer::memory_pointer(context& ctx, void* ptr, std::size_t size,
                               std::function<void()> finalizer)
    : ctx_(&ctx),
      device_(ctx.device()),
      ptr_(ptr),
      size_(size),
      owner_(make_owner(std::move(finalizer))) {}

memory_pointer memory_pointer::view(std::size_t offset, std::size_t size) const {
  GPUMEM_EXPECTS(owner_ != nullptr, "memory_pointer::view: the pointer is empty");
  GPUMEM_EXPECTS(offset <= size_ && size <= size_ - offset,
                 "memory_pointer::view(offset=" + std::to_string(offset) +
                     ", size=" + std::to_string(size) + ") is outside the buffer of " +
                     std::to_string(size_) + " bytes");
  void* const start = ptr_ == nullptr ? nullptr : static_cast<char*>(ptr_) + offset;
  return memory_pointer(ctx_, device_, start, size, offset_ + offset, owner_);
}

memory_pointer memory_pointer::view(std::size_t offset) const {
  GPUMEM_EXPECTS(offset <= size_, "memory_pointer::view(offset=" + std::to_string(offset) +
                                      ") is outside the buffer of " + std::to_string(size_) +
                                      " bytes");
  return view(offset, size_ - offset);
}

context& memory_pointer::owning_context() const {
  GPUMEM_EXPECTS(ctx_ != nullptr, "memory_pointer::owning_context: the pointer is empty");
  return *ctx_;
}

bool memory_pointer::release_idle() noexcept {
  // The owner record is never held weakly, so a count of 1 means no other owner can appear.
  bool const freed = owner_ != nullptr && owner_.use_count() == 1 && owner_->free_idle();
  *this = memory_pointer();
  return freed;
}

// --- mapped_memory / managed_memory ---

mapped_memory::mapped_memory(context& ctx, void* host_ptr, void* device_ptr, std::size_t size,
                             std::function<void()> finalizer)
    : auto_free_pointer(ctx, device_ptr, size, std::move(finalizer)), host_ptr_(host_ptr) {}

managed_memory::managed_memory(context& ctx, void* ptr, std::size_t size,
                               std::function<void()> finalizer)
    : memory_pointer(ctx, ptr, size, std::move(finalizer)) {}

// --- pinned_memory ---

pinned_memory::pinned_memory(context& ctx, void* host_ptr, std::size_t size,
                             std::function<void()> finalizer, std::shared_ptr<void> owner)
    : ctx_(&ctx),
      host_ptr_(host_ptr),
      size_(size),
      owner_(make_owner(std::move(finalizer), std::move(owner))) {}

std::shared_ptr<void> const& pinned_memory::owner() const noexcept {
  static std::shared_ptr<void> const none;
  return owner_ ? owner_->keep_alive() : none;
}

context& pinned_memory::owning_context() const {
  GPUMEM_EXPECTS(ctx_ != nullptr, "pinned_memory::owning_context: the pointer is empty");
  return *ctx_;
}

// --- host_memory ---

void* host_memory::host_pointer() const noexcept {
  return is_mapped_ ? mapped_.host_pointer() : pinned_.host_pointer();
}

std::size_t host_memory::size() const noexcept {
  return is_mapped_ ? mapped_.size() : pinned_.size();
}

long host_memory::use_count() const noexcept {
  return is_mapped_ ? mapped_.use_count() : pinned_.use_count();
}

void* host_memory::device_pointer() const {
  return mapped().device_pointer();
}

mapped_memory const& host_memory::mapped() const {
  GPUMEM_EXPECTS(is_mapped_,
                 "host_memory: the memory is pinned but not mapped, so it has no device pointer "
                 "(allocate it with host_alloc_flags{.mapped = true} or mempin(..., mapped=true))");
  return mapped_;
}

pinned_memory const& host_memory::pinned() const {
  GPUMEM_EXPECTS(!is_mapped_, "host_memory: the memory is mapped, not pinned-only");
  return pinned_;
}

}  // namespace gpumem
