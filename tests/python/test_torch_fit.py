"""DistributedOptimizer as torch users expect an optimizer to behave: an instance of the optimizer it
wraps (schedulers, GradScaler, state_dict), momentum correction, None gradients kept as torch keeps
them, and what it cannot exchange refused by name."""

import functools

import pytest
import torch

import sparsgd.torch as st
from conftest import all_ok, small_classifier, three_class_shard


dataset = functools.partial(three_class_shard, n=256)
make_model = small_classifier


def scheduler_job(rank, world_size):
    model = make_model()
    opt = st.DistributedOptimizer(torch.optim.Adam(model.parameters(), lr=0.01), model.named_parameters(),
                                  density=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    scaler = torch.amp.GradScaler("cpu", init_scale=256.0)
    x, y = dataset(rank, world_size)
    lrs, losses = [], []
    for step in range(6):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        losses.append(loss.item())
        if step % 2 == 0:
            loss.backward()
            opt.step()
        else:  # mixed precision's pattern: exchange, unscale, then step without a second exchange
            scaler.scale(loss).backward()
            opt.synchronize()
            scaler.unscale_(opt)
            scaler.step(opt)
            scaler.update()
        scheduler.step()
        lrs.append(opt.param_groups[0]["lr"])
    return (isinstance(opt, torch.optim.Adam), isinstance(opt, st.DistributedOptimizer), type(opt).__name__, lrs,
            losses, [p.detach().clone() for p in model.parameters()], opt.iteration)


def test_it_is_the_optimizer_it_wraps_for_schedulers_and_grad_scaler(run_workers):
    results = all_ok(run_workers(2, scheduler_job))
    for adam, wrapper, name, lrs, losses, params, iteration in results:
        assert adam and wrapper and name == "Adam"
        assert lrs == pytest.approx([0.01, 0.005, 0.005, 0.0025, 0.0025, 0.00125])
        assert losses[-1] < losses[0] and iteration == 6
        for a, b in zip(params, results[0][5]):
            assert torch.equal(a, b)


def momentum_job(rank, world_size, steps, stop_at, saved):
    """SGD without momentum and DGC's momentum correction; with stop_at, saved and resumed there."""
    model = make_model()
    x, y = dataset(rank, world_size)

    def make_optimizer():
        return st.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05), density=0.05,
                                       momentum_correction=0.9)

    opt = make_optimizer()
    for step in range(steps):
        if step == stop_at:
            torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, f"{saved}-{rank}")
            model = make_model()
            opt = make_optimizer()
            state = torch.load(f"{saved}-{rank}")
            model.load_state_dict(state["model"])
            opt.load_state_dict(state["opt"])
        i = (step * 16) % len(x)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x[i:i + 16]), y[i:i + 16]).backward()
        opt.step()
    return torch.nn.functional.cross_entropy(model(x), y).item(), [p.detach().clone() for p in model.parameters()]


def test_momentum_correction_trains_and_resumes_exactly(run_workers, tmp_path):
    straight = all_ok(run_workers(2, momentum_job, 30, -1, str(tmp_path / "a")))
    resumed = all_ok(run_workers(2, momentum_job, 30, 13, str(tmp_path / "b")))
    first = torch.nn.functional.cross_entropy(make_model()(dataset(0, 2)[0]), dataset(0, 2)[1]).item()
    for (loss, params), (_, resumed_params) in zip(straight, resumed):
        assert loss < 0.5 * first
        for a, b in zip(params, resumed_params):
            assert torch.equal(a, b)


class _PartlyUsed(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(3)
        self.used = torch.nn.Linear(8, 4)
        self.rank0_only = torch.nn.Linear(8, 4)
        self.unused = torch.nn.Linear(8, 4)

    def forward(self, x, rank):
        out = self.used(x)
        return out + self.rank0_only(x) if rank == 0 else out


def none_gradient_job(rank, world_size):
    model = _PartlyUsed()
    before = model.unused.weight.detach().clone()
    opt = st.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1, weight_decay=0.1),
                                  model.named_parameters(), density=1.0, aggregator="allgather")
    torch.manual_seed(10 + rank)
    for _ in range(3):
        opt.zero_grad()
        model(torch.randn(5, 8), rank).pow(2).sum().backward()
        opt.step()
    return (model.unused.weight.grad is None, torch.equal(model.unused.weight, before),
            model.rank0_only.weight.grad is not None, [p.detach().clone() for p in model.parameters()])


def test_a_parameter_without_a_gradient_anywhere_keeps_none(run_workers):
    """As torch (and DDP) do: a parameter no rank used keeps grad None and the optimizer leaves it
    alone (weight decay included); one that only rank 0 used gets the average on every rank."""
    results = all_ok(run_workers(2, none_gradient_job))
    for unused_none, unused_unchanged, rank0_only_has_grad, params in results:
        assert unused_none and unused_unchanged and rank0_only_has_grad
        for a, b in zip(params, results[0][3]):
            assert torch.equal(a, b)


def refusals_job(rank, world_size):
    messages = {}

    def refused(name, make):
        try:
            make()
        except (ValueError, TypeError) as error:
            messages[name] = str(error)

    double = torch.nn.Linear(4, 2).double()
    refused("float64", lambda: st.DistributedOptimizer(torch.optim.SGD(double.parameters(), lr=0.1),
                                                       double.named_parameters()))
    plain = torch.nn.Linear(4, 2)
    refused("momentum", lambda: st.DistributedOptimizer(torch.optim.SGD(plain.parameters(), lr=0.1, momentum=0.9),
                                                        momentum_correction=0.9))
    embedding = torch.nn.Embedding(10, 3, sparse=True)
    opt = st.DistributedOptimizer(torch.optim.SGD(embedding.parameters(), lr=0.1), embedding.named_parameters())
    embedding(torch.tensor([1, 2])).sum().backward()
    refused("sparse", opt.step)
    # Validate, then change: a state whose residual has the wrong length changes nothing.
    model = make_model()
    good = st.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), density=0.1)
    state = good.state_dict()
    state["param_groups"][0]["lr"] = 123.0
    state["sparsgd"]["residuals"] = [torch.zeros(5)]
    refused("residual", lambda: good.load_state_dict(state))
    messages["lr after"] = good.param_groups[0]["lr"]
    # Parameter shapes are agreed, not only their counts.
    shaped = torch.nn.Parameter(torch.zeros((6, 5) if rank == 0 else (5, 6)))
    refused("shapes", lambda: st.DistributedOptimizer(torch.optim.SGD([shaped], lr=0.1)))
    return messages


def test_what_it_cannot_exchange_is_refused_by_name(run_workers):
    for messages in all_ok(run_workers(2, refusals_job)):
        assert "parameter 'weight' has torch.float64 gradients" in messages["float64"]
        assert "momentum_correction replaces the optimizer's momentum" in messages["momentum"]
        assert "parameter 'weight' has a sparse gradient" in messages["sparse"]
        assert "residuals do not fit this optimizer" in messages["residual"]
        assert messages["lr after"] == 0.1
        assert "parameter shapes" in messages["shapes"]
