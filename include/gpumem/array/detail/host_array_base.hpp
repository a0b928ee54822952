// gpumem/array/detail/host_array_base.hpp
//
// Host element access shared by the arrays whose memory the host can touch (pinned, mapped,
// managed): operator() by indices and a host view. Reading or writing while device work on the
// same memory is in flight is a race, as in CUDA; synchronise the stream first.
#pragma once

#include <gpumem/array/array_view.hpp>
#include <gpumem/array/detail/array_base.hpp>
#include <gpumem/array/detail/transfer.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace gpumem::detail {

template <class Derived, class T, class Owner>
class host_array_base : public array_base<Derived, T, Owner> {
  using base = array_base<Derived, T, Owner>;

 public:
  // The elements through a view over the host address.
  array_view<T> host_view() const { return {this->data_, this->layout_}; }
  template <class... I>
  T& operator()(I... indices) const {
    static_assert(sizeof...(I) > 0, "give one index per dimension");
    GPUMEM_EXPECTS(static_cast<int>(sizeof...(I)) == this->layout_.rank,
                   std::to_string(sizeof...(I)) + " indices for an array of rank " +
                       std::to_string(this->layout_.rank));
    if (!host_view().contains(indices...))
      throw_out_of_range({std::to_string(indices)...},
                         {static_cast<std::size_t>(indices)...});  // as contains() reads them
    return host_view()(indices...);
  }
  // The elements densely in the natural order.
  std::vector<T> to_vector() const {
    std::vector<T> out(this->size());
    transfer(host_side(host_span<T>(out), this->layout_, "to_vector"), array_side(*this), nullptr);
    return out;
  }

 protected:
  using base::base;

 private:
  // "index (1, 5) out of range for dimension 1 (length 3) of an array of shape (2, 3), ...".
  // `text` spells each index as the caller wrote it (a negative one shows as negative).
  [[noreturn]] void throw_out_of_range(std::vector<std::string> const& text,
                                       std::vector<std::size_t> const& index) const {
    int dim = 0;
    while (dim + 1 < this->layout_.rank && index[dim] < this->layout_.shape[dim])
      ++dim;
    std::string list = "(";
    for (std::size_t d = 0; d < text.size(); ++d)
      list += (d ? ", " : "") + text[d];
    list += text.size() == 1 ? ",)" : ")";
    throw_logic_error("index " + list + " out of range for dimension " + std::to_string(dim) +
                          " (length " + std::to_string(this->layout_.shape[dim]) +
                          ") of an array of " + this->layout_.describe(),
                      __FILE__, __LINE__);
  }
};

}  // namespace gpumem::detail
