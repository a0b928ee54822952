// gpumem/manager/plugin.hpp
//
// Writing a memory-manager plugin as a shared library, loaded with
// GPUMEM_MEMORY_MANAGER=/path/to/libmy_manager.so:
//
//   #include <gpumem/manager/host_only_memory_manager.hpp>
//   #include <gpumem/manager/plugin.hpp>
//
//   class my_manager : public gpumem::ipc_mixin<gpumem::host_only_memory_manager> {
//     // memalloc, get_memory_info, interface_version, name
//   };
//   GPUMEM_EXPORT_MEMORY_MANAGER(my_manager)
//
// The macro defines the C entry point gpumem looks up:
//   extern "C" gpumem::memory_manager_factory* gpumem_memory_manager_factory();
// returning a factory that lives as long as the library. `Type` must be constructible from
// `gpumem::context&`. The plugin links against the same libgpumem (and C++ runtime) as the
// process; the entry point passes a C++ object, so no other ABI is supported.
#pragma once

#include <gpumem/manager/memory_manager.hpp>

#include <memory>

// The name of the entry point (for dlsym).
#define GPUMEM_MEMORY_MANAGER_ENTRY_POINT "gpumem_memory_manager_factory"

#define GPUMEM_EXPORT_MEMORY_MANAGER(Type)                                            \
  extern "C" __attribute__((visibility("default"))) ::gpumem::memory_manager_factory* \
  gpumem_memory_manager_factory() {                                                   \
    static ::gpumem::memory_manager_factory factory =                                 \
        [](::gpumem::context& owner) -> std::unique_ptr<::gpumem::memory_manager> {   \
      return std::make_unique<Type>(owner);                                           \
    };                                                                                \
    return &factory;                                                                  \
  }

// The signature of the entry point.
using gpumem_memory_manager_entry_point = ::gpumem::memory_manager_factory* (*)();
