// The plugin shared libraries loaded through GPUMEM_MEMORY_MANAGER by context_test: a good one,
// and (by TEST_PLUGIN_VERSION / TEST_PLUGIN_THROWS) bad ones.
#include <gpumem/core/error.hpp>
#include <gpumem/manager/plugin.hpp>

#include <stdexcept>

#include "test_plugin_manager.hpp"

#if !defined(TEST_PLUGIN_THROWS)
GPUMEM_EXPORT_MEMORY_MANAGER(gpumem::test::test_plugin_manager)
#elif TEST_PLUGIN_THROWS == 1
// The entry point itself throws.
extern "C" __attribute__((visibility("default"))) gpumem::memory_manager_factory*
gpumem_memory_manager_factory() {
  throw std::runtime_error("test plugin: the entry point fails");
}
#elif TEST_PLUGIN_THROWS == 2
// The manager's constructor throws (on set_memory_manager's probe context already).
namespace {
struct throwing_manager : gpumem::test::test_plugin_manager {
  explicit throwing_manager(gpumem::context& owner) : gpumem::test::test_plugin_manager(owner) {
    throw std::runtime_error("test plugin: the constructor fails");
  }
};
}  // namespace
GPUMEM_EXPORT_MEMORY_MANAGER(throwing_manager)
#elif TEST_PLUGIN_THROWS == 3
// interface_version() throws something that is not a std::exception.
namespace {
struct throwing_manager : gpumem::test::test_plugin_manager {
  using gpumem::test::test_plugin_manager::test_plugin_manager;
  int interface_version() const override { throw 42; }
};
}  // namespace
GPUMEM_EXPORT_MEMORY_MANAGER(throwing_manager)
#elif TEST_PLUGIN_THROWS == 4
// The entry point throws one of gpumem's own errors (a device call that failed).
extern "C" __attribute__((visibility("default"))) gpumem::memory_manager_factory*
gpumem_memory_manager_factory() {
  throw gpumem::cuda_error(2, "cudaErrorMemoryAllocation", "test plugin entry point", __FILE__,
                           __LINE__, "the entry point's device call fails");
}
#elif TEST_PLUGIN_THROWS == 5
// The manager's constructor throws one of gpumem's own errors (its first allocation failed).
namespace {
struct throwing_manager : gpumem::test::test_plugin_manager {
  explicit throwing_manager(gpumem::context& owner) : gpumem::test::test_plugin_manager(owner) {
    throw gpumem::out_of_memory(12345, "test plugin pool", 0, 0, "the constructor's reserve fails");
  }
};
}  // namespace
GPUMEM_EXPORT_MEMORY_MANAGER(throwing_manager)
#endif
