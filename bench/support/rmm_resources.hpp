// RMM's pool_memory_resource and arena_memory_resource (over its cuda_memory_resource) as
// benchmark competitors. Implemented in rmm_resources.cpp, which bench/CMakeLists compiles only
// when librmm was found (its PyPI wheel, with RMM's own CCCL headers, kept apart from gpumem's
// translation units); a stand-in says "not found" otherwise.
#pragma once

#include <cstddef>
#include <string>

namespace gpumem::bench {

enum class rmm_kind { pool, arena };

// "found: <librmm dir>" or "not found" and why.
std::string rmm_status();
bool rmm_available();
// A new resource of that kind (opaque; thread safe, as RMM's resources are).
void* rmm_create(rmm_kind kind);
void rmm_destroy(void* resource);
void* rmm_allocate(void* resource, std::size_t bytes, void* cuda_stream);
void rmm_deallocate(void* resource, void* ptr, std::size_t bytes, void* cuda_stream);

}  // namespace gpumem::bench
