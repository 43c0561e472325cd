#!/usr/bin/env python3
"""A plain PyTorch DDP training script, and what sparsgd adds to it.

Trains the CNN of `sparsgd train --model cnn` (two 5x5 convolutions, 32 and 64 channels, each with
ReLU and 2x2 max pooling, then 128 and 10 units) on Fashion-MNIST from Debian
(dataset-fashion-mnist) with SGD, momentum 0.9, weight decay 1e-4, batch 32 per worker, lr 0.05,
as `sparsgd train` does. Launch one process per worker:

    OMP_NUM_THREADS=1 PYTHONPATH=build/python .venv/bin/torchrun --nproc_per_node 4 \\
      examples/ddp_fashion_mnist.py --hook sparsgd

(from the checkout, after scripts/setup.sh; with the package pip-installed into your own environment,
`torchrun` of that environment and no PYTHONPATH).

--hook none      DDP as it is (allreduce of every bucket)
--hook fp16      torch's fp16 compression hook
--hook bf16      torch's bf16 compression hook
--hook powersgd  torch's PowerSGD hook (--powersgd-rank R). On gloo it fails with DDP's default two
                 buckets (torch 1.13 and 2.11 alike: "Received data size doesn't match expected size.
                 Is there a distributed collective mismatch": ranks issue the buckets' P and Q
                 allreduces in different orders), so this script gives DDP a single bucket for it.
--hook sparsgd   the two lines sparsgd adds:
                     state = sparsgd.torch.HookState(compressor=..., aggregator=..., density=...)
                     ddp.register_comm_hook(state, sparsgd.torch.hook)
--momentum-correction  with --hook sparsgd: DGC's momentum correction in the hook
                 (HookState(momentum_correction=--momentum)): each worker's velocity is what gets
                 sparsified, and SGD then steps without momentum of its own (same lr, momentum
                 and weight decay, applied in another place).
--optimizer adam|adamw  no DDP: the model's gradients go through sparsgd.torch.DistributedOptimizer
                 (with the sparsgd options), which wraps torch.optim.Adam/AdamW.

Rank 0 prints one JSON line at the end (and writes it to --out): wall time of the training loop
(data loading and evaluation excluded), test accuracy, bytes sent per worker per iteration, and
the modelled communication time per iteration on a given network (default: the gTop-k paper's
1 Gbps cluster) at P = 4 and 32, from the alpha-beta closed form, bucket by bucket.
"""

import argparse
import gzip
import json
import math
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

DATA = "/usr/share/datasets/fashion-mnist"
MEAN, STD = 0.2860, 0.3530


def read_idx(path, offset):
    try:
        with gzip.open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        sys.exit(f"ddp_fashion_mnist: cannot read {path}: {e} (apt-get install dataset-fashion-mnist)")
    return torch.frombuffer(bytearray(raw[offset:]), dtype=torch.uint8)


def load(data_dir, split):
    images = read_idx(os.path.join(data_dir, f"{split}-images-idx3-ubyte.gz"), 16)
    labels = read_idx(os.path.join(data_dir, f"{split}-labels-idx1-ubyte.gz"), 8).long()
    images = ((images.float() / 255.0 - MEAN) / STD).reshape(-1, 1, 28, 28)
    if images.shape[0] != labels.shape[0]:
        sys.exit(f"ddp_fashion_mnist: {split}: {images.shape[0]} images but {labels.shape[0]} labels")
    return images, labels


class Cnn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 32, 5, padding=2)
        self.conv2 = torch.nn.Conv2d(32, 64, 5, padding=2)
        self.fc1 = torch.nn.Linear(64 * 7 * 7, 128)
        self.fc2 = torch.nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hook", choices=["none", "fp16", "bf16", "powersgd", "sparsgd"], default="sparsgd")
    p.add_argument("--optimizer", choices=["sgd", "adam", "adamw"], default="sgd")
    p.add_argument("--powersgd-rank", type=int, default=4)
    p.add_argument("--compressor", default="topk")
    p.add_argument("--aggregator", default="gtopk-rd")
    p.add_argument("--density", type=float, default=0.01)
    p.add_argument("--r-factor", type=float, default=4.0)
    p.add_argument("--momentum-correction", action="store_true",
                   help="sparsgd hook: DGC momentum correction (the hook applies --momentum; SGD none)")
    p.add_argument("--network", default="none", help="network model for sparsgd's own clock (network_s)")
    p.add_argument("--model-network", default="paper-1gbe", help="network of the modelled time per iteration")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--max-iters", type=int, default=0, help="stop after this many iterations (0: whole epochs)")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=None, help="default 0.05 (sgd), 0.001 (adam, adamw)")
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--weight-decay", type=float, default=1e-4)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--data", default=DATA)
    p.add_argument("--out", default="", help="also write rank 0's JSON summary here")
    args = p.parse_args()
    if args.optimizer != "sgd" and args.hook not in ("sparsgd", "none"):
        p.error("--optimizer adam/adamw steps through sparsgd's DistributedOptimizer (no DDP hook)")
    if args.momentum_correction and (args.hook != "sparsgd" or args.optimizer != "sgd"):
        p.error("--momentum-correction belongs to --hook sparsgd with --optimizer sgd")
    if args.batch_size < 1 or args.epochs < 1 or args.max_iters < 0 or args.powersgd_rank < 1:
        p.error("--batch-size, --epochs and --powersgd-rank must be >= 1, --max-iters >= 0")
    if args.lr is None:
        args.lr = 0.05 if args.optimizer == "sgd" else 0.001
    return args


def dense_ring_bytes(elements, workers, bytes_per_element=4):
    """What a ring allreduce sends per worker (the convention of sparsgd's counters)."""
    return 2 * (workers - 1) * elements * bytes_per_element / workers if workers > 1 else 0.0


def main():
    args = parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(args.seed)
    train_x, train_y = load(args.data, "train")
    test_x, test_y = load(args.data, "t10k")
    model = Cnn()  # the same initial values on every rank (same seed); DDP broadcasts rank 0's anyway
    n = sum(p.numel() for p in model.parameters())

    import sparsgd.torch
    from sparsgd import _C
    sparsgd_options = dict(compressor=args.compressor, aggregator=args.aggregator, density=args.density,
                           r_factor=args.r_factor, network=args.network)
    state = None
    if args.optimizer != "sgd":
        inner = (torch.optim.Adam if args.optimizer == "adam" else torch.optim.AdamW)(
            model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
        optimizer = sparsgd.torch.DistributedOptimizer(inner, model.named_parameters(), **sparsgd_options)
        sparsgd.torch.broadcast_parameters(model.state_dict(), root_rank=0)
        net = model
    else:
        ddp_kwargs = {}
        if args.hook == "powersgd":
            ddp_kwargs["bucket_cap_mb"] = 1024  # one bucket: see the module's docstring
            torch.distributed._DEFAULT_FIRST_BUCKET_BYTES = 1024 * 1024 * 1024
        net = torch.nn.parallel.DistributedDataParallel(model, **ddp_kwargs)
        if args.hook in ("fp16", "bf16"):
            from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
            compress = default_hooks.fp16_compress_hook if args.hook == "fp16" else default_hooks.bf16_compress_hook
            net.register_comm_hook(None, compress)
        elif args.hook == "powersgd":
            from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook
            power_state = powerSGD_hook.PowerSGDState(process_group=None, matrix_approximation_rank=args.powersgd_rank,
                                                      start_powerSGD_iter=2, random_seed=args.seed)
            net.register_comm_hook(power_state, powerSGD_hook.powerSGD_hook)
        elif args.hook == "sparsgd":
            state = sparsgd.torch.HookState(
                momentum_correction=args.momentum if args.momentum_correction else 0.0, **sparsgd_options)
            net.register_comm_hook(state, sparsgd.torch.hook)
        # With momentum correction the hook returns the averaged velocity: no second momentum.
        optimizer = torch.optim.SGD(net.parameters(), lr=args.lr,
                                    momentum=0.0 if args.momentum_correction else args.momentum,
                                    weight_decay=args.weight_decay)

    shard = len(train_x) // world
    per_epoch = math.ceil(shard / args.batch_size)
    sent = 0.0
    steps = 0
    losses = []
    dist.barrier()
    start = time.perf_counter()
    for epoch in range(args.epochs):
        order = torch.randperm(len(train_x), generator=torch.Generator().manual_seed(args.seed * 1000 + epoch))
        mine = order[rank * shard:(rank + 1) * shard]
        for i in range(per_epoch):
            if args.max_iters and steps >= args.max_iters:
                break
            index = mine[i * args.batch_size:(i + 1) * args.batch_size]
            optimizer.zero_grad()
            loss = F.cross_entropy(net(train_x[index]), train_y[index])
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            steps += 1
            if state is not None:
                sent += state.last_step["bytes_sent"]
            elif args.optimizer != "sgd":
                sent += optimizer.last_step["bytes_sent"]
    wall = time.perf_counter() - start

    # Bytes and the modelled time per iteration, bucket by bucket (after DDP's rebuild).
    if state is not None:
        buckets = [b.averager.size for _, b in sorted(state._buckets.items())]
    elif args.optimizer != "sgd":
        buckets = [n]
    else:
        logging = net._get_ddp_logging_data()
        sizes = logging.get("rebuilt_bucket_sizes") or logging.get("bucket_sizes") or str(4 * n)
        buckets = [int(b) // 4 for b in str(sizes).split(", ") if b]
    model_ms = {}
    for workers in (4, 32):
        seconds = 0.0
        for b in buckets:
            if args.hook == "sparsgd" or args.optimizer != "sgd":
                seconds += _C.aggregation_cost(args.aggregator, workers, b, args.density, args.model_network)["seconds"]
            elif args.hook in ("fp16", "bf16"):
                seconds += _C.aggregation_cost("dense", workers, (b + 1) // 2, 1.0, args.model_network)["seconds"]
            elif args.hook == "powersgd":
                # One allreduce of the 1-D tensors, one of all P matrices, one of all Q matrices.
                r = args.powersgd_rank
                vectors = sum(p.numel() for p in model.parameters() if p.dim() <= 1)
                ps = sum(min(p.shape[0], r) * p.shape[0] for p in model.parameters() if p.dim() > 1)
                qs = sum(min(p.shape[0], r) * p[0].numel() for p in model.parameters() if p.dim() > 1)
                seconds += sum(_C.aggregation_cost("dense", workers, m, 1.0, args.model_network)["seconds"]
                               for m in (vectors, ps, qs))
            else:
                seconds += _C.aggregation_cost("dense", workers, b, 1.0, args.model_network)["seconds"]
        model_ms[workers] = 1e3 * seconds
    if state is None and args.optimizer == "sgd":
        if args.hook == "none":
            sent = steps * sum(dense_ring_bytes(b, world) for b in buckets)
        elif args.hook in ("fp16", "bf16"):
            sent = steps * sum(dense_ring_bytes(b, world, 2) for b in buckets)
        else:
            r = args.powersgd_rank
            vectors = sum(p.numel() for p in model.parameters() if p.dim() <= 1)
            pq = sum(min(p.shape[0], r) * (p.shape[0] + p[0].numel()) for p in model.parameters() if p.dim() > 1)
            sent = steps * (dense_ring_bytes(vectors, world) + dense_ring_bytes(pq, world))

    model.eval()
    correct = torch.zeros(1)
    with torch.no_grad():
        part = slice(rank * len(test_x) // world, (rank + 1) * len(test_x) // world)
        correct += (model(test_x[part]).argmax(1) == test_y[part]).sum()
    dist.all_reduce(correct)
    walls = [None] * world
    dist.all_gather_object(walls, wall)
    summary = {
        "torch": torch.__version__,
        "sparsgd": sparsgd.__version__,
        "hook": args.hook if args.optimizer == "sgd" else f"DistributedOptimizer({args.optimizer})",
        "compressor": args.compressor if args.hook == "sparsgd" or args.optimizer != "sgd" else None,
        "aggregator": args.aggregator if args.hook == "sparsgd" or args.optimizer != "sgd" else None,
        "density": args.density if args.hook == "sparsgd" or args.optimizer != "sgd" else None,
        "momentum_correction": args.momentum_correction,
        "powersgd_rank": args.powersgd_rank if args.hook == "powersgd" else None,
        "workers": world, "seed": args.seed, "epochs": args.epochs, "iterations": steps, "parameters": n,
        "wall_s": max(walls), "test_accuracy": correct.item() / len(test_x),
        "final_train_loss": sum(losses[-50:]) / max(1, len(losses[-50:])),
        "bytes_per_worker_per_iteration": sent / max(1, steps), "buckets": buckets,
        "model_network": args.model_network, "model_comm_ms_P4": model_ms[4], "model_comm_ms_P32": model_ms[32],
    }
    if rank == 0:
        line = json.dumps(summary)
        print(line, flush=True)
        if args.out:
            with open(args.out + ".tmp", "w") as f:
                f.write(line + "\n")
                f.flush()
                os.fsync(f.fileno())
            os.replace(args.out + ".tmp", args.out)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
