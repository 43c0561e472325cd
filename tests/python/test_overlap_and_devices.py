"""The hook's exchanges overlap the backward pass and give what the synchronous path gives; the device
path (what a GPU runs) gives what the host engine gives, on CPU tensors; an NCCL job's hook and
optimizer make their own gloo group; gradient types are exchanged as torch users expect or refused."""

import functools
import time

import pytest
import torch
import torch.distributed as dist

import sparsgd.torch as st
from conftest import all_ok, small_classifier, three_class_shard


dataset = functools.partial(three_class_shard, n=256)


def make_model(dtype=torch.float32):
    return small_classifier(hidden=64, hidden_layers=2, dtype=dtype)


def hook_job(rank, world_size, steps, hook_options, bucket_cap_mb=0.004):
    """A DDP job with several buckets (a small bucket cap); returns the parameters after `steps`
    steps, whether each Future was still pending when the hook returned, and the last statistics."""
    model = make_model()
    x, y = dataset(rank, world_size)
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=bucket_cap_mb)
    state = st.HookState(density=0.05, seed=3, **hook_options)
    pending = []

    def watching_hook(s, bucket):
        future = st.hook(s, bucket)
        pending.append(not future.done())
        return future

    ddp.register_comm_hook(state, watching_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
    for step in range(steps):
        i = (step * 16) % len(x)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(ddp(x[i:i + 16]), y[i:i + 16]).backward()
        opt.step()
    return [p.detach().clone() for p in model.parameters()], pending, state.last_step, state.iteration


def test_overlapped_hook_gives_the_synchronous_results_bit_for_bit(run_workers):
    """4 processes, 20 steps, several buckets: the Futures are still pending when the hook returns,
    and the parameters equal those of the hook that exchanges inside the call."""
    overlapped = all_ok(run_workers(4, hook_job, 20, {"overlap": True}))
    synchronous = all_ok(run_workers(4, hook_job, 20, {"overlap": False}))
    for (params, pending, last, iteration), (sync_params, sync_pending, sync_last, _) in zip(overlapped, synchronous):
        assert iteration == 20
        assert last["exchanges"] > 1 and last["exchanges"] == sync_last["exchanges"]
        assert not any(sync_pending)
        assert any(pending), "no Future was pending when the hook returned"
        for a, b in zip(params, sync_params):
            assert torch.equal(a, b)
    for params, *_ in overlapped[1:]:
        for a, b in zip(params, overlapped[0][0]):
            assert torch.equal(a, b)


def test_the_device_path_on_cpu_tensors_gives_the_host_engines_results(run_workers):
    """engine='device' runs the code a GPU runs, on CPU tensors: the same training, to a float
    rounding of the division by P (the C++ tests hold residuals and selections bit for bit)."""
    for aggregator in ("gtopk-rd", "allgather"):
        host = all_ok(run_workers(3, hook_job, 10, {"engine": "host", "aggregator": aggregator}))
        device = all_ok(run_workers(3, hook_job, 10, {"engine": "device", "aggregator": aggregator}))
        for (params, *_), (device_params, *_) in zip(host, device):
            for a, b in zip(params, device_params):
                assert torch.allclose(a, b, rtol=1e-5, atol=1e-6), (a - b).abs().max()


class _SlowBackward(torch.autograd.Function):
    """Identity forward; its backward sleeps, standing in for a layer whose gradient takes time."""

    @staticmethod
    def forward(ctx, x, seconds):
        ctx.seconds = seconds
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        time.sleep(ctx.seconds)
        return grad, None


class _SlowLayers(torch.nn.Module):
    def __init__(self, layers, seconds):
        super().__init__()
        torch.manual_seed(1)
        self.layers = torch.nn.ModuleList(torch.nn.Linear(32, 32) for _ in range(layers))
        self.seconds = seconds

    def forward(self, x):
        for layer in self.layers:
            x = _SlowBackward.apply(layer(x), self.seconds)
        return x


def overlap_timing_job(rank, world_size, overlap, layers, backward_s, delay_ms):
    """Each layer's backward takes backward_s; each message of the exchange is held back delay_ms.
    One bucket a layer. Returns the wall time of the last 3 of 5 steps."""
    model = _SlowLayers(layers, backward_s)
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.001)
    state = st.HookState(aggregator="allgather", density=0.1, overlap=overlap)
    state.transport = st._C.delayed_transport(state.transport, delay_ms)
    ddp.register_comm_hook(state, st.hook)
    x = torch.randn(8, 32)
    times = []
    for _ in range(5):
        start = time.perf_counter()
        ddp(x).sum().backward()
        times.append(time.perf_counter() - start)
    return sum(times[2:]), state.last_step["exchanges"], state.last_step["messages_sent"]


def test_the_exchanges_overlap_the_backward_pass(run_workers):
    """With 4 layers whose backward takes 0.12 s each and messages held back 0.12 s (one a bucket on
    2 ranks), a synchronous step takes about 4 x 0.12 + 4 x 0.12 = 0.96 s, an overlapped one about
    0.12 + 4 x 0.12 = 0.6 s: near max(backward, exchanges) plus one layer, not their sum."""
    layers, backward_s, delay_ms = 4, 0.12, 120.0
    overlapped = all_ok(run_workers(2, overlap_timing_job, True, layers, backward_s, delay_ms))
    synchronous = all_ok(run_workers(2, overlap_timing_job, False, layers, backward_s, delay_ms))
    steps = 3
    backward = layers * backward_s
    for (wall, exchanges, messages), (sync_wall, sync_exchanges, _) in zip(overlapped, synchronous):
        assert exchanges == sync_exchanges == layers and messages == layers
        exchanges_s = messages * delay_ms / 1000
        assert sync_wall / steps >= backward + exchanges_s  # the sum: the lower bound of the synchronous step
        assert wall / steps < backward + exchanges_s - 0.5 * min(backward, exchanges_s), (wall / steps, sync_wall / steps)


def nccl_job(rank, world_size):
    """As in a job whose default group is NCCL: the package makes a gloo group of its own, once,
    and the hook and the optimizer train over it."""
    real = dist.get_backend
    dist.get_backend = lambda group=None: "nccl"
    try:
        state = st.HookState(density=0.1)
        model = make_model()
        opt = st.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), density=0.1)
    finally:
        dist.get_backend = real
    default = dist.distributed_c10d._get_default_group()
    made = st._gloo_groups[id(default)][1]
    x, y = dataset(rank, world_size)
    for i in range(0, 64, 16):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x[i:i + 16]), y[i:i + 16]).backward()
        opt.step()
    return (made is not default, len(st._gloo_groups), state.world_size,
            [p.detach().clone() for p in model.parameters()])


def test_a_job_whose_group_is_nccl_gets_a_gloo_group_of_the_package(run_workers):
    results = all_ok(run_workers(3, nccl_job))
    for other, groups, world, params in results:
        assert other and groups == 1 and world == 3
        for a, b in zip(params, results[0][3]):
            assert torch.equal(a, b)


def dtype_job(rank, world_size, dtype):
    model = make_model(dtype)
    x, y = dataset(rank, world_size)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    ddp.register_comm_hook(st.HookState(density=0.1, overlap=False), st.hook)
    try:
        torch.nn.functional.cross_entropy(ddp(x[:16].to(dtype)), y[:16]).backward()
    except Exception as error:  # noqa: B902 - the message is the result
        return "refused", str(error)
    return "ok", [p.grad.dtype for p in model.parameters()]


def test_half_precision_buckets_are_exchanged_and_float64_ones_refused(run_workers):
    for status, grads in all_ok(run_workers(2, dtype_job, torch.bfloat16)):
        assert status == "ok" and set(grads) == {torch.bfloat16}
    for status, message in all_ok(run_workers(2, dtype_job, torch.float64)):
        assert status == "refused" and "torch.float64 gradients; sparsgd exchanges float32" in message, message
