// gpumem/frame/range_index.hpp
//
// range_index: the row labels start, start + step, ... up to (not including) stop — pandas'
// RangeIndex. It is three integers: no column is ever allocated unless to_column() is asked for.
//
//   frame::range_index r(10, 20, 2);     // 10 12 14 16 18
//   r.size();                            // 5
//   r.value(3);                          // 16
//   r.slice(1, 3);                       // range_index(12, 16, 2): 12 14
//   r.to_column();                       // an int64 column 10 12 14 16 18 (device memory)
//
// Labels may reach INT64_MIN and INT64_MAX - 1: size(), value() and slice() never overflow (a
// slice's stop is one step past its last label, or the int64 limit where that does not fit).
//
// Errors: step 0, and positions outside the index, are gpumem::logic_error naming the values.
// A value type; thread safety as an int.
#pragma once

#include <gpumem/column/column.hpp>

#include <cstddef>
#include <cstdint>

namespace gpumem::frame {

class range_index {
 public:
  // 0, 1, ..., size - 1.
  explicit range_index(std::size_t size = 0);
  range_index(std::int64_t start, std::int64_t stop, std::int64_t step = 1);

  std::int64_t start() const noexcept { return start_; }
  std::int64_t stop() const noexcept { return stop_; }
  std::int64_t step() const noexcept { return step_; }
  std::size_t size() const noexcept;
  // The label of position `position` (logic_error past the end).
  std::int64_t value(std::size_t position) const;
  // Positions [begin, end) as a range_index (logic_error when outside).
  range_index slice(std::size_t begin, std::size_t end) const;
  // The labels as a new int64 column (logic_error naming the count when no allocation could hold
  // them).
  column to_column() const;

  friend bool operator==(range_index const& a, range_index const& b) noexcept {
    return a.size() == b.size() && (a.size() == 0 || (a.start_ == b.start_ && a.step_ == b.step_));
  }

 private:
  std::int64_t start_ = 0;
  std::int64_t stop_ = 0;
  std::int64_t step_ = 1;
};

}  // namespace gpumem::frame
