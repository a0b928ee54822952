// Internal: makes a device current for the duration of a scope and restores the caller's device,
// so manager calls on a context never leave the calling thread on another device.
#pragma once

#include <gpumem/cuda/device_backend.hpp>

namespace gpumem::detail {

class scoped_device {
 public:
  explicit scoped_device(int device) {
    device_backend& b = backend();
    previous_ = b.current_device();
    if (previous_ != device) {
      b.set_current_device(device);
      changed_ = true;
    }
  }
  scoped_device(scoped_device const&) = delete;
  scoped_device& operator=(scoped_device const&) = delete;
  ~scoped_device() {
    if (!changed_) return;
    try {
      backend().set_current_device(previous_);
    } catch (...) {
      // Restoring can only fail if the device vanished; nothing useful to do in a destructor.
    }
  }

 private:
  int previous_ = 0;
  bool changed_ = false;
};

}  // namespace gpumem::detail
