#!/usr/bin/env bash
# Installs the Debian packages sparsgd builds against (only those missing), then configures and
# builds it in ./build. Safe to run again: it does nothing that is already done.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake pkg-config
  libhwy-dev            # SIMD kernels with runtime dispatch
  libopenmpi-dev openmpi-bin   # the MPI transport
  libtorch-dev          # LibTorch 1.13: the torch layer and the torch-topk baseline
  libgloo-dev           # the headers of torch's gloo process groups (the c10d transport's tests)
  python3-torch python3-dev pybind11-dev python3-pytest  # the Python package and its tests
  libopenblas0-pthread  # an optimized BLAS for LibTorch (the reference BLAS is ten times slower); the
                        # trainer sets it to one thread per worker. Not the serial build: it is not
                        # safe to call from several worker threads at once (training diverges).
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

build_type=${SPARSGD_BUILD_TYPE:-Release}
cmake -S . -B build -DCMAKE_BUILD_TYPE="$build_type" -DSPARSGD_WITH_PYTHON=ON ${SPARSGD_CMAKE_ARGS:-}
cmake --build build -j"$(nproc)"
