#!/usr/bin/env bash
# Usage: pip_install_check.sh PYTHON SOURCE_DIR
# The package as a PyTorch user installs it: from a directory outside the checkout,
#   PYTHON -m pip install --no-build-isolation --target DIR SOURCE_DIR
# builds it against PYTHON's torch (pyproject.toml: scikit-build-core over the project's CMake);
# then, with PYTHONPATH=DIR, the package imports from DIR, names its version and torch's, and a
# 3-process gloo DDP job (examples/ddp_fashion_mnist.py under that environment's torchrun) registers
# sparsgd.torch.hook and trains.
set -euo pipefail
python=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")  # absolute: the script changes directory
source=$(cd "$2" && pwd)
work=$(mktemp -d /tmp/sparsgd-pip.XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$work"
start=$SECONDS
if ! "$python" -m pip install --disable-pip-version-check --no-build-isolation --no-cache-dir --target "$work/site" \
     "$source" >"$work/pip.log" 2>&1; then
  echo "FAIL: pip install --no-build-isolation --target failed:"
  tail -n 60 "$work/pip.log"
  exit 1
fi
echo "pip install --no-build-isolation --target: $((SECONDS - start)) s"
ls "$work/site/sparsgd"
[ ! -e "$work/site/torch" ] || { echo "FAIL: pip put a torch into the target (the package must use the environment's)"; exit 1; }

PYTHONPATH="$work/site" "$python" - "$work/site" <<'PY'
import os, sys
import sparsgd, sparsgd.torch, torch
assert os.path.realpath(sparsgd.__file__).startswith(os.path.realpath(sys.argv[1])), sparsgd.__file__
assert torch.__version__.startswith("2."), torch.__version__
print(f"sparsgd {sparsgd.__version__} (built against torch {sparsgd.TORCH_VERSION}), torch {torch.__version__}")
PY

torchrun=$(dirname "$python")/torchrun
PYTHONPATH="$work/site" OMP_NUM_THREADS=1 "$torchrun" --nproc_per_node 3 "$source/examples/ddp_fashion_mnist.py" \
  --hook sparsgd --aggregator gtopk-rd --density 0.01 --max-iters 20 --out "$work/summary.json" >"$work/ddp.log" 2>&1 ||
  { echo "FAIL: the 3-process DDP job failed:"; tail -n 40 "$work/ddp.log"; exit 1; }
"$python" - "$work/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
assert s["hook"] == "sparsgd" and s["workers"] == 3 and s["iterations"] == 20, s
assert 0.0 <= s["test_accuracy"] <= 1.0 and s["bytes_per_worker_per_iteration"] > 0, s
print(f"3-process DDP job with sparsgd.torch.hook: {s['iterations']} iterations, test accuracy "
      f"{100 * s['test_accuracy']:.1f}%, {s['bytes_per_worker_per_iteration']:,} bytes a worker an iteration")
PY
echo "pip install check: ok"
