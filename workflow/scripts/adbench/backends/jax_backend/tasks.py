"""JAX's tasks: one builder per task over a model function and its loss (eager: the step's
halves timed apart where the task has two; jit: the whole step in one jax.jit), the
variable-length tasks' shape policy and trace counter, and prepare."""

from __future__ import annotations

import contextlib
import dataclasses
import os
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from adbench import spec
from adbench.backends import Prepared
from adbench.backends.jax_backend import DYNAMIC_TASK
from adbench.backends.jax_backend.device import (
    JaxDevice,
    apply_cuda_numerics,
    device_sync,
    jax_device,
    ready,
)
from adbench.backends.jax_backend.models import (
    FAMILIES,
    FAMILY_CHOICES,
    LOSSES,
    SEQUENCE_FAMILIES,
    Forward,
    sequence_loss,
)
from adbench.clock import split_timer, whole_timer
from adbench.derivatives import checked


# ================================================================ tasks
@dataclasses.dataclass
class Task:
    """One task: `forward(params, x, aux) -> state` and `derive(state)` for the split eager
    timing (None where the task is not separable); `step(params, x, aux)` the whole iteration
    (jitted in jit mode); `result(params, x, aux) -> (loss, {name: array} or [jacobian] or
    None)` for the derivative check (None: the forward task, which checks its loss)."""

    forward: Callable
    derive: Callable
    step: Callable
    result: Callable
    choices: dict[str, str]
    # The jax.jit-wrapped functions the step calls (jit mode): their compiled-entry counts
    # are its traces (Prepared.traces).
    jitted: tuple = ()


def backward_task(forward: Forward, loss: Callable, one_hot: list, jit: bool) -> Task:
    def loss_fn(params, x, aux):
        return loss(forward(params, x, aux), aux)

    def vjp_forward(params, x, aux):
        return jax.vjp(lambda p: loss_fn(p, x, aux), params)

    def vjp_backward(state):
        value, pullback = state
        return pullback(jnp.ones_like(value))

    step = jax.value_and_grad(loss_fn)
    step = jax.jit(step) if jit else step

    def result(params, x, aux):
        value, grads = step(params, x, aux)
        return float(value), grads

    choice = ("jax.jit(jax.value_and_grad(loss)) of the parameter dict" if jit else
              "forward: jax.vjp(loss, params) (runs the forward and linearises it); "
              "backward: the returned pullback at cotangent 1.0 (jax.grad's two halves)")
    return Task(vjp_forward, vjp_backward, step, result, {"backward": choice},
                jitted=(step,) if jit else ())


def backward_frozen_task(forward: Forward, loss: Callable, one_hot: list, jit: bool) -> Task:
    """backward w.r.t. the trainable parameters only: the step's parameters are the pair
    (trainable, frozen) (split_frozen) and jax.value_and_grad differentiates the first, so
    nothing is linearised through the frozen part (the frozen arrays are plain inputs)."""
    def loss_fn(trainable, frozen, x, aux):
        return loss(forward({**frozen, **trainable}, x, aux), aux)

    def vjp_forward(params, x, aux):
        trainable, frozen = params
        return jax.vjp(lambda p: loss_fn(p, frozen, x, aux), trainable)

    def vjp_backward(state):
        value, pullback = state
        return pullback(jnp.ones_like(value))

    grad = jax.value_and_grad(loss_fn)  # argnums=0: the trainable parameters
    grad = jax.jit(grad) if jit else grad

    def step(params, x, aux):
        return grad(*params, x, aux)

    def result(params, x, aux):
        value, grads = step(params, x, aux)
        return float(value), grads

    choice = ("jax.jit(jax.value_and_grad(loss)) w.r.t. the trainable parameters' dict, the "
              "frozen ones a second argument" if jit else
              "forward: jax.vjp(loss, trainable params) with the frozen ones closed over; "
              "backward: the pullback at cotangent 1.0")
    return Task(vjp_forward, vjp_backward, step, result, {"backward": choice})


def split_frozen(params: dict, workload: spec.Workload) -> tuple[dict, dict]:
    """(trainable, frozen) parameter dicts of a frozen task (spec.ModelSpec.trained)."""
    names = [p.name for p in workload.spec.params]
    trained = {names[i] for i in workload.spec.trained(workload.task)}
    return ({k: v for k, v in params.items() if k in trained},
            {k: v for k, v in params.items() if k not in trained})


def loss_jacobian_task(forward: Forward, loss: Callable, one_hot: list, jit: bool) -> Task:
    def loss_fn(params, x, aux):
        return loss(forward(params, x, aux), aux)

    step = jax.jacrev(loss_fn)  # w.r.t. the parameter dict: one row, the scalar loss
    step = jax.jit(step) if jit else step

    def result(params, x, aux):
        return float(loss_fn(params, x, aux)), step(params, x, aux)

    return Task(None, None, step, result,
                {"jacobian": "jax.jacrev(loss) w.r.t. the parameter dict (vmap of the "
                             "pullback over the one-row basis)"
                             + (", inside the jax.jit" if jit else "")})


def _outputs(forward: Forward, rows: int) -> Callable:
    """The first `rows` entries of one example's flattened output (canonical order)."""
    return lambda params, x, aux: forward(params, x, aux).reshape(-1)[:rows]


def jacobian_rows_task(forward: Forward, loss: Callable, one_hot: list, jit: bool) -> Task:
    outputs = _outputs(forward, len(one_hot))

    def vjp_forward(params, x, aux):
        return jax.vjp(lambda xx: outputs(params, xx, aux), x)

    def rows_of(pullback, cotangents):
        return jnp.stack([pullback(e)[0] for e in cotangents])  # (rows, 1, *input)

    def vjp_backward(state):
        _, pullback = state
        return rows_of(pullback, one_hot)

    def whole(params, x, aux, cotangents):
        _, pullback = jax.vjp(lambda xx: outputs(params, xx, aux), x)
        return rows_of(pullback, cotangents)

    whole = jax.jit(whole) if jit else whole
    return Task(vjp_forward, vjp_backward, lambda *a: whole(*a, one_hot),
                lambda *a: (float("nan"), whole(*a, one_hot)), {
        "jacobian": "one pullback from jax.vjp, called with each one-hot cotangent in a "
                    "Python loop, rows stacked" + (" (unrolled at trace time into one XLA "
                                                   "program)" if jit else "")})


def jacobian_vectorized_task(forward: Forward, loss: Callable, one_hot: list, jit: bool) -> Task:
    outputs = _outputs(forward, len(one_hot))

    def jacobian(params, x, aux):
        return jax.jacrev(lambda xx: outputs(params, xx, aux))(x)  # (rows, 1, *input)

    step = jax.jit(jacobian) if jit else jacobian
    return Task(None, None, step, lambda *a: (float("nan"), step(*a)),
                {"jacobian": "jax.jacrev w.r.t. the input (vmap of the pullback over the "
                             "one-hot basis)" + (", inside the jax.jit" if jit else "")})


def forward_task(forward: Forward, loss: Callable, one_hot: list, jit: bool) -> Task:
    """The loss alone (spec.FORWARD_TASK): no jax.vjp or jax.grad, so nothing is linearised
    or kept for a derivative; jit mode jax.jits the loss function itself, eager calls it
    under jax.disable_jit() (prepare's context), as the backward step."""
    def loss_fn(params, x, aux):
        return loss(forward(params, x, aux), aux)

    step = jax.jit(loss_fn) if jit else loss_fn

    def result(params, x, aux):
        return float(step(params, x, aux)), None  # no derivative: the loss is checked

    choice = ("jax.jit(loss) of the parameter dict: the forward and the loss, no jax.vjp "
              "or jax.grad" if jit else
              "loss(params, x, aux) called under jax.disable_jit(), no jax.vjp or jax.grad: "
              "nothing linearised")
    return Task(None, None, step, result, {"forward": choice}, jitted=(step,) if jit else ())


TASK_BUILDERS = {"backward": backward_task, "backward_frozen": backward_frozen_task,
                 "loss_jacobian": loss_jacobian_task,
                 "jacobian_rows": jacobian_rows_task,
                 "jacobian_vectorized": jacobian_vectorized_task,
                 spec.FORWARD_TASK: forward_task,
                 # The variable-length tasks: the backward step of the sequence model
                 # (SEQUENCE_FAMILIES), on batches shaped by the task's strategy (the dynamic
                 # one refused: CAPABILITIES).
                 **{task: backward_task for task in spec.SEQUENCE_TASKS
                    if task != DYNAMIC_TASK}}


# ================================================================ variable lengths
# What each mode does with the batches of each strategy (spec.SEQUENCE_STRATEGIES): the cell's
# `shape_policy` choice.  "dynamic" is refused in both modes (CAPABILITIES).
SHAPE_POLICY = {
    "eager": "op by op at whatever length the batch has: no trace or compilation of the "
             "step (Prepared.traces 0); XLA's op-by-op executables are cached per primitive "
             "and shape, and most of them (one time step's) do not depend on the length",
    "jit": {
        "true": "jax.jit as it behaves by default: its compilations are specialised to "
                "the arguments' shapes, so every new length is traced and compiled once "
                "more (and cached: a length seen before reuses its executable)",
        "padded": "jax.jit of one shape, the maximum length: one trace and compilation "
                  "for the whole epoch, every step computing all the padded steps",
        "bucketed": "jax.jit of one shape per bucket: a trace and compilation per bucket "
                    "reached, every step computing up to its bucket's length",
    },
}


def trace_counter(task: Task, jit: bool) -> Callable[[], int | None]:
    """The step's traces/compilations so far: the compiled entries of the jax.jit-wrapped
    functions it calls (their cache size: one per new argument shape), 0 in eager mode
    (nothing is traced into a compiled step); None where this JAX has no cache size."""
    if not jit:
        return lambda: 0

    def count():
        sizes = [getattr(f, "_cache_size", None) for f in task.jitted]
        if not sizes or any(size is None for size in sizes):
            return None
        return sum(size() for size in sizes)

    return count


# ================================================================ prepare
MODE_CHOICES = {
    "eager": {"execution": "no jax.jit; every call under jax.disable_jit(), so jnp "
                           "functions JAX writes with an internal jit and lax.scan bodies "
                           "also run primitive by primitive; XLA still compiles each "
                           "primitive once per shape and dtype (JAX's op-by-op dispatch, "
                           "cached in the process), paid in the first iterations"},
    "jit": {"execution": "jax.jit of the whole step (forward and derivative; the forward "
                         "task's loss alone), traced and "
                         "compiled by XLA at its first call, the first timed iteration "
                         "(compile_s 0); a shorter last batch of an epoch compiles once "
                         "more"},
}


def _device_batch(batch: dict[str, np.ndarray], dev, dtype) -> tuple:
    """(x, aux) on the device; labels and lengths int32 (JAX's default integer width); a
    variable-length task's aux is the pair (aux, lengths)."""
    def put(array):
        array = array.astype(np.int32 if array.dtype.kind in "iu" else dtype)
        return jax.device_put(array, dev)

    aux = put(batch["h0"] if "h0" in batch else batch["y"])
    if "lengths" in batch:
        aux = (aux, put(batch["lengths"]))
    return put(batch["x"]), aux


def device_arrays(workload: spec.Workload, dev, dtype: str) -> tuple[dict, list, list]:
    """The parameters (a dict by spec name), the batches and jacobian_rows' one-hot
    cotangents, on the device once, outside the clock, and ready."""
    model_spec = workload.spec
    params = {p.name: jax.device_put(a.astype(dtype), dev)
              for p, a in zip(model_spec.params, spec.make_params(workload), strict=True)}
    batches = [_device_batch(b, dev, dtype) for b in spec.make_batches(workload)]
    rows = min(workload.jacobian_rows, model_spec.n_outputs)
    one_hot = [jax.device_put(e, dev) for e in np.eye(rows, dtype=dtype)]
    ready((params, batches, one_hot))
    return params, batches, one_hot


def model_and_loss(workload: spec.Workload) -> tuple[Forward, Callable]:
    """The model's function and loss; on sequences, their masked forms."""
    model_spec = workload.spec
    if workload.sequence is None:
        return FAMILIES[model_spec.family](model_spec), LOSSES[model_spec.loss]
    return (SEQUENCE_FAMILIES[model_spec.family](model_spec),
            sequence_loss(LOSSES[model_spec.loss]))


def prepare(workload: spec.Workload, mode: str, device: str,
            dtype: str = "float32") -> Prepared:
    if dtype == "float64":  # process-wide; the harness never asks for it
        jax.config.update("jax_enable_x64", True)
    model_spec = workload.spec
    dev = jax_device(device)
    numerics = apply_cuda_numerics(spec.CUDA_NUMERICS) if device == "cuda" else {}
    sync = device_sync(device)
    params, batches, one_hot = device_arrays(workload, dev, dtype)
    rows = len(one_hot)
    jit = mode == "jit"
    trained = [model_spec.params[i].name for i in workload.spec.trained(workload.task)]
    differentiated = split_frozen(params, workload) if spec.TASKS[workload.task].frozen \
        else params
    task = TASK_BUILDERS[workload.task](*model_and_loss(workload), one_hot, jit)
    context = contextlib.nullcontext if jit else jax.disable_jit
    split = "forward_s" in spec.timed_quantities("jax", mode, workload.task)
    batch = lambda i: batches[i % len(batches)]  # noqa: E731

    def run(i, clock):
        x, aux = batch(i)
        with context():
            if split:
                return split_timer(lambda: sync.hold(task.forward(differentiated, x, aux)),
                                   lambda state: sync.hold(task.derive(state)), sync, clock)
            return whole_timer(lambda: sync.hold(task.step(differentiated, x, aux)), sync,
                               clock)

    def canonical(wrt: str, arrays) -> list[np.ndarray]:
        """The result's derivatives as numpy: the input Jacobian (one array) in the spec's
        shape, or the differentiated parameters' dict in the spec's order
        (derivatives.Kind.wrt)."""
        if wrt == "input":
            return [np.asarray(arrays, dtype=dtype).reshape(model_spec.jacobian_shape(rows))]
        return [np.asarray(arrays[name], dtype=dtype) for name in trained]

    def derivatives(i):
        with context():
            loss, arrays = task.result(differentiated, *batch(i))
        return checked(spec.TASKS[workload.task].derivative, loss, arrays, dtype, canonical)

    choices = {
        "model": "plain jax.numpy / jax.lax functions of a parameter dict (no flax/optax), "
                 "canonical layouts, no conversion",
        **MODE_CHOICES[mode], **task.choices,
        # A sequence cell's model code is in sequence_choices instead.
        **(FAMILY_CHOICES.get(model_spec.family, {}) if workload.sequence is None else {}),
        "sync": "jax.block_until_ready, before each clock read, on the result of the call "
                "just timed (a vjp's pullback with its residuals included)",
        "compile_cache": "cold: no persistent compilation cache "
                         "(jax_enable_compilation_cache=False), in-process caches only",
        "threads": f"PJRT_NPROC={os.environ.get('PJRT_NPROC', 'unset')}, XLA_FLAGS="
                   f"{os.environ.get('XLA_FLAGS', '')!r}",
        "dtype": dtype, **numerics,
    }
    traces = None  # fixed-shape tasks: no counter (schema: null there)
    if workload.sequence is not None:
        choices.update(sequence_choices(workload, mode))
        traces = trace_counter(task, jit)
    return Prepared(run=run, derivatives=derivatives, choices=choices, traces=traces)


def sequence_choices(workload: spec.Workload, mode: str) -> dict[str, str]:
    """A variable-length cell's strategy, its shape policy in this mode, and the model code
    on sequences."""
    strategy = workload.sequence
    policy = SHAPE_POLICY[mode]
    model = {
        "lstm": "lax.scan of the LSTM cell over every step of x (padded steps included), "
                "each example's h gathered at lengths - 1 with jnp.take_along_axis, then "
                "the dense layer and the l2 loss",
        "rnn_cell": "lax.scan of the cell over every step of x from h0 (JAX's loop: one "
                    "compiled body whatever the length; a Python loop under jax.jit would "
                    "unroll every step into the program), h = jnp.where(t < lengths, "
                    "h_new, h), the same code for every strategy; loss sum(h)",
    }[workload.spec.family]
    return {"sequence": strategy,
            "shape_policy": policy if isinstance(policy, str) else policy[strategy],
            "sequence_model": model + (" (the scans run as Python loops under "
                                       "disable_jit)" if mode == "eager" else "")}


# The device class backends.load makes this framework's Backend of (with CAPABILITIES,
# TASK_BUILDERS and prepare).
DEVICE = JaxDevice
