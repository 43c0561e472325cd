#!/usr/bin/env bash
# sparsgd train --device cuda where no GPU is visible: exit status 2 and one line on stderr, before
# anything is trained. Where a GPU is visible, skipped (exit 77), naming why: gpu-check.sh trains there.
set -u
cli=$1
gpus=$(nvidia-smi -L 2>/dev/null | grep -c GPU)
if [ "${gpus:-0}" -gt 0 ]; then
  echo "skipped: this machine has a GPU (scripts/gpu-check.sh trains on it)"
  exit 77
fi
err=$(mktemp)
trap 'rm -f "$err"' EXIT
"$cli" train --device cuda --out "$(mktemp -d)/run" >/dev/null 2>"$err"
status=$?
lines=$(grep -c . "$err")
if [ "$status" -ne 2 ] || [ "$lines" -ne 1 ] || ! grep -q -- "--device cuda: no CUDA GPU is visible to this process" "$err"; then
  echo "FAIL: status $status, $lines lines: $(cat "$err")"
  exit 1
fi
echo "ok: $(cat "$err")"
