// gpumem/cuda/device_malloc_heap.hpp
//
// The size of CUDA's in-kernel malloc heap (cudaLimitMallocHeapSize; 8 MiB unless set). gpumem's
// device runtime keeps CUDA's malloc selectable as a heap (nrt::heap_kind::cuda_malloc) for
// comparison, and that heap must be sized before the first kernel that calls malloc or free:
// CUDA refuses to change it afterwards.
//
// On the host backend CUDA's malloc heap is std::malloc: there is nothing to size, and the value
// is only remembered. Thread safety: as the CUDA runtime (any thread).
#pragma once

#include <cstddef>

namespace gpumem::detail {

// Makes the current device's malloc heap at least `bytes`. A heap that is already large enough is
// left alone (so a second device heap of the same size works after kernels have used malloc).
// Throws gpumem::cuda_error when CUDA refuses (typically: a kernel already used malloc), naming
// the size asked for and the size in force.
void set_device_malloc_heap_size(std::size_t bytes);

// The current device's malloc heap size (the remembered value on the host backend).
std::size_t device_malloc_heap_size();

}  // namespace gpumem::detail
