"""Chainer's models: chains of links as Chainer users write them, each with the way the
spec's canonical arrays map onto its parameters and its gradients back (Model), and the
losses."""

from __future__ import annotations

import dataclasses
import math
from typing import Callable

import chainer
import chainer.functions as F
import chainer.links as L
import numpy as np

from adbench import spec


# ================================================================ layouts
@dataclasses.dataclass
class Model:
    """A built model: the chain, its forward(x, aux) -> prediction, and how the spec's
    canonical arrays map onto its parameters."""

    chain: chainer.Link
    forward: Callable
    params: list  # chainer Parameters whose gradients make up the canonical ones
    load: Callable[[list[np.ndarray]], None]  # canonical arrays -> the parameters
    canonical: Callable[[list[np.ndarray]], list[np.ndarray]]  # their grads -> canonical
    choices: dict[str, str] = dataclasses.field(default_factory=dict)


def _same(a):
    return a


def _transposed(a):
    return a.T


def _set(param, value: np.ndarray) -> None:
    value = np.asarray(value, dtype=param.array.dtype)
    if value.shape != param.array.shape:
        raise ValueError(f"canonical -> chainer: shape {value.shape} for a parameter of "
                         f"shape {param.array.shape}")
    param.array[...] = value


def _named(model_spec: spec.ModelSpec, chain, forward, entries: dict, choices=None) -> Model:
    """entries: spec param name -> (chainer Parameter, layout), one to one; a layout is its
    own inverse here (identity or transpose)."""
    names = [p.name for p in model_spec.params]
    if sorted(names) != sorted(entries):
        raise ValueError(f"{model_spec.family}: parameters {sorted(entries)} do not match the "
                         f"spec's {sorted(names)}")
    params = [entries[n][0] for n in names]
    layouts = [entries[n][1] for n in names]

    def load(arrays):
        for param, layout, array in zip(params, layouts, arrays, strict=True):
            _set(param, layout(array))

    def canonical(grads):
        return [np.ascontiguousarray(layout(g)) for layout, g in zip(layouts, grads, strict=True)]

    return Model(chain, forward, params, load, canonical, choices or {})


def _linear(entries: dict, name: str, link) -> None:
    entries[f"{name}.weight"] = (link.W, _transposed)  # L.Linear: W (out, in)
    if link.b is not None:
        entries[f"{name}.bias"] = (link.b, _same)


def _conv(entries: dict, name: str, link) -> None:
    entries[f"{name}.weight"] = (link.W, _same)  # (out, in, kh, kw), as the spec
    if link.b is not None:
        entries[f"{name}.bias"] = (link.b, _same)


def _bn(entries: dict, name: str, link) -> None:
    entries[f"{name}.gamma"] = (link.gamma, _same)
    entries[f"{name}.beta"] = (link.beta, _same)


# ================================================================ models
def build_mlp(model_spec: spec.ModelSpec) -> Model:
    sizes = model_spec.arch["sizes"]
    chain = chainer.ChainList(*(L.Linear(a, b) for a, b in zip(sizes[:-1], sizes[1:])))
    layers = list(chain)

    def forward(x, aux):
        for i, layer in enumerate(layers):
            x = layer(x)
            if i < len(layers) - 1:
                x = F.relu(x)
        return x

    entries = {}
    for i, layer in enumerate(layers):
        _linear(entries, f"fc{i}", layer)
    return _named(model_spec, chain, forward, entries)


class CNN(chainer.Chain):
    def __init__(self, model_spec: spec.ModelSpec):
        super().__init__()
        a = model_spec.arch
        c0, c1 = a["channels"]
        with self.init_scope():
            self.conv0 = L.Convolution2D(1, c0, a["kernel"], a["strides"][0], a["padding"])
            self.conv1 = L.Convolution2D(c0, c1, a["kernel"], a["strides"][1], a["padding"])
            self.fc = L.Linear(model_spec.params[-2].shape[0], model_spec.n_outputs)

    def forward(self, x, aux):
        h = F.relu(self.conv1(F.relu(self.conv0(x))))
        return self.fc(h)  # L.Linear flattens (N, C, H, W) in (C, H, W) order, as the spec


def build_cnn(model_spec: spec.ModelSpec) -> Model:
    chain = CNN(model_spec)
    entries = {}
    _conv(entries, "conv0", chain.conv0)
    _conv(entries, "conv1", chain.conv1)
    _linear(entries, "fc", chain.fc)
    return _named(model_spec, chain, chain.forward, entries, {
        "conv": "L.Convolution2D on CPU: im2col + numpy.tensordot (iDeep off)"})


class LSTMNet(chainer.Chain):
    def __init__(self, model_spec: spec.ModelSpec):
        super().__init__()
        hidden = model_spec.arch["hidden"]
        with self.init_scope():
            self.lstm = L.NStepLSTM(1, model_spec.input_shape[1], hidden, 0.0)
            self.fc = L.Linear(hidden, model_spec.n_outputs)

    def forward(self, x, aux):
        hy, _, _ = self.lstm(None, None, list(F.separate(x, axis=0)))  # one sequence each
        return self.fc(hy[0])


def build_lstm(model_spec: spec.ModelSpec) -> Model:
    chain = LSTMNet(model_spec)
    hidden = model_spec.arch["hidden"]
    layer = chain.lstm[0]
    # F.n_step_lstm's CPU path stacks (w2, w0, w1, w3) as F.lstm's (a, i, f, o): w0 is the
    # input gate, w1 forget, w2 the cell candidate (g), w3 output; w4..w7 the same for h.
    ws = [getattr(layer, f"w{j}") for j in range(8)]
    bs = [getattr(layer, f"b{j}") for j in range(8)]
    gate = lambda a, j: a[..., j * hidden:(j + 1) * hidden]  # noqa: E731  (canonical i, f, g, o)

    def load(arrays):
        w_ih, w_hh, bias, w_fc, b_fc = arrays
        for j in range(4):
            _set(ws[j], gate(w_ih, j).T)
            _set(ws[4 + j], gate(w_hh, j).T)
            _set(bs[j], gate(bias, j))
            _set(bs[4 + j], np.zeros(hidden))  # the second bias: zero, like torch's bias_hh
        _set(chain.fc.W, w_fc.T)
        _set(chain.fc.b, b_fc)

    def canonical(grads):
        w_in, w_h, b_in = grads[0:4], grads[4:8], grads[8:12]
        return [np.ascontiguousarray(np.concatenate([g.T for g in w_in], axis=1)),
                np.ascontiguousarray(np.concatenate([g.T for g in w_h], axis=1)),
                np.concatenate(b_in), np.ascontiguousarray(grads[12].T), grads[13]]

    params = ws + bs[:4] + [chain.fc.W, chain.fc.b]
    return Model(chain, chain.forward, params, load, canonical, {
        "lstm": "L.NStepLSTM (F.n_step_lstm): on CPU a Python loop over the 28 steps of "
                "F.linear + F.lstm, its eight weights re-stacked at every step; its second "
                "bias set (b4..b7) stays zero and its gradient is not reported (Chainer still "
                "computes it)"})


class Bottleneck(chainer.Chain):
    def __init__(self, block: dict):
        super().__init__()
        self.project = block["project"]
        with self.init_scope():
            self.conv1 = L.Convolution2D(block["in"], block["mid"], 1, nobias=True)
            self.bn1 = L.BatchNormalization(block["mid"], eps=1e-5)
            self.conv2 = L.Convolution2D(block["mid"], block["mid"], 3, block["stride"], 1,
                                         nobias=True)
            self.bn2 = L.BatchNormalization(block["mid"], eps=1e-5)
            self.conv3 = L.Convolution2D(block["mid"], block["out"], 1, nobias=True)
            self.bn3 = L.BatchNormalization(block["out"], eps=1e-5)
            if self.project:
                self.downsample = L.Convolution2D(block["in"], block["out"], 1,
                                                  block["stride"], nobias=True)
                self.downsample_bn = L.BatchNormalization(block["out"], eps=1e-5)

    def forward(self, x):
        h = F.relu(self.bn1(self.conv1(x)))
        h = F.relu(self.bn2(self.conv2(h)))
        h = self.bn3(self.conv3(h))
        shortcut = self.downsample_bn(self.downsample(x)) if self.project else x
        return F.relu(h + shortcut)


class ResNet(chainer.Chain):
    def __init__(self, model_spec: spec.ModelSpec):
        super().__init__()
        self.names = [b["name"] for b in spec.resnet_blocks(model_spec.arch["stages"])]
        with self.init_scope():
            self.conv1 = L.Convolution2D(3, 64, 7, 2, 3, nobias=True)
            self.bn1 = L.BatchNormalization(64, eps=1e-5)
            self.blocks = chainer.ChainList(*(Bottleneck(b) for b in
                                              spec.resnet_blocks(model_spec.arch["stages"])))
            self.fc = L.Linear(2048, model_spec.n_outputs)

    def forward(self, x, aux):
        h = F.relu(self.bn1(self.conv1(x)))
        h = F.max_pooling_2d(h, 3, 2, 1, cover_all=False)  # cover_all=False: PyTorch's size
        for block in self.blocks:
            h = block(h)
        return self.fc(F.mean(h, axis=(2, 3)))


def build_resnet(model_spec: spec.ModelSpec) -> Model:
    chain = ResNet(model_spec)
    entries = {}
    _conv(entries, "conv1", chain.conv1)
    _bn(entries, "bn1", chain.bn1)
    for name, block in zip(chain.names, chain.blocks):
        for part in ("1", "2", "3"):
            _conv(entries, f"{name}.conv{part}", getattr(block, f"conv{part}"))
            _bn(entries, f"{name}.bn{part}", getattr(block, f"bn{part}"))
        if block.project:
            _conv(entries, f"{name}.downsample", block.downsample)
            _bn(entries, f"{name}.downsample_bn", block.downsample_bn)
    _linear(entries, "fc", chain.fc)
    return _named(model_spec, chain, chain.forward, entries, {
        "resnet": "built by hand from links (L.ResNet50Layers is v1 and loads pretrained "
                  "weights); L.BatchNormalization with chainer.config.train=False uses "
                  "F.fixed_batch_normalization with its running statistics (mean 0, var 1), "
                  "eps 1e-5 as PyTorch; F.max_pooling_2d(cover_all=False)",
        "conv": "L.Convolution2D on CPU: im2col + numpy.tensordot (iDeep off)"})


class SelfAttention(chainer.Chain):
    """One head of self-attention from links, as Chainer has no attention link."""

    def __init__(self, model_spec: spec.ModelSpec):
        super().__init__()
        embed = model_spec.arch["embed"]
        self.scale = 1.0 / math.sqrt(embed)
        with self.init_scope():
            self.q = L.Linear(embed, embed)
            self.k = L.Linear(embed, embed)
            self.v = L.Linear(embed, embed)
            self.o = L.Linear(embed, embed)

    def forward(self, x, aux):  # x (N, L, E)
        q, k, v = (layer(x, n_batch_axes=2) for layer in (self.q, self.k, self.v))
        weights = F.softmax(F.matmul(q, k, transb=True) * self.scale, axis=2)
        return self.o(F.matmul(weights, v), n_batch_axes=2)


def build_attention(model_spec: spec.ModelSpec) -> Model:
    chain = SelfAttention(model_spec)
    entries = {}
    for n in ("q", "k", "v", "o"):
        _linear(entries, f"attn.{n}", getattr(chain, n))
    return _named(model_spec, chain, chain.forward, entries)


class CTCNet(chainer.Chain):
    def __init__(self, model_spec: spec.ModelSpec):
        super().__init__()
        with self.init_scope():
            self.fc = L.Linear(model_spec.arch["features"], model_spec.arch["classes"])

    def forward(self, x, aux):
        return F.log_softmax(self.fc(x, n_batch_axes=2), axis=2)


def build_ctc(model_spec: spec.ModelSpec) -> Model:
    chain = CTCNet(model_spec)
    entries = {}
    _linear(entries, "fc", chain.fc)
    return _named(model_spec, chain, chain.forward, entries, {
        "ctc": "F.connectionist_temporal_classification(reduce='no') summed; it applies its "
               "own softmax, which leaves the log-softmax's probabilities unchanged"})


class RNNCell(chainer.Chain):
    """The slides' cell with explicit weights: F.linear(h, W_h) is h W_h^T."""

    def __init__(self, model_spec: spec.ModelSpec):
        super().__init__()
        dtype = chainer.get_dtype()
        with self.init_scope():
            self.W_h = chainer.Parameter(np.zeros(model_spec.params[0].shape, dtype))
            self.W_x = chainer.Parameter(np.zeros(model_spec.params[1].shape, dtype))

    def forward(self, x, aux):
        return F.tanh(F.linear(aux, self.W_h) + F.linear(x, self.W_x))


def build_rnn_cell(model_spec: spec.ModelSpec) -> Model:
    chain = RNNCell(model_spec)
    entries = {"W_h": (chain.W_h, _same), "W_x": (chain.W_x, _same)}
    return _named(model_spec, chain, chain.forward, entries)


BUILDERS = {"mlp": build_mlp, "cnn": build_cnn, "lstm": build_lstm, "resnet": build_resnet,
            "attention": build_attention, "ctc": build_ctc, "rnn_cell": build_rnn_cell}


# ================================================================ losses
def _l2(pred, aux):
    return F.sqrt(F.sum(F.square(pred - aux)))  # ||y - f(x)||_2


def _xent(pred, aux):
    return F.softmax_cross_entropy(pred, aux)  # mean over the batch


def _ctc(pred, aux):
    steps = list(F.separate(pred, axis=1))  # Chainer's CTC takes a list of (N, C) per step
    return F.sum(F.connectionist_temporal_classification(steps, aux, 0, reduce="no"))


def _sum(pred, aux):
    return F.sum(pred)


LOSSES = {"l2": _l2, "xent": _xent, "ctc": _ctc, "sum": _sum}
