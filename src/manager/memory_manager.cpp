// The defaults of memory_manager's stream-ordered additions (memory_manager.hpp): what a manager
// that knows nothing of streams can still promise.
#include <gpumem/core/error.hpp>
#include <gpumem/manager/context.hpp>
#include <gpumem/manager/memory_manager.hpp>

namespace gpumem {

// memalloc's memory is usable by every stream once it returns, and its finalizer frees only what
// no device work uses any more: that is the stream-ordered contract, with more waiting.
memory_pointer memory_manager::allocate(std::size_t bytes, stream_handle) {
  return memalloc(bytes);
}

void memory_manager::release_stream(stream_handle) {}

void* memory_manager::allocate_unowned(std::size_t, stream_handle) {
  throw not_supported("memory manager '" + name() +
                      "': no unowned allocations (use allocate(), which returns an owner)");
}

void* memory_manager::memalloc_unowned(std::size_t) {
  throw not_supported("memory manager '" + name() +
                      "': no unowned allocations (use memalloc(), which returns an owner)");
}

// The queue's fields; managers that count their allocations add theirs.
memory_statistics memory_manager::get_memory_statistics() const {
  memory_statistics s;
  pending_deallocations const& queue = owning_context().pending_deallocations();
  s.pending_count = queue.size();
  s.pending_bytes = queue.bytes();
  s.retired_count = queue.retired_size();
  s.retired_bytes = queue.retired_bytes();
  return s;
}

}  // namespace gpumem
