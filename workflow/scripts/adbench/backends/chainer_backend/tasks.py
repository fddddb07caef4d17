"""Chainer's tasks: one builder per task over a built model (define-by-run: each step
records its graph as it runs), and prepare."""

from __future__ import annotations

import chainer
import chainer.functions as F
import numpy as np

from adbench import spec
from adbench.backends import Prepared, no_sync
from adbench.backends.chainer_backend.device import ChainerDevice
from adbench.backends.chainer_backend.models import BUILDERS, LOSSES, Model
from adbench.clock import split_timer, whole_timer
from adbench.derivatives import loss_as_array


def backward_task(model: Model, loss_fn, batches, workload) -> Prepared:
    batch = lambda i: batches[i % len(batches)]  # noqa: E731
    retain = workload.task == "backward_retained"
    kept = []  # backward_retained: the last step's loss, and through it its graph

    def forward(i):
        x, aux = batch(i)
        return loss_fn(model.forward(x, aux), aux)

    def backward(loss):
        loss.backward()
        if retain:
            kept.append(loss)

    def run(i, clock):
        model.chain.cleargrads()  # outside the clock: each step starts with no .grad
        kept.clear()
        return split_timer(lambda: forward(i), backward, no_sync, clock)

    def derivatives(i):
        model.chain.cleargrads()
        loss = forward(i)
        loss.backward()
        return float(loss.array), model.canonical([p.grad for p in model.params])

    choices = {"backward": "loss.backward(), cleargrads() outside the clock"}
    if retain:
        choices["retained"] = ("Chainer keeps a graph while its output is referenced (no "
                               "retain_graph flag): the loss held after the step, released "
                               "outside the clock when the next step starts")
    return Prepared(run, derivatives, choices, release=kept.clear if retain else None)


def jacobian_rows_task(model: Model, loss_fn, batches, workload) -> Prepared:
    rows = min(workload.jacobian_rows, workload.spec.n_outputs)
    # Each example a leaf Variable; the one-hot rows as Variables, made once, outside the clock.
    examples = [(chainer.Variable(x), aux) for x, aux in batches]
    one_hot = [chainer.Variable(row) for row in np.eye(rows, dtype=batches[0][0].dtype)]
    input_shape = workload.spec.input_shape

    def forward(i):
        x, aux = examples[i % len(examples)]
        return x, F.reshape(model.forward(x, aux), (-1,))[:rows]

    def backward(state):
        x, out = state
        grads = [chainer.grad([out], [x], grad_outputs=[row])[0].array for row in one_hot]
        return np.stack(grads).reshape(rows, *input_shape)

    def run(i, clock):
        return split_timer(lambda: forward(i), backward, no_sync, clock)

    def derivatives(i):
        return float("nan"), [backward(forward(i))]

    return Prepared(run, derivatives, {
        "jacobian": "Python loop of chainer.grad([out], [x], grad_outputs=[one-hot row]) on "
                    "one graph (chainer.grad backpropagates only along paths to x)"})


def forward_task(model: Model, loss_fn, batches, workload) -> Prepared:
    """The loss alone (spec.FORWARD_TASK) under chainer.no_backprop_mode(): no creator
    functions are kept, so no graph is recorded for a backward.  numpy computes
    synchronously: the step is one call."""
    batch = lambda i: batches[i % len(batches)]  # noqa: E731
    dtype = batches[0][0].dtype.name  # the cell's dtype, as prepare made the batches

    def loss(i):
        x, aux = batch(i)
        with chainer.no_backprop_mode():
            return loss_fn(model.forward(x, aux), aux)

    def run(i, clock):
        return whole_timer(lambda: loss(i), no_sync, clock)

    def derivatives(i):
        return loss_as_array(float(loss(i).array), dtype)

    return Prepared(run, derivatives, {"forward": "loss_fn(model.forward(x, aux), aux) under "
                                       "chainer.no_backprop_mode() (no graph recorded)"})


TASK_BUILDERS = {
    "backward": backward_task,
    "backward_retained": backward_task,
    "jacobian_rows": jacobian_rows_task,
    spec.FORWARD_TASK: forward_task,
}


# ================================================================ prepare
def _batch(batch: dict, model_spec: spec.ModelSpec, dtype) -> tuple:
    """(x, aux) as numpy arrays: aux is h0 (rnn_cell) or the targets; integer labels int32,
    as Chainer's softmax_cross_entropy and CTC type checks ask."""
    aux = batch["h0"] if "h0" in batch else batch["y"]
    aux = aux.astype(np.int32) if aux.dtype.kind in "iu" else aux.astype(dtype)
    return np.ascontiguousarray(batch["x"], dtype=dtype), np.ascontiguousarray(aux)


def prepare(workload: spec.Workload, mode: str, device: str, dtype: str = "float32") -> Prepared:
    model_spec = workload.spec
    chainer.global_config.dtype = np.dtype(dtype)  # the links' parameters
    model = BUILDERS[model_spec.family](model_spec)
    model.load(spec.make_params(workload))
    # Inference mode for the whole process (batch norm's running statistics); set once here
    # rather than a using_config context inside every timed step.
    chainer.global_config.train = False
    batches = [_batch(b, model_spec, np.dtype(dtype)) for b in spec.make_batches(workload)]
    prepared = TASK_BUILDERS[workload.task](model, LOSSES[model_spec.loss], batches, workload)
    prepared.choices.update({
        "model": "chainer.links (Chain/ChainList) under define-by-run",
        "config": f"chainer.config.train=False, type_check={chainer.config.type_check} "
                  f"(Chainer's default), use_ideep={chainer.config.use_ideep!r}",
        "compile": "none (define-by-run: compile_s 0, no cache)",
        "dtype": dtype, **model.choices,
    })
    return prepared


# The device class backends.load makes this framework's Backend of (with CAPABILITIES,
# TASK_BUILDERS and prepare).
DEVICE = ChainerDevice
