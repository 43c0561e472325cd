#!/usr/bin/env bash
# The whole GPU verification as one script, for a borrowed GPU machine (its image: torch with CUDA,
# Python, nvcc, CMake, ninja, pybind11, no network) or any machine with a GPU.
#
#   bash scripts/gpu-check.sh --pack      here, before borrowing: copies the Debian headers and
#                                         libraries the build needs and the image lacks (Highway,
#                                         GoogleTest, nlohmann json) into .gpu-deps/ (ignored by git;
#                                         carry it to the machine)
#   bash scripts/gpu-check.sh [OUT]       on the GPU machine: builds the library, the CUDA tests and
#                                         the package against that machine's torch (build-gpu/), runs
#                                         the CUDA tests and scripts/gpu_check.py (device against CPU,
#                                         conservation, top-k against a full sort, a 2-process hook
#                                         job and an NCCL one, the benchmarks), results in OUT
#                                         (default: out/gpu-check)
#
# Without a GPU it says so, runs the CPU-side checks (the device path over CPU tensors) with the
# package of build/ (scripts/setup.sh builds it; SPARSGD_BUILD_DIR names another), and exits 0.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

if [ "${1:-}" = "--pack" ]; then
  deps="$root/.gpu-deps"
  rm -rf "$deps"
  mkdir -p "$deps"
  multiarch=$(gcc -print-multiarch)
  # Mirrored below .gpu-deps as they lie below /usr: the packages' CMake files find their prefix
  # from their own place.
  (cd /usr && cp -r --parents include/hwy include/gtest include/gmock include/nlohmann include/zlib.h include/zconf.h "$deps/" &&
    cp -P --parents lib/"$multiarch"/libhwy*.so* lib/"$multiarch"/libgtest*.a lib/"$multiarch"/libgmock*.a lib/"$multiarch"/libz.a "$deps/" &&
    for config in lib/"$multiarch"/cmake/hwy lib/"$multiarch"/cmake/GTest share/cmake/nlohmann_json; do
      cp -r --parents "$config" "$deps/"
    done)
  echo "packed $(du -sh "$deps" | cut -f1) into .gpu-deps (carry it: run(..., carry=[\".gpu-deps\"]))"
  exit 0
fi

out=${1:-$root/out/gpu-check}
mkdir -p "$out"
python=${SPARSGD_PYTHON:-}
if [ -z "$python" ]; then
  if [ -x "$root/.venv/bin/python" ]; then python="$root/.venv/bin/python"; else python=$(command -v python3); fi
fi
commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo "${SPARSGD_COMMIT:-unknown}")

if ! "$python" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  echo "gpu-check: no CUDA GPU is visible here: the CPU-side checks only (the device path over CPU tensors)"
  cpu_build=${SPARSGD_BUILD_DIR:-$root/build}
  if [ ! -d "$cpu_build/python/sparsgd" ]; then
    echo "gpu-check: no package in $cpu_build/python: run scripts/setup.sh first" >&2
    exit 1
  fi
  PYTHONPATH="$cpu_build/python" OMP_NUM_THREADS=1 "$python" "$root/scripts/gpu_check.py" --out "$out" --commit "$commit"
  exit $?
fi

start=$SECONDS
build="$root/build-gpu"
prefix="$root/.gpu-deps"
torch_prefix=$("$python" -c "import torch; print(torch.utils.cmake_prefix_path)")
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix;$torch_prefix" -DPython3_EXECUTABLE="$python" \
  -DSPARSGD_WITH_MPI=OFF -DSPARSGD_BUILD_CLI=OFF -DSPARSGD_BUILD_TESTS=ON > "$out/configure.log" 2>&1 \
  || { tail -30 "$out/configure.log"; exit 1; }
cmake --build "$build" -j "$(nproc)" --target sparsgd_python cuda_tests > "$out/build.log" 2>&1 \
  || { tail -40 "$out/build.log"; exit 1; }
echo "gpu-check: built in $((SECONDS - start)) s"
export LD_LIBRARY_PATH="$(echo "$prefix"/lib/*-linux-gnu)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
status=0
"$build/tests/cuda_tests" --gtest_brief=1 > "$out/cuda_tests.log" 2>&1 || status=1
tail -3 "$out/cuda_tests.log"
PYTHONPATH="$build/python" "$python" "$root/scripts/gpu_check.py" --out "$out" --commit "$commit" || status=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$out/gpu.txt" 2>/dev/null || true
echo "gpu-check: done in $((SECONDS - start)) s, results in $out (status $status)"
exit $status
