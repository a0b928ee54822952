// The plugin shared libraries loaded through GPUMEM_MEMORY_MANAGER by context_test: a good one,
// and (by TEST_PLUGIN_VERSION / TEST_PLUGIN_THROWS) bad ones.
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
#endif
