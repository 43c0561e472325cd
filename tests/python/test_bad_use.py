"""Bad use of the Python package gets a Python exception with a clear message, never a crash or a
hang: no process group, bad options, ranks that disagree, NaN/Inf gradients (stop or skip), a
parameter set that changes, a state_dict from another rank, and a rank that dies mid-training."""

import math
import os
import re
import time

import pytest
import torch

import sparsgd
import sparsgd.torch as st
from conftest import all_ok


def test_refuses_to_start_without_a_process_group():
    with pytest.raises(RuntimeError, match="init_process_group"):
        st.HookState()
    model = torch.nn.Linear(3, 2)
    with pytest.raises(RuntimeError, match="init_process_group"):
        st.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), model.named_parameters())


@pytest.mark.parametrize("kwargs,message", [
    ({"density": 0}, "density must be a number in \\(0, 1\\]"),
    ({"density": 1.5}, "density"),
    ({"density": math.nan}, "density"),
    ({"density": "0.1"}, "density"),
    ({"compressor": "top-k"}, "unknown compressor 'top-k'; one of topk, topk-reuse, randk"),
    ({"aggregator": "ring"}, "unknown aggregator 'ring'"),
    ({"aggregator": 3}, "unknown aggregator 3"),
    ({"r_factor": 0.5}, "r_factor must be a number >= 1"),
    ({"timeout_ms": 0}, "timeout_ms must be an integer in \\[1, 2147483647\\]"),
    ({"timeout_ms": 10**13}, "timeout_ms must be an integer in \\[1, 2147483647\\]"),
    ({"seed": 2**64}, "seed must be an integer in \\[0, 2\\*\\*64\\)"),
    ({"on_nonfinite": "ignore"}, "on_nonfinite must be 'stop' or 'skip'"),
    ({"seed": -1}, "seed"),
    ({"momentum_correction": 1.0}, "momentum_correction must be a number in \\[0, 1\\)"),
    ({"momentum_correction": -0.1}, "momentum_correction"),
    ({"momentum_correction": math.nan}, "momentum_correction"),
    ({"momentum_correction": True}, "momentum_correction"),
    ({"error_feedback": "no"}, "error_feedback must be True or False"),
    ({"compressor": "randk-unbiased", "aggregator": "randk-shared"}, "switch error feedback off"),
    ({"aggregator": "randk-shared"}, "needs the randk or randk-unbiased compressor"),
    ({"index_coding": "rice"}, "index_coding must be 'raw' or 'compressed'"),
    ({"index_coding": "compressed", "aggregator": "dense"}, "sends no indices"),
    ({"aggregator": "auto", "auto_trials": -1}, "auto_trials must be an integer in \\[0, 16\\]"),
    ({"aggregator": "auto", "auto_trials": 17}, "auto_trials"),
    ({"aggregator": "auto", "auto_trials": 1.5}, "auto_trials"),
])
def test_refuses_bad_options_before_anything_else(kwargs, message):
    with pytest.raises(ValueError, match=message):
        st.HookState(**kwargs)


def test_numpy_scalars_are_numbers():
    """np.float32(0.01) is a density and np.int64(3) a seed, as torch takes them: the options pass
    the checks (and then ask for a process group, which this process has not made)."""
    import numpy as np
    with pytest.raises(RuntimeError, match="torch.distributed is not initialized"):
        st.HookState(density=np.float32(0.01), seed=np.int64(3), r_factor=np.float64(2.0))


def test_the_package_names_the_build_it_runs():
    # CTest passes CMake's project version; the revision is the commit the C++ library was built from.
    assert sparsgd.__version__ == os.environ.get("SPARSGD_PROJECT_VERSION", "(run me through ctest)")
    assert re.fullmatch(r"[0-9a-f]{12}(-dirty|-unchecked)?|unknown", sparsgd.__revision__), sparsgd.__revision__


def test_aggregator_descriptors_are_readable_and_unknown_names_refused():
    for name in sparsgd.AGGREGATORS:
        props = sparsgd.aggregator_properties(name)
        assert props["name"] == name and props["summary"]
    assert sparsgd.aggregator_properties("randk-shared")["needs_shared_indices"]
    assert not sparsgd.aggregator_properties("gtopk-rd")["needs_shared_indices"]
    assert sparsgd.aggregator_properties("dense")["dense_result"]
    assert not sparsgd.aggregator_properties("dense")["sends_indices"]
    with pytest.raises(ValueError, match="unknown aggregator 'tree' \\(expected dense, allgather"):
        sparsgd.aggregator_properties("tree")


def bad_network(rank, world_size):
    try:
        st.HookState(network="5gbe")
    except sparsgd.InvalidArgument as e:
        return str(e)
    return "accepted"


def test_refuses_an_unknown_network(run_workers):
    (message,) = all_ok(run_workers(1, bad_network))
    assert "5gbe" in message and "paper-1gbe" in message, message


def disagreeing(rank, world_size, field):
    options = {"density": 0.01, "compressor": "topk", "aggregator": "gtopk-rd", "momentum_correction": 0.0}
    options[field] = {"density": 0.001, "compressor": "randk", "aggregator": "allgather",
                      "momentum_correction": 0.9}[field] if rank == 2 else options[field]
    start = time.monotonic()
    try:
        st.HookState(timeout_ms=20000, **options)
    except sparsgd.InvalidArgument as e:
        return str(e), time.monotonic() - start
    return "accepted", 0.0


@pytest.mark.parametrize("field,shown", [("density", "0.01 on rank 0, 0.001 on rank 2"),
                                         ("compressor", "'topk' on rank 0, 'randk' on rank 2"),
                                         ("aggregator", "'gtopk-rd' on rank 0, 'allgather' on rank 2"),
                                         ("momentum_correction", "0.0 on rank 0, 0.9 on rank 2")])
def test_ranks_that_disagree_fail_at_once_on_every_rank(run_workers, field, shown):
    for message, took in all_ok(run_workers(4, disagreeing, field)):
        assert f"ranks disagree on the sparsgd DDP hook's options: '{field}': {shown}" in message, message
        assert took < 10


def model_and_data(rank):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(10, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    g = torch.Generator().manual_seed(rank)
    return model, torch.randn(8, 10, generator=g), torch.randint(0, 2, (8,), generator=g)


def nonfinite_hook(rank, world_size, mode):
    model, x, y = model_and_data(rank)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    state = st.HookState(on_nonfinite=mode, density=0.1, timeout_ms=15000, module=model)
    ddp.register_comm_hook(state, st.hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    events = []
    for step in range(3):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(ddp(x), y)
        if rank == 1 and step == 1:
            loss = loss * float("nan")
        before = [p.detach().clone() for p in model.parameters()]
        try:
            loss.backward()
        except Exception as e:
            return {"error": f"{type(e).__name__}: {e}", "step": step}
        if not state.last_step["skipped"]:
            opt.step()
        events.append((state.last_step["skipped"], state.last_step["skip_reason"],
                       all(torch.equal(a, b) for a, b in zip(before, model.parameters()))))
    return {"events": events}


def test_nonfinite_gradient_stops_naming_the_parameter(run_workers):
    results = run_workers(3, nonfinite_hook, "stop")
    status, value = results[1]
    assert status == "ok" and value["step"] == 1, results[1]
    assert "non-finite gradient (nan) in parameter '2.bias' at element 0, iteration 1 on rank 1; nothing was sent" \
        in value["error"], value
    # The others end with an error, not a hang, naming rank 1 as the rank that ended: rank 0 directly
    # (its partner); rank 2 (folded into rank 0 at P = 3) through rank 0's recorded failure.
    status, value = results[0]
    assert status == "ok" and "from rank 1" in value.get("error", "") and "rank 1 ended without recording"         in value["error"], results[0]
    status, value = results[2]
    assert status == "ok" and "from rank 0" in value.get("error", "") and "rank 1 ended first" in value["error"], \
        results[2]


def test_nonfinite_gradient_skips_on_every_rank(run_workers):
    for rank, result in enumerate(all_ok(run_workers(3, nonfinite_hook, "skip"))):
        skipped = [e[0] for e in result["events"]]
        assert skipped == [False, True, False], (rank, result)
        assert "non-finite gradient" in result["events"][1][1]
        assert result["events"][1][2], "a skipped step must not change the parameters"


def changing_parameters(rank, world_size):
    model, x, y = model_and_data(rank)
    opt = st.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), model.named_parameters())
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
    extra = torch.nn.Parameter(torch.zeros(3))
    opt.optimizer.add_param_group({"params": [extra]})
    try:
        opt.step()
    except ValueError as e:
        changed = str(e)
    other = st.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), model.named_parameters())
    state = other.state_dict()
    state["sparsgd"]["identity"]["rank"] = 1 - rank
    try:
        other.load_state_dict(state)
    except ValueError as e:
        return changed, str(e)
    return changed, "accepted"


def test_changed_parameters_and_foreign_state_are_refused(run_workers):
    for changed, foreign in all_ok(run_workers(2, changing_parameters)):
        assert "the optimizer's parameters changed since DistributedOptimizer was created (4 tensors then, 5 now)" \
            in changed
        assert "saved with rank = " in foreign and "another rank, job or configuration" in foreign, foreign


def dying(rank, world_size):
    import os
    model, x, y = model_and_data(rank)
    opt = st.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), model.named_parameters(),
                                  timeout_ms=8000)
    for step in range(5):
        if rank == 2 and step == 2:
            os._exit(3)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        start = time.monotonic()
        try:
            opt.step()
        except sparsgd.TransportError as e:
            return f"{type(e).__name__}: {e}", time.monotonic() - start
    return "no error", 0.0


def test_a_rank_that_dies_ends_the_others_with_an_error_naming_it(run_workers):
    results = run_workers(4, dying, expect_exit=(2,))
    for rank in (0, 1, 3):
        message, took = all_ok({rank: results[rank]})[0]
        # Directly (its partner) or through the chain of recorded failures, every rank names rank 2.
        assert "rank 2 ended" in message, (rank, message)
        assert took < 12, (rank, took)
