// gpumem/core/config.hpp
//
// Compile-time configuration shared by every layer. No CUDA header is included here: device
// qualifiers come from the compiler (nvcc defines __CUDACC__), so host-only compilers see plain
// C++.
#pragma once

#if defined(__CUDACC__)
#define GPUMEM_HD __host__ __device__
#define GPUMEM_DEVICE_FN __device__
#else
#define GPUMEM_HD
#define GPUMEM_DEVICE_FN
#endif

// True while compiling device code (the device pass of nvcc); host code, and every host-only
// compiler, sees 0. Use it to pick the device or host spelling of one small helper, never to fork
// an algorithm.
#if defined(__CUDA_ARCH__)
#define GPUMEM_DEVICE_PASS 1
#else
#define GPUMEM_DEVICE_PASS 0
#endif

// GPUMEM_HAS_CUDA is set by the build (1 when the cuda backend is compiled in).
#ifndef GPUMEM_HAS_CUDA
#define GPUMEM_HAS_CUDA 0
#endif

// Thread-local variables read on hot paths: the initial-exec model makes a read one fs-relative
// load (the default model in a shared library calls __tls_get_addr). Keep such variables few and
// small (a few words): a library loaded with dlopen takes them from glibc's small static TLS
// surplus. A build for dlopen by hosts that fill that surplus (the Python package) turns the model
// off with GPUMEM_NO_INITIAL_EXEC_TLS (CMake: GPUMEM_INITIAL_EXEC_TLS=OFF; GPUMEM_PYTHON=ON implies
// it): then the general-dynamic model applies, which works however the library is loaded.
#if defined(__GNUC__) && !defined(GPUMEM_NO_INITIAL_EXEC_TLS)
#define GPUMEM_TLS_INITIAL_EXEC __attribute__((tls_model("initial-exec")))
#else
#define GPUMEM_TLS_INITIAL_EXEC
#endif

// GPUMEM_VALIDATE is set by the build (CMake option GPUMEM_VALIDATE) to 1 in validating builds:
// full-structure validators run after every operation of the stress tests, and GPUMEM_ASSERT is on
// (core/assert.hpp; docs/design/checks.md describes the tiers).
#ifndef GPUMEM_VALIDATE
#define GPUMEM_VALIDATE 0
#endif
