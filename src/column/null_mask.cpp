// Building a validity mask on the host and moving it in one transfer (see null_mask.hpp).
#include <gpumem/column/bitmask.hpp>
#include <gpumem/column/null_mask.hpp>

namespace gpumem {

buffer null_mask_from_host(std::vector<bool> const& valid, buffer_memory memory) {
  buffer_options options;
  options.memory = memory;
  return null_mask_from_host(valid, options);
}

buffer null_mask_from_host(std::vector<bool> const& valid, buffer_options const& options) {
  std::vector<bitmask_word> words(bitmask_allocation_bytes(valid.size()) / sizeof(bitmask_word), 0);
  for (std::size_t i = 0; i < valid.size(); ++i)
    if (valid[i]) set_bit(words.data(), i);
  return buffer::from_host(words.data(), words.size() * sizeof(bitmask_word), options);
}

}  // namespace gpumem
