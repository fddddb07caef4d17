"""JAX backend: every model a plain jax.numpy / jax.lax function of a parameter dict; eager
(op by op, no jit) and jit (the whole step in one jax.jit) modes; every task of the spec.

No model library (flax, haiku, optax): the models are the pure functions JAX users write,
`forward(params, x, aux) -> output`, with `params` a dict from the spec's parameter names to
arrays in the spec's canonical layouts (x @ W dense weights, NCHW images, OIHW kernels: XLA
chooses its own physical layouts), so no conversion is needed either way.  `aux` is the
batch's second array: rnn_cell's previous hidden state, else the targets (ignored by the
model).

What "eager" means in JAX: no jax.jit anywhere, and every step runs under jax.disable_jit(),
so the jax.numpy functions JAX implements with an internal jit (jnp.linalg.norm,
jax.nn.log_softmax, ...) and the body of lax.scan also run primitive by primitive.  Each
primitive is still executed by XLA: JAX compiles it once per shape and dtype and caches the
executable in the process (JAX's own op-by-op dispatch), so the first iterations pay those
small compilations.  jax.grad/jax.vjp/jax.jacrev trace the Python function at every call.

Variable-length tasks (spec.SEQUENCE_TASKS): the LSTM and the RNN cell on sequences
(SEQUENCE_FAMILIES), the same code for every strategy, masked to each example's length.
Eager runs every batch at whatever length it has.  jax.jit compiles once per new input
shape (true length: per new length; padded: once; bucketed: per bucket), counted by
Prepared.traces (the jitted step's cache size).  The dynamic-shape strategy is unsupported
in both modes: jax.jit has none (padding and bucketing are JAX's answer), eager needs none.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import math
import os
from importlib import metadata
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from adbench import spec
from adbench.backends import (
    Prepared,
    UnsupportedCell,
    check_sequence_model,
    device_not_visible,
    trained_params,
)
from adbench.derivatives import loss_as_array
from adbench.clock import split_timer, whole_timer

MODES = ("eager", "jit")


# ================================================================ environment
def _pool_threads() -> int:
    """Threads of XLA:CPU's intra-op (Eigen) pool alive in this process, by their names."""
    count = 0
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/comm") as f:
                if "XLAEigen" in f.read():
                    count += 1
        except OSError:  # a thread that ended while we looked
            pass
    return count


def configure_threads(threads: int) -> dict:
    """XLA's CPU client ignores OMP_NUM_THREADS: it sizes its client and intra-op (Eigen)
    thread pools from PJRT_NPROC (else every core), read when the client is created; at one
    thread, --xla_cpu_multi_thread_eigen=false also keeps Eigen's matmuls and convolutions
    on the calling thread.  Both are set here, then the CPU client is created, so the
    backend starts with them; the report counts the intra-op pool's live threads."""
    os.environ["PJRT_NPROC"] = str(threads)
    forced = {"--xla_cpu_multi_thread_eigen": "false" if threads == 1 else "true",
              **_cuda_autotune_flags()}
    flags = [f for f in os.environ.get("XLA_FLAGS", "").split()
             if f.split("=", 1)[0] not in forced]
    flags += [f"{name}={value}" for name, value in forced.items()]
    os.environ["XLA_FLAGS"] = " ".join(flags)
    # JAX's persistent compilation cache (used when a directory is configured, e.g. by
    # JAX_COMPILATION_CACHE_DIR) stays off, so no cell reads another's: every process
    # compiles cold and nothing is written outside the process.
    jax.config.update("jax_enable_compilation_cache", False)
    jax.devices("cpu")  # creates the CPU client now, with these settings
    return {"xla_cpu_intra_op_pool": _pool_threads()}


def _cuda_plugin_installed() -> bool:
    """Whether this is a CUDA environment (envs/jax-cuda.yaml: jax[cuda12]), which the
    pipeline uses for cuda cells only."""
    return any(importlib.util.find_spec(name) is not None
               for name in ("jax_cuda12_plugin", "jax_cuda13_plugin"))


def _cuda_autotune_flags() -> dict[str, str]:
    """XLA's GPU autotuning as spec.CUDA_NUMERICS says, in a CUDA environment only (a CPU
    environment's XLA_FLAGS stay as they were).  It is set in configure_threads, before the
    device is known, because XLA parses XLA_FLAGS once, when the first client starts (measured:
    a flag added after jax.devices() is ignored)."""
    if spec.CUDA_NUMERICS["cudnn_autotune"] or not _cuda_plugin_installed():
        return {}
    return {"--xla_gpu_autotune_level": "0"}


def versions() -> dict[str, str]:
    return {"jax": jax.__version__, "jaxlib": metadata.version("jaxlib"),
            "numpy": np.__version__}


def _gpus() -> list:
    try:
        return jax.devices("gpu")
    except RuntimeError:  # no GPU backend in this jaxlib (the CPU wheel)
        return []


def device_name(device: str) -> str:
    if device == "cuda" and _gpus():
        return _gpus()[0].device_kind
    return "cpu"


def apply_cuda_numerics(numerics: dict) -> dict[str, str]:
    """spec.CUDA_NUMERICS in JAX's switches, before anything is traced; returns what is in
    force for the cell's choices (autotuning: see _cuda_autotune_flags)."""
    # JAX's default float32 matmul/conv precision on GPU is TF32; "highest" is full float32.
    jax.config.update("jax_default_matmul_precision",
                      "tensorfloat32" if numerics["tf32"] else "highest")
    flags = os.environ.get("XLA_FLAGS", "")
    return {
        "cuda_tf32": f"jax_default_matmul_precision={jax.config.jax_default_matmul_precision}",
        "cuda_autotune": f"XLA_FLAGS={flags!r}, parsed when configure_threads started the "
                         "client" + ("" if "--xla_gpu_autotune_level=0" in flags
                                     else " (no --xla_gpu_autotune_level=0: XLA autotunes)"),
        "cuda_memory": "XLA_PYTHON_CLIENT_PREALLOCATE="
                       f"{os.environ.get('XLA_PYTHON_CLIENT_PREALLOCATE', 'unset')} (JAX's "
                       "default preallocates 75% of the GPU's memory)",
    }


def gpu_info(device: str) -> dict | None:
    """The GPU a cuda cell runs on, as JAX sees it (driver and total memory: provenance.gpu,
    from nvidia-smi)."""
    if device != "cuda" or not _gpus():
        return None
    gpu = _gpus()[0]
    info = {"name": gpu.device_kind,
            "compute_capability": getattr(gpu, "compute_capability", None),
            "peak_memory_scope": "device.memory_stats()['peak_bytes_in_use'] since the "
                                 "process started (JAX has no reset): preparation and "
                                 "warm-up included"}
    try:  # the CUDA plugin's own versions (private module, absent from the CPU jaxlib)
        from jax._src.lib import cuda_versions
        info["cuda_version"] = str(cuda_versions.cuda_runtime_get_version())
        info["cudnn_version"] = str(cuda_versions.cudnn_get_version())
    except (ImportError, AttributeError, RuntimeError):
        pass
    return info


def cuda_runtime() -> tuple[str | None, str]:
    """The CUDA runtime JAX's CUDA plugin loaded (None: the CPU jaxlib); where the plugin
    cannot say, the CUDA major version its package is built for."""
    try:  # the CUDA plugin's own versions (private module, absent from the CPU jaxlib)
        from jax._src.lib import cuda_versions
        return (str(cuda_versions.cuda_runtime_get_version()),
                "jax._src.lib.cuda_versions.cuda_runtime_get_version()")
    except (ImportError, AttributeError, RuntimeError):
        pass
    for major in ("13", "12"):
        plugin = f"jax_cuda{major}_plugin"
        if importlib.util.find_spec(plugin) is not None:
            return major, f"the installed {plugin}"
    return None, "no jax_cuda*_plugin installed"


def reset_peak_memory(device: str) -> None:
    """JAX exposes no reset of its peak: the peak covers the whole process (gpu_info says)."""


def peak_memory(device: str) -> int | None:
    if device != "cuda" or not _gpus():
        return None
    stats = _gpus()[0].memory_stats() or {}
    peak = stats.get("peak_bytes_in_use")
    return int(peak) if peak is not None else None


def device_memory_in_use(device: str) -> int | None:
    """The device buffers still allocated now (live arrays, a kept VJP's residuals included)."""
    if device != "cuda" or not _gpus():
        return None
    in_use = (_gpus()[0].memory_stats() or {}).get("bytes_in_use")
    return int(in_use) if in_use is not None else None


def _no_gpu_words() -> str:
    """JAX's own account: asking for the CUDA platform raises why it is absent ("Backend
    'cuda' failed to initialize: ..." keeps the plugin's error, a driver too old among them)."""
    try:
        jax.devices("cuda")
        words = "jax.devices('gpu') is empty"
    except RuntimeError as exc:
        words = f"jax.devices('cuda') raised RuntimeError: {exc}"
    if not _cuda_plugin_installed():
        words += " (no jax_cuda*_plugin: this environment has the CPU jaxlib)"
    return words


def _device(device: str):
    if device == "cuda":
        if not _gpus():
            raise device_not_visible("jax", _no_gpu_words(), *cuda_runtime())
        return _gpus()[0]
    return jax.devices("cpu")[0]


# ================================================================ models
Forward = Callable[[dict, jax.Array, jax.Array], jax.Array]


def mlp(model: spec.ModelSpec) -> Forward:
    layers = len(model.arch["sizes"]) - 1

    def forward(params, x, aux):
        for i in range(layers):
            x = x @ params[f"fc{i}.weight"] + params[f"fc{i}.bias"]
            if i < layers - 1:
                x = jax.nn.relu(x)
        return x

    return forward


def _conv(x, w, stride: int, pad: int):
    return lax.conv_general_dilated(x, w, (stride, stride), ((pad, pad), (pad, pad)),
                                    dimension_numbers=("NCHW", "OIHW", "NCHW"))


def _channel(v):
    """A per-channel vector broadcast over NCHW."""
    return v[None, :, None, None]


def cnn(model: spec.ModelSpec) -> Forward:
    arch = model.arch

    def forward(params, x, aux):
        for i, stride in enumerate(arch["strides"]):
            x = _conv(x, params[f"conv{i}.weight"], stride, arch["padding"])
            x = jax.nn.relu(x + _channel(params[f"conv{i}.bias"]))
        x = x.reshape(x.shape[0], -1)  # (C, H, W) order: the canonical dense rows
        return x @ params["fc.weight"] + params["fc.bias"]

    return forward


def _lstm_cell(params) -> Callable:
    """One LSTM step, (h, c), x_t -> (h, c): gates i, f, g, o, as torch.nn.LSTM."""
    w_ih, w_hh, b = params["lstm.W_ih"], params["lstm.W_hh"], params["lstm.bias"]

    def cell(carry, x_t):
        h, c = carry
        i, f, g, o = jnp.split(x_t @ w_ih + h @ w_hh + b, 4, axis=-1)  # gates i, f, g, o
        c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
        h = jax.nn.sigmoid(o) * jnp.tanh(c)
        return h, c

    return cell


def lstm(model: spec.ModelSpec) -> Forward:
    hidden = model.arch["hidden"]

    def forward(params, x, aux):
        cell = _lstm_cell(params)
        zeros = jnp.zeros((x.shape[0], hidden), x.dtype)
        (h, _), _ = lax.scan(lambda carry, x_t: (cell(carry, x_t), None), (zeros, zeros),
                             jnp.swapaxes(x, 0, 1))  # time-major
        return h @ params["fc.weight"] + params["fc.bias"]

    return forward


BN_EPSILON = 1e-5  # PyTorch's; inference mode with running mean 0 and variance 1


def resnet(model: spec.ModelSpec) -> Forward:
    stages = model.arch["stages"]

    def conv_bn(params, x, conv_name, bn_name, stride, pad, relu):
        x = _conv(x, params[f"{conv_name}.weight"], stride, pad)
        scale = params[f"{bn_name}.gamma"] / math.sqrt(1.0 + BN_EPSILON)
        x = x * _channel(scale) + _channel(params[f"{bn_name}.beta"])
        return jax.nn.relu(x) if relu else x

    def forward(params, x, aux):
        x = conv_bn(params, x, "conv1", "bn1", 2, 3, relu=True)
        x = lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, 3, 3), (1, 1, 2, 2),
                              ((0, 0), (0, 0), (1, 1), (1, 1)))
        for blk in spec.resnet_blocks(stages):
            n, stride = blk["name"], blk["stride"]
            y = conv_bn(params, x, f"{n}.conv1", f"{n}.bn1", 1, 0, relu=True)
            y = conv_bn(params, y, f"{n}.conv2", f"{n}.bn2", stride, 1, relu=True)
            y = conv_bn(params, y, f"{n}.conv3", f"{n}.bn3", 1, 0, relu=False)
            if blk["project"]:
                x = conv_bn(params, x, f"{n}.downsample", f"{n}.downsample_bn", stride, 0,
                            relu=False)
            x = jax.nn.relu(y + x)
        x = jnp.mean(x, axis=(2, 3))
        return x @ params["fc.weight"] + params["fc.bias"]

    return forward


def attention(model: spec.ModelSpec) -> Forward:
    """Single-head self-attention as nn.MultiheadAttention computes it (scaled dot product,
    softmax over keys, output projection)."""
    scale = 1.0 / math.sqrt(model.arch["embed"])

    def forward(params, x, aux):
        q, k, v = (x @ params[f"attn.{n}.weight"] + params[f"attn.{n}.bias"]
                   for n in ("q", "k", "v"))
        weights = jax.nn.softmax(jnp.einsum("nle,nme->nlm", q * scale, k), axis=-1)
        context = jnp.einsum("nlm,nme->nle", weights, v)
        return context @ params["attn.o.weight"] + params["attn.o.bias"]

    return forward


def ctc(model: spec.ModelSpec) -> Forward:
    def forward(params, x, aux):
        return jax.nn.log_softmax(x @ params["fc.weight"] + params["fc.bias"], axis=-1)

    return forward


def rnn_cell(model: spec.ModelSpec) -> Forward:
    def forward(params, x, aux):  # aux: the previous hidden state
        return jnp.tanh(aux @ params["W_h"].T + x @ params["W_x"].T)

    return forward


FAMILIES = {"mlp": mlp, "cnn": cnn, "lstm": lstm, "resnet": resnet, "attention": attention,
            "ctc": ctc, "rnn_cell": rnn_cell}


# ---------------------------------------------------------------- on sequences
# A variable-length task's batch (spec.make_batches): x of shape (batch, steps, features),
# `steps` as the strategy pads it (zeros past the true length), and aux the pair (the
# model's usual aux, lengths): the same code for every strategy, whatever `steps` is.
def lstm_sequence(model: spec.ModelSpec) -> Forward:
    """The LSTM over every step of x (lax.scan, as the fixed-shape model), each example's
    output read at its last true step, lengths - 1 (jnp.take_along_axis), then the dense
    layer: the steps past a length run on zeros and never reach the loss."""
    hidden = model.arch["hidden"]

    def forward(params, x, aux):
        _, lengths = aux
        cell = _lstm_cell(params)

        def step(carry, x_t):
            carry = cell(carry, x_t)
            return carry, carry[0]  # every step's h

        zeros = jnp.zeros((x.shape[0], hidden), x.dtype)
        _, hs = lax.scan(step, (zeros, zeros), jnp.swapaxes(x, 0, 1))  # (steps, batch, hidden)
        h = jnp.take_along_axis(hs, (lengths - 1)[None, :, None], axis=0)[0]
        return h @ params["fc.weight"] + params["fc.bias"]

    return forward


def rnn_cell_sequence(model: spec.ModelSpec) -> Forward:
    """The cell unrolled over every step of x from h0 with lax.scan (JAX's loop: one
    compiled body whatever the length, where a Python loop under jax.jit would unroll
    `steps` copies into the program), h kept past each example's length by a mask:
    h = where(t < lengths, tanh(h W_h^T + x_t W_x^T), h).  The loss (sum) reads the last h."""
    def forward(params, x, aux):
        h0, lengths = aux
        w_h, w_x = params["W_h"], params["W_x"]

        def step(carry, x_t):
            h, t = carry  # the step's index rides in the carry (no scanned arange to slice)
            h_new = jnp.tanh(h @ w_h.T + x_t @ w_x.T)
            return (jnp.where((t < lengths)[:, None], h_new, h), t + 1), None

        (h, _), _ = lax.scan(step, (h0, jnp.zeros((), lengths.dtype)), jnp.swapaxes(x, 0, 1))
        return h

    return forward


SEQUENCE_FAMILIES = {"lstm": lstm_sequence, "rnn_cell": rnn_cell_sequence}


def sequence_loss(loss: Callable) -> Callable:
    """The model's loss of a sequence batch: its aux is (the usual aux, lengths)."""
    return lambda out, aux: loss(out, aux[0])


# ================================================================ losses
def l2_loss(out, y):
    return jnp.linalg.norm(y - out)  # 000 Fig. 1: the 2-norm of every entry


def xent_loss(out, labels):
    logp = jax.nn.log_softmax(out, axis=-1)
    return -jnp.mean(jnp.take_along_axis(logp, labels[:, None], axis=1))


def sum_loss(out, aux):
    return jnp.sum(out)


LOG_ZERO = -1e30  # log(0) of the CTC recursion: finite, so no inf - inf makes a NaN gradient


def ctc_loss(log_probs, labels, blank: int = 0):
    """CTC negative log-likelihood (Graves et al. 2006), summed over the batch, every
    sequence and label full length: the forward (alpha) recursion in log space over the
    label sequence with blanks interleaved, lax.scan over time."""
    n, steps, _ = log_probs.shape
    blanks = jnp.full_like(labels, blank)
    ext = jnp.stack([blanks, labels], axis=-1).reshape(n, -1)  # blank, l1, blank, l2, ...
    ext = jnp.concatenate([ext, blanks[:, :1]], axis=1)  # ... blank: 2L + 1 states
    states = ext.shape[1]
    emit = jnp.take_along_axis(log_probs, jnp.broadcast_to(ext[:, None, :],
                                                           (n, steps, states)), axis=2)
    # A label state may also be entered from two states back unless it repeats that label.
    before = jnp.concatenate([jnp.full((n, 2), -1, ext.dtype), ext[:, :-2]], axis=1)
    skip = (ext != blank) & (ext != before)
    first = jnp.arange(states) < 2  # a path starts in the first blank or the first label

    def shift(alpha, k):
        return jnp.concatenate([jnp.full((n, k), LOG_ZERO, alpha.dtype), alpha[:, :-k]],
                               axis=1)

    def step(alpha, emit_t):
        paths = jnp.stack([alpha, shift(alpha, 1),
                           jnp.where(skip, shift(alpha, 2), LOG_ZERO)])
        return jax.nn.logsumexp(paths, axis=0) + emit_t, None

    alpha0 = jnp.where(first, emit[:, 0], LOG_ZERO)
    alpha, _ = lax.scan(step, alpha0, jnp.swapaxes(emit, 0, 1)[1:])
    # A path ends in the last label or the final blank.
    return -jnp.sum(jax.nn.logsumexp(alpha[:, -2:], axis=1))


LOSSES = {"l2": l2_loss, "xent": xent_loss, "sum": sum_loss, "ctc": ctc_loss}


# ================================================================ tasks
def _ready(tree):
    """Wait for every array of a result (a pullback's residuals included)."""
    return jax.block_until_ready(tree)


class ResultSync:
    """JAX's sync before a clock read.  JAX has no device-wide barrier and dispatches
    asynchronously on every device (the CPU too), so the timed call hands its result over
    (`hold`) and the sync waits for every array of it (a pullback's residuals included)."""

    def __init__(self):
        self.pending = None

    def hold(self, result):
        self.pending = result
        return result

    def __call__(self) -> None:
        if self.pending is not None:
            _ready(self.pending)
            self.pending = None


def device_sync(device: str) -> ResultSync:
    """What the timer calls before every clock read: the same on cpu and cuda (see ResultSync)."""
    return ResultSync()


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
    """(trainable, frozen) parameter dicts of a frozen task (backends.trained_params)."""
    names = [p.name for p in workload.spec.params]
    trained = {names[i] for i in trained_params(workload)}
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
                 # (SEQUENCE_FAMILIES), on batches shaped by the task's strategy.
                 **{task: backward_task for task in spec.SEQUENCE_TASKS}}


# Tasks JAX has no way to express, and why.
NO_TASK = {
    "backward_retained": "JAX is functional: no graph outlives the call that differentiates "
                         "(a step's residuals live in the pullback jax.vjp returns, and "
                         "nothing retains or frees a graph between steps), so there is no "
                         "retain_graph to set",
}


# ================================================================ variable lengths
# What each mode does with the batches of each strategy (spec.SEQUENCE_STRATEGIES): the cell's
# `shape_policy` choice.  "dynamic" is refused in both modes (no_dynamic_shapes).
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


def no_dynamic_shapes(mode: str) -> str:
    """Why the dynamic-shape strategy is unsupported in a JAX mode."""
    if mode == "jit":
        return ("jax.jit has no dynamic-shape option (no argument of jax.jit nor jax.config "
                "flag makes one compilation serve several input shapes): each compilation "
                "is specialised to its arguments' shapes, so JAX's answer to varying "
                "lengths is padding or bucketing (backward_padded, backward_bucketed); "
                "jax.jit's default, a compilation per new length, is backward_varlen")
    return ("eager JAX needs no dynamic-shape option: op by op, every batch already runs "
            "at its own length, which is backward_varlen's eager cell")


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


def prepare(workload: spec.Workload, mode: str, device: str,
            dtype: str = "float32") -> Prepared:
    if mode not in MODES:
        raise UnsupportedCell(f"jax has no mode {mode!r}")
    check_sequence_model(workload)
    if workload.sequence == "dynamic":
        raise UnsupportedCell(no_dynamic_shapes(mode))
    model_spec = workload.spec
    if model_spec.family not in FAMILIES:
        raise UnsupportedCell(f"jax backend has no model family {model_spec.family!r}")
    if workload.task not in TASK_BUILDERS:
        raise UnsupportedCell(NO_TASK.get(workload.task,
                                          f"jax backend has no task {workload.task!r}"))
    if dtype == "float64":  # process-wide; the harness never asks for it
        jax.config.update("jax_enable_x64", True)
    dev = _device(device)
    numerics = apply_cuda_numerics(spec.CUDA_NUMERICS) if device == "cuda" else {}
    sync = device_sync(device)
    params = {p.name: jax.device_put(a.astype(dtype), dev)
              for p, a in zip(model_spec.params, spec.make_params(workload), strict=True)}
    batches = [_device_batch(b, dev, dtype) for b in spec.make_batches(workload)]
    rows = min(workload.jacobian_rows, model_spec.n_outputs)
    # The one-hot cotangents of jacobian_rows, on the device once, outside the clock.
    one_hot = [jax.device_put(e, dev) for e in np.eye(rows, dtype=dtype)]
    _ready((params, batches, one_hot))
    jit = mode == "jit"
    trained = [model_spec.params[i].name for i in trained_params(workload)]
    differentiated = split_frozen(params, workload) if spec.TASKS[workload.task].frozen \
        else params
    if workload.sequence is None:
        forward, loss = FAMILIES[model_spec.family](model_spec), LOSSES[model_spec.loss]
    else:
        forward = SEQUENCE_FAMILIES[model_spec.family](model_spec)
        loss = sequence_loss(LOSSES[model_spec.loss])
    task = TASK_BUILDERS[workload.task](forward, loss, one_hot, jit)
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

    def derivatives(i):
        with context():
            loss, arrays = task.result(differentiated, *batch(i))
        derivative = spec.TASKS[workload.task].derivative
        if derivative == "loss":  # the forward task: its loss, as one array
            return loss_as_array(loss, dtype)
        if derivative == "jacobian":
            shape = model_spec.jacobian_shape(rows)
            return float("nan"), [np.asarray(arrays, dtype=dtype).reshape(shape)]
        return loss, [np.asarray(arrays[name], dtype=dtype) for name in trained]

    family_choices = {
        "lstm": {"lstm": "lax.scan of the cell over the 28 steps (a Python loop under "
                         "disable_jit)"},
        "ctc": {"ctc": "CTC loss written in jax.numpy (no optax): the alpha recursion in "
                       "log space with jax.nn.logsumexp, lax.scan over time, log 0 as "
                       f"{LOG_ZERO:g}"},
        "resnet": {"resnet": "lax.conv_general_dilated (NCHW, OIHW), batch norm with "
                             "running mean 0 / variance 1 folded into a scale, "
                             "lax.reduce_window max pool"},
        "attention": {"attention": "jnp.einsum scaled dot product, jax.nn.softmax"},
        "cnn": {"cnn": "lax.conv_general_dilated (NCHW, OIHW)"},
    }
    choices = {
        "model": "plain jax.numpy / jax.lax functions of a parameter dict (no flax/optax), "
                 "canonical layouts, no conversion",
        **MODE_CHOICES[mode], **task.choices,
        # A sequence cell's model code is in sequence_choices instead.
        **(family_choices.get(model_spec.family, {}) if workload.sequence is None else {}),
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
