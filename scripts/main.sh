#!/usr/bin/env bash
# Sets everything up and runs the main job. Until the trainer lands this is the selection
# benchmark at the paper's scale: 25M gradient entries, density 0.001.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
./build/sparsgd bench select --n 25000000 --density 0.001 "$@"
