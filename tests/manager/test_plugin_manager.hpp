// A memory-manager plugin as a plugin author would write it: built on host_only_memory_manager
// with the IPC mixin, device memory straight from the backend (allocate_device, so that
// GPUMEM_DEBUG_MEMORY covers it too), freed at once. Used by the contract suite (compiled in) and
// by the plugin shared library (test_plugin.cpp).
#pragma once

#include <gpumem/core/error.hpp>
#include <gpumem/cuda/device_backend.hpp>
#include <gpumem/manager/context.hpp>
#include <gpumem/manager/host_only_memory_manager.hpp>
#include <gpumem/manager/ipc_mixin.hpp>

#include <atomic>

#ifndef TEST_PLUGIN_VERSION
#define TEST_PLUGIN_VERSION 1
#endif

namespace gpumem::test {

class test_plugin_manager : public ipc_mixin<host_only_memory_manager> {
 public:
  explicit test_plugin_manager(context& owner) : ipc_mixin<host_only_memory_manager>(owner) {}

  memory_pointer memalloc(std::size_t bytes) override {
    if (bytes == 0) return memory_pointer(owning_context(), nullptr, 0);
    void* ptr = allocate_device(bytes);
    live().fetch_add(1);
    return memory_pointer(owning_context(), ptr, bytes, [release = device_release(ptr, bytes)] {
      release();
      live().fetch_sub(1);
    });
  }
  // A plugin that cannot tell: the spec's NotImplementedError.
  memory_info get_memory_info() override {
    throw not_supported("test_plugin does not report memory info");
  }
  int interface_version() const override { return TEST_PLUGIN_VERSION; }
  std::string name() const override { return "test_plugin"; }

  // Device allocations of this plugin not yet freed.
  static std::atomic<long>& live() {
    static std::atomic<long> count{0};
    return count;
  }
};

}  // namespace gpumem::test
