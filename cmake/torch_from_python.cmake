# Finds the torch that a Python interpreter imports, and LibTorch inside it.
#
# One torch for the whole project: the C++ torch layer, `sparsgd-torch`, the tests and the Python
# package all build against the LibTorch that ships inside the torch wheel of Python3_EXECUTABLE
# (the checkout's .venv by default; under `pip install .`, the interpreter pip runs). The
# interpreter is asked, never guessed:
#   - torch.utils.cmake_prefix_path: where find_package(Torch) looks;
#   - torch.compiled_with_cxx11_abi(): the libstdc++ ABI every translation unit must share with
#     LibTorch (a std::string crosses between the layers, so the whole project follows it, not only
#     the files that include torch);
#   - torch._C._PYBIND11_{COMPILER_TYPE,STDLIB,BUILD_ABI}, where torch has them (its pybind11 2.x
#     builds): the tags the extension must be compiled with to share pybind11's type registry with
#     torch; torch's pybind11 3.x builds derive them from the compiler and have no such attributes;
#   - torch.__version__ and torch.version.cuda, recorded in the package so that importing it next to
#     another torch fails with one clear line.
# Sets: SPARSGD_TORCH_VERSION, SPARSGD_TORCH_CUDA (empty for a CPU build), SPARSGD_TORCH_PYBIND11_DEFINES,
# everything find_package(Torch) sets (through cmake/sparsgd_find_libtorch.cmake), and the target
# sparsgd::libtorch that the project links.

set(SPARSGD_TORCH_MIN_VERSION 2.4)

if(NOT Python3_EXECUTABLE AND EXISTS ${PROJECT_SOURCE_DIR}/.venv/bin/python)
  set(Python3_EXECUTABLE ${PROJECT_SOURCE_DIR}/.venv/bin/python CACHE FILEPATH
      "The Python whose torch the project builds against (scripts/setup.sh makes .venv)")
endif()
find_package(Python3 COMPONENTS Interpreter)
if(NOT Python3_Interpreter_FOUND)
  message(FATAL_ERROR "sparsgd: the torch layer is built against the torch of a Python interpreter, and none was found: "
                      "run scripts/setup.sh (it makes .venv with the pinned torch), pass -DPython3_EXECUTABLE=PATH, or "
                      "configure with -DSPARSGD_WITH_TORCH=OFF")
endif()

execute_process(
  COMMAND ${Python3_EXECUTABLE} -c [=[
import torch, torch.utils
print(torch.__version__)
print(torch.utils.cmake_prefix_path)
print(int(torch.compiled_with_cxx11_abi()))
print(torch.version.cuda or "")
tags = []
for name in ("COMPILER_TYPE", "STDLIB", "BUILD_ABI"):
    value = getattr(torch._C, "_PYBIND11_" + name, None)
    if value is not None:
        tags.append('PYBIND11_%s="%s"' % (name, value))
print(";".join(tags))
]=]
  OUTPUT_VARIABLE torch_facts ERROR_VARIABLE torch_error RESULT_VARIABLE torch_failed
  OUTPUT_STRIP_TRAILING_WHITESPACE)
if(torch_failed)
  message(FATAL_ERROR "sparsgd: ${Python3_EXECUTABLE} cannot import torch (${torch_error}); run scripts/setup.sh, or "
                      "install a torch >= ${SPARSGD_TORCH_MIN_VERSION} into that environment")
endif()
string(REPLACE "\n" ";" torch_facts "${torch_facts}")
list(GET torch_facts 0 SPARSGD_TORCH_VERSION)
list(GET torch_facts 1 torch_prefix)
list(GET torch_facts 2 torch_cxx11_abi)
list(GET torch_facts 3 SPARSGD_TORCH_CUDA)
list(LENGTH torch_facts torch_fact_count)
set(SPARSGD_TORCH_PYBIND11_DEFINES "")
if(torch_fact_count GREATER 4)
  list(SUBLIST torch_facts 4 -1 SPARSGD_TORCH_PYBIND11_DEFINES)
endif()
string(REGEX MATCH "^[0-9]+\\.[0-9]+(\\.[0-9]+)?" torch_release "${SPARSGD_TORCH_VERSION}")
if(torch_release VERSION_LESS SPARSGD_TORCH_MIN_VERSION)
  message(FATAL_ERROR "sparsgd: ${Python3_EXECUTABLE} has torch ${SPARSGD_TORCH_VERSION}; sparsgd needs torch >= "
                      "${SPARSGD_TORCH_MIN_VERSION} (scripts/setup.sh installs the pinned one into .venv)")
endif()

list(PREPEND CMAKE_PREFIX_PATH ${torch_prefix})
# A CUDA build of LibTorch looks for the CUDA toolkit when it is found (its own Caffe2Config).
if(SPARSGD_TORCH_CUDA AND NOT CUDAToolkit_ROOT AND EXISTS /usr/local/cuda/bin/nvcc)
  set(CUDAToolkit_ROOT /usr/local/cuda)
endif()
include(${CMAKE_CURRENT_LIST_DIR}/sparsgd_find_libtorch.cmake)
sparsgd_find_libtorch(REQUIRED)
message(STATUS "sparsgd: torch ${SPARSGD_TORCH_VERSION} (CUDA ${SPARSGD_TORCH_CUDA}) of ${Python3_EXECUTABLE}")

# Every translation unit, torch's or not, on the same libstdc++ ABI as LibTorch.
add_compile_definitions(_GLIBCXX_USE_CXX11_ABI=${torch_cxx11_abi})

# sparsgd::libtorch: what the project links for LibTorch. libstdc++ comes first: the wheel's
# libtorch.so exports about 180 symbols of the C++ standard library (std::filesystem among them,
# unversioned, from the toolchain it was built with), and a program that links libtorch.so ahead of
# libstdc++ binds its own std::filesystem calls to those copies, which crash (remove_all jumps to
# address 0). Linked first, libstdc++ supplies them.
add_library(sparsgd_libtorch INTERFACE)
add_library(sparsgd::libtorch ALIAS sparsgd_libtorch)
set_target_properties(sparsgd_libtorch PROPERTIES EXPORT_NAME libtorch)
target_link_libraries(sparsgd_libtorch INTERFACE stdc++ ${TORCH_LIBRARIES})
