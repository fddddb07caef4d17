"""PyTorch's tasks: the modes' transforms (TorchScript, torch.compile and its caches), one
builder per task over WithLoss(model), the variable-length tasks' shape policies, prepare,
and the device class backends.load builds the Backend of."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import time
import warnings
from typing import Callable

import numpy as np
import torch
from torch import Tensor

from adbench import spec
from adbench.backends import Prepared
from adbench.backends.torch_backend.device import (TorchDevice, apply_cuda_numerics,
                                                   device_sync, torch_device)
from adbench.backends.torch_backend.models import (SequenceLoss, as_tensor, build,
                                                   inference_mode, to_canonical)
from adbench.clock import STUDY_CLOCK, split_timer, whole_timer
from adbench.derivatives import loss_as_array


# ================================================================ modes
MODE_CHOICES = {
    "eager": "torch.nn modules, define-by-run",
    "script": "torch.jit.script, in prepare (compile_s), of the module the task calls: "
              "WithLoss (model + loss) for loss tasks, the model for output Jacobians and "
              "for the study's protocol (its loss eager Python, as in its code)",
    "trace": "torch.jit.trace(check_trace=False), in prepare (compile_s), of the module the "
             "task calls on its first batch (WithLoss for loss tasks; the model on an input "
             "requiring grad for output Jacobians); check_trace=False because the check runs "
             "the traced graph, which would make the first timed call not the first",
    "compile": "torch.compile(backend='inductor', mode=None, dynamic=None, fullgraph=False): "
               "Dynamo + AOTAutograd + Inductor {kernels} kernels, compiled lazily in the "
               "first timed iteration (compile_s 0); a shorter last batch recompiles once "
               "with a dynamic batch dimension",
}


# The variable-length task with dynamic shapes ("dynamic") in compile mode.
DYNAMIC_COMPILE_CHOICE = (
    "torch.compile(backend='inductor', mode=None, dynamic=True, fullgraph=False): Dynamo + "
    "AOTAutograd + Inductor {kernels} kernels, compiled lazily in the first timed iteration "
    "(compile_s 0), sizes symbolic from the first compilation")

# What Inductor generates per device (MODE_CHOICES["compile"]).
INDUCTOR_KERNELS = {"cpu": "C++/OpenMP", "cuda": "Triton"}


def transform(module, mode: str, example: tuple) -> tuple[Callable, float, dict[str, str]]:
    """The module (or function) as `mode` runs it, the seconds of ahead-of-time work
    (compile_s), and notes for `choices`.

    Parameters stay shared with `module` (scripting, tracing and torch.compile do not copy
    them), so `binds` still names what is differentiated."""
    if mode == "eager":
        return module, 0.0, {}
    if mode == "compile":  # a wrapper: Dynamo traces and Inductor compiles at the first call
        return torch.compile(module, backend="inductor"), 0.0, {}
    notes = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", torch.jit.TracerWarning)
        start = time.perf_counter()
        if mode == "script":
            compiled = torch.jit.script(module)
        else:
            compiled = torch.jit.trace(module, example, check_trace=False)
        seconds = time.perf_counter() - start
    tracer = [w for w in caught if issubclass(w.category, torch.jit.TracerWarning)]
    if tracer:  # what the trace may have frozen (a Python value of a traced shape)
        notes["tracer_warnings"] = (f"{len(tracer)}, first: "
                                    f"{str(tracer[0].message).splitlines()[0][:200]}")
    return compiled, seconds, notes


def _jacrev(model, rows: int) -> Callable:
    """torch.func.jacrev of the model's first `rows` outputs w.r.t. its input."""
    def jacobian_of(x, aux):
        return torch.func.jacrev(lambda xx: model(xx, aux).reshape(-1)[:rows])(x)
    return jacobian_of


def _inductor_cache(threads: int) -> dict[str, str]:
    """A cold Inductor cache for this cell, under ADBENCH_CACHE_DIR/torch, removed at exit.

    TORCHINDUCTOR_CACHE_DIR is read at every compile, so it is set here, before the lazy
    compilation of the first timed iteration.  The in-process caches are emptied too, as
    Inductor's own fresh_cache() does (a fresh process per cell makes that a no-op in the
    pipeline; in a process running several cells, Inductor would otherwise reuse compiled
    kernels of identical source, and Dynamo would count earlier cells' recompiles)."""
    root = os.environ.get("ADBENCH_CACHE_DIR")
    base = os.path.join(root, "torch") if root else None
    if base:
        os.makedirs(base, exist_ok=True)
    path = tempfile.mkdtemp(prefix="inductor-", dir=base)
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = path
    import torch._dynamo
    import torch._inductor.config
    import torch._inductor.utils

    torch._dynamo.reset()
    torch._inductor.utils.clear_caches()
    # Inductor's compile workers: as many as the cell's threads (1: compiled in-process).
    torch._inductor.config.compile_threads = threads
    return {"inductor_cache": "cold: a fresh TORCHINDUCTOR_CACHE_DIR per cell under "
                              + ("ADBENCH_CACHE_DIR/torch" if base else "the system temp "
                                 "directory (ADBENCH_CACHE_DIR unset)")
                              + ", removed at exit",
            "inductor_precompiled_headers": _precompiled_headers(),
            "inductor_compile_threads": str(threads),
            "inductor_cpp_threads": f"{torch.get_num_threads()} (torch.get_num_threads() "
                                    "when the kernels are generated)"}


def _precompiled_headers() -> str:
    """Whether Inductor's precompiled C++ headers (for its CPU kernels) were there before this
    cell.  Torch keeps them in the temp directory whatever TORCHINDUCTOR_CACHE_DIR says, for
    every later process, and building them is part of the first compile (8 s of 20 here):
    run_cell.py gives each cell a temp directory of its own, so every cell builds them."""
    from torch._inductor import codecache, config

    if not config.cpp_cache_precompile_headers:
        return "off (TORCHINDUCTOR_CPP_CACHE_PRECOMPILE_HEADERS=0)"
    headers = codecache._HEADER_DIR  # {temp dir}/torchinductor_{user}/precompiled_headers
    if os.path.isdir(headers) and any(n.endswith(".gch") for n in os.listdir(headers)):
        return ("warm: built by an earlier process in the same temp directory (measure.py "
                "run without run_cell.py)")
    return "cold: none in the temp directory when the cell started; built by its first compile"


# What torch.compile leaves out of its graphs, per model family (torch._dynamo.explain).
COMPILE_NOTES = {
    "ctc": "aten._ctc_loss has a data-dependent output shape: Dynamo leaves the CTC loss out "
           "of the compiled graph and it runs eagerly",
    "lstm": "Dynamo does not trace nn.LSTM (torch._dynamo.config.allow_rnn=False, the "
            "default; True fails in backward on CPU's mkldnn_rnn_layer): a graph break, the "
            "LSTM runs eagerly and only what follows it is compiled",
}


# The same on a variable-length batch (the sequence tasks' choices["graph"]).
SEQUENCE_COMPILE_NOTES = {
    "lstm": "Dynamo does not trace nn.LSTM (torch._dynamo.config.allow_rnn=False, the "
            "default): LSTMNet.sequence, whose first op it is, runs eagerly as a whole (the "
            "LSTM, the gather at lengths - 1, the dense layer); only the loss is compiled, so "
            "no compiled graph has a time dimension (a new length retraces only the calling "
            "frame, whose guards saw x's shape)",
    "rnn_cell": "the cell's Python loop over range(T) is unrolled into one graph per length: "
                "Dynamo guards on T (dynamic=True or not), so every new length compiles anew",
}


class NoCompiledGraph(RuntimeError):
    """A compile cell's first call compiled no graph: Dynamo fell back to eager PyTorch."""


def _require_a_graph(prepared: Prepared, workload: spec.Workload) -> None:
    """Stop a compile cell whose first call compiled no graph at all (NoCompiledGraph: a
    failure, unless a run-time refusal of CAPABILITIES declares it for the cell).

    torch.compile falls back to eager without an error where Dynamo cannot trace (a graph
    break at the model's first op, jacrev over a graph break): such a cell would time eager
    PyTorch under the torch.compile label.  Dynamo's counters are read around the first
    call (run or derivatives), outside the clock."""
    from torch._dynamo.utils import counters

    checked = []

    def guarded(fn):
        def call(*args):
            if checked:
                return fn(*args)
            before = counters["aot_autograd"]["total"]
            seen = set(counters["unimplemented"]) | set(counters["graph_break"])
            result = fn(*args)
            checked.append(True)
            if counters["aot_autograd"]["total"] == before:
                reasons = [r for r in (*counters["unimplemented"], *counters["graph_break"])
                           if r not in seen]
                why = reasons[0].strip().splitlines()[0] if reasons else "no reason recorded"
                raise NoCompiledGraph(
                    f"torch.compile compiled no graph for {workload.model} {workload.task}: "
                    f"Dynamo fell back to eager PyTorch ({why})")
            return result
        return call

    prepared.run = guarded(prepared.run)
    prepared.derivatives = guarded(prepared.derivatives)


# ================================================================ tasks
def freeze(binds, workload) -> list:
    """The binds of the parameters the task trains (spec.ModelSpec.trained); the others
    get requires_grad=False, before any transform, so autograd records no derivative
    through them.  One torch parameter per spec parameter wherever a model has a frozen
    part (attention's packed in_proj, the exception, has none)."""
    trained = workload.spec.trained(workload.task)
    if len(trained) == len(workload.spec.params):
        return binds
    for i, (param, _, _) in enumerate(binds):
        if i not in trained:
            param.requires_grad_(False)
    return [binds[i] for i in trained]


class RetainedGraph:
    """backward_retained's last graph: backward(retain_graph=True) keeps its buffers, and the
    loss that reaches them is held after the step returns, until the next step starts
    (released there, outside the clock)."""

    def __init__(self):
        self.loss = None

    def backward(self, loss: Tensor) -> None:
        loss.backward(retain_graph=True)
        self.loss = loss

    def release(self) -> None:
        self.loss = None


def backward_task(net, binds, batches, workload, sync, mode) -> Prepared:
    binds = freeze(binds, workload)
    params = [p for p, _, _ in binds]
    batch = lambda i: batches[i % len(batches)]  # noqa: E731
    f, compile_s, notes = transform(net, mode, batch(0))
    retained = RetainedGraph() if workload.task == "backward_retained" else None
    backward = retained.backward if retained else Tensor.backward

    def clear():  # outside the clock: each step starts with no accumulated .grad
        for p in params:
            p.grad = None
        if retained:
            retained.release()

    def run(i, clock):
        clear()
        return split_timer(lambda: f(*batch(i)), backward, sync, clock)

    def derivatives(i):
        clear()
        loss = f(*batch(i))
        backward(loss)
        return float(loss.detach()), to_canonical(binds, [p.grad for p in params])

    return Prepared(run, derivatives, {**BACKWARD_CHOICES[workload.task], **notes}, compile_s,
                    release=retained.release if retained else None)


BACKWARD_CHOICES = {
    "backward": {"backward": "loss.backward(), .grad cleared outside the clock"},
    "backward_frozen": {"backward": "loss.backward(), .grad cleared outside the clock",
                        "frozen": "the frozen part's parameters requires_grad_(False) before "
                                  "the mode's transform: autograd records nothing through it"},
    "backward_retained": {"backward": "loss.backward(retain_graph=True), .grad cleared "
                                      "outside the clock",
                          "retained": "the step's loss (and through it its graph's saved "
                                      "tensors) held after the step, released outside the "
                                      "clock when the next step starts"},
}


def epoch_slicer(batches) -> Callable[[int], tuple[Tensor, Tensor]]:
    """The study's loop: the epoch's data as one array each (x, y), made once, outside the
    clock; iteration i slices its batch from them (a view), as the study's loop does."""
    x_epoch = torch.cat([x for x, _ in batches])
    y_epoch = torch.cat([y for _, y in batches])
    bounds = spec.epoch_bounds([len(x) for x, _ in batches])

    def batch(i):
        lo, hi = bounds[i % len(bounds)]
        return x_epoch[lo:hi], y_epoch[lo:hi]
    return batch


def study_task(net, binds, batches, workload, sync, mode) -> Prepared:
    """The study's protocol (spec.STUDY_PROTOCOL_TASK), 000 Fig. 1 as written: the batch
    sliced from the epoch, `pred_y = pmodel(x); loss = torch.norm(true_y - pred_y)`, then
    `loss.backward()`, .grad never cleared (the gradients accumulate over the epoch, as in
    its code); `pmodel` the model, scripted in script mode (the loss stays eager Python).
    STUDY_CLOCK read around the forward lines with the slicing (forward_s: the loop's
    Python overhead with them) and around `loss.backward()` (backward_s: what the study
    timed, in both its modes)."""
    params = [p for p, _, _ in binds]
    batch = epoch_slicer(batches)
    pmodel, compile_s, notes = transform(net.model, mode, batch(0))

    def forward(i):
        x, true_y = batch(i)
        pred_y = pmodel(x, true_y)  # our models take (x, aux); the MLP ignores aux
        return torch.norm(true_y - pred_y)

    def run(i, clock):  # the study's clock, not the harness's
        return split_timer(lambda: forward(i), Tensor.backward, sync, STUDY_CLOCK)

    def clear():
        for p in params:
            p.grad = None

    def derivatives(i):
        """One step of the study's lines from no .grad, outside the clock; .grad cleared
        again after, so the timed loop starts as the study's epoch does."""
        clear()
        loss = forward(i)
        loss.backward()
        grads = to_canonical(binds, [p.grad for p in params])
        clear()
        return float(loss.detach()), grads

    return Prepared(run, derivatives, {**STUDY_CHOICES, **notes}, compile_s)


STUDY_CHOICES = {
    "protocol": "the study's (000 Fig. 1): the epoch's data as one tensor, each batch sliced "
                "from it inside the loop; pred_y = pmodel(x); loss = torch.norm(true_y - "
                "pred_y); loss.backward(); no .grad cleared (the gradients accumulate over "
                "the epoch, as in its code)",
    "clock": "time.time() (the study's timing lines are not published): forward_s around "
             "the slicing and the forward lines, backward_s around loss.backward() (what "
             "the study timed), the device synchronised before each reading",
}


def _jacobian_inputs(batches, workload):
    """Each example as a leaf requiring grad; the rows' one-hot cotangents, made once."""
    examples = [(x.clone().requires_grad_(True), aux) for x, aux in batches]
    rows = workload.jacobian_rows
    eye = torch.eye(rows, dtype=examples[0][0].dtype, device=examples[0][0].device)
    return examples, rows, eye


def _as_jacobian(rows_of_grads: Tensor, workload) -> np.ndarray:
    return rows_of_grads.detach().cpu().numpy().reshape(workload.spec.jacobian_shape(
        workload.jacobian_rows))


def jacobian_rows_task(net, binds, batches, workload, sync, mode) -> Prepared:
    examples, rows, eye = _jacobian_inputs(batches, workload)
    model, compile_s, notes = transform(net.model, mode, examples[0])  # x requires grad
    example = lambda i: examples[i % len(examples)]  # noqa: E731

    def forward(i):
        x, aux = example(i)
        return x, model(x, aux).reshape(-1)[:rows]

    def row_by_row(x_out):
        x, out = x_out
        return torch.stack([torch.autograd.grad(out, x, eye[r], retain_graph=True)[0]
                            for r in range(rows)])

    def run(i, clock):
        return split_timer(lambda: forward(i), row_by_row, sync, clock)

    def derivatives(i):
        return float("nan"), [_as_jacobian(row_by_row(forward(i)), workload)]

    return Prepared(run, derivatives, {"jacobian": "Python loop of torch.autograd.grad, "
                                       "one-hot grad_outputs, retain_graph=True", **notes},
                    compile_s)


def jacobian_vectorized_task(net, binds, batches, workload, sync, mode) -> Prepared:
    examples, rows, _ = _jacobian_inputs(batches, workload)
    choices = {"jacobian": "torch.func.jacrev (vmap over vector-Jacobian products)"}
    if mode == "compile":
        # torch.func.jacrev over a compiled module runs eagerly: Dynamo captures no graph
        # under a functorch transform (torch 2.13: no graph, no error, no warning).  The
        # transform is compiled as a whole instead, as PyTorch advises (issue #128711).
        jacobian_of, compile_s, notes = transform(_jacrev(net.model, rows), mode, ())
        choices["jacobian"] = ("torch.compile(torch.func.jacrev(model)): the whole vectorised "
                               "Jacobian traced by Dynamo and compiled by Inductor (jacrev "
                               "over a compiled module would silently run eagerly)")
    else:
        model, compile_s, notes = transform(net.model, mode, examples[0])
        jacobian_of = _jacrev(model, rows)
    choices.update(notes)

    def jacobian(i):
        x, aux = examples[i % len(examples)]
        return jacobian_of(x.detach(), aux)

    def run(i, clock):
        return whole_timer(lambda: jacobian(i), sync, clock)

    def derivatives(i):
        return float("nan"), [_as_jacobian(jacobian(i), workload)]

    return Prepared(run, derivatives, choices, compile_s)


def loss_jacobian_task(net, binds, batches, workload, sync, mode) -> Prepared:
    params = [p for p, _, _ in binds]
    batch = lambda i: batches[i % len(batches)]  # noqa: E731
    f, compile_s, notes = transform(net, mode, batch(0))
    names = {id(p): n for n, p in f.named_parameters()}  # compile: "_orig_mod." prefixed

    def loss_function(i):
        args = batch(i)
        return lambda *values: torch.func.functional_call(
            f, {names[id(p)]: v for p, v in zip(params, values)}, args)

    def jacobian(i):
        return torch.autograd.functional.jacobian(loss_function(i), tuple(params))

    def run(i, clock):
        return whole_timer(lambda: jacobian(i), sync, clock)

    def derivatives(i):
        grads = jacobian(i)
        with torch.no_grad():  # the eager module: a compiled one would recompile for no_grad
            loss = float(net(*batch(i)))
        return loss, to_canonical(binds, list(grads))

    return Prepared(run, derivatives, {"jacobian": "torch.autograd.functional.jacobian "
                                       "(vectorize=False) of the loss via "
                                       "torch.func.functional_call", **notes}, compile_s)


def forward_task(net, binds, batches, workload, sync, mode) -> Prepared:
    """The loss alone (spec.FORWARD_TASK) under torch.no_grad(): autograd records nothing, as
    in a user's evaluation; the mode transforms WithLoss as for backward (torch.compile
    compiles its no-grad graph at the first call)."""
    batch = lambda i: batches[i % len(batches)]  # noqa: E731
    with torch.no_grad():  # a trace records the graph it is traced in
        f, compile_s, notes = transform(net, mode, batch(0))

    def loss(i):
        with torch.no_grad():
            return f(*batch(i))

    def run(i, clock):
        return whole_timer(lambda: loss(i), sync, clock)

    def derivatives(i):
        value = loss(i)
        return loss_as_array(float(value), str(value.dtype).removeprefix("torch."))

    return Prepared(run, derivatives, {"forward": "WithLoss(model) under torch.no_grad()",
                                       **notes}, compile_s)


# ================================================================ variable-length tasks
def _shape_policy(mode: str, strategy: str, family: str) -> str:
    """How the mode serves the batches' lengths (choices["shape_policy"])."""
    if mode == "eager":
        return "define-by-run: each batch runs at the steps it has, no shape to fix"
    if mode == "script":
        loop = ("the RNN cell's loop over range(T) a TorchScript loop" if family == "rnn_cell"
                else "nn.LSTM one aten::lstm op over the whole sequence")
        return (f"one torch.jit.script graph for every length ({loop}); the profiling "
                "executor's default shape specialisation, nothing set")
    if mode == "trace":
        if family == "rnn_cell":
            return (f"one torch.jit.trace of the loop unrolled over {spec.SEQUENCE_LENGTHS[1]} "
                    "steps, the length of every (padded) batch")
        return ("one torch.jit.trace on the first batch for every length: nn.LSTM is one "
                "aten::lstm op over the whole sequence, the gather reads the lengths input")
    if strategy == "dynamic":
        return ("torch.compile(dynamic=True): sizes symbolic from the first compilation, "
                "except those the code specialises on")
    return ("torch.compile(dynamic=None), the default: the first shape compiles static, a "
            "new one recompiles with the changed size symbolic (automatic dynamic) unless the "
            "code specialises on it")


def _sequence_shapes(workload: spec.Workload) -> str:
    """The batch lengths (time steps as the strategy pads them) of the cell's iterations."""
    steps = sorted({spec.padded_length(workload.sequence, workload.sequence_length(i))
                    for i in range(workload.total_iterations)})
    return (f"{len(steps)} distinct over {workload.total_iterations} iterations "
            f"(warm-up included): {', '.join(map(str, steps))}")


def _no_trace_count() -> None:
    """Prepared.traces where the mode exposes no count: TorchScript (script, trace) keeps
    its profiling executor's shape specialisations to itself."""
    return None


def _dynamo_frames() -> int:
    """Frames Dynamo has traced and compiled in this process (each recompilation counted,
    whether or not it produced a graph)."""
    from torch._dynamo.utils import counters

    return counters["frames"]["ok"]


def _recompile_limit_hits() -> int:
    """Times Dynamo gave up recompiling a frame at its recompile limit (cache_size_limit)."""
    from torch._dynamo.utils import counters

    return sum(n for reason, n in counters["unimplemented"].items()
               if "recompile limit" in reason.lower() or "cache size limit" in reason.lower())


def sequence_task(net, binds, batches, workload, sync, mode) -> Prepared:
    """A variable-length task: the backward step of SequenceLoss(model) on batches of the
    strategy's lengths (batch = (x, aux, lengths)), as backward_task times it."""
    strategy, family = workload.sequence, workload.spec.family
    binds = freeze(binds, workload)
    params = [p for p, _, _ in binds]
    module = SequenceLoss(net.model, net.loss)
    module.training = net.training  # not .eval(): on CUDA, cuDNN's LSTM stays in train mode
    batch = lambda i: batches[i % len(batches)]  # noqa: E731
    if mode == "compile" and strategy == "dynamic":  # lazily, at the first timed call
        f, compile_s, notes = torch.compile(module, backend="inductor", dynamic=True), 0.0, {}
    else:
        f, compile_s, notes = transform(module, mode, batch(0))
    choices = {"backward": "loss.backward(), .grad cleared outside the clock",
               "sequence_strategy": strategy,
               "sequence_shapes": _sequence_shapes(workload),
               "shape_policy": _shape_policy(mode, strategy, family),
               "sequence_model": SEQUENCE_MODELS[family], **notes}

    def clear():  # outside the clock: each step starts with no accumulated .grad
        for p in params:
            p.grad = None

    def run(i, clock):
        clear()
        return split_timer(lambda: f(*batch(i)), Tensor.backward, sync, clock)

    def derivatives(i):
        clear()
        loss = f(*batch(i))
        loss.backward()
        return float(loss.detach()), to_canonical(binds, [p.grad for p in params])

    traces = _no_trace_count  # script, trace
    if mode == "eager":
        traces = lambda: 0  # noqa: E731
    elif mode == "compile":
        # Past torch._dynamo.config.recompile_limit recompilations of a frame, Dynamo runs
        # it eagerly for every shape it has not compiled, without an error: PyTorch's
        # default behaviour, so the cell is timed, not refused (_require_a_graph still
        # refuses one whose first call compiled nothing); the fallback is recorded in the
        # choices when it happens (outside the clock), and `traces` stops growing there.
        from torch._dynamo import config as dynamo_config

        limit = dynamo_config.recompile_limit
        choices["recompile_limit"] = (
            f"torch._dynamo.config.recompile_limit={limit}: a frame compiled {limit} times "
            "runs eagerly for every shape it has not compiled (Dynamo's fallback, no error); "
            "choices['compile_fallback'] says whether and when that happened")
        frames, hits = _dynamo_frames(), _recompile_limit_hits()
        traces = lambda: _dynamo_frames() - frames  # noqa: E731
        timed = run

        def run(i, clock):
            sample = timed(i, clock)
            if "compile_fallback" not in choices and _recompile_limit_hits() > hits:
                choices["compile_fallback"] = (
                    f"recompile_limit hit at iteration {i} (a batch of "
                    f"{batch(i)[0].shape[1]} steps): from there a length not compiled "
                    "before ran eagerly, under the torch.compile label")
            return sample

    return Prepared(run, derivatives, choices, compile_s, traces)


# How each model reads a variable-length batch (choices["sequence_model"]).
SEQUENCE_MODELS = {
    "lstm": "nn.LSTM over the batch's T steps, each example's output gathered at lengths - 1, "
            "then the dense layer and the l2 loss",
    "rnn_cell": "the cell unrolled in a Python loop over the batch's T steps from h0, "
                "h = torch.where(t < lengths, h_new, h), loss sum(h)",
}


TASK_BUILDERS = {
    "backward": backward_task,
    "backward_frozen": backward_task,
    "backward_retained": backward_task,
    "jacobian_rows": jacobian_rows_task,
    "jacobian_vectorized": jacobian_vectorized_task,
    "loss_jacobian": loss_jacobian_task,
    spec.FORWARD_TASK: forward_task,
    spec.STUDY_PROTOCOL_TASK: study_task,
    **{task: sequence_task for task in spec.SEQUENCE_TASKS},
}


# ================================================================ prepare
def prepare(workload: spec.Workload, mode: str, device: str, dtype: str = "float32") -> Prepared:
    dev = torch_device(device)
    numerics = apply_cuda_numerics(spec.CUDA_NUMERICS) if device == "cuda" else {}
    sync = device_sync(device)
    tdtype = getattr(torch, dtype)
    net, binds = build(workload.spec, spec.make_params(workload), dev, tdtype)
    # Batches on the device up front: data transfer is not part of the timing.
    # A variable-length task's batches also carry each example's true length (int64).
    lengths = ("lengths",) if workload.sequence else ()
    batches = [tuple(as_tensor(b[k], dev, tdtype)
                     for k in ("x", "h0" if "h0" in b else "y", *lengths))
               for b in spec.make_batches(workload)]
    cache = _inductor_cache(torch.get_num_threads()) if mode == "compile" else {}
    notes = SEQUENCE_COMPILE_NOTES if workload.sequence else COMPILE_NOTES
    if mode == "compile" and workload.spec.family in notes:
        cache["graph"] = notes[workload.spec.family]
    task = TASK_BUILDERS[workload.task]
    prepared = task(net, binds, batches, workload, sync, mode)
    if mode == "compile":
        _require_a_graph(prepared, workload)
    model_choice = MODE_CHOICES[mode]
    if mode == "compile" and workload.sequence == "dynamic":
        model_choice = DYNAMIC_COMPILE_CHOICE
    prepared.choices.update({
        "model": model_choice.format(kernels=INDUCTOR_KERNELS[device]),
        "inference_mode": inference_mode(net, device),
        **cache, **numerics,
    })
    return prepared


# The device class backends.load makes this framework's Backend of (with CAPABILITIES,
# TASK_BUILDERS and prepare).
DEVICE = TorchDevice
