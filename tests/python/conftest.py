"""Multi-process tests on gloo over loopback: each test function that needs workers hands a
module-level function to ``run_workers``, which starts that many fresh processes, each with its own
gloo process group over a file store, and returns what each returned, or fails naming the rank that
raised or hung.

The processes come from a fork server that has imported torch and sparsgd once, not from a plain
spawn: importing torch costs each process about 2.5 s of CPU, which over the suite's ~120 worker
processes was most of its time on 2 cores. Nothing but imports runs in the server (no process group,
no tensor op, so no thread pool to inherit), so each worker starts as clean as a spawned one."""

import io
import multiprocessing
import os
import queue as queue_module
import sys
import traceback

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)


def _entry(fn, rank, world_size, store, queue, args):
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    try:
        dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=world_size)
        result = fn(rank, world_size, *args)
        # As bytes: torch would otherwise pass tensors through shared memory this process takes along.
        buffer = io.BytesIO()
        torch.save(result, buffer)
        queue.put((rank, "ok", buffer.getvalue()))
    except BaseException as e:  # reported to the parent, which fails the test naming the rank
        queue.put((rank, "error", f"{type(e).__name__}: {e}\n{traceback.format_exc()}"))
    # Flush the report, then end without destroy_process_group or interpreter teardown: a rank that
    # finishes early must not close connections a peer still waits on in its own error path.
    queue.close()
    queue.join_thread()
    os._exit(0)


# The server itself starts with the first worker, not here.
_CONTEXT = multiprocessing.get_context("forkserver")
_CONTEXT.set_forkserver_preload(["torch", "torch.distributed", "sparsgd", "sparsgd.torch"])


class Workers:
    def __init__(self, tmp_path):
        self.tmp_path = tmp_path
        self.count = 0

    def __call__(self, world_size, fn, *args, timeout=120, expect_exit=()):
        """Runs fn(rank, world_size, *args) on world_size processes; returns {rank: ("ok"|"error", value)}.
        Ranks in expect_exit may end without reporting (a rank that kills itself)."""
        self.count += 1
        store = str(self.tmp_path / f"store-{self.count}")
        context = _CONTEXT
        queue = context.Queue()
        processes = [context.Process(target=_entry, args=(fn, r, world_size, store, queue, args))
                     for r in range(world_size)]
        for p in processes:
            p.start()
        results = {}
        try:
            while len(results) < world_size - len(expect_exit):
                rank, status, value = queue.get(timeout=timeout)
                if status == "ok":
                    import torch
                    value = torch.load(io.BytesIO(value))
                results[rank] = (status, value)
        except queue_module.Empty:
            missing = sorted(set(range(world_size)) - set(results) - set(expect_exit))
            pytest.fail(f"ranks {missing} did not finish within {timeout} s; got {results}")
        finally:
            for p in processes:
                p.join(timeout=10)
                if p.is_alive():
                    p.kill()
        return results


@pytest.fixture
def run_workers(tmp_path):
    return Workers(tmp_path)


def all_ok(results):
    """The values of every rank, failing with the first error."""
    for rank in sorted(results):
        status, value = results[rank]
        if status != "ok":
            pytest.fail(f"rank {rank} failed: {value}")
    return [results[r][1] for r in sorted(results)]


def three_class_shard(rank, world_size, n=512):
    """A fixed 3-class problem (points around three centres in 16 dimensions), rank's shard of it."""
    import torch
    g = torch.Generator().manual_seed(42)
    centres = torch.randn(3, 16, generator=g) * 2
    y = torch.randint(0, 3, (n,), generator=g)
    x = centres[y] + torch.randn(n, 16, generator=g)
    return x[rank::world_size], y[rank::world_size]


def small_classifier(hidden=32, hidden_layers=1, dtype=None):
    """The same small MLP on every rank (seed 7): 16 features to 3 classes."""
    import torch
    torch.manual_seed(7)
    layers, width = [], 16
    for _ in range(hidden_layers):
        layers += [torch.nn.Linear(width, hidden), torch.nn.ReLU()]
        width = hidden
    model = torch.nn.Sequential(*layers, torch.nn.Linear(width, 3))
    return model.to(dtype) if dtype is not None else model
