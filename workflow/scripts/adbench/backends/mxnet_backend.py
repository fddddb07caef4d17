"""MXNet backend: Gluon HybridBlocks run imperatively under autograd.record() (eager), or the
same blocks after hybridize(static_alloc=True, static_shape=True) (hybrid).

Models are Gluon blocks as MXNet users write them (nn.Dense, nn.Conv2D, rnn.LSTM,
nn.BatchNorm, gluon.loss), loaded with the spec's canonical arrays (Dense weights are
(out, in) here, the spec's (in, out); convolutions are NCHW/OIHW as in the spec).

MXNet's engine is asynchronous: every operator call only pushes work to the engine's worker
thread, so the clock is read only after mx.nd.waitall().  A hybridized block builds its
symbolic graph (a CachedOp) at its first call, which is the first timed iteration: compile_s
is 0 and time to first step is that iteration.

MXNet 1.9 has no Jacobian API (mx.autograd offers backward, grad and mark_variables, no
jacobian and no vmap): jacobian_vectorized and loss_jacobian are refused.
"""

from __future__ import annotations

import math
import os
import re

# The engine and its OpenMP runtime read their settings once, when libmxnet is loaded
# (static initialisation): they are set here, before the import.  The harness
# (measure.py, backend_runner.py) pins OMP_NUM_THREADS to the cell's thread count before it
# imports this module; MXNet then gives every operator that many OpenMP threads.
# One engine worker thread runs the operators one after another (MXNet's default: more
# workers would run several operators at once, each with OMP_NUM_THREADS threads).
os.environ.setdefault("MXNET_CPU_WORKER_NTHREADS", "1")
# The default engine, ThreadedEnginePerDevice: operators run on the worker thread while
# Python goes on pushing the next ones (MXNet as its users run it).
os.environ.setdefault("MXNET_ENGINE_TYPE", "ThreadedEnginePerDevice")
_ENV_AT_LOAD = {name: os.environ.get(name) for name in (
    "OMP_NUM_THREADS", "MXNET_CPU_WORKER_NTHREADS", "MXNET_ENGINE_TYPE",
    "MXNET_CPU_PRIORITY_NTHREADS", "MXNET_OMP_MAX_THREADS", "MXNET_MKLDNN_ENABLED")}

import ctypes
import itertools

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon
from mxnet.gluon import nn, rnn

from adbench import spec
from adbench.backends import Prepared, UnsupportedCell, blas, trained_params
from adbench.derivatives import loss_as_array
from adbench.clock import split_timer, whole_timer


# ================================================================ environment
def _mapped_library(pattern: str, under: str | None = None):
    """(path, ctypes handle) of a shared library this process has loaded (from its memory
    map), or (None, None)."""
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "/" in line}
    except OSError:
        return None, None
    for path in sorted(paths):
        if re.match(pattern, os.path.basename(path)) and (under is None or
                                                          path.startswith(under)):
            try:
                return path, ctypes.CDLL(path)
            except OSError:
                continue
    return None, None


def _features() -> dict[str, bool]:
    return {f.name: f.enabled for f in mx.runtime.Features().values()}


def configure_threads(threads: int) -> dict:
    """What MXNet's math runs on: the OpenMP runtime libmxnet links (libgomp; oneDNN and
    MXNet's own kernels use it) and the OpenBLAS the wheel bundles (an OpenMP build).
    Both took OMP_NUM_THREADS when libmxnet loaded, and MXNet leaves them there when it is
    set; the engine's worker thread cannot be changed from here afterwards, so a count that
    differs from `threads` is reported as it is and the harness refuses the cell.  Read from
    the libraries themselves (this environment has no threadpoolctl) and keyed as every
    backend keys its pools (blas.pool_key); a library not found is keyed as libmxnet's."""
    mxnet_dir = os.path.dirname(mx.__file__)
    omp_path, omp = _mapped_library(r"lib(gomp|omp|iomp5)[.-]")
    blas_path, openblas = _mapped_library(r"libopenblas", mxnet_dir)
    omp_threads = int(omp.omp_get_max_threads()) if omp is not None else None
    if omp is None and not _features().get("OPENMP", False):
        omp_threads = 1  # a build without OpenMP runs every operator on one thread
    blas_threads = int(openblas.openblas_get_num_threads()) if openblas is not None else None
    libmxnet = os.path.join(mxnet_dir, "libmxnet.so")
    return {blas.pool_key("openmp", omp_path or libmxnet): omp_threads,
            blas.pool_key("openblas", blas_path or libmxnet): blas_threads}


def versions() -> dict[str, str]:
    return {"mxnet": mx.__version__, "numpy": np.__version__}


def device_name(device: str) -> str:
    if device == "cuda" and mx.context.num_gpus() > 0:
        return "gpu(0)"
    return "cpu"


# ================================================================ models
class MLP(nn.HybridSequential):
    """nn.Dense layers, ReLU between them (Dense's own activation), a linear output."""

    def __init__(self, model: spec.ModelSpec):
        super().__init__()
        sizes = model.arch["sizes"]
        with self.name_scope():
            for i, (a, b) in enumerate(itertools.pairwise(sizes)):
                last = i == len(sizes) - 2
                self.add(nn.Dense(b, activation=None if last else "relu", in_units=a))

    def named(self) -> dict:
        return {name: entry for i, layer in enumerate(self) for name, entry in
                _dense(f"fc{i}", layer).items()}


class CNN(nn.HybridBlock):
    def __init__(self, model: spec.ModelSpec):
        super().__init__()
        a = model.arch
        (c0, c1), k, (s0, s1), pad = a["channels"], a["kernel"], a["strides"], a["padding"]
        with self.name_scope():
            self.conv0 = nn.Conv2D(c0, k, s0, pad, in_channels=model.input_shape[0],
                                   activation="relu")
            self.conv1 = nn.Conv2D(c1, k, s1, pad, in_channels=c0, activation="relu")
            # Dense flattens NCHW maps in (C, H, W) order: the canonical rows' order.
            self.fc = nn.Dense(model.n_outputs, in_units=model.params[-2].shape[0])

    def hybrid_forward(self, F, x):
        return self.fc(self.conv1(self.conv0(x)))

    def named(self) -> dict:
        return {**_conv("conv0", self.conv0), **_conv("conv1", self.conv1),
                **_dense("fc", self.fc)}


class LSTMNet(nn.HybridBlock):
    def __init__(self, model: spec.ModelSpec):
        super().__init__()
        hidden = model.arch["hidden"]
        with self.name_scope():
            # The fused RNN operator (oneDNN's LSTM on CPU); gates i, f, g, o as canonical.
            self.lstm = rnn.LSTM(hidden, layout="NTC", input_size=model.input_shape[1])
            self.fc = nn.Dense(model.n_outputs, in_units=hidden)

    def hybrid_forward(self, F, x):
        out = self.lstm(x)  # (N, T, H), zero initial states
        return self.fc(F.slice_axis(out, axis=1, begin=-1, end=None))  # the last step

    def named(self) -> dict:
        lstm = self.lstm
        return {"lstm.W_ih": (lstm.l0_i2h_weight, TRANSPOSE),
                "lstm.W_hh": (lstm.l0_h2h_weight, TRANSPOSE),
                "lstm.bias": (lstm.l0_i2h_bias, SAME), **_dense("fc", self.fc)}

    def frozen(self) -> list:
        # MXNet's LSTM adds two biases (i2h, h2h), the spec has one: h2h is frozen at zero,
        # so the trained parameters are the spec's (as the torch backend does).
        return [(self.lstm.l0_h2h_bias, 0.0)]


class Bottleneck(nn.HybridBlock):
    def __init__(self, block: dict):
        super().__init__()
        cin, mid, cout, stride = block["in"], block["mid"], block["out"], block["stride"]
        self.project = block["project"]
        with self.name_scope():
            self.conv1 = nn.Conv2D(mid, 1, use_bias=False, in_channels=cin)
            self.bn1 = _batchnorm(mid)
            self.conv2 = nn.Conv2D(mid, 3, stride, 1, use_bias=False, in_channels=mid)
            self.bn2 = _batchnorm(mid)
            self.conv3 = nn.Conv2D(cout, 1, use_bias=False, in_channels=mid)
            self.bn3 = _batchnorm(cout)
            if self.project:
                self.downsample = nn.Conv2D(cout, 1, stride, use_bias=False, in_channels=cin)
                self.downsample_bn = _batchnorm(cout)

    def hybrid_forward(self, F, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        shortcut = self.downsample_bn(self.downsample(x)) if self.project else x
        return F.relu(out + shortcut)

    def named(self, n: str) -> dict:
        named = {}
        for part in ("conv1", "conv2", "conv3") + (("downsample",) if self.project else ()):
            named.update(_conv(f"{n}.{part}", getattr(self, part)))
        for part in ("bn1", "bn2", "bn3") + (("downsample_bn",) if self.project else ()):
            named.update(_bn(f"{n}.{part}", getattr(self, part)))
        return named


class ResNet(nn.HybridBlock):
    """ResNet50 v1.5 from spec.resnet_blocks() (stride in the 3x3 convolution, as
    torchvision; Gluon's model_zoo resnet50_v1 strides the first 1x1 convolution)."""

    def __init__(self, model: spec.ModelSpec):
        super().__init__()
        self.block_names = []
        with self.name_scope():
            self.conv1 = nn.Conv2D(64, 7, 2, 3, use_bias=False,
                                   in_channels=model.input_shape[0])
            self.bn1 = _batchnorm(64)
            self.pool = nn.MaxPool2D(3, 2, 1)
            self.blocks = nn.HybridSequential()
            for blk in spec.resnet_blocks(model.arch["stages"]):
                self.blocks.add(Bottleneck(blk))
                self.block_names.append(blk["name"])
            self.gap = nn.GlobalAvgPool2D()
            self.fc = nn.Dense(model.n_outputs, in_units=2048)

    def hybrid_forward(self, F, x):
        x = self.pool(F.relu(self.bn1(self.conv1(x))))
        return self.fc(self.gap(self.blocks(x)))

    def named(self) -> dict:
        named = {**_conv("conv1", self.conv1), **_bn("bn1", self.bn1)}
        for n, block in zip(self.block_names, self.blocks):
            named.update(block.named(n))
        return {**named, **_dense("fc", self.fc)}


class SelfAttention(nn.HybridBlock):
    """One head of self-attention in explicit matrix products (Gluon 1.x has no attention
    layer): softmax(q k^T / sqrt(E)) v, then the output projection."""

    def __init__(self, model: spec.ModelSpec):
        super().__init__()
        e = model.arch["embed"]
        self.scale = 1.0 / math.sqrt(e)
        with self.name_scope():
            for n in "qkvo":
                setattr(self, n, nn.Dense(e, flatten=False, in_units=e))

    def hybrid_forward(self, F, x):
        q, k, v = self.q(x), self.k(x), self.v(x)
        scores = F.batch_dot(q, k, transpose_b=True) * self.scale
        return self.o(F.batch_dot(F.softmax(scores, axis=-1), v))

    def named(self) -> dict:
        return {name: entry for n in "qkvo"
                for name, entry in _dense(f"attn.{n}", getattr(self, n)).items()}


class CTCNet(nn.HybridBlock):
    def __init__(self, model: spec.ModelSpec):
        super().__init__()
        with self.name_scope():
            self.fc = nn.Dense(model.arch["classes"], flatten=False,
                               in_units=model.arch["features"])

    def hybrid_forward(self, F, x):
        return F.log_softmax(self.fc(x), axis=-1)

    def named(self) -> dict:
        return _dense("fc", self.fc)


class RNNCell(nn.HybridBlock):
    """The slides' cell, written as they write it: explicit weights, dot, tanh."""

    def __init__(self, model: spec.ModelSpec):
        super().__init__()
        with self.name_scope():
            self.W_h = self.params.get("W_h", shape=model.params[0].shape)
            self.W_x = self.params.get("W_x", shape=model.params[1].shape)

    def hybrid_forward(self, F, x, h, W_h, W_x):
        return F.tanh(F.dot(h, W_h, transpose_b=True) + F.dot(x, W_x, transpose_b=True))

    def named(self) -> dict:
        return {"W_h": (self.W_h, SAME), "W_x": (self.W_x, SAME)}


FAMILIES = {"mlp": MLP, "cnn": CNN, "lstm": LSTMNet, "resnet": ResNet,
            "attention": SelfAttention, "ctc": CTCNet, "rnn_cell": RNNCell}
# Families whose model takes the batch's second array (rnn_cell's previous hidden state).
TAKES_AUX = {"rnn_cell"}


class CTCLossBlankFirst(gluon.loss.CTCLoss):
    """gluon.loss.CTCLoss with class 0 as the blank, as the spec has it: Gluon's hard-codes
    blank_label='last'; this passes blank_label='first' to the same CTCLoss operator (labels
    1..C-1, every sequence and label full length, so no lengths and no padding)."""

    def hybrid_forward(self, F, pred, label, pred_lengths=None, label_lengths=None,
                       sample_weight=None):
        if self._layout == "NTC":
            pred = F.swapaxes(pred, 0, 1)
        # The operator applies its own softmax: on log-probabilities it changes nothing.
        return F.CTCLoss(pred, label, use_data_lengths=False, use_label_lengths=False,
                         blank_label="first")


class WithLoss(nn.HybridBlock):
    """The model and its loss, one block (hybridized as one graph in hybrid mode)."""

    def __init__(self, model: nn.HybridBlock, model_spec: spec.ModelSpec):
        super().__init__()
        self.loss_name = model_spec.loss
        self.takes_aux = model_spec.family in TAKES_AUX
        with self.name_scope():
            self.model = model
            if self.loss_name == "xent":
                self.xent = gluon.loss.SoftmaxCrossEntropyLoss()
            elif self.loss_name == "ctc":
                self.ctc = CTCLossBlankFirst(layout="NTC", label_layout="NT")

    def hybrid_forward(self, F, x, aux):
        pred = self.model(x, aux) if self.takes_aux else self.model(x)
        if self.loss_name == "l2":
            return F.norm(aux - pred)  # 000 Fig. 1: norm(true_y - pred_y)
        if self.loss_name == "xent":
            return F.mean(self.xent(pred, aux))
        if self.loss_name == "ctc":
            return F.sum(self.ctc(pred, aux))
        return F.sum(pred)


# ================================================================ canonical <-> MXNet layouts
SAME = (lambda a: a, lambda a: a)
TRANSPOSE = (lambda a: a.T, lambda a: a.T)  # Dense weights: (out, in) vs canonical (in, out)


def _dense(name: str, layer) -> dict:
    named = {f"{name}.weight": (layer.weight, TRANSPOSE)}
    if layer.bias is not None:
        named[f"{name}.bias"] = (layer.bias, SAME)
    return named


def _conv(name: str, layer) -> dict:  # OIHW, as canonical
    named = {f"{name}.weight": (layer.weight, SAME)}
    if layer.bias is not None:
        named[f"{name}.bias"] = (layer.bias, SAME)
    return named


def _batchnorm(channels: int):
    # Inference mode (running mean 0, variance 1) while autograd records in training mode:
    # see INFERENCE_MODE.
    return nn.BatchNorm(epsilon=1e-5, use_global_stats=True, in_channels=channels)


def _bn(name: str, layer) -> dict:
    return {f"{name}.gamma": (layer.gamma, SAME), f"{name}.beta": (layer.beta, SAME)}


def build(model_spec: spec.ModelSpec, arrays: list[np.ndarray], ctx, dtype: str = "float32"):
    """The model block with the canonical arrays loaded; its parameters in spec order, each
    with its gradient's way back to the canonical layout."""
    if model_spec.family not in FAMILIES:
        raise UnsupportedCell(f"mxnet backend has no model family {model_spec.family!r}")
    model = FAMILIES[model_spec.family](model_spec)
    model.initialize(mx.init.Zero(), ctx=ctx)
    if dtype != "float32":  # a float64 build, for the tests' round-off-free comparison
        model.cast(dtype)
    named = model.named()
    names = [p.name for p in model_spec.params]
    if sorted(named) != sorted(names):
        raise ValueError(f"{model_spec.family}: parameters {sorted(named)} do not match the "
                         f"spec's {sorted(names)}")
    binds = [named[n] for n in names]
    for (param, (to_mx, _)), array in zip(binds, arrays, strict=True):
        value = np.ascontiguousarray(to_mx(array), dtype=dtype)
        if value.shape != tuple(param.shape):
            raise ValueError(f"canonical -> mxnet: shape {value.shape} for {param.name} "
                             f"of shape {tuple(param.shape)}")
        param.set_data(mx.nd.array(value, ctx=ctx, dtype=dtype))
    for param, fill in getattr(model, "frozen", list)():
        param.set_data(mx.nd.full(param.shape, fill, ctx=ctx, dtype=dtype))
        param.grad_req = "null"
    trained = {id(p) for p, _ in binds}
    for param in model.collect_params().values():  # every other parameter stays fixed
        if id(param) not in trained and param.grad_req != "null":
            raise ValueError(f"{model_spec.family}: {param.name} is trained, not in the spec")
    if model_spec.family == "resnet":  # batch norm: running mean 0, variance 1
        for param in model.collect_params().values():
            if param.name.endswith("running_mean"):
                param.set_data(mx.nd.zeros(param.shape, ctx=ctx, dtype=dtype))
            elif param.name.endswith("running_var"):
                param.set_data(mx.nd.ones(param.shape, ctx=ctx, dtype=dtype))
    return model, binds


def to_canonical(binds, grads) -> list[np.ndarray]:
    return [np.ascontiguousarray(back(g.asnumpy()))
            for (_, (_, back)), g in zip(binds, grads, strict=True)]


# ================================================================ tasks
def _sync() -> None:
    mx.nd.waitall()


def freeze(binds, workload) -> list:
    """The binds of the parameters the task trains; the frozen part's get grad_req 'null'
    (before hybridize), so autograd computes no gradient through them."""
    trained = trained_params(workload)
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
        return split_timer(lambda: forward(i), backward, _sync, clock)

    def derivatives(i):
        loss = forward(i)
        backward(loss)
        return float(loss.asnumpy().reshape(())), to_canonical(binds,
                                                               [p.grad() for p in params])

    return Prepared(run, derivatives, {"backward": "with autograd.record(): loss = "
                                       "net(x, y); loss.backward(); gradients written into "
                                       "each Parameter's grad (grad_req='write')",
                                       **BACKWARD_CHOICES.get(workload.task, {})})


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
        return split_timer(lambda: forward(i), row_by_row, _sync, clock)

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
        return whole_timer(lambda: loss(i), _sync, clock)

    def derivatives(i):
        return loss_as_array(float(loss(i).asnumpy().reshape(())), dtype)

    return Prepared(run, derivatives, {"forward": "loss = net(x, y) outside autograd.record() "
                                       "(nothing recorded, predict mode); mx.nd.waitall() "
                                       "before the clock is read"})


def _no_jacobian_api(model, binds, batches, workload, hybrid):
    raise UnsupportedCell(
        f"MXNet {mx.__version__} has no Jacobian API: mx.autograd offers backward, grad "
        "(vector-Jacobian products) and mark_variables, but no jacobian and no vmap to "
        f"vectorise them, so {workload.task} cannot be computed as the task defines it")


TASK_BUILDERS = {
    "backward": backward_task,
    "backward_frozen": backward_task,
    "backward_retained": backward_task,
    "jacobian_rows": jacobian_rows_task,
    "jacobian_vectorized": _no_jacobian_api,
    "loss_jacobian": _no_jacobian_api,
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


def prepare(workload: spec.Workload, mode: str, device: str,
            dtype: str = "float32") -> Prepared:
    if mode not in MODE_CHOICES:
        raise UnsupportedCell(f"mxnet has no mode {mode!r}")
    if workload.task not in TASK_BUILDERS:
        raise UnsupportedCell(f"mxnet backend has no task {workload.task!r}")
    if dtype not in ("float32", "float64"):
        raise UnsupportedCell(f"mxnet backend runs float32 (float64 for tests), not {dtype}")
    if dtype != "float32" and workload.spec.loss == "ctc" and workload.task in (
            "backward", spec.FORWARD_TASK):
        raise UnsupportedCell("MXNet's CTCLoss operator computes in float32 only: no "
                              f"{dtype} CTC loss")
    if device == "cuda":
        if mx.context.num_gpus() == 0:
            raise UnsupportedCell("device cuda requested but the mxnet 1.9.1 wheel is "
                                  "CPU-only (mx.context.num_gpus() == 0)")
        ctx = mx.gpu(0)
    else:
        ctx = mx.cpu()
    if workload.task in ("jacobian_vectorized", "loss_jacobian"):
        _no_jacobian_api(None, None, None, workload, mode == "hybrid")
    model_spec = workload.spec
    model, binds = build(model_spec, spec.make_params(workload), ctx, dtype)
    # Batches on the device up front (data transfer is not timed); integer labels (xent,
    # CTC) as floats, as Gluon's losses take them.
    second = "h0" if model_spec.family in TAKES_AUX else "y"
    batches = [tuple(mx.nd.array(b[k], ctx=ctx, dtype=dtype) for k in ("x", second))
               for b in spec.make_batches(workload)]
    _sync()
    prepared = TASK_BUILDERS[workload.task](model, binds, batches, workload,
                                            mode == "hybrid")
    features = _features()
    prepared.choices.update({
        "model": "Gluon HybridBlocks (nn.Dense, nn.Conv2D, rnn.LSTM, nn.BatchNorm) or "
                 "explicit NDArray ops (attention's matmuls, the slides' RNN cell)",
        "engine": f"MXNET_ENGINE_TYPE={_ENV_AT_LOAD['MXNET_ENGINE_TYPE']}, "
                  f"MXNET_CPU_WORKER_NTHREADS={_ENV_AT_LOAD['MXNET_CPU_WORKER_NTHREADS']}, "
                  f"OMP_NUM_THREADS={_ENV_AT_LOAD['OMP_NUM_THREADS']} (set before import); "
                  "mx.nd.waitall() before every clock read",
        "onednn": "on" if features.get("MKLDNN") and
                  os.environ.get("MXNET_MKLDNN_ENABLED", "1") != "0" else "off",
        "blas": ", ".join(n for n in ("BLAS_OPEN", "BLAS_MKL", "BLAS_ATLAS", "BLAS_APPLE")
                          if features.get(n)) or "none",
        "layout": "NCHW images, OIHW kernels, Dense weights (out, in) (converted once, at "
                  "preparation)",
        "dtype": dtype,
        "inference_mode": INFERENCE_MODE,
        "cache": "none: MXNet keeps no compile cache on disk (a hybridized block's graph "
                 "lives in the process)",
        **_family_choices(model_spec),
        **MODE_CHOICES[mode],
    })
    return prepared


def _family_choices(model_spec: spec.ModelSpec) -> dict[str, str]:
    return {
        "lstm": {"lstm": "gluon.rnn.LSTM (fused RNN operator, oneDNN on CPU), gates i, f, g, "
                         "o; its h2h bias frozen at zero (grad_req='null')"},
        "resnet": {"resnet": "built by hand from spec.resnet_blocks() (v1.5); nn.BatchNorm("
                             "use_global_stats=True): running statistics"},
        "ctc": {"ctc": "gluon.loss.CTCLoss subclassed to pass blank_label='first' (Gluon "
                       "hard-codes 'last'; the spec's blank is class 0) to the same "
                       "CTCLoss operator, summed over the batch"},
        "attention": {"attention": "nn.Dense(flatten=False) projections, batch_dot and "
                                   "softmax (Gluon 1.x has no attention layer)"},
        "mlp": {"dense": "nn.Dense(activation='relu')"},
    }.get(model_spec.family, {})
