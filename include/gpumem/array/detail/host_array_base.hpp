// gpumem/array/detail/host_array_base.hpp
//
// Host element access shared by the arrays whose memory the host can touch (pinned, mapped,
// managed): operator() by indices and a host view. Reading or writing while device work on the
// same memory is in flight is a race, as in CUDA; synchronise the stream first.
#pragma once

#include <gpumem/array/array_view.hpp>
#include <gpumem/array/detail/array_base.hpp>
#include <gpumem/array/detail/transfer.hpp>

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
    GPUMEM_EXPECTS(host_view().contains(indices...),
                   "index out of range for an array of " + this->layout_.describe());
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
};

}  // namespace gpumem::detail
