#!/usr/bin/env bash
# Sets up what sparsgd builds against, then configures and builds it in ./build. Safe to run again:
# it does nothing that is already done.
#   1. Debian's packages (only those missing): compilers, CMake, MPI, Highway, GoogleTest, ...
#   2. .venv: a virtual environment made from Debian's Python (/usr/bin/python3; SPARSGD_PYTHON
#      names another), with the pinned torch and Python tools of python/requirements.txt from PyPI.
#      The whole project (C++ torch layer, `sparsgd train`, tests, Python package) builds against
#      that one torch. The first run downloads about 2.7 GB (torch's CUDA wheel and its nvidia-*
#      runtime wheels) and installs 4.7 GB.
#   3. CMake in ./build (SPARSGD_CMAKE_ARGS adds options), and the build.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake pkg-config
  libhwy-dev            # SIMD kernels with runtime dispatch
  libopenmpi-dev openmpi-bin   # the MPI transport
  libgloo-dev           # gloo's headers, which torch's ProcessGroupGloo.hpp includes (the c10d transport's C++
                        # tests make gloo groups); torch's wheel ships the library but not these headers
  python3 python3-venv python3-dev  # the interpreter .venv is made from, and the headers the extension needs
  libcli11-dev nlohmann-json3-dev libfmt-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  zlib1g-dev
  dataset-fashion-mnist # Fashion-MNIST (gzipped IDX) for the torch layer's loader and training
  gnuplot-nox           # the PNG plots of training runs
  clang libclang-rt-14-dev  # scripts/sanitize.sh and scripts/fuzz.sh: AddressSanitizer, UBSan and libFuzzer
  llvm-14               # llvm-symbolizer: function names and lines in sanitizer reports
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -q
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# The virtual environment, and the pinned packages whenever python/requirements.txt differs from
# what was last installed (a stamp inside .venv records it).
python=${SPARSGD_PYTHON:-/usr/bin/python3}
if ! [ -x .venv/bin/python ]; then
  echo "setup: making .venv from $python ($("$python" --version 2>&1))"
  "$python" -m venv .venv
fi
stamp=.venv/sparsgd-requirements.txt
if ! cmp -s python/requirements.txt "$stamp"; then
  echo "setup: installing python/requirements.txt into .venv (the first time: about 2.7 GB from PyPI)"
  .venv/bin/python -m pip install --disable-pip-version-check -q -r python/requirements.txt
  cp python/requirements.txt "$stamp"
fi

build_type=${SPARSGD_BUILD_TYPE:-Release}
cmake -S . -B build -DCMAKE_BUILD_TYPE="$build_type" -DSPARSGD_WITH_PYTHON=ON \
  -DPython3_EXECUTABLE="$PWD/.venv/bin/python" ${SPARSGD_CMAKE_ARGS:-}
cmake --build build -j"$(nproc)"
