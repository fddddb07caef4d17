"""TensorFlow's models: each family built the way Keras users write it (the slides' RNN cell
in raw TensorFlow ops), its variables in the spec's parameter order with their layouts
(canonical <-> TensorFlow: NHWC images, HWIO kernels; converted once, at loading, and
derivatives back outside the clock), the batches as tensors, and the losses."""

from __future__ import annotations

import dataclasses
from typing import Callable, NamedTuple

import numpy as np
import tensorflow as tf

from adbench import spec
from adbench.backends.tensorflow_backend.device import keras


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


def nhwc_to_nchw(a: np.ndarray) -> np.ndarray:
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
    if sequence:
        return SEQUENCE_BUILDERS[model_spec.family](model_spec, dtype, sequence=True)
    return BUILDERS[model_spec.family](model_spec, dtype)


def load_params(model: Model, arrays: list[np.ndarray]) -> None:
    for variable, layout, array in zip(model.variables, model.layouts, arrays, strict=True):
        variable.assign(layout.to_tf(array).astype(variable.dtype.as_numpy_dtype))


# ================================================================ data and losses
def device_batch(batch: dict[str, np.ndarray], model_spec, model: Model, dtype) -> dict:
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
