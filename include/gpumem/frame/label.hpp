// gpumem/frame/label.hpp
//
// label: the name of a column in a frame — a tuple of one or more strings. A plain string label is
// the tuple of that one string; hierarchical labels (pandas' MultiIndex columns) have several
// levels.
//
//   frame::label a = "price";                 // one level: ("price")
//   frame::label b{"price", "eur"};           // two levels: ("price", "eur")
//   b.starts_with({"price"});                 // true
//   b.drop_front(1);                          // ("eur")
//   b.to_string();                            // "(price, eur)"; a.to_string() is "price"
//
// "a" and ("a",) are the same label here (pandas keeps them apart; gpumem has no other key types,
// so there is nothing to tell apart). Labels compare level by level, lexicographically by bytes.
// The empty label (no levels) is what an unnamed series has; a column_accessor refuses it.
//
// A value type: copies are independent. Thread safety: as std::vector<std::string>.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <ostream>
#include <string>
#include <vector>

namespace gpumem::frame {

class label {
 public:
  label() = default;
  label(std::string name) : parts_{std::move(name)} {}    // NOLINT: implicit by design
  label(char const* name) : parts_{std::string(name)} {}  // NOLINT: implicit by design
  label(std::initializer_list<std::string> parts) : parts_(parts) {}
  explicit label(std::vector<std::string> parts) : parts_(std::move(parts)) {}

  std::size_t levels() const noexcept { return parts_.size(); }
  bool empty() const noexcept { return parts_.empty(); }
  // Level `level` (logic_error naming it when the label has fewer levels).
  std::string const& operator[](std::size_t level) const;
  std::vector<std::string> const& parts() const noexcept { return parts_; }

  // True when the first prefix.levels() levels of this label are prefix's.
  bool starts_with(label const& prefix) const noexcept;
  // The label without its first `count` levels (logic_error when it has fewer).
  label drop_front(std::size_t count) const;

  // "a" for one level, "(a, b)" for several, "" for none.
  std::string to_string() const;

  friend bool operator==(label const& a, label const& b) noexcept { return a.parts_ == b.parts_; }
  friend bool operator!=(label const& a, label const& b) noexcept { return !(a == b); }
  friend bool operator<(label const& a, label const& b) noexcept { return a.parts_ < b.parts_; }

 private:
  std::vector<std::string> parts_;
};

std::ostream& operator<<(std::ostream& out, label const& l);

}  // namespace gpumem::frame
