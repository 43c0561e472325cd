"""sparsgd for PyTorch: sparse gradient exchange over torch.distributed.

Two ways in, both over the process group that ``torch.distributed.init_process_group`` created
(gloo on CPU; a GPU job passes a gloo group: ``dist.new_group(backend="gloo")``):

- A DDP communication hook, per bucket::

      state = sparsgd.torch.HookState(compressor="topk", aggregator="gtopk-rd", density=0.01)
      ddp.register_comm_hook(state, sparsgd.torch.hook)

- A Horovod-style optimizer wrapper, whole model (the gTop-k paper's setting) or per layer, for
  any ``torch.optim`` optimizer and a model that is not wrapped in DDP::

      opt = sparsgd.torch.DistributedOptimizer(torch.optim.Adam(model.parameters()),
                                               model.named_parameters(), density=0.01)
      sparsgd.torch.broadcast_parameters(model.state_dict(), root_rank=0)

Each worker adds its residual to its gradient (error feedback; ``error_feedback=False`` drops it
instead), selects entries (a compressor: ``sparsgd.COMPRESSORS``, each described by
``sparsgd.describe()``), the workers aggregate the sparse gradients (an aggregator:
``sparsgd.AGGREGATORS``), and what did not get into the sum stays in the residual. The
result is the AVERAGE over the workers (the sum divided by the world size once). The work runs
in C++ (sparsgd._C) with the GIL released.
"""

import math

import torch
import torch.distributed as dist

from . import _C

__all__ = ["HookState", "hook", "DistributedOptimizer", "broadcast_parameters", "broadcast_optimizer_state"]

_STAT_KEYS = ("bytes_sent", "messages_sent", "selected", "compress_s", "aggregate_s", "aggregate_cpu_s",
              "feedback_s", "network_s")


def _options(compressor, aggregator, density, r_factor, seed, shared_seed, network, timeout_ms, on_nonfinite,
             error_feedback=True, index_coding="raw", auto_trials=2, threshold_period=32):
    """The exchange options, checked, with the CLI's names and defaults: their Python types here, their
    values and combinations by the C++ layer's one spec (collectives/exchange_options.hpp)."""
    if compressor not in _C.compressor_names():
        raise ValueError(f"sparsgd: unknown compressor {compressor!r}; one of {', '.join(_C.compressor_names())}")
    if aggregator not in _C.aggregator_names():
        raise ValueError(f"sparsgd: unknown aggregator {aggregator!r}; one of {', '.join(_C.aggregator_names())}")
    if isinstance(density, bool) or not isinstance(density, (int, float)) or not math.isfinite(density) \
            or not 0.0 < density <= 1.0:
        raise ValueError(f"sparsgd: density must be a number in (0, 1], got {density!r}")
    if isinstance(r_factor, bool) or not isinstance(r_factor, (int, float)) or not math.isfinite(r_factor) \
            or r_factor < 1.0:
        raise ValueError(f"sparsgd: r_factor must be a number >= 1, got {r_factor!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"sparsgd: seed must be an integer >= 0, got {seed!r}")
    if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int) or timeout_ms <= 0:
        raise ValueError(f"sparsgd: timeout_ms must be an integer > 0, got {timeout_ms!r}")
    if on_nonfinite not in ("stop", "skip"):
        raise ValueError(f"sparsgd: on_nonfinite must be 'stop' or 'skip', got {on_nonfinite!r}")
    if network is None:
        network = "none"
    if not isinstance(network, str):
        raise ValueError(f"sparsgd: network must be a string such as 'paper-1gbe', got {network!r}")
    if not isinstance(error_feedback, bool):
        raise ValueError(f"sparsgd: error_feedback must be True or False, got {error_feedback!r}")
    codings = _C.index_coding_names()
    if index_coding not in codings:
        raise ValueError(f"sparsgd: index_coding must be {' or '.join(repr(c) for c in codings)}, got {index_coding!r}")
    most = _C.max_auto_trials()
    if isinstance(auto_trials, bool) or not isinstance(auto_trials, int) or not 0 <= auto_trials <= most:
        raise ValueError(f"sparsgd: auto_trials must be an integer in [0, {most}], got {auto_trials!r}")
    if isinstance(threshold_period, bool) or not isinstance(threshold_period, int) or threshold_period < 1:
        raise ValueError(f"sparsgd: threshold_period must be an integer >= 1, got {threshold_period!r}")
    if shared_seed is None:
        shared_seed = _C.aggregator_properties(aggregator)["needs_shared_indices"]
    # The combinations (randk-shared with a compressor of shared indices, an unbiased compressor
    # without error feedback) are the C++ layer's rules: asked here, before any exchange.
    _C.validate_exchange(compressor, aggregator, float(density), float(r_factor), seed, bool(shared_seed),
                         error_feedback, index_coding, auto_trials, threshold_period)
    return {"compressor": compressor, "aggregator": aggregator, "density": float(density),
            "r_factor": float(r_factor), "seed": seed, "shared_seed": bool(shared_seed),
            "error_feedback": error_feedback, "index_coding": index_coding,
            "auto_trials": auto_trials, "threshold_period": threshold_period, "network": network,
            "timeout_ms": timeout_ms,
            "on_nonfinite": on_nonfinite}


_transports_made = {}


def _failure_store(group):
    """The group's c10d store and a prefix of this transport's own, where ranks record why they
    failed, so that a rank that lost a peer can name the rank that ended first. The n-th transport
    of a group has the same prefix on every rank (all ranks create them in the same order)."""
    c10d = dist.distributed_c10d
    try:  # torch 1.13 keeps them in _pg_map; later versions in _world.pg_map
        pg_map = c10d._world.pg_map if hasattr(c10d, "_world") else c10d._pg_map
        store = pg_map[group][1]
    except (AttributeError, KeyError, IndexError, TypeError):
        return ()
    if store is None:
        return ()
    count = _transports_made.get(id(group), 0) + 1
    _transports_made[id(group)] = count
    return (store, f"sparsgd/{count}")


def _transport(process_group, options):
    if not dist.is_available():
        raise RuntimeError("sparsgd: this torch has no torch.distributed")
    if not dist.is_initialized():
        raise RuntimeError("sparsgd: torch.distributed is not initialized: call "
                           "torch.distributed.init_process_group(...) first")
    group = process_group if process_group is not None else dist.distributed_c10d._get_default_group()
    if group is None or group == dist.GroupMember.NON_GROUP_MEMBER:
        raise ValueError("sparsgd: this rank is not a member of the process group")
    transport = _C.process_group_transport(group, options["timeout_ms"], *_failure_store(group))
    if options["network"] != "none":
        transport = _C.simulated_network(transport, options["network"])
    return transport


def _exchange_kwargs(options):
    return {k: options[k] for k in ("compressor", "aggregator", "density", "r_factor", "seed", "shared_seed",
                                    "error_feedback", "index_coding", "auto_trials", "threshold_period")}


def _agree(transport, options, what, extra=()):
    """Every rank must run with the same options: checked at once, failing on every rank."""
    fields = [(k, repr(v)) for k, v in options.items() if k != "timeout_ms"] + [(k, str(v)) for k, v in extra]
    transport.check_ranks_agree(fields, what)


class _StepTotals:
    """Statistics summed over a step's exchanges (buckets)."""

    def __init__(self):
        self.values = dict.fromkeys(_STAT_KEYS, 0)
        self.values.update(exchanges=0, skipped=False, skip_reason="")

    def add(self, stats):
        for key in _STAT_KEYS:
            self.values[key] += stats[key]
        self.values["exchanges"] += 1
        if stats["skipped"]:
            self.values["skipped"] = True
            self.values["skip_reason"] = self.values["skip_reason"] or stats["skip_reason"]


class _Bucket:
    def __init__(self, key, averager, size):
        self.key = key
        self.averager = averager
        self.output = torch.empty(size, dtype=torch.float32)


class HookState:
    """The state of the sparsgd DDP communication hook: options, the transport over the process
    group, one error-feedback residual per bucket, and per-step statistics.

    Keyword names are the CLI's: compressor (one of ``sparsgd.COMPRESSORS``), aggregator (one of
    ``sparsgd.AGGREGATORS``; ``sparsgd.describe()`` says what each does), density, r_factor (rtopk),
    seed, shared_seed (the compressors that draw their indices; default: on for an aggregator that
    needs shared indices), error_feedback (True: what did not get into the sum stays in the
    residual; False: it is dropped, as a compressor that scales its values requires), index_coding
    ('raw', or 'compressed': indices as packed gaps or a bitmap, about 13 bits an index instead of
    32 at density 0.001, for the aggregators that send indices; same results, fewer bytes, some CPU
    time), auto_trials (aggregator
    'auto': how often at least each plausible candidate is timed per bucket before it settles on the
    fastest, more where fewer candidates are plausible (two are timed 5 times each), the candidates
    it cannot tell apart then timed again within the same budget; 0:
    the closed forms' choice alone, untimed and reproducible), threshold_period (topk-reuse: the
    exact top-k every this many steps, one filter pass against its threshold between), network (none, 1gbe, 10gbe,
    paper-1gbe, alpha=S,bw=BITS: a network model whose clock gives ``network_s``, what the step's
    exchange would take on that network), timeout_ms (every wait; a silent or dead peer is an
    error naming it), on_nonfinite ('stop': a NaN or Inf gradient raises, naming the parameter;
    'skip': every rank zeroes that bucket and ``last_step['skipped']`` is True, so the training
    loop should not step). ``module`` (optional) names parameters in errors.

    momentum_correction (DGC, Lin et al. 2018): 0 (off), or the momentum m in (0, 1). Each worker
    then keeps its own velocity u = m u + g per bucket, error feedback accumulates u instead of the
    raw gradient, and what was sent and summed also leaves u (momentum factor masking). The hook
    returns the averaged velocity, so the optimizer must NOT add momentum again: step
    ``torch.optim.SGD(params, lr, momentum=0, weight_decay=...)``. With top-k at density 0.01 this
    is what keeps a one-epoch run within a point of dense SGD with momentum (docs/results/pytorch.md);
    without it, momentum acts on the sparse sum and stale residuals, and accuracy drops.

    Creating it is collective: every rank checks that all ranks passed the same options.
    ``last_step`` holds the statistics of the last complete step (bytes_sent, messages_sent,
    selected, compress_s, aggregate_s, network_s, exchanges, skipped).
    """

    def __init__(self, process_group=None, compressor="topk", aggregator="gtopk-rd", density=0.01, r_factor=4.0,
                 seed=0, shared_seed=None, network="none", timeout_ms=60000, on_nonfinite="stop", module=None,
                 momentum_correction=0.0, error_feedback=True, index_coding="raw", auto_trials=2, threshold_period=32):
        self.options = _options(compressor, aggregator, density, r_factor, seed, shared_seed, network, timeout_ms,
                                on_nonfinite, error_feedback, index_coding, auto_trials, threshold_period)
        if isinstance(momentum_correction, bool) or not isinstance(momentum_correction, (int, float)) \
                or not math.isfinite(momentum_correction) or not 0.0 <= momentum_correction < 1.0:
            raise ValueError(f"sparsgd: momentum_correction must be a number in [0, 1) (0: off), "
                             f"got {momentum_correction!r}")
        self.options["momentum_correction"] = float(momentum_correction)
        self.transport = _transport(process_group, self.options)
        self.rank = self.transport.rank
        self.world_size = self.transport.size
        _agree(self.transport, self.options, "the sparsgd DDP hook's options")
        self.iteration = 0
        self.last_step = None
        self._step = _StepTotals()
        self._buckets = {}
        self._spilled = {}  # parameter -> (residual, velocity), between a bucket rebuild and the new bucket
        self._names = {}
        if module is not None:
            self._names = {p.data_ptr(): name for name, p in module.named_parameters()}

    def _name(self, index, position, parameter):
        return self._names.get(parameter.data_ptr(), f"bucket {index} parameter {position}")

    def _bucket(self, index, parameters, size):
        key = tuple((p.data_ptr(), p.numel()) for p in parameters)
        if sum(n for _, n in key) != size:  # not one slice per parameter: keep the bucket whole
            key = ((("bucket", index), size),)
        bucket = self._buckets.get(index)
        if bucket is not None and bucket.key == key:
            return bucket
        # DDP rebuilds its buckets after the first iteration: the residuals (and the velocities of
        # momentum correction) follow their parameters.
        new = set(key)
        momentum = self.options["momentum_correction"]
        for i, old in list(self._buckets.items()):
            if i == index or new & set(old.key):
                residual = old.averager.residuals()[0]
                velocity = old.averager.local_velocity() if momentum else torch.zeros_like(residual)
                sizes = [n for _, n in old.key]
                for (k, n), r, v in zip(old.key, torch.split(residual, sizes), torch.split(velocity, sizes)):
                    self._spilled[(k, n)] = (r, v)
                del self._buckets[i]
        names = [self._name(index, i, p) for i, p in enumerate(parameters)] if len(key) == len(parameters) \
            else [f"bucket {index}"]
        averager = _C.FlatAverager(self.transport, [n for _, n in key], names,
                                   skip_nonfinite=self.options["on_nonfinite"] == "skip",
                                   momentum_correction=momentum, **_exchange_kwargs(self.options))
        if any(k in self._spilled for k in key):
            parts = [self._spilled.pop(k, (torch.zeros(k[1]), torch.zeros(k[1]))) for k in key]
            averager.set_residuals([torch.cat([r for r, _ in parts])])
            if momentum:
                averager.set_local_velocity(torch.cat([v for _, v in parts]))
        bucket = _Bucket(key, averager, size)
        self._buckets[index] = bucket
        return bucket

    def _average(self, index, buffer, parameters):
        if buffer.numel() == 0:
            return buffer
        flat = buffer.detach()
        if flat.device.type != "cpu" or flat.dtype != torch.float32 or not flat.is_contiguous():
            flat = flat.to("cpu", torch.float32).contiguous()
        bucket = self._bucket(index, parameters, flat.numel())
        stats = bucket.averager.average(flat, bucket.output, self.iteration,
                                        align_clocks=self._step.values["exchanges"] == 0)
        self._step.add(stats)
        if stats["skipped"]:
            bucket.output.zero_()
        out = bucket.output
        if out.device != buffer.device or out.dtype != buffer.dtype:
            return out.to(buffer.device, buffer.dtype)
        return out.clone()

    def _finish_step(self):
        self.last_step = self._step.values
        self._step = _StepTotals()
        self.iteration += 1

    def set_density(self, density):
        """From the next exchange on (a density warm-up)."""
        _options(self.options["compressor"], self.options["aggregator"], density, 4.0, 0, None, None, 1, "stop",
                 self.options["error_feedback"])
        self.options["density"] = float(density)
        for bucket in self._buckets.values():
            bucket.averager.set_density(float(density))

    def __getstate__(self):
        raise TypeError("sparsgd.torch.HookState holds a live transport and cannot be pickled")


def hook(state, bucket):
    """DDP communication hook: error feedback + compression + sparse aggregation of one bucket.
    Returns a completed Future holding the bucket's averaged gradient (DDP must not divide it again:
    it does not, with a hook)."""
    out = state._average(bucket.index(), bucket.buffer(), bucket.parameters())
    if bucket.is_last():
        state._finish_step()
    future = torch.futures.Future()
    future.set_result(out)
    return future


class DistributedOptimizer:
    """Wraps any ``torch.optim`` optimizer (Horovod's shape): ``step()`` first exchanges the
    gradients of the optimizer's parameters (error feedback, compression, sparse aggregation) and
    writes the AVERAGE into each ``.grad``, then steps the optimizer. For a model that is not
    wrapped in DDP. Call ``synchronize()`` yourself before ``step()`` to clip or inspect the
    averaged gradients.

    Options as for HookState, plus ``per_layer`` (one exchange, k per tensor, instead of one over
    the whole model). ``state_dict()`` includes the residuals and the iteration, so a run resumed
    from it continues exactly; ``load_state_dict`` refuses a state from another rank, world size or
    configuration. Creating it is collective and checks that all ranks agree on the options and the
    parameter count.
    """

    def __init__(self, optimizer, named_parameters=None, process_group=None, compressor="topk",
                 aggregator="gtopk-rd", density=0.01, r_factor=4.0, seed=0, shared_seed=None, per_layer=False,
                 network="none", timeout_ms=60000, on_nonfinite="stop", error_feedback=True, index_coding="raw",
                 auto_trials=2, threshold_period=32):
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise ValueError(f"sparsgd: DistributedOptimizer wraps a torch.optim.Optimizer, got {type(optimizer)}")
        self.optimizer = optimizer
        self.options = _options(compressor, aggregator, density, r_factor, seed, shared_seed, network, timeout_ms,
                                on_nonfinite, error_feedback, index_coding, auto_trials, threshold_period)
        self.options["per_layer"] = bool(per_layer)
        names = {}
        if named_parameters is not None:
            for name, p in named_parameters:
                names[id(p)] = name
        self._parameters = [p for group in optimizer.param_groups for p in group["params"] if p.requires_grad]
        if not self._parameters:
            raise ValueError("sparsgd: the optimizer has no parameters that require gradients")
        self._layout = self._current_layout()
        self.transport = _transport(process_group, self.options)
        self.rank = self.transport.rank
        self.world_size = self.transport.size
        _agree(self.transport, self.options, "the sparsgd DistributedOptimizer's options",
               [("parameter tensors", len(self._parameters)),
                ("parameter elements", sum(p.numel() for p in self._parameters))])
        self._sync = _C.ModelGradientAverager(
            self.transport, self._parameters, [names.get(id(p), f"parameter {i}") for i, p in enumerate(self._parameters)],
            per_layer=self.options["per_layer"], skip_nonfinite=on_nonfinite == "skip",
            **_exchange_kwargs(self.options))
        self.iteration = 0
        self.last_step = None
        self._synchronized = False

    def _current_layout(self):
        return [(p.data_ptr(), p.numel()) for p in self._parameters]

    def _check_parameters(self):
        now = [p for group in self.optimizer.param_groups for p in group["params"] if p.requires_grad]
        if len(now) != len(self._parameters) or any(a is not b for a, b in zip(now, self._parameters)):
            raise ValueError(f"sparsgd: the optimizer's parameters changed since DistributedOptimizer was created "
                             f"({len(self._parameters)} tensors then, {len(now)} now); create a new one")
        if self._current_layout() != self._layout:
            raise ValueError("sparsgd: a parameter was replaced or resized since DistributedOptimizer was created "
                             "(its storage or element count changed); create a new one")

    def synchronize(self):
        """Collective: the averaged gradients into every parameter's .grad; returns the statistics."""
        self._check_parameters()
        self.last_step = self._sync.synchronize(self.iteration)
        self._synchronized = True
        return self.last_step

    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        if not self._synchronized:
            self.synchronize()
        self._synchronized = False
        self.iteration += 1
        if self.last_step["skipped"]:
            return loss
        result = self.optimizer.step()
        return loss if closure is not None else result

    def zero_grad(self, set_to_none=False):
        self.optimizer.zero_grad(set_to_none=set_to_none)

    @property
    def param_groups(self):
        return self.optimizer.param_groups

    @property
    def state(self):
        return self.optimizer.state

    def set_density(self, density):
        """From the next step on (a density warm-up)."""
        _options(self.options["compressor"], self.options["aggregator"], density, 4.0, 0, None, None, 1, "stop",
                 self.options["error_feedback"])
        self.options["density"] = float(density)
        self._sync.set_density(float(density))

    def _identity(self):
        # How indices travel changes no result: a state saved with one coding resumes with the other;
        # nor does how auto settles change what the residuals mean.
        identity = {k: v for k, v in self.options.items()
                    if k not in ("timeout_ms", "network", "density", "index_coding", "auto_trials")}
        identity.update(rank=self.rank, world_size=self.world_size,
                        elements=[p.numel() for p in self._parameters])
        return identity

    def state_dict(self):
        return {"optimizer": self.optimizer.state_dict(),
                "sparsgd": {"identity": self._identity(), "iteration": self.iteration,
                            "density": self.options["density"], "residuals": self._sync.residuals()}}

    def load_state_dict(self, state_dict):
        if not isinstance(state_dict, dict) or "sparsgd" not in state_dict or "optimizer" not in state_dict:
            raise ValueError("sparsgd: not a DistributedOptimizer state_dict (no 'sparsgd' and 'optimizer' entries)")
        saved = state_dict["sparsgd"]
        mine = self._identity()
        for key, value in mine.items():
            if saved["identity"].get(key) != value:
                shown = "the parameter sizes" if key == "elements" else repr(saved["identity"].get(key))
                raise ValueError(f"sparsgd: this state_dict was saved with {key} = {shown}, but this optimizer has "
                                 f"{key} = {'other sizes' if key == 'elements' else repr(value)}: it belongs to another "
                                 f"rank, job or configuration")
        self.optimizer.load_state_dict(state_dict["optimizer"])
        self._sync.set_residuals(list(saved["residuals"]))
        self.iteration = int(saved["iteration"])
        self.set_density(saved["density"])

    def __repr__(self):
        return f"sparsgd.torch.DistributedOptimizer({self.optimizer!r}, {self.options})"


def _tensors(params):
    if isinstance(params, dict):
        return list(params.values())
    return [p[1] if isinstance(p, tuple) else p for p in params]


def broadcast_parameters(params, root_rank=0, process_group=None):
    """Copies the root rank's tensors to every rank, in place (a model.state_dict(),
    model.named_parameters() or a list of tensors), so that all workers start equal."""
    with torch.no_grad():
        for tensor in _tensors(params):
            dist.broadcast(tensor.data if isinstance(tensor, torch.nn.Parameter) else tensor, src=root_rank,
                           group=process_group)


def broadcast_optimizer_state(optimizer, root_rank=0, process_group=None):
    """Copies the root rank's optimizer state (a torch.optim optimizer, or the one a
    DistributedOptimizer wraps) to every rank."""
    if isinstance(optimizer, DistributedOptimizer):
        optimizer = optimizer.optimizer
    state = [optimizer.state_dict() if dist.get_rank() == root_rank else None]
    dist.broadcast_object_list(state, src=root_rank, group=process_group)
    if dist.get_rank() != root_rank:
        optimizer.load_state_dict(state[0])
