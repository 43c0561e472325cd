#!/usr/bin/env bash
# Sets everything up and runs the main job: data-parallel training of the CNN on Fashion-MNIST
# with 4 in-process workers, Top-k selection and gTop-k aggregation (density 0.01) with DGC's
# momentum correction, one epoch,
# reporting what the run would cost on the gTop-k paper's 1 Gbps cluster. Extra arguments go to
# `sparsgd train` (see `./build/sparsgd train --help`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
./build/sparsgd train --out runs/main --overwrite "$@"  # the main job replaces its last run
