// Test support: swaps the process-wide backend for the life of a scope.
//
// Contexts hold memory of the backend they were created with, so the swap closes every context
// before installing the new backend and again before restoring the old one. Memory allocated
// through the scoped backend must be gone before the scope ends.
#pragma once

#include <gpumem/cuda/device_backend.hpp>
#include <gpumem/manager/context.hpp>

#include <memory>
#include <utility>

namespace gpumem::test {

class scoped_backend {
 public:
  explicit scoped_backend(std::unique_ptr<device_backend> replacement) {
    gpumem::close();
    previous_ = install_backend(std::move(replacement));
  }
  // A private simulated device of `capacity` bytes (out-of-memory and ratio tests).
  explicit scoped_backend(std::size_t capacity)
      : scoped_backend(make_host_backend(host_backend_options{capacity})) {}
  scoped_backend(scoped_backend const&) = delete;
  scoped_backend& operator=(scoped_backend const&) = delete;
  ~scoped_backend() {
    gpumem::close();
    install_backend(std::move(previous_));
  }

 private:
  std::unique_ptr<device_backend> previous_;
};

}  // namespace gpumem::test
