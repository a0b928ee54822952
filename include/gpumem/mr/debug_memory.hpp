// gpumem/mr/debug_memory.hpp
//
// GPUMEM_DEBUG_MEMORY (environment_snapshot().debug_memory) switches the tracking adaptor on
// around the resources of the memory managers (CONVENTIONS.md 9, like Arrow's
// ARROW_DEBUG_MEMORY_POOL). The managers call one of these when they build their resource stack.
#pragma once

#include <gpumem/mr/memory_resource.hpp>
#include <gpumem/mr/tracking_adaptor.hpp>

#include <memory>

namespace gpumem {

// True when GPUMEM_DEBUG_MEMORY is on (read from the environment table).
bool debug_memory_enabled();

// Returns `resource` itself when debugging is off; otherwise an owning tracking adaptor around it.
std::unique_ptr<memory_resource> wrap_for_debug_if_enabled(
    std::unique_ptr<memory_resource> resource, tracking_options options = {});

// For a resource the caller keeps: a tracking adaptor referencing `resource` when debugging is
// on, null when it is off (allocate through `resource` then).
std::unique_ptr<tracking_adaptor> make_debug_adaptor_if_enabled(memory_resource& resource,
                                                                tracking_options options = {});

}  // namespace gpumem
