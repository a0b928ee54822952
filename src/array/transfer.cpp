// The copy entry of the array layer (see detail/transfer.hpp): overlap staging and keep-alives
// around copy_elements.
#include <gpumem/array/detail/transfer.hpp>
#include <gpumem/array/device_array.hpp>

#include <cstddef>
#include <memory>
#include <vector>

namespace gpumem::detail {

staging_buffer device_staging_buffer(std::size_t bytes) {
  auto memory = std::make_shared<memory_pointer>(allocate_device_memory(bytes));
  return {memory->device_pointer(), memory};
}

staging_buffer host_staging_buffer(std::size_t bytes) {
  // max_align_t elements: aligned for every element type an array may hold.
  std::size_t const words = (bytes + sizeof(std::max_align_t) - 1) / sizeof(std::max_align_t);
  auto memory = std::make_shared<std::vector<std::max_align_t>>(words);
  return {memory->data(), memory};
}

void transfer(copy_side const& dst, copy_side const& src, stream const* s) {
  if (extents_overlap(dst.data, dst.layout, src.data, src.layout)) {
    // Checked here so that a mismatch names the caller's layouts, not the temporary's.
    check_same_shape(dst.layout, src.layout);
    make_staging_fn const make =
        src.make_staging != nullptr ? src.make_staging : &device_staging_buffer;
    staging_buffer const temporary = make(src.layout.nbytes());
    // Dense in the destination's order, so that the second copy moves the fewest runs.
    copy_side const middle{temporary.data,
                           array_layout::contiguous(src.layout.shape_vector(), src.layout.itemsize,
                                                    dst.layout.natural_order()),
                           temporary.owner, src.make_staging};
    // New memory overlaps neither side: these two copies do not stage again. On a stream the
    // second runs after the first (one stream is in order), and both keep `temporary` alive.
    transfer(middle, src, s);
    transfer(dst, middle, s);
    return;
  }
  if (s == nullptr) {
    copy_elements(dst.data, dst.layout, src.data, src.layout, copy_mode::synchronous, nullptr);
    return;
  }
  copy_elements(dst.data, dst.layout, src.data, src.layout, copy_mode::asynchronous, s->handle());
  if (dst.owner) s->keep_alive(dst.owner);
  if (src.owner) s->keep_alive(src.owner);
}

}  // namespace gpumem::detail
