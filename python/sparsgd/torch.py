"""sparsgd for PyTorch: sparse gradient exchange over torch.distributed.

Two ways in, both in a job that called ``torch.distributed.init_process_group`` (gloo, or NCCL: the
package then makes its own gloo group over the same ranks, collectively, when it is created):

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
in C++ (sparsgd._C) with the GIL released. Gradients on a GPU stay there: error feedback, the
selection and the average run on the device, and only the selected pairs cross to the host, where
the exchange runs (the device path; gradients on the CPU take the host engine).
"""

import math
import numbers
import queue
import threading
import warnings

import torch
import torch.distributed as dist

from . import _C

__all__ = ["HookState", "hook", "DistributedOptimizer", "broadcast_parameters", "broadcast_optimizer_state"]

_STAT_KEYS = ("bytes_sent", "messages_sent", "selected", "compress_s", "aggregate_s", "aggregate_cpu_s",
              "feedback_s", "network_s")


# The longest wait the transports take: a signed 32-bit count of milliseconds, the CLI's range; far
# larger ones would overflow the clock arithmetic of the waits.
_MAX_TIMEOUT_MS = 2**31 - 1


def _is_real(value):
    """A real number (numpy's scalars included), not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _is_integer(value):
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _options(compressor, aggregator, density, r_factor, seed, shared_seed, network, timeout_ms, on_nonfinite,
             error_feedback=True, index_coding="raw", auto_trials=2, threshold_period=32):
    """The exchange options, checked, with the CLI's names and defaults: their Python types here, their
    values and combinations by the C++ layer's one spec (collectives/exchange_options.hpp)."""
    if compressor not in _C.compressor_names():
        raise ValueError(f"sparsgd: unknown compressor {compressor!r}; one of {', '.join(_C.compressor_names())}")
    if aggregator not in _C.aggregator_names():
        raise ValueError(f"sparsgd: unknown aggregator {aggregator!r}; one of {', '.join(_C.aggregator_names())}")
    if not _is_real(density) or not math.isfinite(density) or not 0.0 < density <= 1.0:
        raise ValueError(f"sparsgd: density must be a number in (0, 1], got {density!r}")
    if not _is_real(r_factor) or not math.isfinite(r_factor) or r_factor < 1.0:
        raise ValueError(f"sparsgd: r_factor must be a number >= 1, got {r_factor!r}")
    if not _is_integer(seed) or not 0 <= seed < 2**64:
        raise ValueError(f"sparsgd: seed must be an integer in [0, 2**64), got {seed!r}")
    if not _is_integer(timeout_ms) or not 0 < timeout_ms <= _MAX_TIMEOUT_MS:
        raise ValueError(f"sparsgd: timeout_ms must be an integer in [1, {_MAX_TIMEOUT_MS}] (about 24 days), "
                         f"got {timeout_ms!r}")
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
    if not _is_integer(auto_trials) or not 0 <= auto_trials <= most:
        raise ValueError(f"sparsgd: auto_trials must be an integer in [0, {most}], got {auto_trials!r}")
    if not _is_integer(threshold_period) or not 1 <= threshold_period < 2**64:
        raise ValueError(f"sparsgd: threshold_period must be an integer >= 1, got {threshold_period!r}")
    if shared_seed is None:
        shared_seed = _C.aggregator_properties(aggregator)["needs_shared_indices"]
    # The combinations (randk-shared with a compressor of shared indices, an unbiased compressor
    # without error feedback) are the C++ layer's rules: asked here, before any exchange.
    _C.validate_exchange(compressor, aggregator, float(density), float(r_factor), seed, bool(shared_seed),
                         error_feedback, index_coding, auto_trials, threshold_period)
    return {"compressor": compressor, "aggregator": aggregator, "density": float(density),
            "r_factor": float(r_factor), "seed": int(seed), "shared_seed": bool(shared_seed),
            "error_feedback": error_feedback, "index_coding": index_coding,
            "auto_trials": int(auto_trials), "threshold_period": int(threshold_period), "network": network,
            "timeout_ms": int(timeout_ms),
            "on_nonfinite": on_nonfinite}


def _check_density(options, density):
    """A density for these options (a warm-up's, or a saved state's), by the same checks as at the start."""
    _options(options["compressor"], options["aggregator"], density, 4.0, 0, None, None, 1, "stop",
             options["error_feedback"])


def _checked_iteration(iteration, whose):
    if not _is_integer(iteration) or not 0 <= iteration < 2**63:
        raise ValueError(f"sparsgd: {whose} iteration must be an integer in [0, 2**63), got {iteration!r}")
    return iteration


def _note_restored_density(current, saved, whose):
    """A saved density is restored, as torch restores a saved learning rate (a density warm-up resumes
    where it was); said aloud when it is not the density this object had."""
    if float(saved) != float(current):
        warnings.warn(f"sparsgd: {whose}.load_state_dict restores the saved density {float(saved):g} (this object had "
                      f"{float(current):g}), as torch restores a saved learning rate; call set_density() after loading "
                      f"to change it", stacklevel=3)


def _state_identity(options, rank, world_size):
    """What a saved state must share with whoever loads it. How indices travel changes no result (a
    state saved with one coding resumes with the other), nor does how auto settles or which engine ran."""
    identity = {k: v for k, v in options.items()
                if k not in ("timeout_ms", "network", "density", "index_coding", "auto_trials", "engine")}
    identity.update(rank=rank, world_size=world_size)
    return identity


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


_gloo_groups = {}


def _exchange_group(group):
    """The group the exchange runs on: `group` if gloo serves it CPU tensors, else a gloo group over
    the same ranks, made once per group (collective: new_group needs every rank of the job, in the
    same order, as the constructors that call this are)."""
    backend = str(dist.get_backend(group)).lower()
    if backend == "gloo" or "cpu:gloo" in backend:
        return group
    made = _gloo_groups.get(id(group))
    if made is None:
        ranks = None if group == dist.distributed_c10d._get_default_group() else dist.get_process_group_ranks(group)
        made = _gloo_groups[id(group)] = (group, dist.new_group(ranks=ranks, backend="gloo"))
    return made[1]


_ENGINES = ("auto", "host", "device")


def _check_engine(engine):
    if engine not in _ENGINES:
        raise ValueError(f"sparsgd: engine must be one of {', '.join(repr(e) for e in _ENGINES)}, got {engine!r}")
    return engine


def _device_of(engine, device):
    """Where a buffer on `device` is averaged: None for the host engine, else the device's name."""
    if engine == "host":
        if device.type != "cpu":
            raise ValueError(f"sparsgd: engine='host' takes CPU gradients, not gradients on {device}")
        return None
    if engine == "device" or device.type != "cpu":
        return str(device)
    return None


def _exchange_dtype(dtype, what):
    """float32 is exchanged as it is; float16 and bfloat16 exactly widened to float32 and narrowed
    back; anything else (float64 would be rounded to float32 silently) is refused."""
    if dtype in (torch.float32, torch.float16, torch.bfloat16):
        return dtype
    raise TypeError(f"sparsgd: {what} has {dtype} gradients; sparsgd exchanges float32 (float16 and bfloat16 "
                    f"widened to it): train this model in float32, or leave these parameters out")


def _transport(process_group, options):
    if not dist.is_available():
        raise RuntimeError("sparsgd: this torch has no torch.distributed")
    if not dist.is_initialized():
        raise RuntimeError("sparsgd: torch.distributed is not initialized: call "
                           "torch.distributed.init_process_group(...) first")
    group = process_group if process_group is not None else dist.distributed_c10d._get_default_group()
    if group is None or group == dist.GroupMember.NON_GROUP_MEMBER:
        raise ValueError("sparsgd: this rank is not a member of the process group")
    group = _exchange_group(group)
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
    def __init__(self, key, averager, size, device):
        self.key = key
        self.averager = averager
        self.output = torch.empty(size, dtype=torch.float32, device=device)


class _Exchanger:
    """One thread that runs a HookState's exchanges in the order the hook submitted them (the same
    order on every rank, as DDP calls the hook), so that the autograd thread goes on computing the
    gradients of earlier layers meanwhile. On CUDA the work is ordered after the bucket's gradients
    by an event and runs on a side stream; the Future carries that stream's completion to DDP."""

    def __init__(self):
        self._queue = queue.Queue()
        self._failure = None
        self._thread = threading.Thread(target=self._run, name="sparsgd-exchange", daemon=True)
        self._thread.start()

    def submit(self, future, work, device):
        ready = None
        if device.type == "cuda":
            ready = torch.cuda.Event()
            ready.record(torch.cuda.current_stream(device))
        self._queue.put((future, work, device, ready))

    def _run(self):
        streams = {}
        while True:
            future, work, device, ready = self._queue.get()
            if self._failure is not None:
                future.set_exception(RuntimeError(f"sparsgd: an earlier exchange of this hook failed: {self._failure}"))
                continue
            try:
                if ready is not None:
                    stream = streams.setdefault(device, torch.cuda.Stream(device))
                    with torch.cuda.stream(stream):
                        stream.wait_event(ready)
                        future.set_result(work())
                else:
                    future.set_result(work())
            except BaseException as error:  # noqa: B902 - every failure goes to the Future DDP waits on
                self._failure = error
                future.set_exception(error)


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

    overlap (default True): the hook returns at once with a Future that a worker thread completes
    when the bucket's exchange is done, so that DDP's backward pass computes earlier layers'
    gradients meanwhile; the results are those of ``overlap=False``, which exchanges inside the hook.
    engine: 'auto' (gradients on a GPU on the device path, CPU gradients on the host engine), 'host',
    or 'device' (the device path for CPU gradients too: the same code a GPU runs). Gradients are
    float32, or float16/bfloat16 (exchanged as float32); float64 buckets are refused.

    Creating it is collective: every rank checks that all ranks passed the same options (in an
    NCCL job, it also makes the package's gloo group). ``last_step`` holds the statistics of the
    last complete step (bytes_sent, messages_sent, selected, compress_s, aggregate_s, network_s,
    exchanges, skipped).
    """

    def __init__(self, process_group=None, compressor="topk", aggregator="gtopk-rd", density=0.01, r_factor=4.0,
                 seed=0, shared_seed=None, network="none", timeout_ms=60000, on_nonfinite="stop", module=None,
                 momentum_correction=0.0, error_feedback=True, index_coding="raw", auto_trials=2, threshold_period=32,
                 overlap=True, engine="auto"):
        self.options = _options(compressor, aggregator, density, r_factor, seed, shared_seed, network, timeout_ms,
                                on_nonfinite, error_feedback, index_coding, auto_trials, threshold_period)
        self.options["momentum_correction"] = _momentum_correction(momentum_correction)
        if not isinstance(overlap, bool):
            raise ValueError(f"sparsgd: overlap must be True or False, got {overlap!r}")
        self.options["engine"] = _check_engine(engine)
        self.overlap = overlap
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
        self._module = module
        self._exchanger = None
        self._submitted_in_step = 0
        if module is not None:
            self._names = {p.data_ptr(): name for name, p in module.named_parameters()}

    def _name(self, index, position, parameter):
        return self._names.get(parameter.data_ptr(), f"bucket {index} parameter {position}")

    def _bucket(self, index, parameters, size, device):
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
                                   momentum_correction=momentum, device=_device_of(self.options["engine"], device),
                                   **_exchange_kwargs(self.options))
        if any(k in self._spilled for k in key):
            parts = [self._spilled.pop(k, None) or (torch.zeros(k[1], device=device), torch.zeros(k[1], device=device))
                     for k in key]
            averager.set_residuals([torch.cat([r.to(device) for r, _ in parts])])
            if momentum:
                averager.set_local_velocity(torch.cat([v.to(device) for _, v in parts]))
        bucket = _Bucket(key, averager, size, device)
        self._buckets[index] = bucket
        return bucket

    def _average(self, index, buffer, parameters, iteration, first):
        if buffer.numel() == 0:
            return buffer
        names = ", ".join(self._name(index, i, p) for i, p in enumerate(parameters[:3]))
        dtype = _exchange_dtype(buffer.dtype, f"DDP bucket {index} ({names}{', ...' if len(parameters) > 3 else ''})")
        flat = buffer.detach()
        if flat.dtype != torch.float32 or not flat.is_contiguous():
            flat = flat.to(torch.float32).contiguous()
        bucket = self._bucket(index, parameters, flat.numel(), flat.device)
        stats = bucket.averager.average(flat, bucket.output, iteration, align_clocks=first)
        self._step.add(stats)
        if stats["skipped"]:
            bucket.output.zero_()
        out = bucket.output
        return out.to(dtype) if dtype != torch.float32 else out.clone()

    def _finish_step(self):
        self.last_step = self._step.values
        self._step = _StepTotals()

    def _exchange(self, index, buffer, parameters, iteration, first, last):
        out = self._average(index, buffer, parameters, iteration, first)
        if last:
            self._finish_step()
        return out

    def submit(self, bucket):
        """What ``hook`` does: the bucket's exchange, submitted in call order; returns its Future."""
        index, buffer, parameters, last = bucket.index(), bucket.buffer(), bucket.parameters(), bucket.is_last()
        if buffer.is_sparse or any(p.grad is not None and p.grad.is_sparse for p in parameters):
            names = ", ".join(self._name(index, i, p) for i, p in enumerate(parameters))
            raise ValueError(f"sparsgd: DDP bucket {index} ({names}) holds sparse gradients (nn.Embedding(sparse=True)?); "
                             f"sparsgd exchanges dense gradients: build the layer with sparse=False")
        # The network model's clocks are aligned once a step, before its first exchange.
        iteration, first = self.iteration, self._submitted_in_step == 0
        self._submitted_in_step += 1
        if last:
            self.iteration += 1
            self._submitted_in_step = 0
        if not self.overlap:
            future = torch.futures.Future()
            future.set_result(self._exchange(index, buffer, parameters, iteration, first, last))
            return future
        if self._exchanger is None:
            self._exchanger = _Exchanger()
        future = torch.futures.Future(devices=[buffer.device] if buffer.device.type == "cuda" else None)
        self._exchanger.submit(future, lambda: self._exchange(index, buffer, parameters, iteration, first, last),
                               buffer.device)
        return future

    def set_density(self, density):
        """From the next exchange on (a density warm-up)."""
        _check_density(self.options, density)
        self.options["density"] = float(density)
        for bucket in self._buckets.values():
            bucket.averager.set_density(float(density))

    def _parameter_names(self, what):
        if self._module is None:
            raise ValueError(f"sparsgd: HookState.{what} needs the model: HookState(..., module=model) names the "
                             f"parameters its residuals and velocities are saved under")
        return {p.data_ptr(): (name, p) for name, p in self._module.named_parameters()}

    def _identity(self):
        return _state_identity(self.options, self.rank, self.world_size)

    def state_dict(self):
        """The hook's state, as an optimizer's: the residuals and momentum-correction velocities of
        every parameter (by the module's parameter names: the state survives a restart, whose buckets
        and storage differ), the step count and the density. Between steps; needs ``module``."""
        by_pointer = self._parameter_names("state_dict")
        saved = {}
        for (pointer, numel), (residual, velocity) in self._spilled.items():
            if pointer in by_pointer:
                saved[by_pointer[pointer][0]] = (residual.cpu(), velocity.cpu())
        momentum = self.options["momentum_correction"]
        for bucket in self._buckets.values():
            residual = bucket.averager.residuals()[0]
            velocity = bucket.averager.local_velocity() if momentum else torch.zeros_like(residual)
            sizes = [n for _, n in bucket.key]
            for (pointer, numel), r, v in zip(bucket.key, torch.split(residual, sizes), torch.split(velocity, sizes)):
                if pointer not in by_pointer:
                    raise ValueError("sparsgd: a DDP bucket is not one slice per parameter of the module; its state "
                                     "cannot be saved by parameter")
                saved[by_pointer[pointer][0]] = (r.cpu(), v.cpu())
        return {"identity": self._identity(), "iteration": self.iteration, "density": self.options["density"],
                "parameters": saved}

    def load_state_dict(self, state_dict):
        """Restores what state_dict() saved, before the first step of the resumed job (every rank its
        own). Everything is checked before anything changes: the options, rank and world size, and
        each saved parameter's name and size against the module."""
        by_pointer = self._parameter_names("load_state_dict")
        by_name = {name: p for name, p in self._module.named_parameters()}
        if not isinstance(state_dict, dict) or not isinstance(state_dict.get("identity"), dict) \
                or not isinstance(state_dict.get("parameters"), dict):
            raise ValueError("sparsgd: not a HookState state_dict (no 'identity' and 'parameters' entries)")
        for key, value in self._identity().items():
            if state_dict["identity"].get(key) != value:
                raise ValueError(f"sparsgd: this hook state was saved with {key} = {state_dict['identity'].get(key)!r}, "
                                 f"but this HookState has {key} = {value!r}: it belongs to another rank, job or "
                                 f"configuration")
        iteration = _checked_iteration(state_dict.get("iteration"), "the hook state's")
        density = state_dict.get("density")
        _check_density(self.options, density)
        restored = {}
        for name, entry in state_dict["parameters"].items():
            parameter = by_name.get(name)
            if parameter is None:
                raise ValueError(f"sparsgd: the hook state holds parameter '{name}', which the module does not have")
            if not (isinstance(entry, (tuple, list)) and len(entry) == 2 and all(
                    isinstance(t, torch.Tensor) and t.numel() == parameter.numel() for t in entry)):
                raise ValueError(f"sparsgd: the hook state of parameter '{name}' does not fit it "
                                 f"({parameter.numel()} values expected, a residual and a velocity)")
            restored[(parameter.data_ptr(), parameter.numel())] = tuple(t.detach().to(torch.float32) for t in entry)
        # Checked: now change. The buckets are made again at the next step, from the restored state.
        self._buckets.clear()
        self._spilled = {key: (r.to(by_pointer[key[0]][1].device), v.to(by_pointer[key[0]][1].device))
                         for key, (r, v) in restored.items()}
        self.iteration = int(iteration)
        _note_restored_density(self.options["density"], density, "HookState")
        self.options["density"] = float(density)

    def __getstate__(self):
        raise TypeError("sparsgd.torch.HookState holds a live transport and cannot be pickled")


def _momentum_correction(momentum_correction):
    if not _is_real(momentum_correction) or not math.isfinite(momentum_correction) \
            or not 0.0 <= momentum_correction < 1.0:
        raise ValueError(f"sparsgd: momentum_correction must be a number in [0, 1) (0: off), "
                         f"got {momentum_correction!r}")
    return float(momentum_correction)


def hook(state, bucket):
    """DDP communication hook: error feedback + compression + sparse aggregation of one bucket.
    Returns a Future of the bucket's averaged gradient (DDP must not divide it again: it does not,
    with a hook), completed by the state's exchange thread (``overlap=True``) or already complete."""
    return state.submit(bucket)


_wrapped_classes = {}


def _wrapped_class(optimizer_class):
    """DistributedOptimizer mixed into the wrapped optimizer's class (Horovod's shape), so that the
    object is an instance of both: LR schedulers, GradScaler and anything else that checks
    isinstance or reads param_groups and state takes it as the optimizer it wraps."""
    made = _wrapped_classes.get(optimizer_class)
    if made is None:
        made = _wrapped_classes[optimizer_class] = type(optimizer_class.__name__, (DistributedOptimizer, optimizer_class),
                                                        {"__module__": __name__})
    return made


class DistributedOptimizer(torch.optim.Optimizer):
    """Wraps any ``torch.optim`` optimizer (Horovod's shape): ``step()`` first exchanges the
    gradients of the optimizer's parameters (error feedback, compression, sparse aggregation) and
    writes the AVERAGE into each ``.grad``, then steps the optimizer. For a model that is not
    wrapped in DDP. Call ``synchronize()`` yourself before ``step()`` to clip or inspect the
    averaged gradients (then ``step()`` does not exchange again).

    The object is an instance of the wrapped optimizer's class too, sharing its parameter groups
    and state: LR schedulers, ``torch.cuda.amp.GradScaler`` (call ``synchronize()``, then
    ``scaler.unscale_(opt)`` and ``scaler.step(opt)``) and ``state_dict`` work on it as on the
    optimizer itself.

    Options as for HookState, plus ``per_layer`` (one exchange, k per tensor, instead of one over
    the whole model) and ``momentum_correction`` (DGC's: each worker's velocity is exchanged; the
    optimizer must then have no momentum of its own, which is checked). Gradients on a GPU stay
    there (the device path). A parameter whose gradient is None on every rank keeps None (the
    optimizer skips it, as it would without sparsgd) unless its residual carried something into
    the average; where some ranks have one, the others take part with zeros. Parameters are
    float32, float16 or bfloat16 on one device; sparse gradients are refused by name.
    ``state_dict()`` is the optimizer's, with the residuals, velocities and iteration under the key
    'sparsgd', so a run resumed from it continues exactly; ``load_state_dict`` checks everything
    before it changes anything, and refuses a state from another rank, world size or configuration.
    Creating it is collective and checks that all ranks agree on the options and the parameters'
    shapes.
    """

    def __new__(cls, optimizer=None, *args, **kwargs):
        if cls is DistributedOptimizer:
            if not isinstance(optimizer, torch.optim.Optimizer):
                raise ValueError(f"sparsgd: DistributedOptimizer wraps a torch.optim.Optimizer, got {type(optimizer)}")
            if isinstance(optimizer, DistributedOptimizer):
                raise ValueError("sparsgd: this optimizer is a DistributedOptimizer already")
            cls = _wrapped_class(type(optimizer))
        return object.__new__(cls)

    def __init__(self, optimizer, named_parameters=None, process_group=None, compressor="topk",
                 aggregator="gtopk-rd", density=0.01, r_factor=4.0, seed=0, shared_seed=None, per_layer=False,
                 network="none", timeout_ms=60000, on_nonfinite="stop", error_feedback=True, index_coding="raw",
                 auto_trials=2, threshold_period=32, momentum_correction=0.0, engine="auto"):
        options = _options(compressor, aggregator, density, r_factor, seed, shared_seed, network, timeout_ms,
                           on_nonfinite, error_feedback, index_coding, auto_trials, threshold_period)
        options["per_layer"] = bool(per_layer)
        options["momentum_correction"] = _momentum_correction(momentum_correction)
        options["engine"] = _check_engine(engine)
        if options["momentum_correction"] > 0:
            for group in optimizer.param_groups:
                if group.get("momentum", 0) or group.get("nesterov", False):
                    raise ValueError(f"sparsgd: momentum_correction replaces the optimizer's momentum, but a parameter "
                                     f"group has momentum={group.get('momentum')}: build the optimizer with momentum=0")
        names = {}
        if named_parameters is not None:
            for name, p in named_parameters:
                names[id(p)] = name
        parameters = [p for group in optimizer.param_groups for p in group["params"] if p.requires_grad]
        if not parameters:
            raise ValueError("sparsgd: the optimizer has no parameters that require gradients")
        self._names = [names.get(id(p), f"parameter {i}") for i, p in enumerate(parameters)]
        devices = {p.device for p in parameters}
        if len(devices) > 1:
            raise ValueError(f"sparsgd: the parameters are on several devices ({', '.join(sorted(map(str, devices)))}); "
                             f"DistributedOptimizer averages one device's")
        for name, p in zip(self._names, parameters):
            _exchange_dtype(p.dtype, f"parameter '{name}'")
        # The wrapped optimizer's groups (the same dicts), defaults and state: one optimizer, two names.
        torch.optim.Optimizer.__init__(self, optimizer.param_groups, optimizer.defaults)
        self.param_groups = optimizer.param_groups
        self.state = optimizer.state
        for key, value in vars(optimizer).items():
            self.__dict__.setdefault(key, value)
        self.optimizer = optimizer
        self.options = options
        self._parameters = parameters
        self._layout = self._current_layout()
        self.transport = _transport(process_group, self.options)
        self.rank = self.transport.rank
        self.world_size = self.transport.size
        _agree(self.transport, self.options, "the sparsgd DistributedOptimizer's options",
               [("parameter shapes", [tuple(p.shape) for p in parameters])])
        self._device = next(iter(devices))
        self._sync = _C.FlatAverager(self.transport, [p.numel() for p in parameters], self._names,
                                     skip_nonfinite=on_nonfinite == "skip",
                                     momentum_correction=options["momentum_correction"], per_segment=options["per_layer"],
                                     device=_device_of(options["engine"], self._device), **_exchange_kwargs(options))
        self._output = torch.empty(sum(p.numel() for p in parameters), dtype=torch.float32, device=self._device)
        self.iteration = 0
        self.last_step = None
        self._synchronized = False

    def _current_layout(self):
        return [(p.data_ptr(), p.numel()) for p in self._parameters]

    def _check_parameters(self):
        now = [p for group in self.param_groups for p in group["params"] if p.requires_grad]
        if len(now) != len(self._parameters) or any(a is not b for a, b in zip(now, self._parameters)):
            raise ValueError(f"sparsgd: the optimizer's parameters changed since DistributedOptimizer was created "
                             f"({len(self._parameters)} tensors then, {len(now)} now); create a new one")
        if self._current_layout() != self._layout:
            raise ValueError("sparsgd: a parameter was replaced or resized since DistributedOptimizer was created "
                             "(its storage or element count changed); create a new one")

    def synchronize(self):
        """Collective: the averaged gradients into every parameter's .grad; returns the statistics."""
        self._check_parameters()
        parts, has_gradient = [], []
        for name, p in zip(self._names, self._parameters):
            if p.grad is None:
                parts.append(torch.zeros(p.numel(), dtype=torch.float32, device=self._device))
                has_gradient.append(False)
                continue
            if p.grad.is_sparse:
                raise ValueError(f"sparsgd: parameter '{name}' has a sparse gradient (nn.Embedding(sparse=True)?), "
                                 f"which sparsgd does not exchange: use a dense gradient")
            parts.append(p.grad.detach().reshape(-1).to(torch.float32))
            has_gradient.append(True)
        # Which parameters have a gradient on some rank (one small collective): the others may keep None.
        somewhere = self.transport.any_rank(has_gradient)
        flat = torch.cat(parts)
        self.last_step = self._sync.average(flat, self._output, self.iteration)
        self._synchronized = True
        if self.last_step["skipped"]:
            return self.last_step
        with torch.no_grad():
            for p, average, anywhere in zip(self._parameters, torch.split(self._output, [p.numel() for p in self._parameters]),
                                            somewhere):
                if not anywhere and not average.any():
                    continue  # no rank had a gradient and nothing of the residual arrived: it stays None
                if p.grad is None:
                    p.grad = average.view_as(p).to(p.dtype).clone()
                else:
                    p.grad.copy_(average.view_as(p))
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
        result = super().step()
        return loss if closure is not None else result

    def set_density(self, density):
        """From the next step on (a density warm-up)."""
        _check_density(self.options, density)
        self.options["density"] = float(density)
        self._sync.set_density(float(density))

    def _identity(self):
        return dict(_state_identity(self.options, self.rank, self.world_size),
                    elements=[p.numel() for p in self._parameters])

    def state_dict(self):
        state = super().state_dict()
        state["sparsgd"] = {"identity": self._identity(), "iteration": self.iteration,
                            "density": self.options["density"],
                            "residuals": [r.cpu() for r in self._sync.residuals()],
                            "velocity": self._sync.local_velocity().cpu()}
        return state

    def load_state_dict(self, state_dict):
        if not isinstance(state_dict, dict) or not isinstance(state_dict.get("sparsgd"), dict):
            raise ValueError("sparsgd: not a DistributedOptimizer state_dict (no 'sparsgd' entry)")
        saved = state_dict["sparsgd"]
        optimizer_state = state_dict.get("optimizer", {k: v for k, v in state_dict.items() if k != "sparsgd"})
        mine = self._identity()
        identity = saved.get("identity")
        if not isinstance(identity, dict):
            raise ValueError("sparsgd: this state_dict's 'sparsgd' entry has no identity")
        for key, value in mine.items():
            if identity.get(key, None if key != "momentum_correction" else 0.0) != value:
                shown = "the parameter sizes" if key == "elements" else repr(identity.get(key))
                raise ValueError(f"sparsgd: this state_dict was saved with {key} = {shown}, but this optimizer has "
                                 f"{key} = {'other sizes' if key == 'elements' else repr(value)}: it belongs to another "
                                 f"rank, job or configuration")
        residuals = saved.get("residuals")
        current = self._sync.residuals()
        if not isinstance(residuals, (list, tuple)) or len(residuals) != len(current) or any(
                not isinstance(r, torch.Tensor) or r.numel() != c.numel() for r, c in zip(residuals, current)):
            raise ValueError(f"sparsgd: the state_dict's residuals do not fit this optimizer "
                             f"({len(current)} of {[c.numel() for c in current]} values expected)")
        velocity = saved.get("velocity", torch.zeros(0))
        if not isinstance(velocity, torch.Tensor) or velocity.numel() != self._sync.local_velocity().numel():
            raise ValueError("sparsgd: the state_dict's momentum-correction velocity does not fit this optimizer")
        iteration = _checked_iteration(saved.get("iteration"), "the state_dict's")
        density = saved.get("density")
        _check_density(self.options, density)
        # Everything checked: now change.
        super().load_state_dict(optimizer_state)
        self._sync.set_residuals([r.to(self._device) for r in residuals])
        if velocity.numel():
            self._sync.set_local_velocity(velocity.to(self._device))
        self.iteration = int(iteration)
        _note_restored_density(self.options["density"], density, "DistributedOptimizer")
        self.set_density(density)

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
    # A DistributedOptimizer's own optimizer state, without its residuals (each rank keeps its own).
    plain = super(DistributedOptimizer, optimizer) if isinstance(optimizer, DistributedOptimizer) else optimizer
    state = [plain.state_dict() if dist.get_rank() == root_rank else None]
    dist.broadcast_object_list(state, src=root_rank, group=process_group)
    if dist.get_rank() != root_rank:
        plain.load_state_dict(state[0])
