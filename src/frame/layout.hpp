// Text layout helpers shared by series and data_frame printing (src/frame, not installed).
#pragma once

#include <cstddef>
#include <string>

namespace gpumem::frame::detail {

// `text` with spaces before / after it up to `width` code points (unchanged when wider).
std::string pad_left(std::string const& text, std::size_t width);
std::string pad_right(std::string const& text, std::size_t width);
// `text` centred in `width` as Python's str.center does it (the odd space on the left only when
// both the padding and the width are odd).
std::string center(std::string const& text, std::size_t width);

}  // namespace gpumem::frame::detail
