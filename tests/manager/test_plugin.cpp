// The plugin shared library loaded through GPUMEM_MEMORY_MANAGER by context_test.
#include <gpumem/manager/plugin.hpp>

#include "test_plugin_manager.hpp"

GPUMEM_EXPORT_MEMORY_MANAGER(gpumem::test::test_plugin_manager)
