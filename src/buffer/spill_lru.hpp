// The least-recently-used order of one spill manager's storages that could be spilled now: an
// intrusive doubly linked list through the storages themselves (buffer_storage's lru_ members), so
// moving a storage to the back when it is used costs a few pointer writes and no allocation, and
// choosing victims walks from the front over the victims, not over every buffer.
//
// A storage is linked exactly while it is on the device and unpinned: it joins at the back when it
// is registered or when its last pin goes (the end of its use: a spill lock, a transfer), and
// leaves when it is pinned, spilled, exposed or destroyed. So the front is the least recently used
// candidate, and a walk skips only storages another thread is busy with at that moment.
//
// Thread safety: none of its own; every call is made under the registry's list mutex.
#pragma once

#include "buffer_storage.hpp"

#include <cstddef>

namespace gpumem::detail {

class spill_lru {
 public:
  // Links `s` at the back (unlinking it first when linked).
  void push_back(buffer_storage& s) noexcept {
    if (s.lru_linked_) unlink(s);
    s.lru_prev_ = tail_;
    s.lru_next_ = nullptr;
    if (tail_ != nullptr) {
      tail_->lru_next_ = &s;
    } else {
      head_ = &s;
    }
    tail_ = &s;
    s.lru_linked_ = true;
    ++size_;
  }
  // Unlinks `s` when it is linked.
  void unlink(buffer_storage& s) noexcept {
    if (!s.lru_linked_) return;
    (s.lru_prev_ != nullptr ? s.lru_prev_->lru_next_ : head_) = s.lru_next_;
    (s.lru_next_ != nullptr ? s.lru_next_->lru_prev_ : tail_) = s.lru_prev_;
    s.lru_prev_ = s.lru_next_ = nullptr;
    s.lru_linked_ = false;
    --size_;
  }
  static bool linked(buffer_storage const& s) noexcept { return s.lru_linked_; }
  buffer_storage* front() const noexcept { return head_; }
  static buffer_storage* next(buffer_storage const& s) noexcept { return s.lru_next_; }
  static buffer_storage* previous(buffer_storage const& s) noexcept { return s.lru_prev_; }
  std::size_t size() const noexcept { return size_; }

 private:
  buffer_storage* head_ = nullptr;
  buffer_storage* tail_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace gpumem::detail
