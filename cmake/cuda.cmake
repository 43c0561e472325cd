# SPARSGD_CUDA=AUTO|ON|OFF: whether the project's CUDA sources (src/cuda) are compiled and linked
# into the library, the torch layer and the Python package. AUTO: when nvcc is found (CUDACXX, the
# PATH, or the toolkit's usual home /usr/local/cuda). The build needs no GPU; what runs on one is
# tested where a device is present and skipped, naming why, where none is.
# Sets SPARSGD_HAVE_CUDA.

set(SPARSGD_CUDA AUTO CACHE STRING "Compile the CUDA sources: AUTO (when nvcc is found), ON or OFF")
set_property(CACHE SPARSGD_CUDA PROPERTY STRINGS AUTO ON OFF)
if(NOT SPARSGD_CUDA MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "SPARSGD_CUDA must be AUTO, ON or OFF (got '${SPARSGD_CUDA}')")
endif()

set(SPARSGD_HAVE_CUDA OFF)
if(NOT SPARSGD_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX})
    find_program(SPARSGD_NVCC nvcc HINTS /usr/local/cuda/bin)
    if(SPARSGD_NVCC)
      set(CMAKE_CUDA_COMPILER ${SPARSGD_NVCC})
    endif()
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    # The architectures a default build carries: Ampere (sm_80) and Hopper (sm_90) as machine code,
    # and compute_90 PTX that newer GPUs compile when they load it. A user building for one card
    # passes -DCMAKE_CUDA_ARCHITECTURES=native (or its number) instead.
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES "80-real;90" CACHE STRING "CUDA architectures to compile for")
    endif()
    # Device code is C++17: Debian 12's CMake (3.25) knows no C++20 flag for nvcc, and rejects a
    # target that asks for one. Host code stays C++20.
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    set(CMAKE_CUDA_EXTENSIONS OFF)
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    # The shared CUDA runtime: the one torch's wheel loads (libcudart.so.<major>), so that the library
    # and torch share a runtime in one process instead of carrying two.
    set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
    set(SPARSGD_HAVE_CUDA ON)
    message(STATUS "sparsgd: CUDA ${CMAKE_CUDA_COMPILER_VERSION} (${CMAKE_CUDA_COMPILER}), architectures ${CMAKE_CUDA_ARCHITECTURES}")
  elseif(SPARSGD_CUDA STREQUAL "ON")
    message(FATAL_ERROR "SPARSGD_CUDA=ON, but no CUDA compiler was found: install the CUDA toolkit "
                        "(nvcc under /usr/local/cuda/bin), set CUDACXX, or configure with -DSPARSGD_CUDA=AUTO or OFF")
  else()
    message(STATUS "sparsgd: no nvcc found, the CUDA sources are not built (SPARSGD_CUDA=AUTO)")
  endif()
endif()
