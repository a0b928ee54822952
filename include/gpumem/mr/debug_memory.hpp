// gpumem/mr/debug_memory.hpp
//
// GPUMEM_DEBUG_MEMORY (environment_snapshot().debug_memory) switches the tracking adaptor on
// around the device memory of every memory manager gpumem builds (like Arrow's
// ARROW_DEBUG_MEMORY_POOL): resource_memory_manager (and so the "pool" and "async" managers) wraps
// its resource, host_only_memory_manager's allocate_device (the "default" and "host_only" managers)
// goes through a tracking adaptor over cuda_resource. The flag is read when a manager is made.
// Code that builds a stack of its own calls one of these.
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

// For a resource held by shared ownership (whatever the flag says): a tracking adaptor that keeps
// `upstream` alive as long as the adaptor lives. `upstream` must not be null.
std::shared_ptr<tracking_adaptor> make_shared_tracking_adaptor(
    std::shared_ptr<memory_resource> upstream, tracking_options options = {});

}  // namespace gpumem
