"""PyTensor backend: a symbolic graph of model and loss, pytensor.grad for the derivatives,
one pytensor.function per cell, compiled in `prepare`; modes "c" and "numba".

    c      Mode(linker="cvm", optimizer="fast_run"): the FAST_RUN rewrites, C thunks run by
           the C virtual machine (g++ at compile time, modules cached in the compiledir).
    numba  the predefined NUMBA mode (NumbaLinker, FAST_RUN + numba rewrites): the whole
           graph becomes one Numba function.  It is PyTensor 3.0.7's default: config.linker
           defaults to "auto", which Mode() and get_mode("FAST_RUN") resolve to NUMBA.

Weights are shared variables (pytensor.shared, borrow=True) holding the spec's canonical
arrays, which are already the layouts PyTensor users write (x @ W with W (in, out), NCHW
images, OIHW kernels): nothing is converted, and derivatives are taken w.r.t. the shared
variables.  Batches are the function's inputs (numpy arrays, passed as they are).

Compile caches live under $ADBENCH_CACHE_DIR/pytensor (base_compiledir for the C modules,
and the Numba caches), set here before pytensor and numba are imported.  One cache dir
serves every cell of a run, so a cell's compile_s is cold only for the first cell that
needs a module; `choices["cache"]` says what was in the cache before the cell compiled.
"""

from __future__ import annotations

import inspect
import os
import time


# ================================================================ caches, before the import
# (the backends package imports no framework)
from adbench.backends import (  # noqa: E402
    Prepared, UnsupportedCell, blas, cache_dir, compose_flags, no_sync)

CACHE_DIR = cache_dir("pytensor")
os.environ["PYTENSOR_FLAGS"] = compose_flags(
    os.environ.get("PYTENSOR_FLAGS", ""),
    forced={"base_compiledir": CACHE_DIR},
    # float32 Python literals (1 / sqrt(E), the CTC's -1e30): no silent float64 upcasts.
    defaults={"floatX": "float32"})
# Numba's own file cache (functions PyTensor jits with cache=True); PyTensor's cache of the
# graphs it generates is <base_compiledir>/numba.
os.environ["NUMBA_CACHE_DIR"] = os.path.join(CACHE_DIR, "numba_functions")
if os.environ.get("OMP_NUM_THREADS") and "NUMBA_NUM_THREADS" not in os.environ:
    os.environ["NUMBA_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"]

import numba  # noqa: E402
import numpy as np  # noqa: E402
import pytensor  # noqa: E402
import pytensor.tensor as pt  # noqa: E402
import scipy  # noqa: E402
from pytensor.compile.builders import OpFromGraph  # noqa: E402
from pytensor.compile.mode import Mode, get_mode  # noqa: E402
from pytensor.gradient import disconnected_grad  # noqa: E402
from pytensor.gradient import jacobian as pt_jacobian  # noqa: E402
from pytensor.scan.op import Scan  # noqa: E402

from adbench import spec  # noqa: E402
from adbench.timing import whole_timer  # noqa: E402


# ================================================================ environment
def configure_threads(threads: int) -> dict:
    """OpenBLAS (numpy's, used by the C thunks' BLAS fallback and by numpy-based perform
    methods; scipy's, which Numba's np.dot calls) reads OPENBLAS_NUM_THREADS, pinned by the
    harness before the import; threadpoolctl sets it again and reports it.  PyTensor's own C
    code runs one thread (config.openmp False, reported in choices); Numba's thread pool
    (used only by parallel=True code, which PyTensor does not generate by default) is set
    too."""
    import scipy.linalg  # noqa: F401  (loads scipy's OpenBLAS, which Numba's BLAS calls use)

    pools = blas.limit_threads(threads)
    try:
        numba.set_num_threads(threads)
    except ValueError:  # more than NUMBA_NUM_THREADS, fixed when numba was imported
        pass
    return {"numba": numba.get_num_threads(), **pools}


def versions() -> dict[str, str]:
    return {"pytensor": pytensor.__version__, "numpy": np.__version__,
            "numba": numba.__version__, "scipy": scipy.__version__}


def device_name(device: str) -> str:
    return "cpu"


# ================================================================ layers (symbolic)
def relu(x):
    return pt.maximum(x, 0)


def dense(x, w, b=None):
    y = pt.dot(x, w)
    return y if b is None else y + b


def _pad(x, pad: int, value: float = 0.0):
    """Zero- (or value-) padding of an NCHW tensor's two spatial axes."""
    if pad == 0:
        return x
    n, c, h, w = x.shape
    z = pt.alloc(np.asarray(value, dtype=x.dtype), n, c, h + 2 * pad, w + 2 * pad)
    return pt.set_subtensor(z[:, :, pad:-pad, pad:-pad], x)


def _windows(x, size: tuple[int, int], kernel: int, stride: int, pad: int, fill=0.0):
    """The kernel*kernel shifted, strided views of the padded input (im2col's columns)."""
    h, w = size
    out_h, out_w = (h + 2 * pad - kernel) // stride + 1, (w + 2 * pad - kernel) // stride + 1
    x = _pad(x, pad, fill)
    views = [x[:, :, i:i + stride * (out_h - 1) + 1:stride, j:j + stride * (out_w - 1) + 1:stride]
             for i in range(kernel) for j in range(kernel)]
    return views, (out_h, out_w)


def conv2d(x, w, size: tuple[int, int], shape: tuple[int, ...], stride: int, pad: int,
           b=None):
    """Cross-correlation of NCHW `x` with OIHW `w` (as torch.nn.Conv2d), as im2col: PyTensor
    3.0.7 has no multi-channel convolution op (tensor.nnet and tensor.conv are gone; its
    signal.convolve2d is single-channel scipy.signal-style), so the kernel*kernel strided
    views are stacked and contracted with the kernel in one tensordot (one GEMM)."""
    c_out, c_in, k, _ = shape
    views, out = _windows(x, size, k, stride, pad)
    cols = views[0] if k == 1 else pt.stack(views, axis=2)  # (N, C, k*k, OH, OW)
    cols = cols.reshape((cols.shape[0], c_in * k * k, out[0], out[1]))
    y = pt.tensordot(w.reshape((c_out, c_in * k * k)), cols, axes=[[1], [1]])  # (O, N, ...)
    y = y.dimshuffle(1, 0, 2, 3)
    return (y if b is None else y + b.dimshuffle("x", 0, "x", "x")), out


def max_pool(x, size: tuple[int, int], kernel: int, stride: int, pad: int):
    views, out = _windows(x, size, kernel, stride, pad, fill=-np.inf)
    return pt.max(pt.stack(views, axis=0), axis=0), out


BN_EPS = 1e-5  # torch.nn.BatchNorm2d's


def batch_norm(x, gamma, beta):
    """Inference mode with running mean 0 and variance 1 (the spec's)."""
    scale = gamma / float(np.sqrt(1.0 + BN_EPS))  # a Python float: float32 or 64 as gamma
    return x * scale.dimshuffle("x", 0, "x", "x") + beta.dimshuffle("x", 0, "x", "x")


# ================================================================ models
# Each takes (spec, params (shared variables, spec order), x, aux) and returns the output.
def mlp(model, params, x, aux):
    layers = len(model.arch["sizes"]) - 1
    for i in range(layers):
        x = dense(x, params[2 * i], params[2 * i + 1])
        if i < layers - 1:
            x = relu(x)
    return x


def cnn(model, params, x, aux):
    a = model.arch
    size = model.input_shape[1:]
    for i in range(2):
        w, b = params[2 * i], params[2 * i + 1]
        x, size = conv2d(x, w, size, model.params[2 * i].shape, a["strides"][i],
                         a["padding"], b)
        x = relu(x)
    return dense(x.flatten(2), params[4], params[5])  # flattened in (C, H, W) order


def lstm(model, params, x, aux):
    w_ih, w_hh, bias, w_fc, b_fc = params
    hidden = model.arch["hidden"]
    inputs = dense(x.dimshuffle(1, 0, 2), w_ih, bias)  # (T, N, 4H): one GEMM for all steps

    def step(pre, h, c, w_hh):
        z = pre + pt.dot(h, w_hh)
        i = pt.sigmoid(z[:, :hidden])
        f = pt.sigmoid(z[:, hidden:2 * hidden])
        g = pt.tanh(z[:, 2 * hidden:3 * hidden])
        o = pt.sigmoid(z[:, 3 * hidden:])
        c = f * c + i * g
        return o * pt.tanh(c), c

    h0 = pt.zeros((x.shape[0], hidden), dtype=x.dtype)
    hs, _ = pytensor.scan(step, sequences=inputs, outputs_info=[h0, h0],
                          non_sequences=[w_hh], return_updates=False, return_list=True)
    return dense(hs[-1], w_fc, b_fc)


def resnet(model, params, x, aux):
    it = iter(zip(params, model.params))

    def conv_bn(x, size, stride, pad, relu_after=True):
        (w, p), (gamma, _), (beta, _) = next(it), next(it), next(it)
        y, size = conv2d(x, w, size, p.shape, stride, pad)
        y = batch_norm(y, gamma, beta)
        return (relu(y) if relu_after else y), size

    size = model.input_shape[1:]
    x, size = conv_bn(x, size, 2, 3)
    x, size = max_pool(x, size, 3, 2, 1)
    for blk in spec.resnet_blocks():
        y, out = conv_bn(x, size, 1, 0)
        y, out = conv_bn(y, out, blk["stride"], 1)
        y, out = conv_bn(y, out, 1, 0, relu_after=False)
        shortcut = conv_bn(x, size, blk["stride"], 0, relu_after=False)[0] \
            if blk["project"] else x
        x, size = relu(y + shortcut), out
    (w_fc, _), (b_fc, _) = next(it), next(it)
    return dense(x.mean(axis=(2, 3)), w_fc, b_fc)


def attention(model, params, x, aux):
    """One head, as nn.MultiheadAttention: softmax(q k^T / sqrt(E)) v, then the output
    projection; x (N, L, E)."""
    wq, bq, wk, bk, wv, bv, wo, bo = params
    q, k, v = dense(x, wq, bq), dense(x, wk, bk), dense(x, wv, bv)
    scores = pt.matmul(q, k.dimshuffle(0, 2, 1)) / np.float32(np.sqrt(model.arch["embed"]))
    weights = pt.special.softmax(scores, axis=-1)
    return dense(pt.matmul(weights, v), wo, bo)


def ctc_net(model, params, x, aux):
    return pt.special.log_softmax(dense(x, params[0], params[1]), axis=-1)


def rnn_cell(model, params, x, aux):
    w_h, w_x = params
    return pt.tanh(pt.dot(aux, w_h.T) + pt.dot(x, w_x.T))


FAMILIES = {"mlp": mlp, "cnn": cnn, "lstm": lstm, "resnet": resnet, "attention": attention,
            "ctc": ctc_net, "rnn_cell": rnn_cell}


# ================================================================ losses
NEG = np.float32(-1e30)  # log(0) for the CTC recursion: finite, so no inf - inf in gradients


def _logsumexp(*terms):
    m = terms[0]
    for t in terms[1:]:
        m = pt.maximum(m, t)
    m = disconnected_grad(m)  # the max only shifts: its derivative cancels exactly
    return m + pt.log(sum(pt.exp(t - m) for t in terms))


def ctc_loss(log_probs, labels, model):
    """CTC (blank 0), summed over the batch; every sequence and label at full length.

    PyTensor has no CTC op, so it is written as PyTensor users write recurrences: the
    forward (alpha) recursion in log space over the time steps with pytensor.scan over the
    extended label sequence (blanks between and around the labels); pytensor.grad
    differentiates through the scan."""
    n_labels, classes = model.arch["label_length"], model.arch["classes"]
    states = 2 * n_labels + 1
    n = labels.shape[0]
    blanks = pt.zeros_like(labels)
    ext = pt.concatenate([pt.stack([blanks, labels], axis=2).reshape((n, 2 * n_labels)),
                          blanks[:, :1]], axis=1)  # (N, S): blank, l1, blank, l2, ..., blank
    one_hot = pt.eq(ext[:, :, None], pt.arange(classes)[None, None, :]).astype(log_probs.dtype)
    emit = pt.matmul(log_probs, one_hot.dimshuffle(0, 2, 1)).dimshuffle(1, 0, 2)  # (T, N, S)
    skip = pt.concatenate([pt.zeros((n, 2), dtype="bool"),
                           pt.neq(ext[:, 2:], 0) & pt.neq(ext[:, 2:], ext[:, :-2])], axis=1)
    alpha0 = pt.switch(pt.lt(pt.arange(states), 2)[None, :], emit[0], NEG)

    def step(e, alpha, skip):
        pad1 = pt.alloc(NEG, n, 1)
        from_prev = pt.concatenate([pad1, alpha[:, :-1]], axis=1)
        from_skip = pt.switch(skip, pt.concatenate([pad1, pad1, alpha[:, :-2]], axis=1), NEG)
        return _logsumexp(alpha, from_prev, from_skip) + e

    alphas = pytensor.scan(step, sequences=emit[1:], outputs_info=alpha0,
                           non_sequences=skip, return_updates=False)
    last = alphas[-1]
    return -_logsumexp(last[:, states - 1], last[:, states - 2]).sum()


def loss_of(model, pred, aux):
    """As torch_backend.WithLoss: l2 = ||y - pred||_2, mean cross-entropy, summed CTC, sum."""
    if model.loss == "l2":
        return pt.sqrt(pt.sum(pt.sqr(aux - pred)))
    if model.loss == "xent":
        log_p = pt.special.log_softmax(pred, axis=-1)
        return -pt.mean(log_p[pt.arange(aux.shape[0]), aux])
    if model.loss == "ctc":
        return ctc_loss(pred, aux, model)
    return pred.sum()


# ================================================================ graphs of the tasks
MODES = {
    "c": (("pytensor.compile.mode.Mode(linker='cvm', optimizer='fast_run'): FAST_RUN "
           "rewrites, C thunks (g++) run by the C VM"),
          lambda: Mode(linker="cvm", optimizer="fast_run")),
    "numba": (("get_mode('NUMBA'): NumbaLinker with FAST_RUN + numba rewrites, the whole "
               "graph jitted as one Numba function; PyTensor 3.0.7's default mode "
               "(config.linker 'auto' resolves to numba)"),
              lambda: get_mode("NUMBA")),
}


LINKERS = {"c": "cvm", "numba": "auto"}

# Cells refused before compiling, with what was measured (tiny workload, 2-core machine
# shared with other jobs, PyTensor 3.0.7, Numba 0.65.1).
REFUSED = {
    ("numba", "resnet"):
        "PyTensor 3.0.7's Numba mode does not compile ResNet50 in reasonable time: the "
        "backward graph (2467 nodes after the FAST_RUN + numba rewrites, which took 130 s) "
        "had not finished Numba's compilation after 25 minutes (11.7 CPU-minutes); the "
        "2-convolution CNN's 138-node graph takes 290 s of Numba compilation (2.1 s per "
        "node: about 85 minutes for ResNet50's, extrapolated)",
}


def _inputs(model, dtype: str, per_example: bool):
    """Symbolic x (batch axis free, the rest static) and aux (targets, labels or h0)."""
    x = pt.tensor("x", dtype=dtype, shape=(1 if per_example else None, *model.input_shape))
    if model.family == "rnn_cell":
        aux = pt.tensor("h0", dtype=dtype, shape=(x.type.shape[0], model.arch["hidden"]))
    elif model.loss in ("xent", "ctc"):
        aux = pt.tensor("y", dtype="int64",
                        shape=(None,) if model.loss == "xent" else (None, None))
    else:
        aux = pt.tensor("y", dtype=dtype, shape=(None, *model.output_shape))
    return x, aux


def _graph(workload: spec.Workload, params, dtype: str):
    """(function inputs, outputs, choices) of the task's step."""
    model, task = workload.spec, workload.task
    forward = FAMILIES[model.family]
    x, aux = _inputs(model, dtype, workload.per_example)
    if task in ("backward", "loss_jacobian"):
        loss = loss_of(model, forward(model, params, x, aux), aux)
        if task == "backward":
            grads = pytensor.grad(loss, params)
            choice = "pytensor.grad(loss, shared weights)"
        else:
            grads = pt_jacobian(loss, params)
            choice = ("pytensor.gradient.jacobian(loss, shared weights): for a scalar "
                      "expression it is pytensor.grad (the same graph as backward)")
        return [x, aux], [loss, *grads], {"derivative": choice}
    rows = min(workload.jacobian_rows, model.n_outputs)
    inputs = [x, aux] if model.family == "rnn_cell" else [x]
    out = forward(model, params, x, aux).flatten()[:rows]
    if task == "jacobian_rows":
        jac = pt_jacobian(out, x, vectorize=False)  # (rows, 1, *input)
        return inputs, [jac.reshape((rows, *model.input_shape))], {
            "derivative": "pytensor.gradient.jacobian(out, x, vectorize=False): "
                          "pytensor.scan over the rows, one pytensor.grad of out[r] w.r.t. x "
                          "per iteration (FAST_RUN hoists the loop-invariant forward out of "
                          "the scan). A Python loop of pytensor.grad calls unrolled into one "
                          "graph was not used: the 128-row attention Jacobian had not "
                          "finished compiling after 5 minutes in C mode"}
    if task == "jacobian_vectorized":
        jac = pt_jacobian(out, x, vectorize=True)  # (rows, 1, *input)
        return inputs, [jac.reshape((rows, *model.input_shape))], {
            "derivative": "pytensor.gradient.jacobian(out, x, vectorize=True): one pullback "
                          "with a symbolic cotangent, vectorize_graph over the rows of eye"}
    raise UnsupportedCell(f"pytensor backend has no task {task!r}")


# ================================================================ compilation
def _cache_state() -> str:
    c_modules = [d for d in pytensor.config.compiledir.glob("tmp*") if d.is_dir()] \
        if pytensor.config.compiledir.exists() else []
    numba_dir = pytensor.config.base_compiledir / "numba"
    numba_files = sum(len(files) for _, _, files in os.walk(numba_dir))
    state = "cold (empty)" if not c_modules and not numba_files else "warm"
    return (f"{state} before this cell: {len(c_modules)} C modules, {numba_files} Numba cache "
            f"files under {pytensor.config.base_compiledir}; the cache dir is shared by every "
            "cell run with the same ADBENCH_CACHE_DIR, so a later cell's compile_s reuses "
            "what earlier cells compiled")


def _compile_inner_functions(fgraph, seen: set | None = None) -> int:
    """Compile, in prepare, the functions the C VM would otherwise compile at the first call:
    the inner graphs of OpFromGraph nodes (PyTensor 3.0.7's Softmax and LogSoftmax are
    OpFromGraph ops that the C linker runs through `op.fn`, compiled lazily), also inside
    Scan's inner functions.  Nothing is computed.  Returns how many were compiled."""
    seen = set() if seen is None else seen
    count = 0
    for node in fgraph.apply_nodes:
        op = node.op
        if id(op) in seen:
            continue
        seen.add(id(op))
        if isinstance(op, OpFromGraph):
            count += 1 + _compile_inner_functions(op.fn.maker.fgraph, seen)
        elif isinstance(op, Scan):
            count += _compile_inner_functions(op.fn.maker.fgraph, seen)
    return count


def _numba_compile(function, args) -> str:
    """Compile the Numba function for the exact types of the first call, in prepare (the
    NumbaLinker jits lazily, at the first call, otherwise); no step is run."""
    jit_fn = getattr(function.vm, "jit_fn", None)
    if jit_fn is None or not hasattr(jit_fn, "compile"):
        return "lazy: no Numba dispatcher found; compiled at the first call"
    given = iter(args)
    values = tuple(c.data if c.implicit else next(given) for c in function.input_storage)
    if jit_fn.py_func.__code__.co_flags & inspect.CO_VARARGS:
        # PyTensor's cached wrapper is `def f(*args)`: Numba's dispatcher folds the call's
        # arguments into one tuple and types that.
        jit_fn.compile((numba.typeof(values),))
    else:
        jit_fn.compile(tuple(numba.typeof(v) for v in values))
    return "Numba dispatcher compiled in prepare for the first call's argument types"


def numba_signatures(function) -> int | None:
    """How many signatures the Numba function has compiled (1: no recompilation)."""
    jit_fn = getattr(function.vm, "jit_fn", None)
    return len(jit_fn.signatures) if jit_fn is not None else None


def prepare(workload: spec.Workload, mode: str, device: str, dtype: str = "float32") -> Prepared:
    if mode not in MODES:
        raise UnsupportedCell(f"pytensor has no mode {mode!r}")
    if device != "cpu":
        raise UnsupportedCell("the pytensor backend runs on CPU only (its C and Numba "
                              "linkers are CPU backends)")
    model = workload.spec
    if model.family not in FAMILIES:
        raise UnsupportedCell(f"pytensor backend has no model family {model.family!r}")
    if (mode, model.family) in REFUSED:
        raise UnsupportedCell(REFUSED[mode, model.family])
    params = [pytensor.shared(a.astype(dtype, copy=False), name=p.name, borrow=True)
              for p, a in zip(model.params, spec.make_params(workload), strict=True)]
    batches = [tuple(np.ascontiguousarray(
        b[k].astype(dtype, copy=False) if b[k].dtype.kind == "f" else b[k])
        for k in ("x", "h0" if "h0" in b else "y")) for b in spec.make_batches(workload)]
    mode_label, make_mode = MODES[mode]
    # The linker of the functions PyTensor compiles for itself with the default mode (the
    # inner graphs of OpFromGraph ops in C mode): "auto" is Numba; a C-mode user picks the C
    # backend with PYTENSOR_FLAGS=linker=cvm, set here per cell (one cell per process in
    # the pipeline; the tests run cells of both modes in one process, in turn).
    pytensor.config.linker = LINKERS[mode]
    cache = _cache_state()

    t = time.perf_counter()
    inputs, outputs, choices = _graph(workload, params, dtype)
    function = pytensor.function(inputs, outputs, mode=make_mode())
    inner = _compile_inner_functions(function.maker.fgraph) if mode == "c" else None
    args = lambda i: batches[i % len(batches)][:len(inputs)]  # noqa: E731
    jit = _numba_compile(function, args(0)) if mode == "numba" else None
    compile_s = time.perf_counter() - t
    for o in function.maker.fgraph.outputs:
        if o.dtype != dtype:
            raise RuntimeError(f"output of dtype {o.dtype}, not {dtype}: an upcast in the graph")

    jitted = numba_signatures(function) if mode == "numba" else None

    def run(i, clock):
        # The compiled function computes synchronously and returns numpy arrays.
        sample = whole_timer(lambda: function(*args(i)), no_sync, clock)
        if jitted is not None and numba_signatures(function) != jitted:
            raise RuntimeError("Numba compiled a new signature during a timed call: the "
                               "compilation in prepare did not match the call's types")
        return sample

    def derivatives(i):
        values = function(*args(i))
        if spec.TASKS[workload.task].derivative == "jacobian":
            return float("nan"), [np.asarray(values[0])]
        return float(values[0]), [np.asarray(v) for v in values[1:]]

    choices.update({
        "mode": mode_label,
        "graph": "symbolic PyTensor graph of model + loss; weights are shared variables "
                 "(canonical layouts, no conversion), batches are function inputs",
        "compile_s": "symbolic differentiation + pytensor.function (rewrites, C code "
                     "generation and g++ / Numba code generation)"
                     + (" + Numba's LLVM compilation for the first call's types"
                        if mode == "numba" else ""),
        "cache": cache,
        "blas": f"blas__ldflags={pytensor.config.blas__ldflags!r}"
                + (" (empty: PyTensor's NumPy C-API BLAS fallback)"
                   if not pytensor.config.blas__ldflags else ""),
        "openmp": str(pytensor.config.openmp),
        "trust_input": "False (pytensor.function's default: inputs are checked at each call)",
        "dtype": dtype,
    })
    if mode == "c":
        choices["linker"] = (f"config.linker='cvm' (PyTensor's default 'auto' is Numba): the "
                             f"{inner} inner function(s) of OpFromGraph ops (Softmax, "
                             "LogSoftmax), which the C VM compiles lazily at the first call, "
                             "are compiled in C, in prepare")
    if mode == "numba":
        choices["numba"] = f"{jit}; fastmath={pytensor.config.numba__fastmath} (default)"
    if model.family == "cnn" or model.family == "resnet":
        choices["conv"] = ("im2col: kernel*kernel strided slices stacked, one tensordot per "
                           "convolution (PyTensor 3.0.7 has no multi-channel conv2d op)")
    if model.family == "resnet":
        choices["pool"] = "max pool as the max over the 9 strided slices of the -inf-padded input"
    if model.loss == "ctc":
        choices["ctc"] = ("CTC written in PyTensor: log-space alpha recursion with "
                          "pytensor.scan (no CTC op in PyTensor)")
    if model.family == "lstm":
        choices["lstm"] = ("pytensor.scan over the 28 steps; input projection x @ W_ih + b "
                           "for all steps before the scan")
    prepared = Prepared(run, derivatives, choices, compile_s)
    prepared.function = function  # for the tests (e.g. Numba signatures after the loop)
    return prepared
