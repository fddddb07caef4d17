"""Float64 ground truth for every model's derivatives, by a path independent of the cells.

Small models (spec `reference="numpy"`) are differentiated by hand in numpy.  Where that
would be impractical (convolutions, recurrences, attention, CTC, ResNet50) the spec says
`reference="torch"`: a float64 run of the PyTorch backend's eager mode, which the float32
cells of every framework (and PyTorch's own float32 cells) are then compared with.

The derivative is that of the task's kind (spec.TASKS[task].derivative) at the workload's
first batch, in the layout the backends' `Prepared.derivatives` use.  A frozen task's
("trainable_gradients": the gradients of the parameters outside the model's frozen part) is
the all-trainable gradients' reference restricted to those parameters: computed whole, never
by the frozen path the cells take.  A forward task's ("loss") is that reference's loss.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from adbench import spec
from adbench.derivatives import kind, loss_as_array

# An array whose reference is tiny next to the others (attention's key bias has a zero
# gradient in exact arithmetic) is compared on this fraction of the largest array's norm.
NORM_FLOOR = 1e-2


def relative_error(arrays: list[np.ndarray], reference: list[np.ndarray]) -> float:
    """Largest relative L2 error over the arrays: ||a - b|| / max(||b||, floor); inf when
    the lists do not match in number or shape."""
    if len(arrays) != len(reference) or any(np.shape(a) != np.shape(b)
                                            for a, b in zip(arrays, reference)):
        return float("inf")
    norms = [float(np.linalg.norm(np.asarray(b, dtype=np.float64))) for b in reference]
    floor = max(max(norms, default=0.0) * NORM_FLOOR, 1e-30)
    return max((float(np.linalg.norm(np.asarray(a, dtype=np.float64) - b)) / max(n, floor)
                for a, b, n in zip(arrays, reference, norms)), default=0.0)


def reference_derivatives(workload: spec.Workload) -> tuple[float, list[np.ndarray]]:
    derivative = spec.TASKS[workload.task].derivative
    kind(derivative)  # a kind nobody declared: a ValueError naming it
    if derivative not in spec.REFERENCE_TASK:
        raise ValueError(f"no float64 reference of derivative kind {derivative!r}: "
                         "spec.REFERENCE_TASK names no task whose data sizes it shares")
    workload = dataclasses.replace(workload, task=spec.REFERENCE_TASK[derivative], warmup=0,
                                   iterations=1)
    if derivative == "loss":  # the gradients' reference's loss, computed the same way
        loss, _ = reference_derivatives(dataclasses.replace(workload, task="backward"))
        return loss_as_array(loss)
    if spec.TASKS[workload.task].frozen:
        loss, arrays = reference_derivatives(dataclasses.replace(workload, task="backward"))
        return loss, [arrays[i] for i in workload.spec.trained(workload.task)]
    if workload.spec.reference == "numpy":
        family, kinds = NUMPY_REFERENCES[workload.spec.family]
        if derivative not in kinds:  # never another kind's derivative in its place
            raise ValueError(f"{workload.model}: no numpy reference of derivative kind "
                             f"{derivative!r} (reference.NUMPY_REFERENCES)")
        params, batch = _float64_point(workload)
        return family(workload, params, batch, derivative)
    if workload.spec.reference == "torch":
        # Loaded by name, only when the spec asks for it: the rules name it as a code input of
        # the reference jobs alone (code_inputs.py), not of every cell that imports this module.
        from adbench import backends

        prepared = backends.load("torch").prepare(workload, "eager", "cpu", dtype="float64")
        loss, arrays = prepared.derivatives(0)
        return loss, [np.asarray(a, dtype=np.float64) for a in arrays]
    raise ValueError(f"{workload.model}: unknown reference {workload.spec.reference!r}")


def _float64_point(workload: spec.Workload) -> tuple[list[np.ndarray], dict]:
    """The spec's parameters and first batch, float arrays in float64: where the numpy
    references (and the kink margin) are evaluated."""
    batch = spec.make_batches(workload)[0]
    params = [p.astype(np.float64) for p in spec.make_params(workload)]
    return params, {k: (v.astype(np.float64) if v.dtype == np.float32 else v)
                    for k, v in batch.items()}


def _mlp(workload, params, batch, derivative):
    """Affine layers, ReLU between them; loss l2 (||y - f(x)||_2) or mean cross-entropy."""
    weights, biases = params[0::2], params[1::2]
    x = batch["x"]
    if derivative == "jacobian":  # d f(x) / d x for one example, forward mode through layers
        rows = workload.jacobian_rows
        tangent = np.eye(x.shape[1])
        a = x
        for i, (w, b) in enumerate(zip(weights, biases)):
            z = a @ w + b
            tangent = tangent @ w
            if i < len(weights) - 1:
                tangent = tangent * (z > 0)
                a = np.maximum(z, 0.0)
        return float("nan"), [tangent.T[:rows]]
    activations = [x]
    for i, (w, b) in enumerate(zip(weights, biases)):
        z = activations[-1] @ w + b
        activations.append(np.maximum(z, 0.0) if i < len(weights) - 1 else z)
    out = activations[-1]
    if workload.spec.loss == "l2":
        diff = batch["y"] - out
        loss = float(np.linalg.norm(diff))
        grad_out = -diff / loss
    elif workload.spec.loss == "xent":
        shifted = out - out.max(axis=1, keepdims=True)
        logp = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
        labels = batch["y"]
        rows = np.arange(len(labels))
        loss = float(-logp[rows, labels].mean())
        grad_out = np.exp(logp)
        grad_out[rows, labels] -= 1.0
        grad_out /= len(labels)
    else:
        raise ValueError(f"{workload.model}: no numpy reference for loss {workload.spec.loss}")
    grads: list[np.ndarray] = [np.empty(0)] * len(params)
    for i in reversed(range(len(weights))):
        grads[2 * i] = activations[i].T @ grad_out
        grads[2 * i + 1] = grad_out.sum(axis=0)
        grad_out = (grad_out @ weights[i].T) * (activations[i] > 0)
    return loss, grads


def _rnn_cell(workload, params, batch, derivative):
    """next_h = tanh(prev_h W_h^T + x W_x^T), loss = sum(next_h) (the slides' example); on
    a sequence (a variable-length task's batch, at its true length) the cell unrolled over
    its steps, loss = sum of the last h, differentiated back through time."""
    w_h, w_x = params
    x, h0 = batch["x"], batch["h0"]
    if derivative == "sequence_gradients":
        return _rnn_sequence(w_h, w_x, x, h0)
    h = np.tanh(h0 @ w_h.T + x @ w_x.T)
    slope = 1.0 - h**2
    if derivative == "jacobian":
        return float("nan"), [(slope[0][:, None] * w_x)[: workload.jacobian_rows]]
    return float(h.sum()), [slope.T @ h0, slope.T @ x]


def _rnn_sequence(w_h, w_x, x, h0):
    states = [h0]
    for t in range(x.shape[1]):
        states.append(np.tanh(states[-1] @ w_h.T + x[:, t] @ w_x.T))
    grad_h = np.ones_like(h0)  # d sum(h_T) / d h_T
    g_h, g_x = np.zeros_like(w_h), np.zeros_like(w_x)
    for t in reversed(range(x.shape[1])):
        grad_z = grad_h * (1.0 - states[t + 1] ** 2)
        g_h += grad_z.T @ states[t]
        g_x += grad_z.T @ x[:, t]
        grad_h = grad_z @ w_h
    return float(states[-1].sum()), [g_h, g_x]


# The hand-written float64 references: per model family, the function and the derivative
# kinds it computes (the others' references are derived from these: reference_derivatives).
NUMPY_REFERENCES = {"mlp": (_mlp, ("gradients", "jacobian")),
                    "rnn_cell": (_rnn_cell, ("gradients", "jacobian", "sequence_gradients"))}


# A ReLU network's derivative jumps where a pre-activation crosses 0. A unit whose float64
# pre-activation is this close to 0 (relative to the layer's largest) can land on either side
# in float32, depending on a BLAS kernel's summation order: there the float64 reference is
# not the derivative a correct float32 cell computes (seen: mlp512 seed 0, one unit at 7.9e-8
# of the layer's largest, its first layer's gradient 2e-4 off with numpy on AVX-512, not with
# torch). Float32 rounding of a 784-term dot product is a few 1e-7 of it; seeds 1-9 have
# margins from 7.5e-7 to 1.6e-5. There the check uses KINK_TOLERANCE instead: a flipped unit
# moves the gradient by about 1e-4, a wrong derivative by far more.
KINK_MARGIN = 1e-6
KINK_TOLERANCE = 1e-3


def kink_margin(workload: spec.Workload) -> float:
    """The smallest |pre-activation| / largest of the MLP's hidden ReLU layers at the check's
    batch (inf for models without a numpy reference, which are not checked for it)."""
    if workload.spec.reference != "numpy" or workload.spec.family != "mlp":
        return float("inf")
    params, batch = _float64_point(dataclasses.replace(workload, warmup=0, iterations=1))
    a, margin = batch["x"], float("inf")
    for w, b in list(zip(params[0::2], params[1::2]))[:-1]:
        z = a @ w + b
        margin = min(margin, float(np.abs(z).min() / np.abs(z).max()))
        a = np.maximum(z, 0.0)
    return margin
