#!/usr/bin/env bash
# Usage: device_code.sh CUOBJDUMP "ARCHITECTURES" FILE...
# Passes when every FILE holds device machine code (an ELF cubin) for every real architecture in
# CMAKE_CUDA_ARCHITECTURES ("80-real;90" -> sm_80 and sm_90), as cuobjdump lists it.
set -euo pipefail
cuobjdump=$1
archs=$2
shift 2
status=0
for file in "$@"; do
  listing=$("$cuobjdump" --list-elf "$file" 2>&1) || { echo "FAIL: cuobjdump cannot read $file: $listing"; status=1; continue; }
  for arch in ${archs//;/ }; do
    case "$arch" in *-virtual) continue ;; esac
    sm=sm_${arch%%-*}
    if grep -q "\.$sm\.cubin" <<<"$listing"; then
      echo "ok: $file holds $sm code ($(grep -c "\.$sm\.cubin" <<<"$listing") kernels' cubins)"
    else
      echo "FAIL: $file holds no $sm code; cuobjdump --list-elf printed:"
      echo "$listing"
      status=1
    fi
  done
done
exit $status
