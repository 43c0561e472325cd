# sparsgd_find_libtorch([REQUIRED]): find_package(Torch) for the LibTorch inside a CUDA torch wheel,
# without the side effects its config has on the calling project. Used by the project's own build
# (cmake/torch_from_python.cmake) and, installed beside it, by sparsgdConfig.cmake, so that a user's
# project that finds sparsgd gets LibTorch the same way. A CUDA LibTorch's config
#   - sets CMAKE_CUDA_STANDARD to the C++ standard (20) where it is unset, and compiles a probe with
#     it, which Debian 12's CMake (3.25) cannot give nvcc: 17 unless the caller chose;
#   - probes for a GPU unless TORCH_CUDA_ARCH_LIST is set, then appends -gencode flags for its own
#     list (compute_50 among them, which nvcc 13 refuses) to CMAKE_CUDA_FLAGS, turns
#     CMAKE_CUDA_ARCHITECTURES off, and warns about any value it had: the caller's CUDA sources are
#     compiled for the caller's architectures, so both are put back as they were.
macro(sparsgd_find_libtorch)
  if(NOT DEFINED CMAKE_CUDA_STANDARD)
    set(CMAKE_CUDA_STANDARD 17)
  endif()
  if(NOT DEFINED TORCH_CUDA_ARCH_LIST AND NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
    set(TORCH_CUDA_ARCH_LIST "8.0;9.0")
  endif()
  set(_sparsgd_cuda_flags "${CMAKE_CUDA_FLAGS}")
  set(_sparsgd_cuda_architectures_defined OFF)
  if(DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(_sparsgd_cuda_architectures_defined ON)
    set(_sparsgd_cuda_architectures "${CMAKE_CUDA_ARCHITECTURES}")
    unset(CMAKE_CUDA_ARCHITECTURES)
    unset(CMAKE_CUDA_ARCHITECTURES CACHE)
  endif()
  find_package(Torch ${ARGN})
  set(CMAKE_CUDA_FLAGS "${_sparsgd_cuda_flags}")
  unset(CMAKE_CUDA_ARCHITECTURES)
  if(_sparsgd_cuda_architectures_defined)
    set(CMAKE_CUDA_ARCHITECTURES "${_sparsgd_cuda_architectures}" CACHE STRING "CUDA architectures to compile for")
  endif()
endmacro()
