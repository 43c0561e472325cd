#!/usr/bin/env bash
# Reruns or continues the convergence study and regenerates docs/results/convergence.md, its plots
# and the papers' claims in docs/results/findings.md (the grid, seeds and epochs are described in
# scripts/convergence_study.py and at the top of convergence.md). Runs already recorded under
# docs/results/convergence/runs.jsonl are not run again; no run starts that would end after the budget
# (default 55 minutes), so the study goes in chunks: run the command again to continue.
# Usage: scripts/convergence-study.sh [--budget-minutes M] [--report-only] [--list]
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x build/sparsgd ] && [ -x build/sparsgd-torch ] || bash scripts/setup.sh
exec /usr/bin/python3 scripts/convergence_study.py "$@"
