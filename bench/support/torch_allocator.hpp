// PyTorch's CUDA caching allocator as a benchmark competitor (c10::cuda::CUDACachingAllocator's
// raw_alloc_with_stream / raw_delete). Implemented in torch_allocator.cpp, which bench/CMakeLists
// compiles only when libtorch was found; a stand-in says "not found" and why.
#pragma once

#include <cstddef>
#include <string>

namespace gpumem::bench {

// "found: <torch lib dir>" or "not found" and why.
std::string torch_status();
bool torch_available();
void* torch_allocate(std::size_t bytes, void* cuda_stream);
void torch_deallocate(void* ptr);
// Gives every cached block back to the driver (between benchmark cases).
void torch_empty_cache();

}  // namespace gpumem::bench
