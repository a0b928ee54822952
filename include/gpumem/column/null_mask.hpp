// gpumem/column/null_mask.hpp
//
// Validity masks as buffers: a mask built from host flags, in the layout of bitmask.hpp (LSB
// first, padded to 64 bytes), ready to be a column's null_mask.
//
//   buffer mask = gpumem::null_mask_from_host({true, false, true});   // row 1 is null
//   gpumem::column c(type_id::int32, 3, data, mask);
//
// Thread safety: no shared state. Errors: those of buffer allocation (out_of_memory).
#pragma once

#include <gpumem/buffer/buffer.hpp>

#include <vector>

namespace gpumem {

// A mask with bit i set where valid[i] is true (an empty buffer for no rows); the padding bits
// are 0.
buffer null_mask_from_host(std::vector<bool> const& valid,
                           buffer_memory memory = buffer_memory::device);
// The same in a buffer made with `options` (copy-on-write, spill manager).
buffer null_mask_from_host(std::vector<bool> const& valid, buffer_options const& options);

}  // namespace gpumem
