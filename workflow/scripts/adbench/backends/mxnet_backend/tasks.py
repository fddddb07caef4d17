"""MXNet's tasks: one builder per task over a built model (eager: imperative under
autograd.record(); hybrid: the same blocks hybridized), and prepare."""

from __future__ import annotations

import os

import adbench.backends.mxnet_backend.device  # noqa: F401  (the engine's settings, before mxnet)
import mxnet as mx
import numpy as np
from mxnet import autograd

from adbench import spec
from adbench.backends import Prepared
from adbench.backends.mxnet_backend.device import ENV_AT_LOAD, MXNetDevice, features, sync
from adbench.backends.mxnet_backend.models import (
    FAMILY_CHOICES,
    TAKES_AUX,
    WithLoss,
    build,
    to_canonical,
)
from adbench.clock import split_timer, whole_timer
from adbench.derivatives import loss_as_array


def freeze(binds, workload) -> list:
    """The binds of the parameters the task trains; the frozen part's get grad_req 'null'
    (before hybridize), so autograd computes no gradient through them."""
    trained = workload.spec.trained(workload.task)
    if len(trained) == len(workload.spec.params):
        return binds
    for i, (param, _) in enumerate(binds):
        if i not in trained:
            param.grad_req = "null"
    return [binds[i] for i in trained]


def backward_task(model, binds, batches, workload, hybrid: bool) -> Prepared:
    binds = freeze(binds, workload)
    net = WithLoss(model, workload.spec)  # no parameters of its own
    if hybrid:
        net.hybridize(static_alloc=True, static_shape=True)
    params = [p for p, _ in binds]
    batch = lambda i: batches[i % len(batches)]
    retain = workload.task == "backward_retained"
    kept = []  # backward_retained: the last step's loss, and through it its graph

    def forward(i):
        with autograd.record():  # training mode: see INFERENCE_MODE
            return net(*batch(i))

    def backward(loss):
        loss.backward(retain_graph=retain)  # grad_req 'write': each step overwrites
        if retain:
            kept.append(loss)

    def run(i, clock):
        kept.clear()  # outside the clock
        return split_timer(lambda: forward(i), backward, sync, clock)

    def derivatives(i):
        loss = forward(i)
        backward(loss)
        return float(loss.asnumpy().reshape(())), to_canonical(binds,
                                                               [p.grad() for p in params])

    return Prepared(run, derivatives, {"backward": "with autograd.record(): loss = "
                                       "net(x, y); loss.backward(); gradients written into "
                                       "each Parameter's grad (grad_req='write')",
                                       **BACKWARD_CHOICES.get(workload.task, {})},
                    release=kept.clear if retain else None)


BACKWARD_CHOICES = {
    "backward_frozen": {"frozen": "the frozen part's Parameters grad_req='null' (before "
                                  "hybridize): no gradient computed through them"},
    "backward_retained": {"retained": "loss.backward(retain_graph=True), the loss held after "
                                      "the step, released outside the clock when the next "
                                      "step starts"},
}


def jacobian_rows_task(model, binds, batches, workload, hybrid: bool) -> Prepared:
    if hybrid:
        model.hybridize(static_alloc=True, static_shape=True)
    model_spec = workload.spec
    rows = min(workload.jacobian_rows, model_spec.n_outputs)
    ctx = batches[0][0].context
    examples = []
    for x, aux in batches:  # each example a variable of its own, made outside the clock
        x = x.copy()
        x.attach_grad()
        examples.append((x, aux))
    dtype = batches[0][0].dtype
    one_hot = [mx.nd.array(row, ctx=ctx, dtype=dtype) for row in np.eye(rows, dtype=dtype)]
    takes_aux = model_spec.family in TAKES_AUX

    def forward(i):
        x, aux = examples[i % len(examples)]
        with autograd.record():
            out = (model(x, aux) if takes_aux else model(x)).reshape((-1,))
            if rows < out.shape[0]:
                out = out.slice_axis(axis=0, begin=0, end=rows)
        return x, out

    def row_by_row(state):
        x, out = state
        # One vector-Jacobian product per row (each a fresh array, static_alloc or not).
        return mx.nd.stack(*[
            autograd.grad(out, [x], head_grads=[one_hot[r]], retain_graph=True)[0]
            for r in range(rows)])

    def run(i, clock):
        return split_timer(lambda: forward(i), row_by_row, sync, clock)

    def derivatives(i):
        jacobian = row_by_row(forward(i)).asnumpy()
        return float("nan"), [jacobian.reshape(model_spec.jacobian_shape(rows))]

    return Prepared(run, derivatives, {"jacobian": "Python loop of mx.autograd.grad(out, "
                                       "[x], head_grads=[one-hot row], retain_graph=True), "
                                       "then nd.stack of the rows"})


def forward_task(model, binds, batches, workload, hybrid: bool) -> Prepared:
    """The loss alone (spec.FORWARD_TASK): WithLoss called outside autograd.record(), so
    autograd records nothing (and the call runs in predict mode, which batch norm with
    use_global_stats=True computes alike); hybrid mode hybridizes it as for backward, its
    inference CachedOp built at the first call.  The engine is waited for (mx.nd.waitall)
    before every clock read, as in the other tasks."""
    net = WithLoss(model, workload.spec)
    if hybrid:
        net.hybridize(static_alloc=True, static_shape=True)
    batch = lambda i: batches[i % len(batches)]  # noqa: E731
    dtype = np.dtype(batches[0][0].dtype).name  # the cell's dtype, as prepare made the batches

    def loss(i):
        return net(*batch(i))  # no autograd.record(): nothing kept for a backward

    def run(i, clock):
        return whole_timer(lambda: loss(i), sync, clock)

    def derivatives(i):
        return loss_as_array(float(loss(i).asnumpy().reshape(())), dtype)

    return Prepared(run, derivatives, {"forward": "loss = net(x, y) outside autograd.record() "
                                       "(nothing recorded, predict mode); mx.nd.waitall() "
                                       "before the clock is read"})


TASK_BUILDERS = {
    "backward": backward_task,
    "backward_frozen": backward_task,
    "backward_retained": backward_task,
    "jacobian_rows": jacobian_rows_task,
    spec.FORWARD_TASK: forward_task,
}

# Batch norm in inference mode, the way that gives correct gradients in MXNet 1.9.1: predict
# mode (autograd.record(train_mode=False), the analogue of torch's eval()) makes oneDNN's
# max pooling keep no workspace, and its backward then routes the gradient wrongly (a
# (1, 2, 6, 6) input, MaxPool2D(3, 2, 1): 4 of the 18 unit gradients arrive), silently.
INFERENCE_MODE = ("autograd.record() in its default training mode, nn.BatchNorm("
                  "use_global_stats=True): running statistics; predict mode "
                  "(train_mode=False) would break oneDNN max pooling's backward")

MODE_CHOICES = {
    "eager": {"execution": "imperative: each Gluon block and NDArray op dispatched from "
                           "Python to the asynchronous engine"},
    "hybrid": {"execution": "hybridize(static_alloc=True, static_shape=True): the symbolic "
                            "graph (CachedOp) is built at the first call, inside the first "
                            "timed iteration (compile_s 0); a batch of another shape (the "
                            "shorter last batch of an epoch) re-plans its memory"},
}


def device_batches(workload: spec.Workload, ctx, dtype: str) -> list[tuple]:
    """The batches on the device up front (data transfer is not timed); integer labels
    (xent, CTC) as floats, as Gluon's losses take them."""
    second = "h0" if workload.spec.family in TAKES_AUX else "y"
    return [tuple(mx.nd.array(b[k], ctx=ctx, dtype=dtype) for k in ("x", second))
            for b in spec.make_batches(workload)]


def prepare(workload: spec.Workload, mode: str, device: str,
            dtype: str = "float32") -> Prepared:
    ctx = mx.cpu()  # the pipeline's MXNet is the CPU wheel (CAPABILITIES: no cuda build)
    model_spec = workload.spec
    model, binds = build(model_spec, spec.make_params(workload), ctx, dtype)
    batches = device_batches(workload, ctx, dtype)
    sync()
    prepared = TASK_BUILDERS[workload.task](model, binds, batches, workload,
                                            mode == "hybrid")
    found = features()
    prepared.choices.update({
        "model": "Gluon HybridBlocks (nn.Dense, nn.Conv2D, rnn.LSTM, nn.BatchNorm) or "
                 "explicit NDArray ops (attention's matmuls, the slides' RNN cell)",
        "engine": f"MXNET_ENGINE_TYPE={ENV_AT_LOAD['MXNET_ENGINE_TYPE']}, "
                  f"MXNET_CPU_WORKER_NTHREADS={ENV_AT_LOAD['MXNET_CPU_WORKER_NTHREADS']}, "
                  f"OMP_NUM_THREADS={ENV_AT_LOAD['OMP_NUM_THREADS']} (set before import); "
                  "mx.nd.waitall() before every clock read",
        "onednn": "on" if found.get("MKLDNN") and
                  os.environ.get("MXNET_MKLDNN_ENABLED", "1") != "0" else "off",
        "blas": ", ".join(n for n in ("BLAS_OPEN", "BLAS_MKL", "BLAS_ATLAS", "BLAS_APPLE")
                          if found.get(n)) or "none",
        "layout": "NCHW images, OIHW kernels, Dense weights (out, in) (converted once, at "
                  "preparation)",
        "dtype": dtype,
        "inference_mode": INFERENCE_MODE,
        "cache": "none: MXNet keeps no compile cache on disk (a hybridized block's graph "
                 "lives in the process)",
        **FAMILY_CHOICES.get(model_spec.family, {}),
        **MODE_CHOICES[mode],
    })
    return prepared


# The device class backends.load makes this framework's Backend of (with CAPABILITIES,
# TASK_BUILDERS and prepare).
DEVICE = MXNetDevice
