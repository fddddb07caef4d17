"""autograd's tasks: one builder per task over a model function and its loss, and prepare."""

from __future__ import annotations

from typing import Callable

import autograd
import autograd.numpy as np
import numpy as onp
from autograd import make_vjp
from autograd.extend import vspace

from adbench import spec
from adbench.backends import Prepared, no_sync
from adbench.backends.autograd_backend.device import AutogradDevice
from adbench.backends.autograd_backend.models import FAMILIES, FAMILY_CHOICES, LOSSES
from adbench.clock import split_timer, whole_timer
from adbench.derivatives import loss_as_array


# ================================================================ tasks
def _aux_batch(batch: dict, x) -> dict:
    return {**batch, "x": x}


def vjp_task(loss_of, differentiated, batches, note: str) -> Prepared:
    """The backward step as autograd.grad runs it: make_vjp(loss_of)(differentiated, batch)
    traces the forward (timed as forward), then the returned vjp of ones (as backward)."""
    batch = lambda i: batches[i % len(batches)]  # noqa: E731

    def forward(i):  # runs the model under autograd's tracer: builds the tape
        return make_vjp(loss_of)(differentiated, batch(i))

    def backward(state):  # what autograd.grad does after its forward: vjp of ones
        vjp, loss = state
        return vjp(vspace(loss).ones())

    def run(i, clock):
        return split_timer(lambda: forward(i), backward, no_sync, clock)

    def derivatives(i):
        state = forward(i)
        return float(state[1]), list(backward(state))

    return Prepared(run, derivatives, {"backward": note})


def backward_task(model_fn, loss_fn, params, batches, workload) -> Prepared:
    def loss_of(p, batch):
        return loss_fn(model_fn(p, batch), batch)

    return vjp_task(loss_of, params, batches,
                    "make_vjp(loss)(params, batch) traces the forward (timed as forward), then "
                    "the returned vjp of ones (timed as backward): autograd.grad is exactly "
                    "these two calls")


def backward_frozen_task(model_fn, loss_fn, params, batches, workload) -> Prepared:
    """backward w.r.t. the trainable parameters only: make_vjp of a function of those, the
    frozen ones plain arrays of its closure (autograd traces nothing through them)."""
    trained = workload.spec.trained(workload.task)

    def loss_of(trainable, batch):
        every = list(params)
        for k, i in enumerate(trained):
            every[i] = trainable[k]
        return loss_fn(model_fn(every, batch), batch)

    return vjp_task(loss_of, [params[i] for i in trained], batches,
                    "make_vjp of the loss as a function of the trainable parameters (the "
                    "frozen ones closed over: constants to autograd's tracer), then its vjp "
                    "of ones")


def jacobian_rows_task(model_fn, loss_fn, params, batches, workload) -> Prepared:
    rows = min(workload.jacobian_rows, workload.spec.n_outputs)
    one_hot = list(onp.eye(rows, dtype=batches[0]["x"].dtype))  # made once, outside the clock
    input_shape = workload.spec.input_shape

    def outputs(x, batch):
        return np.reshape(model_fn(params, _aux_batch(batch, x)), (-1,))[:rows]

    batch = lambda i: batches[i % len(batches)]  # noqa: E731

    def forward(i):
        b = batch(i)
        return make_vjp(outputs)(b["x"], b)

    def backward(state):
        vjp, _ = state
        return onp.stack([vjp(row) for row in one_hot]).reshape(rows, *input_shape)

    def run(i, clock):
        return split_timer(lambda: forward(i), backward, no_sync, clock)

    def derivatives(i):
        return float("nan"), [backward(forward(i))]

    return Prepared(run, derivatives, {
        "jacobian": "one make_vjp of the output rows w.r.t. the example (forward), then its "
                    "vjp called with each one-hot row in a Python loop (backward)"})


def jacobian_vectorized_task(model_fn, loss_fn, params, batches, workload) -> Prepared:
    rows = min(workload.jacobian_rows, workload.spec.n_outputs)

    def outputs(x, batch):
        return np.reshape(model_fn(params, _aux_batch(batch, x)), (-1,))[:rows]

    jacobian = autograd.jacobian(outputs)
    batch = lambda i: batches[i % len(batches)]  # noqa: E731

    def step(i):
        b = batch(i)
        return jacobian(b["x"], b)

    def run(i, clock):
        return whole_timer(lambda: step(i), no_sync, clock)

    def derivatives(i):
        return float("nan"), [step(i).reshape(rows, *workload.spec.input_shape)]

    return Prepared(run, derivatives, {
        "jacobian": "autograd.jacobian: one make_vjp, then a Python loop (map) of its vjp over "
                    "the output's standard basis; autograd has no vectorised Jacobian, so this "
                    "is jacobian_rows inside one library call"})


def loss_jacobian_task(model_fn, loss_fn, params, batches, workload) -> Prepared:
    shapes = [p.shape for p in params]
    bounds = onp.cumsum([0] + [p.size for p in params])
    flat = onp.concatenate([p.ravel() for p in params])  # made once, outside the clock

    def loss_of_flat(vector, batch):
        # np.split, not slices: a slice's VJP scatters with np.add.at (about 100x slower
        # than an add; 0.6 s over ResNet50's 25M parameters), split's concatenates.
        pieces = np.split(vector, [int(s) for s in bounds[1:-1]])
        unflat = [np.reshape(pieces[k], shape) for k, shape in enumerate(shapes)]
        return loss_fn(model_fn(unflat, batch), batch)

    jacobian = autograd.jacobian(loss_of_flat)
    batch = lambda i: batches[i % len(batches)]  # noqa: E731

    def run(i, clock):
        return whole_timer(lambda: jacobian(flat, batch(i)), no_sync, clock)

    def derivatives(i):
        b = batch(i)
        loss = float(loss_of_flat(flat, b))
        vector = jacobian(flat, b)
        return loss, [vector[a:b_].reshape(shape)
                      for a, b_, shape in zip(bounds[:-1], bounds[1:], shapes)]

    return Prepared(run, derivatives, {
        "jacobian": "autograd.jacobian of the loss w.r.t. one flat float32 vector of every "
                    "parameter (autograd.jacobian takes one array, not a list), np.split "
                    "and reshaped into the parameters inside the step; a scalar output is "
                    "one make_vjp + one vjp of the standard basis, plus split's VJP "
                    "(a concatenate of the gradients into one flat vector)"})


def forward_task(model_fn, loss_fn, params, batches, workload) -> Prepared:
    """The loss alone (spec.FORWARD_TASK): the model and loss called on plain numpy arrays,
    outside make_vjp / autograd.grad, so autograd boxes nothing and records no tape."""
    batch = lambda i: batches[i % len(batches)]  # noqa: E731

    def loss(i):
        b = batch(i)
        return loss_fn(model_fn(params, b), b)

    def run(i, clock):
        return whole_timer(lambda: loss(i), no_sync, clock)

    def derivatives(i):  # checked in the cell's dtype, the parameters' (prepare)
        return loss_as_array(float(loss(i)), params[0].dtype.name)

    return Prepared(run, derivatives, {
        "forward": "loss(model(params, batch)) called plainly on numpy arrays (no make_vjp "
                   "or autograd.grad): autograd.numpy passes straight to numpy, no tape"})


TASK_BUILDERS: dict[str, Callable[..., Prepared]] = {
    "backward": backward_task,
    "backward_frozen": backward_frozen_task,
    "jacobian_rows": jacobian_rows_task,
    "jacobian_vectorized": jacobian_vectorized_task,
    "loss_jacobian": loss_jacobian_task,
    spec.FORWARD_TASK: forward_task,
}


# ================================================================ prepare
def prepare(workload: spec.Workload, mode: str, device: str, dtype: str = "float32") -> Prepared:
    model = workload.spec
    np_dtype = onp.dtype(dtype)
    params = [onp.ascontiguousarray(p, dtype=np_dtype) for p in spec.make_params(workload)]
    batches = [{k: (v.astype(np_dtype) if v.dtype.kind == "f" else v) for k, v in b.items()}
               for b in spec.make_batches(workload)]
    prepared = TASK_BUILDERS[workload.task](FAMILIES[model.family](model), LOSSES[model.loss],
                                            params, batches, workload)
    prepared.choices.update({
        "model": "numpy functions over autograd.numpy (canonical layouts: x @ W, NCHW)",
        "trace": "autograd traces the Python function at every call (no compilation, "
                 "compile_s 0, no cache)",
        "relu": "x * (x > 0) (np.maximum's VJP would make float64 gradients)",
        "dtype": dtype,
        **FAMILY_CHOICES.get(model.family, {}),
    })
    return prepared


# The device class backends.load makes this framework's Backend of (with CAPABILITIES,
# TASK_BUILDERS and prepare).
DEVICE = AutogradDevice
