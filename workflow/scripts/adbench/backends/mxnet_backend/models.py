"""MXNet's models: Gluon HybridBlocks as MXNet users write them, each naming its parameters
as the spec does (with their layouts' way back to canonical), the losses in one block with
the model (WithLoss), and build(), which loads the spec's canonical arrays into them."""

from __future__ import annotations

import itertools
import math

import adbench.backends.mxnet_backend.device  # noqa: F401  (the engine's settings, before mxnet)
import mxnet as mx
import numpy as np
from mxnet import gluon
from mxnet.gluon import nn, rnn

from adbench import spec


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


# What each family's code is, for the cell's choices.
FAMILY_CHOICES = {
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
}
