// gpumem/cuda/detail/scoped_device.hpp
//
// Makes a device current on the calling thread for the duration of a scope and restores the
// caller's device, so that work done for an object that belongs to one device (a context, a pool)
// happens there whichever device the caller has current, and never leaves the caller elsewhere.
// Costs one current_device() query when the device is already current.
#pragma once

#include <gpumem/cuda/device_backend.hpp>

namespace gpumem::detail {

class scoped_device {
 public:
  scoped_device(device_backend& b, int device) : backend_(b) {
    previous_ = b.current_device();
    if (previous_ != device) {
      b.set_current_device(device);
      changed_ = true;
    }
  }
  explicit scoped_device(int device) : scoped_device(backend(), device) {}
  scoped_device(scoped_device const&) = delete;
  scoped_device& operator=(scoped_device const&) = delete;
  ~scoped_device() {
    if (!changed_) return;
    try {
      backend_.set_current_device(previous_);
    } catch (...) {
      // Restoring can only fail if the device vanished; nothing useful to do in a destructor.
    }
  }

 private:
  device_backend& backend_;
  int previous_ = 0;
  bool changed_ = false;
};

}  // namespace gpumem::detail
