"""The models' and tasks' symbolic graphs for PyTensor and Theano, written once.

PyTensor is Theano's successor and keeps its tensor API, so one set of graph builders serves
both: every builder takes a `Dialect`, which carries the framework's tensor module `T`
(pytensor.tensor or theano.tensor) and the few ops and APIs in which the two differ
(convolution, pooling, softmax, batched matmul, cross-entropy, scan's signature, the Jacobian
APIs).  pytensor_backend and theano_backend each pass their own (their models.py) and keep
what is theirs alone: the import, the modes, the compile options, the provenance, what they
refuse (their CAPABILITIES) and their task registry (TASK_BUILDERS: the graphs of
TASK_GRAPHS they run).

Weights are shared variables holding the spec's canonical arrays, which are the layouts users
of both write (x @ W with W (in, out), NCHW images, OIHW kernels): nothing is converted, and
derivatives are taken w.r.t. the shared variables.  Batches are the function's inputs.
"""

from __future__ import annotations

import dataclasses
from types import ModuleType
from typing import Callable

import numpy as np

from adbench import spec
from adbench.backends import no_sync
from adbench.derivatives import checked, kind as derivatives_kind
from adbench.clock import whole_timer


@dataclasses.dataclass(frozen=True)
class Dialect:
    """A framework and the ops in which PyTensor and Theano differ."""

    # pytensor or theano: .tensor, .grad, .gradient.jacobian and .gradient.disconnected_grad
    # are one API in both.
    framework: ModuleType
    label: str  # the framework's label (spec.FRAMEWORKS), for prose
    scan: Callable[..., list]  # (fn, sequences, outputs_info, non_sequences) -> [outputs]
    tensor: Callable  # (name, dtype, shape with None for a free axis) -> a symbolic input
    sigmoid: Callable
    softmax: Callable  # over the last axis
    log_softmax: Callable  # over the last axis
    batched_matmul: Callable  # (N, a, b), (N, b, c) -> (N, a, c)
    xent: Callable  # (logits, integer labels) -> mean cross-entropy
    conv2d: Callable  # (x NCHW, w OIHW, (h, w) of x, w's shape, stride, pad) -> no bias
    max_pool: Callable  # (x, (h, w) of x, kernel, stride, pad) -> the pooled x
    # (out of shape (rows,), x, rows) -> (d out / d x, flat or (rows, *x's shape); choice);
    # jacobian_vectorized None where the framework has none (its CAPABILITIES refuse the task).
    jacobian_rows: Callable
    jacobian_vectorized: Callable | None

    @property
    def name(self) -> str:  # "pytensor" or "theano": in messages and choices
        return self.framework.__name__

    @property
    def T(self) -> ModuleType:  # pytensor.tensor or theano.tensor
        return self.framework.tensor


# ================================================================ layers
def relu(d: Dialect, x):
    return d.T.maximum(x, 0)


def dense(d: Dialect, x, w, b=None):
    y = d.T.dot(x, w)
    return y if b is None else y + b


def output_size(size: tuple[int, int], kernel: int, stride: int, pad: int) -> tuple[int, int]:
    """(height, width) of a convolution's or a pool's output."""
    return tuple((s + 2 * pad - kernel) // stride + 1 for s in size)


def conv2d(d: Dialect, x, w, size: tuple[int, int], shape: tuple, stride: int, pad: int, b=None):
    """Cross-correlation of NCHW `x` with OIHW `w` (as torch.nn.Conv2d); returns (y, size)."""
    y = d.conv2d(x, w, size, shape, stride, pad)
    y = y if b is None else y + b.dimshuffle("x", 0, "x", "x")
    return y, output_size(size, shape[2], stride, pad)


def max_pool(d: Dialect, x, size: tuple[int, int], kernel: int, stride: int, pad: int):
    return d.max_pool(x, size, kernel, stride, pad), output_size(size, kernel, stride, pad)


BN_EPS = 1e-5  # torch.nn.BatchNorm2d's


def batch_norm(x, gamma, beta):
    """Inference mode with running mean 0 and variance 1 (the spec's)."""
    scale = gamma / float(np.sqrt(1.0 + BN_EPS))  # a Python float: float32 or 64 as gamma
    return x * scale.dimshuffle("x", 0, "x", "x") + beta.dimshuffle("x", 0, "x", "x")


# ---------------------------------------------------------------- im2col, for a T without conv2d
def _pad(T, x, pad: int, value: float = 0.0):
    """Zero- (or value-) padding of an NCHW tensor's two spatial axes."""
    if pad == 0:
        return x
    n, c, h, w = x.shape
    z = T.alloc(np.asarray(value, dtype=x.dtype), n, c, h + 2 * pad, w + 2 * pad)
    return T.set_subtensor(z[:, :, pad:-pad, pad:-pad], x)


def _windows(T, x, size: tuple[int, int], kernel: int, stride: int, pad: int, fill=0.0):
    """The kernel*kernel shifted, strided views of the padded input (im2col's columns)."""
    out_h, out_w = output_size(size, kernel, stride, pad)
    x = _pad(T, x, pad, fill)
    return [
        x[
            :,
            :,
            i : i + stride * (out_h - 1) + 1 : stride,
            j : j + stride * (out_w - 1) + 1 : stride,
        ]
        for i in range(kernel)
        for j in range(kernel)
    ]


def im2col_conv2d(T, x, w, size: tuple[int, int], shape: tuple, stride: int, pad: int):
    """Cross-correlation as im2col: the kernel*kernel strided views stacked and contracted
    with the kernel in one tensordot (one GEMM)."""
    c_out, c_in, k, _ = shape
    out_h, out_w = output_size(size, k, stride, pad)
    views = _windows(T, x, size, k, stride, pad)
    cols = views[0] if k == 1 else T.stack(views, axis=2)  # (N, C, k*k, OH, OW)
    cols = cols.reshape((cols.shape[0], c_in * k * k, out_h, out_w))
    y = T.tensordot(w.reshape((c_out, c_in * k * k)), cols, axes=[[1], [1]])  # (O, N, ...)
    return y.dimshuffle(1, 0, 2, 3)


def window_max_pool(T, x, size: tuple[int, int], kernel: int, stride: int, pad: int):
    """Max pool as the max over the kernel*kernel strided views of the -inf-padded input."""
    views = _windows(T, x, size, kernel, stride, pad, fill=-np.inf)
    return T.max(T.stack(views, axis=0), axis=0)


# ================================================================ models
# Each takes (dialect, spec, params (shared variables, spec order), x, aux); returns the output.
def mlp(d: Dialect, model, params, x, aux):
    layers = len(model.arch["sizes"]) - 1
    for i in range(layers):
        x = dense(d, x, params[2 * i], params[2 * i + 1])
        if i < layers - 1:
            x = relu(d, x)
    return x


def cnn(d: Dialect, model, params, x, aux):
    a = model.arch
    size = model.input_shape[1:]
    for i in range(2):
        w, b = params[2 * i], params[2 * i + 1]
        shape = model.params[2 * i].shape
        x, size = conv2d(d, x, w, size, shape, a["strides"][i], a["padding"], b)
        x = relu(d, x)
    return dense(d, x.flatten(2), params[4], params[5])  # flattened in (C, H, W) order


def lstm(d: Dialect, model, params, x, aux):
    w_ih, w_hh, bias, w_fc, b_fc = params
    hidden, T = model.arch["hidden"], d.T
    inputs = dense(d, x.dimshuffle(1, 0, 2), w_ih, bias)  # (T, N, 4H): one GEMM for all steps

    def step(pre, h, c, w_hh):
        z = pre + T.dot(h, w_hh)
        i = d.sigmoid(z[:, :hidden])
        f = d.sigmoid(z[:, hidden : 2 * hidden])
        g = T.tanh(z[:, 2 * hidden : 3 * hidden])
        o = d.sigmoid(z[:, 3 * hidden :])
        c = f * c + i * g
        return o * T.tanh(c), c

    h0 = T.zeros((x.shape[0], hidden), dtype=x.dtype)
    hs, _ = d.scan(step, sequences=inputs, outputs_info=[h0, h0], non_sequences=[w_hh])
    return dense(d, hs[-1], w_fc, b_fc)


def resnet(d: Dialect, model, params, x, aux):
    it = iter(zip(params, model.params))

    def conv_bn(x, size, stride, pad, relu_after=True):
        (w, p), (gamma, _), (beta, _) = next(it), next(it), next(it)
        y, size = conv2d(d, x, w, size, p.shape, stride, pad)
        y = batch_norm(y, gamma, beta)
        return (relu(d, y) if relu_after else y), size

    size = model.input_shape[1:]
    x, size = conv_bn(x, size, 2, 3)
    x, size = max_pool(d, x, size, 3, 2, 1)
    for blk in spec.resnet_blocks():
        y, out = conv_bn(x, size, 1, 0)
        y, out = conv_bn(y, out, blk["stride"], 1)
        y, out = conv_bn(y, out, 1, 0, relu_after=False)
        shortcut = conv_bn(x, size, blk["stride"], 0, relu_after=False)[0] if blk["project"] else x
        x, size = relu(d, y + shortcut), out
    (w_fc, _), (b_fc, _) = next(it), next(it)
    return dense(d, x.mean(axis=(2, 3)), w_fc, b_fc)


def attention(d: Dialect, model, params, x, aux):
    """One head, as nn.MultiheadAttention: softmax(q k^T / sqrt(E)) v, then the output
    projection; x (N, L, E)."""
    wq, bq, wk, bk, wv, bv, wo, bo = params
    q, k, v = dense(d, x, wq, bq), dense(d, x, wk, bk), dense(d, x, wv, bv)
    scale = np.float32(np.sqrt(model.arch["embed"]))
    weights = d.softmax(d.batched_matmul(q, k.dimshuffle(0, 2, 1)) / scale)
    return dense(d, d.batched_matmul(weights, v), wo, bo)


def ctc_net(d: Dialect, model, params, x, aux):
    return d.log_softmax(dense(d, x, params[0], params[1]))


def rnn_cell(d: Dialect, model, params, x, aux):
    w_h, w_x = params
    return d.T.tanh(d.T.dot(aux, w_h.T) + d.T.dot(x, w_x.T))


FAMILIES = {
    "mlp": mlp,
    "cnn": cnn,
    "lstm": lstm,
    "resnet": resnet,
    "attention": attention,
    "ctc": ctc_net,
    "rnn_cell": rnn_cell,
}


# ================================================================ losses
NEG = np.float32(-1e30)  # log(0) for the CTC recursion: finite, so no inf - inf in gradients


def _logsumexp(d: Dialect, *terms):
    m = terms[0]
    for t in terms[1:]:
        m = d.T.maximum(m, t)
    m = d.framework.gradient.disconnected_grad(
        m
    )  # the max only shifts: its derivative cancels exactly
    return m + d.T.log(sum(d.T.exp(t - m) for t in terms))


def ctc_loss(d: Dialect, log_probs, labels, model):
    """CTC (blank 0), summed over the batch; every sequence and label at full length.

    Neither framework has a CTC op it can run here (Theano's needs the external warp-ctc
    library), so the loss is written as their users write recurrences: the forward (alpha)
    recursion in log space over the time steps with scan over the extended label sequence
    (blanks between and around the labels); grad differentiates through the scan."""
    T = d.T
    n_labels, classes = model.arch["label_length"], model.arch["classes"]
    states = 2 * n_labels + 1
    n = labels.shape[0]
    blanks = T.zeros_like(labels)
    pairs = T.stack([blanks, labels], axis=2).reshape((n, 2 * n_labels))
    ext = T.concatenate([pairs, blanks[:, :1]], axis=1)  # (N, S): blank, l1, blank, ..., blank
    classes_axis = T.arange(classes).dimshuffle("x", "x", 0)
    one_hot = T.eq(ext.dimshuffle(0, 1, "x"), classes_axis).astype(log_probs.dtype)
    emit = d.batched_matmul(log_probs, one_hot.dimshuffle(0, 2, 1)).dimshuffle(1, 0, 2)  # T,N,S
    distinct = T.neq(ext[:, 2:], 0) & T.neq(ext[:, 2:], ext[:, :-2])
    skip = T.concatenate([T.zeros((n, 2), dtype="bool"), distinct], axis=1)
    alpha0 = T.switch(T.lt(T.arange(states), 2).dimshuffle("x", 0), emit[0], NEG)

    def step(e, alpha, skip):
        pad1 = T.alloc(NEG, n, 1)
        from_prev = T.concatenate([pad1, alpha[:, :-1]], axis=1)
        from_skip = T.switch(skip, T.concatenate([pad1, pad1, alpha[:, :-2]], axis=1), NEG)
        return _logsumexp(d, alpha, from_prev, from_skip) + e

    (alphas,) = d.scan(step, sequences=emit[1:], outputs_info=alpha0, non_sequences=skip)
    last = alphas[-1]
    return -_logsumexp(d, last[:, states - 1], last[:, states - 2]).sum()


def loss_of(d: Dialect, model, pred, aux):
    """As torch_backend.WithLoss: l2 = ||y - pred||_2, mean cross-entropy, summed CTC, sum."""
    if model.loss == "l2":
        return d.T.sqrt(d.T.sum(d.T.sqr(aux - pred)))
    if model.loss == "xent":
        return d.xent(pred, aux)
    if model.loss == "ctc":
        return ctc_loss(d, pred, aux, model)
    return pred.sum()


# ================================================================ graphs of the tasks
def inputs(d: Dialect, model, dtype: str, per_example: bool):
    """Symbolic x (batch axis free, or 1 for one example) and aux (targets, labels or h0)."""
    batch = 1 if per_example else None
    x = d.tensor("x", dtype, (batch, *model.input_shape))
    if model.family == "rnn_cell":
        aux = d.tensor("h0", dtype, (batch, model.arch["hidden"]))
    elif model.loss == "xent":
        aux = d.tensor("y", "int64", (None,))
    elif model.loss == "ctc":
        aux = d.tensor("y", "int64", (None, None))
    else:
        aux = d.tensor("y", dtype, (None, *model.output_shape))
    return x, aux


def model_loss(d: Dialect, workload: spec.Workload, params, x, aux):
    """The scalar loss of the workload's model on the batch (x, aux)."""
    model = workload.spec
    return loss_of(d, model, FAMILIES[model.family](d, model, params, x, aux), aux)


# ---------------------------------------------------------------- the task graphs
# Each: (dialect, workload, params, x, aux) -> (function inputs, outputs, choices); a
# backend's TASK_BUILDERS (pytensor_backend, theano_backend) picks those it runs.
def backward_graph(d: Dialect, workload: spec.Workload, params, x, aux):
    """The loss, then its derivatives w.r.t. every weight."""
    loss = model_loss(d, workload, params, x, aux)
    return [x, aux], [loss, *d.framework.grad(loss, params)], {
        "derivative": f"{d.name}.grad(loss, shared weights)"}


def backward_frozen_graph(d: Dialect, workload: spec.Workload, params, x, aux):
    """The loss, then its derivatives w.r.t. the trainable weights: grad w.r.t. a subset
    builds no derivative graph through the frozen part."""
    loss = model_loss(d, workload, params, x, aux)
    trained = [params[i] for i in workload.spec.trained(workload.task)]
    return [x, aux], [loss, *d.framework.grad(loss, trained)], {"derivative": (
        f"{d.name}.grad(loss, the trainable shared weights): the frozen part's weights "
        "are constants of the derivative graph")}


def loss_jacobian_graph(d: Dialect, workload: spec.Workload, params, x, aux):
    loss = model_loss(d, workload, params, x, aux)
    return [x, aux], [loss, *d.framework.gradient.jacobian(loss, params)], {"derivative": (
        f"{d.name}.gradient.jacobian(loss, shared weights): for a scalar expression it is "
        f"{d.name}.grad (the same graph as backward)")}


def forward_graph(d: Dialect, workload: spec.Workload, params, x, aux):
    """The loss alone: no grad anywhere in the graph."""
    return [x, aux], [model_loss(d, workload, params, x, aux)], {
        "forward": f"{d.name}.function of the loss alone (no {d.name}.grad in the graph), "
                   "compiled in prepare as the other tasks' steps"}


def _output_jacobian(jacobian: Callable, d: Dialect, workload: spec.Workload, params, x, aux):
    """The first rows of one example's flattened output, differentiated w.r.t. x by one of
    the dialect's Jacobian APIs."""
    model = workload.spec
    rows = min(workload.jacobian_rows, model.n_outputs)
    out = FAMILIES[model.family](d, model, params, x, aux).flatten()[:rows]
    jac, choice = jacobian(out, x, rows)
    function_inputs = [x, aux] if model.family == "rnn_cell" else [x]
    return function_inputs, [jac.reshape((rows, *model.input_shape))], {"derivative": choice}


def jacobian_rows_graph(d: Dialect, workload: spec.Workload, params, x, aux):
    return _output_jacobian(d.jacobian_rows, d, workload, params, x, aux)


def jacobian_vectorized_graph(d: Dialect, workload: spec.Workload, params, x, aux):
    return _output_jacobian(d.jacobian_vectorized, d, workload, params, x, aux)


TASK_GRAPHS = {
    "backward": backward_graph,
    "backward_frozen": backward_frozen_graph,
    "loss_jacobian": loss_jacobian_graph,
    spec.FORWARD_TASK: forward_graph,
    "jacobian_rows": jacobian_rows_graph,
    "jacobian_vectorized": jacobian_vectorized_graph,
}


def task_graph(d: Dialect, build: Callable, workload: spec.Workload, params, dtype: str):
    """(function inputs, outputs, choices) of the task's step, by `build`, the task's
    entry in the backend's TASK_BUILDERS."""
    model = workload.spec
    x, aux = inputs(d, model, dtype, workload.per_example)
    choices = {
        "graph": f"symbolic {d.label} graph of model + loss; weights are shared variables "
        "(canonical layouts, no conversion), batches are function inputs"
    }
    if model.family == "lstm":
        choices["lstm"] = (
            f"{d.name}.scan over the 28 steps; input projection x @ W_ih + b for all steps "
            "before the scan"
        )
    function_inputs, outputs, task_choices = build(d, workload, params, x, aux)
    return function_inputs, outputs, {**choices, **task_choices}


# ================================================================ the compiled step
def compile_work(workload: spec.Workload) -> str:
    """What precedes the compilation in compile_s, for the choice: the forward task builds
    the loss's graph only, every other task differentiates it too."""
    if workload.task == spec.FORWARD_TASK:
        return "the loss's graph (no differentiation) + "
    return "symbolic differentiation + "


def shared_params(shared: Callable, workload: spec.Workload, dtype: str) -> list:
    """The spec's parameters as shared variables, borrowing the canonical arrays."""
    arrays = spec.make_params(workload)
    return [
        shared(a.astype(dtype, copy=False), name=p.name, borrow=True)
        for p, a in zip(workload.spec.params, arrays, strict=True)
    ]


def batch_arguments(workload: spec.Workload, dtype: str) -> list[tuple]:
    """Each batch as the function's arguments (x, then y or h0), floats in `dtype`."""

    def argument(a):
        return np.ascontiguousarray(a.astype(dtype, copy=False) if a.dtype.kind == "f" else a)

    return [
        tuple(argument(b[k]) for k in ("x", "h0" if "h0" in b else "y"))
        for b in spec.make_batches(workload)
    ]


def check_output_dtypes(function, dtype: str) -> None:
    """Refuse a compiled function whose graph upcast an output (a float64 literal, say)."""
    for o in function.maker.fgraph.outputs:
        if o.dtype != dtype:
            raise RuntimeError(f"output of dtype {o.dtype}, not {dtype}: an upcast in the graph")


def timed_function(function, batches: list[tuple], n_inputs: int, workload, dtype: str,
                   after_call=None):
    """(run, derivatives) of a compiled task function (it computes synchronously and returns
    numpy arrays): run times one call, then `after_call()`; derivatives unpacks its outputs
    (the loss first where the kind has one, then the derivatives) in the kind's shape
    (derivatives.checked)."""
    kind = spec.TASKS[workload.task].derivative

    def args(i):
        return batches[i % len(batches)][:n_inputs]

    def run(i, clock):
        sample = whole_timer(lambda: function(*args(i)), no_sync, clock)
        if after_call is not None:
            after_call()
        return sample

    def derivatives(i):
        values = function(*args(i))
        if derivatives_kind(kind).has_loss:
            return checked(kind, values[0], values[1:], dtype)
        return checked(kind, None, values, dtype)

    return run, derivatives
