"""The checks and benchmarks of scripts/gpu-check.sh, with the package built against the machine's torch.

On a GPU (cuda:0):
- every compressor's selection on the device against the host engine on the same values (the same
  indices and values), at sizes from 1 to 1M, with ties; exact top-k against a stable full sort;
- every compressor and aggregator's averager on the device (world size 1): conservation of mass,
  sum of acc == average + residual;
- a 2-process DDP job on the one GPU over gloo with the hook (device path, overlapped): the ranks
  stay equal, the loss falls, Futures are pending when the hook returns; an NCCL job of world size 1
  whose hook and DistributedOptimizer make their own gloo group;
- benchmarks: exact top-k at n = 25M, k = 25K (sparsgd's device selection, torch.topk, one read
  pass), and one training step at 25M parameters (a stack of linear layers, ResNet-50's count) with
  plain DDP, fp16 compression, PowerSGD and the sparsgd hook, world size 1 on NCCL.
Results go to OUT/gpu-check.json; a failed check exits 1.
Without a GPU: the selection and conservation checks on the device path over CPU tensors, then exit 0.
"""

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import sparsgd
import sparsgd.torch as st
from sparsgd import _C

from atomic_file import write_atomically

SEED = 5


def values(n, kind, seed):
    g = torch.Generator().manual_seed(seed)
    if kind == "ties":  # few distinct magnitudes, both signs: ties everywhere
        return (torch.randint(-3, 4, (n,), generator=g) * 0.25).float()
    return torch.randn(n, generator=g)


def check_selections(device, sizes, failures):
    """The device path against the host engine, entry for entry, and top-k against a full sort."""
    checked = 0
    for name in _C.compressor_names():
        for n in sizes:
            for density in (0.001, 0.01, 0.3):
                k = max(1, min(n, round(density * n)))
                for kind in ("normal", "ties"):
                    acc = values(n, kind, n + k)
                    for iteration in range(2):
                        want = _C.selection(acc, name, k, iteration=iteration, rank=1, seed=SEED, r_factor=2.0,
                                            engine="host")
                        got = _C.selection(acc.to(device), name, k, iteration=iteration, rank=1, seed=SEED,
                                           r_factor=2.0, engine="device")
                        checked += 1
                        if not (torch.equal(want[0], got[0].cpu()) and torch.equal(want[1], got[1].cpu())):
                            failures.append(f"selection {name} n={n} k={k} {kind} iteration {iteration}: the device "
                                            f"selected {got[0].numel()} entries, the host {want[0].numel()}, not the same")
    for n, k in ((1, 1), (1000, 10), (1 << 20, 1000)):
        acc = values(n, "ties", 3).to(device)
        keys = acc.view(torch.int32) & 0x7FFFFFFF
        order = torch.sort(keys, descending=True, stable=True).indices[:k]
        want = torch.sort(order).values
        got = _C.selection(acc, "topk", k, engine="device")[0]
        checked += 1
        if not torch.equal(want, got):
            failures.append(f"top-k n={n} k={k}: not the stable full sort's first k")
    return checked


def check_conservation(device, failures):
    """World size 1 (its own gloo group): sum of acc == average + residual for every pair."""
    transport = _C.process_group_transport(dist.distributed_c10d._get_default_group(), 60000)
    checked = 0
    n = 10007
    for compressor in _C.compressor_names():
        properties = _C.compressor_properties(compressor)
        for aggregator in _C.aggregator_names():
            shared = bool(_C.aggregator_properties(aggregator)["needs_shared_indices"])
            feedback = not properties["scales_values"]
            density = 1.0 if properties["dense"] and aggregator != "dense" else 0.01
            try:
                _C.validate_exchange(compressor, aggregator, density, 4.0, SEED, shared, feedback, "raw", 0, 32)
            except ValueError:
                continue
            averager = _C.FlatAverager(transport, [n], ["x"], compressor, aggregator, density, seed=SEED,
                                       shared_seed=shared, error_feedback=feedback, auto_trials=0, device=str(device))
            residual = torch.zeros(n, dtype=torch.float64)
            for step in range(3):
                gradient = values(n, "normal", step).to(device)
                out = torch.empty(n, device=device)
                averager.average(gradient, out, step)
                acc = gradient.double().cpu() + (residual if feedback else 0.0)
                residual = averager.residuals()[0].double().cpu()
                if properties["scales_values"]:
                    continue  # its sent values are scaled: conservation holds only in expectation
                gap = abs(acc.sum().item() - out.double().sum().item() - residual.sum().item())
                checked += 1
                if gap > 1e-3 * (1.0 + acc.abs().sum().item()):
                    failures.append(f"conservation {compressor} + {aggregator} step {step}: off by {gap}")
    return checked


def _hook_job(rank, world_size, store, queue):
    try:
        torch.cuda.set_device(0)
        dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=world_size)
        torch.manual_seed(1)
        model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10)).cuda()
        ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[0], bucket_cap_mb=0.05)
        state = st.HookState(density=0.05)
        pending = []

        def watching(s, bucket):
            future = st.hook(s, bucket)
            pending.append(not future.done())
            return future

        ddp.register_comm_hook(state, watching)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
        g = torch.Generator().manual_seed(rank)
        x = torch.randn(256, 64, generator=g).cuda()
        y = (x[:, :10].argmax(1)).cuda()
        losses = []
        for _ in range(30):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(ddp(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        queue.put((rank, losses[0], losses[-1], any(pending), [p.detach().cpu() for p in model.parameters()]))
    except BaseException as error:  # reported to the parent
        queue.put((rank, "error", repr(error), False, []))


def _nccl_job(store, queue):
    try:
        dist.init_process_group("nccl", init_method="file://" + store, rank=0, world_size=1)
        torch.cuda.set_device(0)
        model = torch.nn.Linear(32, 4).cuda()
        ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[0])
        ddp.register_comm_hook(st.HookState(density=0.1), st.hook)
        other = torch.nn.Linear(32, 4).cuda()
        opt = st.DistributedOptimizer(torch.optim.SGD(other.parameters(), lr=0.1), density=0.1)
        x = torch.randn(16, 32, device="cuda")
        ddp(x).sum().backward()
        other(x).sum().backward()
        opt.step()
        queue.put(("ok", len(st._gloo_groups)))
    except BaseException as error:
        queue.put(("error", repr(error)))


def check_jobs(failures, workdir):
    context = mp.get_context("spawn")
    queue = context.Queue()
    store = os.path.join(workdir, "hook-store")
    processes = [context.Process(target=_hook_job, args=(r, 2, store, queue)) for r in range(2)]
    for p in processes:
        p.start()
    results = sorted(queue.get(timeout=300) for _ in processes)
    for p in processes:
        p.join(timeout=30)
    job = {}
    for rank, first, last, pending, params in results:
        if first == "error":
            failures.append(f"hook job rank {rank}: {last}")
            continue
        job[rank] = {"first_loss": first, "last_loss": last, "future_pending": pending}
        if not last < 0.5 * first:
            failures.append(f"hook job rank {rank}: loss {first} -> {last}, not learning")
        if not pending:
            failures.append(f"hook job rank {rank}: no Future was pending when the hook returned")
    if len(results) == 2 and results[0][1] != "error" and results[1][1] != "error":
        if not all(torch.equal(a, b) for a, b in zip(results[0][4], results[1][4])):
            failures.append("hook job: the two ranks' parameters differ")
    store = os.path.join(workdir, "nccl-store")
    process = context.Process(target=_nccl_job, args=(store, queue))
    process.start()
    status, detail = queue.get(timeout=300)
    process.join(timeout=30)
    if status != "ok":
        failures.append(f"NCCL job: {detail}")
    job["nccl_world_size_1"] = status if status != "ok" else f"ok, {detail} gloo group made"
    return job


def cuda_median_ms(fn, repeat=20):
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeat):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return {"median_ms": statistics.median(times), "min_ms": min(times), "max_ms": max(times), "repeat": repeat}


def bench_selection(n=25_000_000, k=25_000):
    x = torch.randn(n, device="cuda")
    read = cuda_median_ms(lambda: torch.amax(x))
    ours = cuda_median_ms(lambda: _C.selection(x, "topk", k, engine="device"))
    theirs = cuda_median_ms(lambda: torch.topk(x.abs(), k, sorted=False))
    read_ms = read["median_ms"]
    return {"n": n, "k": k, "read_pass": read, "sparsgd_topk": ours, "torch_topk_of_abs": theirs,
            "sparsgd_read_passes": ours["median_ms"] / read_ms, "torch_read_passes": theirs["median_ms"] / read_ms,
            "speedup_over_torch": theirs["median_ms"] / ours["median_ms"]}


def _step_bench(store, queue):
    try:
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook
        dist.init_process_group("nccl", init_method="file://" + store, rank=0, world_size=1)
        torch.cuda.set_device(0)
        results = {}
        for config in ("ddp", "fp16", "powersgd-r4", "sparsgd-topk-d0.01"):
            torch.manual_seed(0)
            layers = []
            for _ in range(6):
                layers += [torch.nn.Linear(2048, 2048), torch.nn.ReLU()]
            model = torch.nn.Sequential(*layers).cuda()
            ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[0])
            if config == "fp16":
                ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
            elif config == "powersgd-r4":
                ddp.register_comm_hook(powerSGD_hook.PowerSGDState(process_group=None, matrix_approximation_rank=4,
                                                                   start_powerSGD_iter=2),
                                       powerSGD_hook.powerSGD_hook)
            elif config.startswith("sparsgd"):
                ddp.register_comm_hook(st.HookState(compressor="topk", aggregator="allgather", density=0.01), st.hook)
            opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
            x = torch.randn(64, 2048, device="cuda")

            def step():
                opt.zero_grad()
                ddp(x).square().mean().backward()
                opt.step()

            for _ in range(5):
                step()
            results[config] = cuda_median_ms(step, repeat=15)
            results[config]["parameters"] = sum(p.numel() for p in model.parameters())
        queue.put(("ok", results))
    except BaseException as error:
        queue.put(("error", repr(error)))


def bench_steps(workdir):
    context = mp.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=_step_bench, args=(os.path.join(workdir, "step-store"), queue))
    process.start()
    status, detail = queue.get(timeout=400)
    process.join(timeout=30)
    return detail if status == "ok" else {"error": detail}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="directory for gpu-check.json")
    parser.add_argument("--commit", default="unknown", help="the commit checked, recorded with the results")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    gpu = torch.cuda.is_available()
    device = torch.device("cuda:0" if gpu else "cpu")
    failures = []
    record = {"commit": args.commit, "sparsgd": sparsgd.__version__, "torch": torch.__version__,
              "machine": platform.node(), "cpu": platform.processor() or platform.machine(),
              "gpu": torch.cuda.get_device_name(0) if gpu else None,
              "cuda_kernels_built": _C.cuda_kernels_built()}
    started = time.time()
    with tempfile.TemporaryDirectory() as workdir:
        dist.init_process_group("gloo", init_method="file://" + os.path.join(workdir, "store"), rank=0, world_size=1)
        sizes = (1, 2, 7, 1000, 1 << 20) if gpu else (1, 7, 1000, 65537)
        record["selections_checked"] = check_selections(device, sizes, failures)
        record["conservation_checked"] = check_conservation(device, failures)
        dist.destroy_process_group()
        if gpu:
            record["jobs"] = check_jobs(failures, workdir)
            record["selection_benchmark"] = bench_selection()
            record["step_benchmark"] = bench_steps(workdir)
    record["failures"] = failures
    record["seconds"] = round(time.time() - started, 1)
    path = os.path.join(args.out, "gpu-check.json")
    write_atomically(path, json.dumps(record, indent=1) + "\n")
    where = record["gpu"] or "no GPU: the device path on CPU tensors only"
    print(f"gpu check ({where}): {record['selections_checked']} selections and {record['conservation_checked']} "
          f"conservation steps checked, {len(failures)} failures, {record['seconds']} s; wrote {path}")
    for failure in failures[:20]:
        print("  FAIL", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
