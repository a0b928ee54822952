# cmake -P script behind the install_consumer / subdirectory_consumer tests (tests/install/
# CMakeLists.txt passes the variables): configures, builds and runs tests/install/consumer against
# this build of gpumem, installed (MODE=install) or as a subdirectory (MODE=subdirectory). The
# build directories are kept between runs (objects stay, so a rerun compiles little), but every
# run configures with a fresh cache and installs into a fresh prefix: nothing of an earlier run
# (an option's old value, a found package) can stand in for what this build does.
cmake_minimum_required(VERSION 3.25)

function(run_step what)
  message(STATUS "${MODE}: ${what}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${MODE}: ${what} failed (${rc})")
  endif()
endfunction()

set(configure_args -G ${GENERATOR} -DCMAKE_CXX_COMPILER=${CXX_COMPILER})
if(MAKE_PROGRAM)
  list(APPEND configure_args -DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM})
endif()
if(CXX_COMPILER_LAUNCHER)
  list(APPEND configure_args -DCMAKE_CXX_COMPILER_LAUNCHER=${CXX_COMPILER_LAUNCHER})
endif()
# The consumer's .cu file (consumer_device) is built against a CUDA build of gpumem, and with
# HOST_ONLY_CUDA_CONSUMER (install mode) against a host-only one, where it runs on the host backend.
set(cuda_consumer ${GPUMEM_CUDA})
if(HOST_ONLY_CUDA_CONSUMER AND MODE STREQUAL "install")
  set(cuda_consumer ON)
  list(APPEND configure_args -DCONSUMER_CUDA=ON)
endif()
if(cuda_consumer)
  list(APPEND configure_args -DCMAKE_CUDA_COMPILER=${CUDA_COMPILER})
  # Installed, the consumer builds for this build's architectures (none in a host-only build: the
  # compiler's default). As a parent of gpumem it sets none, as a user's project may not: gpumem
  # must leave the compiler's default to the parent's .cu targets.
  if(CUDA_ARCHITECTURES AND MODE STREQUAL "install")
    set(ENV{CUDAARCHS} "${CUDA_ARCHITECTURES}")  # CMake's default for CMAKE_CUDA_ARCHITECTURES
  else()
    unset(ENV{CUDAARCHS})
  endif()
  if(CUDA_COMPILER_LAUNCHER)
    list(APPEND configure_args -DCMAKE_CUDA_COMPILER_LAUNCHER=${CUDA_COMPILER_LAUNCHER})
  endif()
endif()

set(consumer_build ${WORK_DIR}/${MODE}-consumer)
if(MODE STREQUAL "install")
  # Installed into one directory and used from another: the package must be relocatable.
  set(staging ${WORK_DIR}/staging)
  set(prefix ${WORK_DIR}/prefix)
  file(REMOVE_RECURSE ${staging} ${prefix})
  run_step("cmake --install into ${staging}"
           ${CMAKE_COMMAND} --install ${GPUMEM_BUILD_DIR} --prefix ${staging})
  file(RENAME ${staging} ${prefix})
  list(APPEND configure_args -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=${BUILD_TYPE})
elseif(MODE STREQUAL "subdirectory")
  # The same CUDA choice as this build and nothing else of gpumem's, not even a build type: its
  # options take the defaults a parent project gets, and the consumer checks that gpumem leaves
  # the (empty) build type alone.
  list(APPEND configure_args -DGPUMEM_SOURCE_DIR=${GPUMEM_SOURCE_DIR} -DGPUMEM_CUDA=${GPUMEM_CUDA})
else()
  message(FATAL_ERROR "MODE must be install or subdirectory, not '${MODE}'")
endif()

run_step("configure the consumer"
         ${CMAKE_COMMAND} --fresh -S ${CONSUMER_SOURCE_DIR} -B ${consumer_build} ${configure_args})
run_step("build the consumer" ${CMAKE_COMMAND} --build ${consumer_build})

set(programs consumer_host)
if(cuda_consumer)
  list(APPEND programs consumer_device)
endif()
foreach(program ${programs})
  run_step("run ${program}" ${consumer_build}/${program})
endforeach()
