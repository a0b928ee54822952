// scalar (see scalar.hpp).
#include <gpumem/core/error.hpp>
#include <gpumem/frame/format.hpp>
#include <gpumem/frame/scalar.hpp>

#include <string>

namespace gpumem::frame {

scalar::scalar(data_type type) : type_(type) {
  GPUMEM_EXPECTS(is_fixed_width(type),
                 "scalar: there are no " + gpumem::to_string(type) + " scalars");
}

scalar scalar::null(data_type type) {
  return scalar(type);
}

void scalar::check_type(type_id asked) const {
  GPUMEM_EXPECTS(type_.id() == asked, "scalar::value: the scalar holds a " +
                                          gpumem::to_string(type_) + " value, not " +
                                          gpumem::to_string(asked));
}

std::optional<double> scalar::as_double() const noexcept {
  if (!valid_) return std::nullopt;
  switch (type_.id()) {
    case type_id::float32:
    case type_id::float64:
      return floating_;
    case type_id::uint8:
    case type_id::uint16:
    case type_id::uint32:
    case type_id::uint64:
    case type_id::bool8:
      return static_cast<double>(unsigned_);
    default:
      return static_cast<double>(signed_);
  }
}

std::string scalar::to_string() const {
  if (!valid_) return "<NA>";
  switch (type_.id()) {
    case type_id::float32:
      return format_float(static_cast<float>(floating_));
    case type_id::float64:
      return format_float(floating_);
    case type_id::bool8:
      return unsigned_ != 0 ? "True" : "False";
    case type_id::uint8:
    case type_id::uint16:
    case type_id::uint32:
    case type_id::uint64:
      return std::to_string(unsigned_);
    default:
      return std::to_string(signed_);
  }
}

std::ostream& operator<<(std::ostream& out, scalar const& s) {
  return out << s.to_string();
}

}  // namespace gpumem::frame
