"""The DDP hook's and the DistributedOptimizer's averaged gradients, and the residuals they keep,
against the serial reference of the same semantics (sparsgd._C.reference_average: each worker's
selection from gradient + residual, the plain aggregation, the sum divided by P once), step by
step on 3 and 4 gloo processes, across DDP's bucket rebuild after the first iteration, with
buckets of mixed parameter sizes."""

import math

import pytest
import torch

from conftest import all_ok

STEPS = 4


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(24, 40), torch.nn.ReLU(), torch.nn.Linear(40, 7),
                               torch.nn.ReLU(), torch.nn.Linear(7, 3))


def batch(rank, step):
    g = torch.Generator().manual_seed(1000 * rank + step)
    return torch.randn(6, 24, generator=g), torch.randint(0, 3, (6,), generator=g)


def local_gradients(model, rank, step):
    x, y = batch(rank, step)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    return [g.detach().clone() for g in torch.autograd.grad(loss, list(model.parameters()))]


def hook_residuals(state, params, what="residual"):
    """Each parameter's residual, or velocity (momentum correction), zeros where no bucket holds one yet."""
    index = {p.data_ptr(): i for i, p in enumerate(params)}
    out = [torch.zeros(p.numel()) for p in params]
    for bucket in state._buckets.values():
        kept = bucket.averager.residuals()[0] if what == "residual" else bucket.averager.local_velocity()
        for (ptr, n), part in zip(bucket.key, torch.split(kept, [n for _, n in bucket.key])):
            out[index[ptr]] = part.clone()
    return out


def hook_worker(rank, world_size, compressor, aggregator, density, momentum_correction=0.0, error_feedback=True,
                index_coding="raw"):
    import sparsgd.torch as st
    model = make_model()
    params = list(model.parameters())
    # Small buckets (the first one too), so that parameters of mixed sizes spread over several.
    # (DDP starts with one bucket, then rebuilds them in backward order: [3, 21], [7, 280], [40, 960].)
    torch.distributed._DEFAULT_FIRST_BUCKET_BYTES = 64
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.0005)
    state = st.HookState(compressor=compressor, aggregator=aggregator, density=density, seed=3,
                         momentum_correction=momentum_correction, error_feedback=error_feedback,
                         index_coding=index_coding)
    ddp.register_comm_hook(state, st.hook)
    record = []
    for step in range(STEPS):
        before = hook_residuals(state, params)
        velocity = hook_residuals(state, params, "velocity") if momentum_correction else None
        local = local_gradients(model, rank, step)
        x, y = batch(rank, step)
        ddp.zero_grad()
        torch.nn.functional.cross_entropy(ddp(x), y).backward()
        index = {p.data_ptr(): i for i, p in enumerate(params)}
        buckets = [[index[ptr] for ptr, _ in b.key] for _, b in sorted(state._buckets.items())]
        record.append({"local": local, "before": before, "average": [p.grad.detach().flatten().clone() for p in params],
                       "after": hook_residuals(state, params), "buckets": buckets, "stats": state.last_step,
                       "velocity": velocity,
                       "velocity_after": hook_residuals(state, params, "velocity") if momentum_correction else None})
        with torch.no_grad():  # a plain SGD step, so that the next gradients differ
            for p in params:
                p -= 0.1 * p.grad
    return record


def check_against_reference(records, groups_per_step, compressor, aggregator, density, momentum_correction=0.0,
                            error_feedback=True):
    from sparsgd import _C
    world_size = len(records)
    for step in range(STEPS):
        for group in groups_per_step(step):
            def exchanged(w):  # the gradient, or with momentum correction the worker's velocity m u + g
                local = [records[w][step]["local"][p].flatten() for p in group]
                if not momentum_correction:
                    return torch.cat(local)
                return torch.cat([momentum_correction * records[w][step]["velocity"][p] + g
                                  for p, g in zip(group, local)])
            inputs = [exchanged(w) for w in range(world_size)]
            # Without error feedback the residual before the step (what the last step dropped) is not added.
            accs = [inputs[w] + torch.cat([records[w][step]["before"][p] for p in group]) if error_feedback
                    else inputs[w].clone() for w in range(world_size)]
            want, residuals, consumed = _C.reference_average(compressor, aggregator, density, accs, step, seed=3,
                                                             shared_seed=aggregator == "randk-shared")
            if momentum_correction:  # momentum factor masking: what was consumed leaves the velocity
                for w in range(world_size):
                    got = torch.cat([records[w][step]["velocity_after"][p] for p in group])
                    torch.testing.assert_close(got, inputs[w].masked_fill(consumed[w], 0.0), rtol=1e-6, atol=1e-7,
                                               msg=lambda m: f"velocity, step {step}, rank {w}: {m}")
            for w in range(world_size):
                got = torch.cat([records[w][step]["average"][p] for p in group])
                where = f"step {step}, parameters {group}, rank {w}"
                # Exact for the sparse sums taken in the reference's order; the dense ring sums in another.
                torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-7, msg=lambda m: f"{where}: {m}")
                kept = torch.cat([records[w][step]["after"][p] for p in group])
                torch.testing.assert_close(kept, residuals[w], rtol=0, atol=0, msg=lambda m: f"residual, {where}: {m}")
                # Conservation: what this worker had is in the sum or in its residual.
            total = sum(accs)
            consumed = sum(accs[w] - residuals[w] for w in range(world_size))
            torch.testing.assert_close(total - consumed, sum(residuals), rtol=1e-5, atol=1e-6)
            # An unbiased compressor's sum holds what it consumed times n/k.
            n = consumed.numel()
            scale = n / max(1, min(n, math.floor(density * n + 0.5))) if compressor == "randk-unbiased" else 1.0
            torch.testing.assert_close(consumed * scale, want * world_size, rtol=1e-4, atol=1e-6)


CASES = [(4, "topk", "gtopk-rd", 0.05), (3, "topk", "gtopk-rd", 0.05), (4, "topk", "gtopk", 0.05),
         (3, "topk", "allgather", 0.05), (4, "rtopk", "gtopk-rd", 0.05), (4, "randk", "randk-shared", 0.1),
         (3, "gaussiank", "allgather", 0.1), (4, "dgc", "gtopk", 0.1), (3, "none", "dense", 1.0),
         (3, "topk", "oktopk", 0.05), (4, "dgc", "oktopk", 0.1)]


@pytest.mark.parametrize("world_size,compressor,aggregator,density", CASES)
def test_hook_average_and_residuals_match_reference(run_workers, world_size, compressor, aggregator, density):
    records = all_ok(run_workers(world_size, hook_worker, compressor, aggregator, density))
    # Every rank saw the same buckets; after the first step DDP rebuilt them.
    for r in records[1:]:
        assert [s["buckets"] for s in r] == [s["buckets"] for s in records[0]]
    assert len(records[0][-1]["buckets"]) > 1, "the test needs several buckets"
    check_against_reference(records, lambda step: records[0][step]["buckets"], compressor, aggregator, density)
    assert records[0][-1]["stats"]["exchanges"] == len(records[0][-1]["buckets"])


# auto: each bucket measures the network (a ping-pong over gloo), tries its plausible candidates
# (two rounds) and settles; whatever formed a step's average, it must be exactly one candidate's
# reference for that step, the same on every rank, with that candidate's residuals.
def test_hook_auto_matches_the_reference_of_one_candidate_every_step(run_workers):
    from sparsgd import _C
    world_size, density = 3, 0.05
    records = all_ok(run_workers(world_size, hook_worker, "topk", "auto", density))
    for step in range(STEPS):
        for group in records[0][step]["buckets"]:
            accs = [torch.cat([records[w][step]["local"][p].flatten() + records[w][step]["before"][p] for p in group])
                    for w in range(world_size)]
            got = [torch.cat([records[w][step]["average"][p] for p in group]) for w in range(world_size)]
            kept = [torch.cat([records[w][step]["after"][p] for p in group]) for w in range(world_size)]
            matched = []
            for candidate in ("gtopk-rd", "oktopk", "allgather", "dense"):
                want, residuals, _ = _C.reference_average("topk", candidate, density, accs, step, seed=3)
                if all(torch.allclose(got[w], want, rtol=1e-5, atol=1e-7) and torch.equal(kept[w], residuals[w])
                       for w in range(world_size)):
                    matched.append(candidate)
            assert matched, f"step {step}, parameters {group}: no candidate's reference gives this average"


# Without error feedback (the dropped part is not added back), and the unbiased random-k that needs it off.
@pytest.mark.parametrize("world_size,compressor,aggregator,density", [(4, "topk", "gtopk-rd", 0.05),
                                                                      (3, "randk-unbiased", "randk-shared", 0.1)])
def test_hook_without_error_feedback_matches_reference(run_workers, world_size, compressor, aggregator, density):
    records = all_ok(run_workers(world_size, hook_worker, compressor, aggregator, density, 0.0, False))
    assert any(r.abs().sum() > 0 for r in records[0][-1]["after"]), "the step dropped something"
    check_against_reference(records, lambda step: records[0][step]["buckets"], compressor, aggregator, density,
                            error_feedback=False)


# Compressed indices: the same averages and residuals as the reference, in fewer bytes than raw.
# At P = 2 gtopk-rd sends each bucket's selection once, which raw would send in a 20-byte header
# and 8 bytes a pair: the coded step must send less (one run, no raw twin to wait for).
def test_hook_with_compressed_indices_matches_reference_in_fewer_bytes(run_workers):
    coded = all_ok(run_workers(2, hook_worker, "topk", "gtopk-rd", 0.05, 0.0, True, "compressed"))
    check_against_reference(coded, lambda step: coded[0][step]["buckets"], "topk", "gtopk-rd", 0.05)
    for rank in range(2):
        for step in range(STEPS):
            stats = coded[rank][step]["stats"]
            assert stats["messages_sent"] == stats["exchanges"], (rank, step, stats)
            raw_bytes = 20 * stats["exchanges"] + 8 * stats["selected"]
            assert stats["bytes_sent"] < raw_bytes, (rank, step, stats)


# One case: the C++ test of the averager covers the arithmetic for every aggregator, compressor
# and P (tests/torch/averager_test.cpp); this one covers the hook's velocities across the rebuild.
@pytest.mark.parametrize("world_size,compressor,aggregator,density", [(4, "topk", "gtopk-rd", 0.05)])
def test_hook_momentum_correction_matches_reference(run_workers, world_size, compressor, aggregator, density):
    """DGC's momentum correction: each worker's velocity (which follows its parameters through
    DDP's bucket rebuild) is what the hook exchanges with error feedback, and what the sum consumed
    leaves it."""
    records = all_ok(run_workers(world_size, hook_worker, compressor, aggregator, density, 0.9))
    assert len(records[0][-1]["buckets"]) > 1, "the test needs several buckets"
    assert any(v.abs().sum() > 0 for v in records[0][-1]["velocity_after"]) or compressor == "none"
    check_against_reference(records, lambda step: records[0][step]["buckets"], compressor, aggregator, density, 0.9)


def optimizer_worker(rank, world_size, compressor, aggregator, density, per_layer):
    import sparsgd.torch as st
    model = make_model()
    params = list(model.parameters())
    opt = st.DistributedOptimizer(torch.optim.Adam(params, lr=0.01), model.named_parameters(), compressor=compressor,
                                  aggregator=aggregator, density=density, seed=3, per_layer=per_layer)
    record = []
    for step in range(STEPS):
        before = [r.clone() for r in opt._sync.residuals()]
        local = local_gradients(model, rank, step)
        x, y = batch(rank, step)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.synchronize()
        after = [r.clone() for r in opt._sync.residuals()]
        if not per_layer:
            split = [p.numel() for p in params]
            before, after = list(torch.split(before[0], split)), list(torch.split(after[0], split))
        record.append({"local": local, "before": before, "average": [p.grad.detach().flatten().clone() for p in params],
                       "after": after})
        opt.step()
    return record


@pytest.mark.parametrize("per_layer", [False, True])
@pytest.mark.parametrize("world_size,compressor,aggregator,density", [(4, "topk", "gtopk-rd", 0.05),
                                                                      (3, "topk", "gtopk", 0.05)])
def test_optimizer_average_matches_reference(run_workers, world_size, compressor, aggregator, density, per_layer):
    records = all_ok(run_workers(world_size, optimizer_worker, compressor, aggregator, density, per_layer))
    n_params = len(records[0][0]["local"])
    groups = [[p] for p in range(n_params)] if per_layer else [list(range(n_params))]
    check_against_reference(records, lambda step: groups, compressor, aggregator, density)
