"""TensorFlow backend: Keras layers under tf.GradientTape (eager), or the whole step in one
tf.function (graph), or in one tf.function(jit_compile=True) that XLA compiles (xla).

Each model family is built the way Keras users write it; the spec's canonical arrays are
loaded into it once, converted to TensorFlow's layouts (NHWC images, HWIO kernels), and
derivatives are converted back outside the clock.  The tasks are written once, as a
`forward` (what runs under the tape) and a `derive` (the tape call), over every model; the
forward task (spec.FORWARD_TASK) is the loss alone, with no tape and a `derive` that takes
nothing.
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Callable, NamedTuple

import numpy as np
import tensorflow as tf

from adbench import spec
from adbench.backends import (Prepared, UnsupportedCell, check_sequence_model,
                              device_not_visible, no_sync, trained_params)
from adbench.derivatives import loss_as_array
from adbench.clock import split_timer, whole_timer

keras = tf.keras  # Keras 3, as `import keras` gives TensorFlow users


# ================================================================ environment
def configure_threads(threads: int) -> dict:
    """Thread pools; settable before TensorFlow's first op only (TF raises RuntimeError after),
    so a setting already in force is left alone.

    They bound XLA too (mode xla): TensorFlow's XLA launch op runs the compiled executable
    with the device's intra-op Eigen pool.  Measured on TF 2.21 with per-thread CPU times of
    a timed XLA loop: at 1 thread one thread is busy (one core), at 2 two pool workers join
    the calling thread; XLA_FLAGS' --xla_cpu_multi_thread_eigen=false changes nothing at 1
    thread, so no XLA flag is set.  The compiling first call keeps two more threads busy
    (XLA's CPU compiler has a process-wide LLVM codegen pool of min(32, cores)); neither
    --xla_cpu_multi_thread_eigen nor --xla_cpu_parallel_codegen_split_count=1 bounds them:
    only CPU affinity would."""
    threading = tf.config.threading
    if threading.get_intra_op_parallelism_threads() != threads:
        threading.set_intra_op_parallelism_threads(threads)
    if threading.get_inter_op_parallelism_threads() != threads:
        threading.set_inter_op_parallelism_threads(threads)
    return {"intra_op": tf.config.threading.get_intra_op_parallelism_threads(),
            "inter_op": tf.config.threading.get_inter_op_parallelism_threads()}


def versions() -> dict[str, str]:
    info = {"tensorflow": tf.__version__, "keras": keras.__version__, "numpy": np.__version__}
    build = tf.sysconfig.get_build_info()
    if build.get("cuda_version"):
        info["cuda"] = str(build["cuda_version"])
    return info


def _gpus() -> list:
    return tf.config.list_physical_devices("GPU")


def device_name(device: str) -> str:
    if device == "cuda" and _gpus():
        details = tf.config.experimental.get_device_details(_gpus()[0])
        return str(details.get("device_name", "GPU:0"))
    return "cpu"


# ================================================================ device: sync, numerics, memory
def device_sync(device: str) -> Callable[[], None]:
    """What the timer calls before every clock read: GPU kernels run asynchronously."""
    return tf.test.experimental.sync_devices if device == "cuda" else no_sync


def _force_xla_flag(name: str, value: str) -> None:
    """XLA_FLAGS with `name` set to `value`, the user's other flags kept."""
    flags = [f for f in os.environ.get("XLA_FLAGS", "").split() if not f.startswith(name)]
    os.environ["XLA_FLAGS"] = " ".join([*flags, f"{name}={value}"])


def apply_cuda_numerics(numerics: dict) -> dict[str, str]:
    """spec.CUDA_NUMERICS in TensorFlow's switches, set before the first op; returns what is
    now in force (read back) for the cell's choices."""
    tf.config.experimental.enable_tensor_float_32_execution(bool(numerics["tf32"]))
    autotune = "1" if numerics["cudnn_autotune"] else "0"
    # Read from the environment whenever a cuDNN kernel is constructed (tsl/util/use_cudnn.cc
    # caches nothing), so setting them before the first op is in time.
    os.environ["TF_CUDNN_USE_AUTOTUNE"] = autotune
    os.environ["TF_CUDNN_RNN_USE_AUTOTUNE"] = autotune  # the LSTM's cuDNN kernel
    if not numerics["cudnn_autotune"]:  # mode xla: XLA parses XLA_FLAGS at its first compile
        _force_xla_flag("--xla_gpu_autotune_level", "0")
    # Settable only before the GPUs are initialised (the first op); a task that runs the
    # allocator as it comes (spec.cuda_numerics) leaves TensorFlow's default: no growth.
    growth = numerics.get("tf_memory_growth")
    for gpu in _gpus() if growth is not None else []:
        if tf.config.experimental.get_memory_growth(gpu) != bool(growth):
            tf.config.experimental.set_memory_growth(gpu, bool(growth))
    return {
        "cuda_tf32": "tf.config.experimental.tensor_float_32_execution_enabled()="
                     f"{tf.config.experimental.tensor_float_32_execution_enabled()}",
        "cuda_autotune": f"TF_CUDNN_USE_AUTOTUNE={os.environ['TF_CUDNN_USE_AUTOTUNE']}, "
                         f"TF_CUDNN_RNN_USE_AUTOTUNE={os.environ['TF_CUDNN_RNN_USE_AUTOTUNE']}"
                         f", XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r}",
        "cuda_memory": "tf.config.experimental.get_memory_growth="
                       f"{[tf.config.experimental.get_memory_growth(g) for g in _gpus()]}"
                       + (" (TensorFlow's default, left unset)" if growth is None else ""),
    }


def gpu_info(device: str) -> dict | None:
    """The GPU a cuda cell runs on, as TensorFlow sees it; CUDA and cuDNN are the versions
    TensorFlow was built with (its total memory: provenance.gpu, from nvidia-smi)."""
    if device != "cuda" or not _gpus():
        return None
    details = tf.config.experimental.get_device_details(_gpus()[0])
    build = tf.sysconfig.get_build_info()
    capability = details.get("compute_capability")
    return {"name": details.get("device_name"),
            "compute_capability": ".".join(map(str, capability)) if capability else None,
            "cuda_version": build.get("cuda_version"),
            "cudnn_version": build.get("cudnn_version"),
            "peak_memory_scope": "tf.config.experimental.get_memory_info('GPU:0')['peak'], "
                                 "reset at the first measured iteration (warm-up excluded)"}


def cuda_runtime() -> tuple[str | None, str]:
    """The CUDA TensorFlow was built with and loads (None: a CPU build)."""
    return (tf.sysconfig.get_build_info().get("cuda_version"),
            "tf.sysconfig.get_build_info()['cuda_version']")


def reset_peak_memory(device: str) -> None:
    """Outside the clock, before the timed loop: the peak is then the loop's own."""
    if device == "cuda" and _gpus():
        tf.config.experimental.reset_memory_stats("GPU:0")


def peak_memory(device: str) -> int | None:
    if device != "cuda" or not _gpus():
        return None
    return int(tf.config.experimental.get_memory_info("GPU:0")["peak"])


# ================================================================ layouts
class Layout(NamedTuple):
    """How one canonical array maps onto a TensorFlow variable, and its derivative back."""

    to_tf: Callable[[np.ndarray], np.ndarray]
    to_canonical: Callable[[np.ndarray], np.ndarray]


SAME = Layout(lambda a: a, lambda a: a)
# Canonical conv weights are (out, in, kh, kw); Keras' Conv2D kernels are (kh, kw, in, out).
CONV = Layout(lambda a: a.transpose(2, 3, 1, 0), lambda a: a.transpose(3, 2, 0, 1))


def _reshaped(tf_shape: tuple, canonical_shape: tuple) -> Layout:
    """Same memory order, other shape (e.g. MultiHeadAttention's (E, heads, E) kernels)."""
    return Layout(lambda a: a.reshape(tf_shape), lambda a: a.reshape(canonical_shape))


def _flatten_rows(height: int, width: int, channels: int) -> Layout:
    """A dense layer after a flatten: canonical rows in (C, H, W) order, NHWC's in (H, W, C)."""
    def to_tf(a):
        return a.reshape(channels, height, width, -1).transpose(1, 2, 0, 3).reshape(a.shape)

    def to_canonical(a):
        return a.reshape(height, width, channels, -1).transpose(2, 0, 1, 3).reshape(a.shape)

    return Layout(to_tf, to_canonical)


def _nchw_to_nhwc(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a.transpose(0, 2, 3, 1))


def _nhwc_to_nchw(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a.transpose(0, 3, 1, 2))


# ================================================================ models
@dataclasses.dataclass
class Model:
    """A built model: its forward on a batch dict, and its variables in spec param order."""

    forward: Callable[[dict], tf.Tensor]
    variables: list[tf.Variable]
    layouts: list[Layout]
    keras_model: object | None  # None where the study writes raw TensorFlow ops
    images: bool = False  # inputs are images, NHWC here and NCHW in the spec
    choices: dict[str, str] = dataclasses.field(default_factory=dict)


class _Named:
    """Collects variables under the spec's parameter names, to order them as the spec does."""

    def __init__(self):
        self.entries: dict[str, tuple[tf.Variable, Layout]] = {}

    def add(self, name: str, variable, layout: Layout = SAME):
        # Keras 3 wraps each tf.Variable; the tape differentiates w.r.t. the tf.Variable.
        if not isinstance(variable, tf.Variable):
            variable = variable.value
        if not isinstance(variable, tf.Variable):
            raise TypeError(f"{name}: {type(variable).__name__} is not a tf.Variable")
        self.entries[name] = (variable, layout)

    def dense(self, name: str, layer, layout: Layout = SAME):
        self.add(f"{name}.weight", layer.kernel, layout)
        if layer.use_bias:
            self.add(f"{name}.bias", layer.bias)

    def conv(self, name: str, layer):
        self.add(f"{name}.weight", layer.kernel, CONV)
        if layer.use_bias:
            self.add(f"{name}.bias", layer.bias)

    def batchnorm(self, name: str, layer):
        self.add(f"{name}.gamma", layer.gamma)
        self.add(f"{name}.beta", layer.beta)


def _keras_forward(model) -> Callable[[dict], tf.Tensor]:
    return lambda batch: model(batch["x"], training=False)


def _conv(x, filters: int, kernel: int, stride: int, pad: int, bias: bool, dtype: str):
    """A Conv2D with PyTorch's symmetric zero padding.

    Keras' "same" puts the odd padding row at the bottom/right when stride > 1, so it equals
    PyTorch's padding only for stride 1 and pad (kernel - 1) / 2; otherwise pad explicitly.
    """
    same = stride == 1 and 2 * pad == kernel - 1
    if pad and not same:
        x = keras.layers.ZeroPadding2D(pad, dtype=dtype)(x)
    layer = keras.layers.Conv2D(filters, kernel, strides=stride,
                                padding="same" if same else "valid", use_bias=bias,
                                dtype=dtype)
    return layer(x), layer


def build_mlp(model_spec: spec.ModelSpec, dtype: str) -> Model:
    sizes = model_spec.arch["sizes"]
    layers = [keras.layers.Dense(n, activation="relu" if i < len(sizes) - 2 else None,
                                 dtype=dtype) for i, n in enumerate(sizes[1:])]
    model = keras.Sequential([keras.Input(sizes[:1], dtype=dtype), *layers])
    named = _Named()
    for i, layer in enumerate(layers):
        named.dense(f"fc{i}", layer)
    return _model(model_spec, _keras_forward(model), named, model)


def build_cnn(model_spec: spec.ModelSpec, dtype: str) -> Model:
    arch = model_spec.arch
    channels, height, width = model_spec.input_shape
    inputs = keras.Input((height, width, channels), dtype=dtype)
    x, named = inputs, _Named()
    for i, (filters, stride) in enumerate(zip(arch["channels"], arch["strides"])):
        x, conv = _conv(x, filters, arch["kernel"], stride, arch["padding"], True, dtype)
        x = keras.layers.ReLU(dtype=dtype)(x)
        named.conv(f"conv{i}", conv)
    fc = keras.layers.Dense(model_spec.n_outputs, dtype=dtype)
    outputs = fc(keras.layers.Flatten(dtype=dtype)(x))
    named.dense("fc", fc, _flatten_rows(*x.shape[1:]))
    model = keras.Model(inputs, outputs)
    return _model(model_spec, _keras_forward(model), named, model, images=True)


def build_lstm(model_spec: spec.ModelSpec, dtype: str, sequence: bool = False) -> Model:
    """Keras' LSTM and a dense layer on its last output.  On a variable-length task's batches
    (`sequence`) it reads x of any number of steps and returns every step's output, and each
    example's output at lengths - 1 is gathered (tf.gather(batch_dims=1)) for the dense layer:
    the true last step, whatever padding follows it."""
    # Keras' LSTM is batch-first, returns the last hidden state, has one bias and orders its
    # gates i, f, c, o: the canonical i, f, g, o, so its arrays load unchanged.
    lstm = keras.layers.LSTM(model_spec.arch["hidden"], return_sequences=sequence, dtype=dtype)
    fc = keras.layers.Dense(model_spec.n_outputs, dtype=dtype)
    named = _Named()
    choices = {"lstm": "keras.layers.LSTM defaults: use_cudnn='auto' (cuDNN kernel on a GPU, "
                       "a tf.while_loop over the steps on CPU), unroll=False"}
    if not sequence:
        model = keras.Sequential([keras.Input(model_spec.input_shape, dtype=dtype), lstm, fc])
        forward = _keras_forward(model)
    else:
        model = keras.Sequential([keras.Input((None, model_spec.sequence_features),
                                              dtype=dtype), lstm])
        fc.build((None, model_spec.arch["hidden"]))

        def forward(batch):
            outputs = model(batch["x"], training=False)  # (batch, steps, hidden)
            return fc(tf.gather(outputs, batch["lengths"] - 1, batch_dims=1))

        choices["lstm"] += (", return_sequences=True over every step of the batch (padding "
                            "included); each example's output at lengths - 1 taken by "
                            "tf.gather(batch_dims=1), then the dense layer")
    named.add("lstm.W_ih", lstm.cell.kernel)
    named.add("lstm.W_hh", lstm.cell.recurrent_kernel)
    named.add("lstm.bias", lstm.cell.bias)
    named.dense("fc", fc)
    return _model(model_spec, forward, named, model, choices=choices)


def build_resnet(model_spec: spec.ModelSpec, dtype: str) -> Model:
    channels, height, width = model_spec.input_shape
    named = _Named()

    def conv_bn(x, conv_name, bn_name, filters, kernel, stride, pad, relu):
        x, conv = _conv(x, filters, kernel, stride, pad, False, dtype)
        # Keras' defaults: moving mean 0, moving variance 1; PyTorch's epsilon.
        bn = keras.layers.BatchNormalization(epsilon=1e-5, dtype=dtype)
        x = bn(x, training=False)
        named.conv(conv_name, conv)
        named.batchnorm(bn_name, bn)
        return keras.layers.ReLU(dtype=dtype)(x) if relu else x

    inputs = keras.Input((height, width, channels), dtype=dtype)
    x = conv_bn(inputs, "conv1", "bn1", 64, 7, 2, 3, relu=True)  # torchvision's stem
    # Zero padding equals PyTorch's -inf padding here: the inputs are post-ReLU.
    x = keras.layers.ZeroPadding2D(1, dtype=dtype)(x)
    x = keras.layers.MaxPooling2D(3, 2, padding="valid", dtype=dtype)(x)
    for blk in spec.resnet_blocks(model_spec.arch["stages"]):
        n, stride = blk["name"], blk["stride"]
        y = conv_bn(x, f"{n}.conv1", f"{n}.bn1", blk["mid"], 1, 1, 0, relu=True)
        y = conv_bn(y, f"{n}.conv2", f"{n}.bn2", blk["mid"], 3, stride, 1, relu=True)
        y = conv_bn(y, f"{n}.conv3", f"{n}.bn3", blk["out"], 1, 1, 0, relu=False)
        if blk["project"]:
            x = conv_bn(x, f"{n}.downsample", f"{n}.downsample_bn", blk["out"], 1, stride, 0,
                        relu=False)
        x = keras.layers.ReLU(dtype=dtype)(keras.layers.Add(dtype=dtype)([y, x]))
    fc = keras.layers.Dense(model_spec.n_outputs, dtype=dtype)
    outputs = fc(keras.layers.GlobalAveragePooling2D(dtype=dtype)(x))
    named.dense("fc", fc)
    model = keras.Model(inputs, outputs)
    return _model(model_spec, _keras_forward(model), named, model, images=True, choices={
        "resnet": "built by hand (keras.applications.ResNet50 is v1, with conv biases); "
                  "BatchNormalization called with training=False"})


def build_attention(model_spec: spec.ModelSpec, dtype: str) -> Model:
    length, embed = model_spec.input_shape
    mha = keras.layers.MultiHeadAttention(num_heads=1, key_dim=embed, dtype=dtype)
    inputs = keras.Input((length, embed), dtype=dtype)
    model = keras.Model(inputs, mha(inputs, inputs, inputs))  # query, value, key
    named = _Named()
    # One head: the (E, 1, E) projection kernels and (1, E, E) output kernel are x @ W.
    for n, layer in (("q", mha.query_dense), ("k", mha.key_dense), ("v", mha.value_dense),
                     ("o", mha.output_dense)):
        named.add(f"attn.{n}.weight", layer.kernel,
                  _reshaped(tuple(layer.kernel.shape), (embed, embed)))
        named.add(f"attn.{n}.bias", layer.bias, _reshaped(tuple(layer.bias.shape), (embed,)))
    return _model(model_spec, _keras_forward(model), named, model)


def build_ctc(model_spec: spec.ModelSpec, dtype: str) -> Model:
    fc = keras.layers.Dense(model_spec.arch["classes"], activation="log_softmax", dtype=dtype)
    model = keras.Sequential([keras.Input(model_spec.input_shape, dtype=dtype), fc])
    named = _Named()
    named.dense("fc", fc)
    return _model(model_spec, _keras_forward(model), named, model, choices={
        "ctc": "dense int32 labels: tf.nn.ctc_loss runs ctc_loss_dense (TF ops with a "
               "custom gradient), not the CTCLoss kernel that sparse labels select"})


def build_rnn_cell(model_spec: spec.ModelSpec, dtype: str, sequence: bool = False) -> Model:
    """The slides' cell in raw TensorFlow ops, as they write it (no Keras layer).  On a
    variable-length task's batches (`sequence`) it is unrolled from h0 over the batch's steps,
    each example's state kept past its length by a mask: the state at its true last step."""
    named = _Named()
    for p in model_spec.params:
        named.add(p.name, tf.Variable(tf.zeros(p.shape, dtype=dtype), name=p.name))
    w_h, w_x = (named.entries[p.name][0] for p in model_spec.params)

    def cell(h, x):
        return tf.tanh(tf.matmul(h, w_h, transpose_b=True) + tf.matmul(x, w_x, transpose_b=True))

    def forward(batch):
        return cell(batch["h0"], batch["x"])

    def unrolled(batch):
        x, lengths, h = batch["x"], batch["lengths"], batch["h0"]
        # One loop for every mode and length: a Python loop in eager; autograph makes it one
        # tf.while_loop in a tf.function (whose graph does not grow with the steps, and runs
        # at a time axis of unknown length).
        for t in tf.range(tf.shape(x)[1]):
            h = tf.where((t < lengths)[:, None], cell(h, x[:, t]), h)
        return h

    if not sequence:
        return _model(model_spec, forward, named, None)
    return _model(model_spec, unrolled, named, None, choices={
        "rnn_cell_loop": "for t in tf.range(steps): a Python loop over the steps in eager; "
                         "autograph turns it into one tf.while_loop in a tf.function (graph, "
                         "xla); each example's state kept past its length by "
                         "tf.where(t < lengths, h_new, h)"})


BUILDERS = {"mlp": build_mlp, "cnn": build_cnn, "lstm": build_lstm, "resnet": build_resnet,
            "attention": build_attention, "ctc": build_ctc, "rnn_cell": build_rnn_cell}


def _model(model_spec, forward, named: _Named, keras_model, images=False, choices=None):
    """Order the named variables as the spec's params (a name missing or extra is a bug)."""
    names = [p.name for p in model_spec.params]
    if sorted(names) != sorted(named.entries):
        raise ValueError(f"{model_spec.family}: variables {sorted(named.entries)} "
                         f"do not match the spec's params {sorted(names)}")
    variables, layouts = zip(*(named.entries[n] for n in names))
    return Model(forward, list(variables), list(layouts), keras_model, images, choices or {})


# The families that read a sequence of any length (spec.ModelSpec.sequence_features).
SEQUENCE_BUILDERS = {"lstm": build_lstm, "rnn_cell": build_rnn_cell}


def build_model(model_spec: spec.ModelSpec, dtype: str = "float32",
                sequence: bool = False) -> Model:
    """The model; `sequence`: its variable-length form (a variable-length task's batches)."""
    if model_spec.family not in BUILDERS:
        raise UnsupportedCell(f"tensorflow backend has no model family {model_spec.family!r}")
    if sequence:
        if model_spec.family not in SEQUENCE_BUILDERS:
            raise UnsupportedCell(f"tensorflow backend reads no sequence of varying length "
                                  f"in model family {model_spec.family!r}")
        return SEQUENCE_BUILDERS[model_spec.family](model_spec, dtype, sequence=True)
    return BUILDERS[model_spec.family](model_spec, dtype)


def load_params(model: Model, arrays: list[np.ndarray]) -> None:
    for variable, layout, array in zip(model.variables, model.layouts, arrays, strict=True):
        variable.assign(layout.to_tf(array).astype(variable.dtype.as_numpy_dtype))


# ================================================================ data and losses
def _device_batch(batch: dict[str, np.ndarray], model_spec, model: Model, dtype) -> dict:
    """One batch as tensors, in TensorFlow's layout; labels int32, as tf.nn.ctc_loss needs."""
    tensors = {}
    for key, array in batch.items():
        if key == "x" and model.images:
            array = _nchw_to_nhwc(array)
        tensors[key] = tf.constant(array, dtype=tf.int32 if array.dtype.kind in "iu" else dtype)
    if model_spec.loss == "ctc":  # every sequence full length (the spec's fixed lengths)
        rows, steps = batch["x"].shape[:2]
        tensors["label_length"] = tf.fill([rows], batch["y"].shape[1])
        tensors["logit_length"] = tf.fill([rows], steps)
    return tensors


def _l2(out, batch):
    return tf.norm(batch["y"] - out)


def _sum(out, batch):
    return tf.reduce_sum(out)


def _xent(out, batch):
    return tf.reduce_mean(
        tf.nn.sparse_softmax_cross_entropy_with_logits(labels=batch["y"], logits=out))


def _ctc(out, batch):
    # `out` is already log-softmaxed; ctc_loss's own log-softmax leaves it unchanged.
    return tf.reduce_sum(tf.nn.ctc_loss(
        labels=batch["y"], logits=out, label_length=batch["label_length"],
        logit_length=batch["logit_length"], logits_time_major=False, blank_index=0))


LOSSES = {"l2": _l2, "sum": _sum, "xent": _xent, "ctc": _ctc}


# ================================================================ tasks
@dataclasses.dataclass
class Task:
    """One task over a model: `forward(batch) -> state` runs under the tape,
    `derive(state) -> (loss or None, [derivatives])` makes the tape call."""

    forward: Callable[[dict], tuple]
    derive: Callable[[tuple], tuple]
    choices: dict[str, str] = dataclasses.field(default_factory=dict)
    # The spec params it differentiates (a loss task's derivatives, in this order).
    trained: list[int] | None = None
    # Called outside the clock before each step: drops what the last step kept.
    release: Callable[[], None] = no_sync
    # What a compiled mode's tf.function holds (MODE_CHOICES' {step}).
    step: str = "forward and tape call"


def _loss_task(model: Model, loss_fn, jacobian: bool) -> Task:
    def forward(batch):
        with tf.GradientTape() as tape:  # trainable variables are watched as they are read
            loss = loss_fn(model.forward(batch), batch)
        return tape, loss

    def derive(state):
        tape, loss = state
        if jacobian:
            return loss, tape.jacobian(loss, model.variables, experimental_use_pfor=True)
        return loss, tape.gradient(loss, model.variables)

    return Task(forward, derive)


def _frozen_task(model: Model, loss_fn, trained: list[int]) -> Task:
    """The backward step w.r.t. the trainable variables only: the frozen part's are never
    watched (as trainable=False leaves them), so the tape records nothing through it."""
    sources = [model.variables[i] for i in trained]

    def forward(batch):
        with tf.GradientTape(watch_accessed_variables=False) as tape:
            tape.watch(sources)
            loss = loss_fn(model.forward(batch), batch)
        return tape, loss

    def derive(state):
        tape, loss = state
        return loss, tape.gradient(loss, sources)

    return Task(forward, derive, {"frozen": "tf.GradientTape(watch_accessed_variables=False) "
                                            "watching the trainable variables only, "
                                            "tape.gradient w.r.t. them"}, trained)


def _retained_task(model: Model, loss_fn) -> Task:
    """The backward step on a persistent tape, held after the step (eagerly) until the next
    step starts: its recorded intermediates stay alive as a retained graph's do."""
    kept = []

    def forward(batch):
        with tf.GradientTape(persistent=True) as tape:
            loss = loss_fn(model.forward(batch), batch)
        return tape, loss

    def derive(state):
        tape, loss = state
        if tf.executing_eagerly():  # inside a tf.function the tape ends with the call
            kept.append(tape)
        return loss, tape.gradient(loss, model.variables)

    return Task(forward, derive, {"retained": "tf.GradientTape(persistent=True); in eager "
                                              "mode the tape is held after the step and "
                                              "dropped outside the clock when the next step "
                                              "starts; in a tf.function it ends with the "
                                              "call"}, release=kept.clear)


def _output_rows(model: Model, batch, rows: int, persistent: bool):
    """The first `rows` entries of one example's flattened output, taped w.r.t. its input.

    Every model's output is in canonical layout (no image outputs), so the flattened order
    is the spec's.
    """
    x = batch["x"]
    with tf.GradientTape(persistent=persistent) as tape:
        tape.watch(x)
        out = tf.reshape(model.forward({**batch, "x": x}), [-1])[:rows]
    return tape, out, x


def _rows_task(model: Model, rows: int, dtype) -> Task:
    one_hot = list(tf.eye(rows, dtype=dtype))  # built once, outside the clock

    def forward(batch):
        return _output_rows(model, batch, rows, persistent=True)

    def derive(state):
        tape, out, x = state
        vjps = [tape.gradient(out, x, output_gradients=row) for row in one_hot]
        return None, [tf.concat(vjps, axis=0)]  # each (1, *input): stack the rows

    return Task(forward, derive, {"jacobian_rows": "one tape.gradient per row with one-hot "
                                  "output_gradients on a persistent tape, in a Python loop "
                                  "(unrolled at trace time under tf.function)"})


def _vectorized_task(model: Model, rows: int) -> Task:
    def forward(batch):
        return _output_rows(model, batch, rows, persistent=False)

    def derive(state):
        tape, out, x = state
        jacobian = tape.jacobian(out, x, experimental_use_pfor=True)  # (rows, 1, *input)
        return None, [tf.reshape(jacobian, [rows, *x.shape[1:]])]

    return Task(forward, derive)


def _forward_task(model: Model, loss_fn) -> Task:
    """The loss alone (spec.FORWARD_TASK): no tf.GradientTape, so nothing is recorded for a
    derivative; a compiled mode's tf.function holds the loss and nothing else."""
    def forward(batch):
        return loss_fn(model.forward(batch), batch)

    def derive(loss):  # no derivative: the step returns the loss as it is
        return loss, []

    return Task(forward, derive, {"forward": "the model's loss with no tf.GradientTape "
                                             "(nothing recorded)"}, step="the loss alone")


PFOR_CHOICE = ("tape.jacobian(experimental_use_pfor=True); in eager mode pfor traces its "
               "loop body into a fresh tf.function at every call (TensorFlow's own design)")


def make_task(workload: spec.Workload, model: Model, dtype) -> Task:
    rows = min(workload.jacobian_rows, workload.spec.n_outputs)
    if (workload.task == "backward" or workload.sequence is not None
            or spec.TASKS[workload.task].default_allocator):
        # A variable-length task is the backward step on the model's sequence form (every
        # strategy alike: only the batches' shapes and the mode's shape policy differ); the
        # default-allocator one is the backward step with TensorFlow's own memory policy.
        return _loss_task(model, LOSSES[workload.spec.loss], jacobian=False)
    if workload.task == "backward_frozen":
        return _frozen_task(model, LOSSES[workload.spec.loss], trained_params(workload))
    if workload.task == "backward_retained":
        return _retained_task(model, LOSSES[workload.spec.loss])
    if workload.task == "loss_jacobian":
        task = _loss_task(model, LOSSES[workload.spec.loss], jacobian=True)
        task.choices["pfor"] = PFOR_CHOICE
        return task
    if workload.task == spec.FORWARD_TASK:
        return _forward_task(model, LOSSES[workload.spec.loss])
    if workload.task == "jacobian_rows":
        return _rows_task(model, rows, dtype)
    if workload.task == "jacobian_vectorized":
        task = _vectorized_task(model, rows)
        task.choices["pfor"] = PFOR_CHOICE
        return task
    raise UnsupportedCell(f"tensorflow backend has no task {workload.task!r}")


# ================================================================ prepare
# {step}: what the task's tf.function holds (Task.step).
MODE_CHOICES = {
    "eager": {},
    "graph": {"tf_function": "one tf.function of {step}, no input_signature: "
                             "the shorter last batch of an epoch retraces once",
              "jit_compile": "False"},
    "xla": {"tf_function": "one tf.function(jit_compile=True) of {step}, no "
                           "input_signature: traced and XLA-compiled at the first timed call "
                           "(compile_s 0); the shorter last batch of an epoch retraces and "
                           "recompiles once",
            "jit_compile": "True: the whole step is one XLA cluster run by TensorFlow's XLA "
                           "launch op on the CPU device; an op XLA cannot compile is an error, "
                           "not a fallback",
            "xla_threads": "XLA's CPU executable runs on TensorFlow's intra-op pool (the launch "
                           "op hands it the device's Eigen pool): tf.config.threading bounds "
                           "it, no XLA_FLAGS set (--xla_cpu_multi_thread_eigen=false measured "
                           "no different). XLA's compiler has its own process-wide LLVM "
                           "codegen pool sized by the schedulable cores, which no flag bounds: "
                           "the compiling first iteration may use more cores than threads"},
}


# How each mode meets a variable-length task's batch shapes (its strategy), and what its
# `traces` counts.
XLA_PER_SHAPE = ("XLA compiles per concrete input shape even where tf.function does not "
                 "retrace (its compile cache is keyed by the shapes: a step at a new length "
                 "compiles anew); traces counts XLA's compilations as the distinct input "
                 "shapes the step has been called with (read outside the clock; TensorFlow "
                 "has no readable compile counter), at least tf.function's "
                 "experimental_get_tracing_count()")


def shape_policy(mode: str, strategy: str) -> dict[str, str]:
    """The choices a variable-length cell records: its strategy and its mode's shape policy."""
    choices = {"sequence": strategy}
    if mode == "eager":
        choices["shape_policy"] = ("define-by-run: each batch runs at its own steps (as the "
                                   "strategy pads it), nothing traced; traces 0")
        return choices
    jit = f"jit_compile={mode == 'xla'}"
    if strategy == "dynamic":
        choices["tf_function"] = (
            f"tf.function(reduce_retracing=True, {jit}), no input_signature: the first "
            "length traces, the second retraces once with the time axis generalised to None, "
            "and every later length reuses that trace")
    else:
        choices["tf_function"] = (
            f"tf.function({jit}) as by default (reduce_retracing=False, no input_signature): "
            "a trace per new input shape: per new length (true), once (padded), once per "
            "bucket (bucketed); the shorter last batch of an epoch, if any, once more")
    choices["shape_policy"] = (XLA_PER_SHAPE if mode == "xla" else
                               "traces = the tf.function's experimental_get_tracing_count()")
    return choices


def _onednn_enabled() -> bool:
    """Whether TensorFlow runs its oneDNN kernels on CPU (TF_ENABLE_ONEDNN_OPTS, default on)."""
    from tensorflow.python.util import _pywrap_util_port  # no public API reports it

    return bool(_pywrap_util_port.IsMklEnabled())


# Cells that abort the whole process (not an exception we could record): refused up front,
# in the modes that run TensorFlow's own kernels (eager, graph; not xla).
ONEDNN_ABORTS = {
    ("attention", "jacobian_vectorized"):
        "pfor turns Keras MultiHeadAttention's projections into BatchMatMulV2 of shape "
        "(rows, 1, L, E) x (E, E), which TensorFlow's oneDNN kernel aborts on "
        "(dnnl::error / SIGSEGV; tf.matmul(tf.ones([4, 1, 8, 16]), tf.ones([16, 16])) "
        "reproduces it); the cell runs with TF_ENABLE_ONEDNN_OPTS=0",
}


def _check_supported(workload: spec.Workload, mode: str, device: str, dtype: str) -> None:
    if mode not in MODE_CHOICES:
        raise UnsupportedCell(f"tensorflow has no mode {mode!r}")
    check_sequence_model(workload)
    if workload.sequence == "dynamic" and mode == "eager":
        raise UnsupportedCell(
            "tensorflow's eager mode has no dynamic-shape option (reduce_retracing and "
            "input_signature are tf.function's): it needs none, define-by-run already runs "
            "each batch at its own length (task backward_varlen)")
    if workload.spec.loss == "ctc" and dtype != "float32":
        raise UnsupportedCell(f"tf.nn.ctc_loss with dense labels (ctc_loss_dense) mixes in "
                              f"float32 constants: it cannot run in {dtype}")
    if device == "cuda" and not _gpus():
        # TensorFlow says why only in its log (the cell's log: "Cannot dlopen some GPU
        # libraries", a driver too old, ...); here, what it reports.
        raise device_not_visible(
            "tensorflow", "tf.config.list_physical_devices('GPU') is [] "
            f"(tf.test.is_built_with_cuda() is {tf.test.is_built_with_cuda()}; TensorFlow's "
            "reasons are in the cell's log)", *cuda_runtime())
    abort = ONEDNN_ABORTS.get((workload.spec.family, workload.task))
    # XLA compiles the batched matmul itself (no TensorFlow oneDNN kernel): it runs.
    if abort and mode != "xla" and device == "cpu" and _onednn_enabled():
        raise UnsupportedCell(f"tensorflow {tf.__version__} with oneDNN on CPU: {abort}")


# What XLA says when it cannot compile a step (raised at the call that compiles it).
XLA_COMPILE_ERROR = re.compile(
    r"Detected unsupported operations when trying to compile graph|XLA compilation requires|"
    r"XLA can't deduce compile time constant|Compilation failure|not supported by XLA|"
    r"No registered '[^']+' OpKernel for XLA_CPU_JIT")


def _refuse_xla_failures(step, workload: spec.Workload):
    """The XLA step, with a compilation XLA refuses turned into UnsupportedCell.

    XLA compiles at the first call of each traced input shape (the first timed iteration,
    and the shorter last batch of an epoch): no call is made before the timed loop to find
    out, the refusal comes from inside run()."""
    def call(batch):
        try:
            return step(batch)
        except (tf.errors.InvalidArgumentError, tf.errors.UnimplementedError,
                tf.errors.InternalError) as exc:
            match = XLA_COMPILE_ERROR.search(str(exc))
            if match is None:
                raise
            lines = [line for line in str(exc).splitlines() if line.strip()]
            detail = next((line.strip() for line in lines if match.group(0) in line), lines[0])
            # The traced function's name and attributes say nothing about the model.
            detail = re.sub(r"__inference_\w+\[[^\]]*\]", "the step", detail)
            raise UnsupportedCell(
                f"XLA (tf.function(jit_compile=True)) cannot compile {workload.model} "
                f"{workload.task} in tensorflow {tf.__version__}: {type(exc).__name__}: "
                f"{detail[:400]}") from exc
    return call


def prepare(workload: spec.Workload, mode: str, device: str,
            dtype: str = "float32") -> Prepared:
    _check_supported(workload, mode, device, dtype)
    numerics = (apply_cuda_numerics(spec.cuda_numerics(workload.task))
                if device == "cuda" else {})
    tf_device = "/GPU:0" if device == "cuda" else "/CPU:0"
    sync = device_sync(device)
    model_spec = workload.spec
    with tf.device(tf_device):
        model = build_model(model_spec, dtype, sequence=workload.sequence is not None)
        load_params(model, spec.make_params(workload))
        # All batches placed on the device up front: data transfer is not part of the timing.
        batches = [_device_batch(b, model_spec, model, dtype)
                   for b in spec.make_batches(workload)]
        task = make_task(workload, model, dtype)
    batch = lambda i: batches[i % len(batches)]  # noqa: E731

    def step(b):
        return task.derive(task.forward(b))

    compiled = None
    if mode in ("graph", "xla"):
        # The dynamic-shape option of a variable-length task: one generalised trace.
        dynamic = {"reduce_retracing": True} if workload.sequence == "dynamic" else {}
        step = compiled = tf.function(step, jit_compile=mode == "xla", **dynamic)
    if mode == "xla":
        step = _refuse_xla_failures(step, workload)
    split = "forward_s" in spec.timed_quantities("tensorflow", mode, workload.task)
    # A variable-length task's XLA step: the input shapes it has been called with, one XLA
    # compilation each (recorded outside the clock; other cells record nothing).
    shapes = set()
    counted = workload.sequence is not None and mode == "xla"

    def called(b):
        if counted:
            shapes.add(tuple((k, tuple(v.shape)) for k, v in sorted(b.items())))

    def run(i, clock):
        task.release()
        called(batch(i))  # outside the clock
        with tf.device(tf_device):
            if split:
                return split_timer(lambda: task.forward(batch(i)), task.derive, sync, clock)
            return whole_timer(lambda: step(batch(i)), sync, clock)

    def derivatives(i):
        called(batch(i))
        with tf.device(tf_device):
            loss, arrays = step(batch(i))
        if spec.TASKS[workload.task].derivative == "loss":  # the forward task: its loss
            return loss_as_array(float(loss), dtype)
        if spec.TASKS[workload.task].derivative == "jacobian":
            jacobian = arrays[0].numpy()
            return float("nan"), [_nhwc_to_nchw(jacobian) if model.images else jacobian]
        layouts = model.layouts if task.trained is None else [model.layouts[i]
                                                              for i in task.trained]
        return float(loss), [layout.to_canonical(a.numpy())
                             for layout, a in zip(layouts, arrays, strict=True)]

    choices = {"layers": f"Keras {keras.__version__} layers, called with training=False"
                         if model.keras_model else "raw TensorFlow ops (tf.matmul, tf.tanh)",
               "bias": "Keras layers add biases via keras.ops.add, which dispatches to "
                       "tf.nn.bias_add (fusable with MatMul/Conv2D)" if model.keras_model
                       else "none",
               "layout": "NHWC images, HWIO kernels (converted once, at preparation)"
                         if model.images else "canonical",
               "onednn": "on" if device == "cpu" and _onednn_enabled() else "off",
               **numerics,
               "dtype": dtype, **model.choices, **task.choices,
               **{k: v.format(step=task.step) for k, v in MODE_CHOICES[mode].items()}}
    if mode == "xla":
        choices["xla_flags"] = os.environ.get("XLA_FLAGS") or "unset"
    def traces():
        """The step's traces so far (XLA's: its compilations, one per shape)."""
        if compiled is None:
            return 0
        traced = compiled.experimental_get_tracing_count()
        return max(traced, len(shapes)) if counted else traced

    if workload.sequence is not None:  # a fixed-shape task's rows carry no traces
        choices.update(shape_policy(mode, workload.sequence))
    return Prepared(run=run, derivatives=derivatives, choices=choices,
                    traces=traces if workload.sequence is not None else None)
