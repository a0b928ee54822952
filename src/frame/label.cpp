// label (see label.hpp).
#include <gpumem/core/error.hpp>
#include <gpumem/frame/label.hpp>

#include <string>

namespace gpumem::frame {

std::string const& label::operator[](std::size_t level) const {
  GPUMEM_EXPECTS(level < parts_.size(), "label: level " + std::to_string(level) + " of " +
                                            to_string() + ", which has " +
                                            std::to_string(parts_.size()) + " levels");
  return parts_[level];
}

bool label::starts_with(label const& prefix) const noexcept {
  if (prefix.parts_.size() > parts_.size()) return false;
  for (std::size_t i = 0; i < prefix.parts_.size(); ++i)
    if (parts_[i] != prefix.parts_[i]) return false;
  return true;
}

label label::drop_front(std::size_t count) const {
  GPUMEM_EXPECTS(count <= parts_.size(), "label: cannot drop " + std::to_string(count) +
                                             " levels of " + to_string() + ", which has " +
                                             std::to_string(parts_.size()));
  return label(
      std::vector<std::string>(parts_.begin() + static_cast<std::ptrdiff_t>(count), parts_.end()));
}

std::string label::to_string() const {
  if (parts_.size() == 1) return parts_[0];
  if (parts_.empty()) return {};
  std::string out = "(";
  for (std::size_t i = 0; i < parts_.size(); ++i) {
    if (i != 0) out += ", ";
    out += parts_[i];
  }
  return out + ")";
}

std::ostream& operator<<(std::ostream& out, label const& l) {
  return out << l.to_string();
}

}  // namespace gpumem::frame
