/* gpumem/python/torch_allocator.h
 *
 * The C ABI of gpumem's PyTorch allocator: the functions torch.cuda.memory.CUDAPluggableAllocator
 * loads by name from the gpumem Python extension (gpumem.torch.use() does this):
 *
 *   alloc = torch.cuda.memory.CUDAPluggableAllocator(gpumem._gpumem.__file__,
 *                                                    "gpumem_torch_alloc", "gpumem_torch_free")
 *   torch.cuda.memory.change_current_allocator(alloc)
 *
 * The signatures are PyTorch's (CUDAPluggableAllocator.h): alloc(size, device, stream) and
 * free(ptr, size, device, stream); `stream` is a cudaStream_t, passed as void* so that this header
 * needs no CUDA header.
 *
 * gpumem_torch_alloc: `size` bytes from the memory manager of `device` (gpumem's context table),
 *   stream-ordered on `stream` (memory_manager::allocate). 0 bytes gives NULL. On failure it
 *   THROWS a C++ exception (gpumem::out_of_memory and the other gpumem errors): deliberately,
 *   because PyTorch does not check for NULL and would hand out a tensor without memory; PyTorch
 *   turns the exception into a Python RuntimeError. Never returns NULL for size > 0. CUDA graph
 *   capture is not supported: on a stream being captured (cudaStreamIsCapturing; the null and
 *   legacy handles, which CUDA never captures, are not asked) it throws gpumem::not_supported,
 *   naming the stream, before the manager is asked, so nothing is allocated and the capture is
 *   left intact.
 * gpumem_torch_free: gives back memory from gpumem_torch_alloc (on its allocation stream, which
 *   PyTorch passes again with the size); NULL is a no-op. Never throws. A pointer that
 *   gpumem_torch_alloc did not return is undefined behaviour where the manager has an unowned
 *   path (the pool and async managers free by address, size and stream); with other managers it
 *   is logged and ignored.
 * gpumem_torch_live_allocations: how many allocations are live (for tests).
 *
 * Ownership: with the pool and async managers (memory_manager::unowned()) nothing is kept per
 * allocation: PyTorch's own record (pointer, size, device, stream) is what the free uses; the
 * extension keeps, per device, the state of each manager that still has live blocks (so a block
 * goes back to its manager after gpumem.set_memory_manager replaced it). Other managers' memory
 * is kept in a table of owners until it is freed (counted per device: while a device has blocks
 * there, its frees look there first). Thread safety: all three may be called from any
 * thread (PyTorch frees from autograd and DataLoader threads), but not while the device's manager
 * is being replaced or its context closed (gpumem.set_memory_manager, gpumem.close, Numba's
 * cuda.close()): PyTorch calls them without the GIL, so nothing orders those calls with them.
 */
#ifndef GPUMEM_PYTHON_TORCH_ALLOCATOR_H
#define GPUMEM_PYTHON_TORCH_ALLOCATOR_H

#include <stddef.h>

#if defined(__GNUC__)
#define GPUMEM_TORCH_EXPORT __attribute__((visibility("default")))
#else
#define GPUMEM_TORCH_EXPORT
#endif

#ifdef __cplusplus
extern "C" {
#endif

GPUMEM_TORCH_EXPORT void* gpumem_torch_alloc(size_t size, int device, void* stream);
GPUMEM_TORCH_EXPORT void gpumem_torch_free(void* ptr, size_t size, int device, void* stream);
GPUMEM_TORCH_EXPORT size_t gpumem_torch_live_allocations(void);

#ifdef __cplusplus
}
#endif

#endif /* GPUMEM_PYTHON_TORCH_ALLOCATOR_H */
