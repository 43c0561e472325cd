#!/usr/bin/env bash
# PyTorch users' comparison: the same DDP training script (examples/ddp_fashion_mnist.py: the CNN of
# `sparsgd train --model cnn`, Fashion-MNIST, SGD with momentum, batch 32 per worker, 1 epoch) with
# DDP as it is, torch's own hooks (fp16, bf16, PowerSGD at rank 1 and 4), and the sparsgd hook (topk with
# gtopk-rd and with allgather, density 0.01 and 0.001), plus sparsgd's DistributedOptimizer around
# Adam; 4 processes launched by the .venv's torchrun (the pinned torch) with OMP_NUM_THREADS=1, seeds 1-3, the configurations
# interleaved within each seed so that a change in the machine's load touches all of them alike.
# Writes docs/results/pytorch.md (and the raw JSON lines to docs/results/pytorch/runs.jsonl).
#
# Usage: scripts/report-pytorch.sh [--seeds "1 2 3"] [--epochs 1] [--max-iters N] [--configs "ddp sparsgd-gtopk-rd-d0.01"]
#        [--name pytorch]   (run after scripts/setup.sh; --name NAME writes docs/results/NAME.md and docs/results/NAME/)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/staged.sh
seeds="1 2 3" epochs=1 max_iters=0 only="" name=pytorch
while (($#)); do
  case $1 in
    --seeds) seeds=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --max-iters) max_iters=$2; shift 2 ;;
    --configs) only=$2; shift 2 ;;
    --name)
      name=$2; shift 2
      [[ $name =~ ^[A-Za-z0-9_-]+$ ]] || { echo "report-pytorch: --name takes letters, digits, - and _" >&2; exit 2; } ;;
    *) echo "report-pytorch: unknown argument $1" >&2; exit 2 ;;
  esac
done
compgen -G "build/python/sparsgd/_C*.so" >/dev/null ||
  { echo "report-pytorch: build the Python package first (bash scripts/setup.sh)" >&2; exit 1; }
out=docs/results/$name
mkdir -p "$out"
runs=$(mktemp -d /tmp/sparsgd-pytorch.XXXXXX)
trap 'rm -rf "$runs"' EXIT
configs=(
  "ddp|--hook none"
  "fp16|--hook fp16"
  "bf16|--hook bf16"
  "powersgd-r1|--hook powersgd --powersgd-rank 1"
  "powersgd-r4|--hook powersgd --powersgd-rank 4"
  "sparsgd-gtopk-rd-d0.01|--hook sparsgd --aggregator gtopk-rd --density 0.01"
  "sparsgd-gtopk-rd-d0.001|--hook sparsgd --aggregator gtopk-rd --density 0.001"
  "sparsgd-allgather-d0.01|--hook sparsgd --aggregator allgather --density 0.01"
  "sparsgd-allgather-d0.001|--hook sparsgd --aggregator allgather --density 0.001"
  "sparsgd-gtopk-rd-d0.01-mc|--hook sparsgd --aggregator gtopk-rd --density 0.01 --momentum-correction"
  "sparsgd-gtopk-rd-d0.001-mc|--hook sparsgd --aggregator gtopk-rd --density 0.001 --momentum-correction"
  "sparsgd-allgather-d0.01-mc|--hook sparsgd --aggregator allgather --density 0.01 --momentum-correction"
  "sparsgd-allgather-d0.001-mc|--hook sparsgd --aggregator allgather --density 0.001 --momentum-correction"
  "adam-sparsgd-gtopk-rd-d0.01|--optimizer adam --aggregator gtopk-rd --density 0.01"
)
: >"$runs/all.jsonl"
for seed in $seeds; do
  for config in "${configs[@]}"; do
    config_name=${config%%|*}
    if [ -n "$only" ] && [[ " $only " != *" $config_name "* ]]; then continue; fi
    read -r -a flags <<<"${config#*|}"
    echo "report-pytorch: seed $seed $config_name" >&2
    OMP_NUM_THREADS=1 PYTHONPATH=build/python .venv/bin/torchrun --nproc_per_node 4 \
      examples/ddp_fashion_mnist.py "${flags[@]}" --seed "$seed" --epochs "$epochs" --max-iters "$max_iters" \
      --out "$runs/$config_name-$seed.json" >"$runs/$config_name-$seed.log" 2>&1 ||
      { echo "report-pytorch: $config_name seed $seed failed:" >&2; tail -20 "$runs/$config_name-$seed.log" >&2
        # What was run so far and the failure's log outlive the temporary directory.
        cp "$runs/all.jsonl" "$out/runs.partial.jsonl"; cp "$runs/$config_name-$seed.log" "$out/failed-$config_name-$seed.log"
        echo "report-pytorch: kept $out/runs.partial.jsonl and $out/failed-$config_name-$seed.log" >&2; exit 1; }
    /usr/bin/python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); d["config"] = sys.argv[2]; print(json.dumps(d))' \
      "$runs/$config_name-$seed.json" "$config_name" >>"$runs/all.jsonl"
  done
done
cp "$runs/all.jsonl" "$out/runs.jsonl"
[ -s "$runs/all.jsonl" ] || { echo "report-pytorch: no configuration matched --configs '$only'" >&2; exit 2; }
table=$(staged "docs/results/$name.md")
/usr/bin/python3 scripts/pytorch-report.py "$out/runs.jsonl" >"$table"
publish "$table" "docs/results/$name.md"
echo "report-pytorch: wrote docs/results/$name.md" >&2
