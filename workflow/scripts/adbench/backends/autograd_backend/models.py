"""autograd's models: each a function f(params, batch) -> prediction over autograd.numpy,
params in the spec's canonical order and layout, as autograd's users write them (its
examples: functions of a parameter list and the data, `np.dot`, `np.tanh`,
`autograd.scipy.special.logsumexp`), and the losses.

The spec's canonical layouts are already numpy's (x @ W, NCHW images with (out, in, kh, kw)
kernels, cross-correlation as in PyTorch), so parameters and inputs load unchanged and
derivatives come back in canonical layout.

float32 throughout: some of autograd's VJPs build float64 masks (np.maximum's and np.where's
VJPs, np.max's, np.mean's division by a numpy integer), which silently turn float32
gradients into float64.  The models avoid those primitives (ReLU as x * (x > 0), a softmax
through logsumexp, sums divided by Python ints), so every gradient stays float32: the tests
check the dtype of what derivatives() returns, which is exactly what the timed steps make.
"""

from __future__ import annotations

import math

import autograd.numpy as np
import numpy as onp
from autograd.scipy.special import logsumexp

from adbench import spec


# ================================================================ building blocks
def relu(x):
    # Not np.maximum(x, 0): its VJP (balanced_eq) returns float64 masks (see the docstring).
    return x * (x > 0)


def sigmoid(x):
    # autograd's examples' form; 1 / (1 + exp(-x)) has an inf * 0 VJP for very negative x.
    return 0.5 * (np.tanh(0.5 * x) + 1.0)


def softmax(x, axis=-1):
    return np.exp(x - logsumexp(x, axis=axis, keepdims=True))


def conv2d(x, w, b, stride: int, pad: int):
    """Cross-correlation (PyTorch's convolution) of NCHW images with (out, in, kh, kw)
    kernels: im2col from strided slices (the kernel's kh * kw shifted views, stacked), then one
    np.tensordot (a BLAS GEMM) over (in, kh, kw)."""
    if pad:
        x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)), mode="constant")
    k = w.shape[-1]
    height = (x.shape[2] - k) // stride + 1
    width = (x.shape[3] - k) // stride + 1
    patches = np.stack([x[:, :, i:i + stride * (height - 1) + 1:stride,
                          j:j + stride * (width - 1) + 1:stride]
                        for i in range(k) for j in range(k)], axis=2)  # (N, C, k*k, H, W)
    kernel = np.reshape(w, (w.shape[0], w.shape[1], k * k))
    out = np.transpose(np.tensordot(patches, kernel, axes=([1, 2], [1, 2])), (0, 3, 1, 2))
    return out if b is None else out + b[:, None, None]


def conv1x1(x, w, stride: int):
    """A 1x1 convolution: one tensordot over channels (no patches to gather)."""
    if stride > 1:
        x = x[:, :, ::stride, ::stride]
    return np.transpose(np.tensordot(x, w[:, :, 0, 0], axes=([1], [1])), (0, 3, 1, 2))


def max_pool(x, k: int, stride: int, pad: int):
    """Max pooling of post-ReLU maps (zero padding equals -inf padding there).  The window's
    maximum is folded from its k*k strided views with bool masks, so the gradient goes to one
    element (the first maximum) and stays float32 (np.max's VJP is float64, see above)."""
    if pad:
        x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)), mode="constant")
    height = (x.shape[2] - k) // stride + 1
    width = (x.shape[3] - k) // stride + 1
    out = None
    for i in range(k):
        for j in range(k):
            view = x[:, :, i:i + stride * (height - 1) + 1:stride,
                     j:j + stride * (width - 1) + 1:stride]
            if out is None:
                out = view
            else:
                take = view > out
                out = out * ~take + view * take
    return out


def batchnorm_inference(x, gamma, beta, eps: float = 1e-5):
    """Batch norm with its running statistics (mean 0, variance 1, as the spec fixes them)."""
    channels = gamma.shape[0]
    mean = onp.zeros((channels, 1, 1), dtype=x.dtype)
    var = onp.ones((channels, 1, 1), dtype=x.dtype)
    return (x - mean) / np.sqrt(var + eps) * gamma[:, None, None] + beta[:, None, None]


# ================================================================ models
# Each model: f(params, batch) -> prediction, params in the spec's canonical order and layout.
def mlp(model: spec.ModelSpec):
    layers = len(model.arch["sizes"]) - 1

    def forward(params, batch):
        x = batch["x"]
        for i in range(layers):
            x = np.dot(x, params[2 * i]) + params[2 * i + 1]
            if i < layers - 1:
                x = relu(x)
        return x

    return forward


def cnn(model: spec.ModelSpec):
    arch = model.arch

    def forward(params, batch):
        x = batch["x"]
        for i, stride in enumerate(arch["strides"]):
            x = relu(conv2d(x, params[2 * i], params[2 * i + 1], stride, arch["padding"]))
        x = np.reshape(x, (x.shape[0], -1))  # (C, H, W) order, as the canonical dense rows
        return np.dot(x, params[-2]) + params[-1]

    return forward


def lstm(model: spec.ModelSpec):
    hidden = model.arch["hidden"]

    def forward(params, batch):
        w_ih, w_hh, bias, w_fc, b_fc = params
        x = batch["x"]  # (N, steps, features)
        projected = np.dot(x, w_ih) + bias  # every step's input projection in one GEMM
        h = onp.zeros((x.shape[0], hidden), dtype=x.dtype)
        c = h
        for t in range(x.shape[1]):
            z = projected[:, t] + np.dot(h, w_hh)
            i = sigmoid(z[:, :hidden])
            f = sigmoid(z[:, hidden:2 * hidden])
            g = np.tanh(z[:, 2 * hidden:3 * hidden])
            o = sigmoid(z[:, 3 * hidden:])
            c = f * c + i * g
            h = o * np.tanh(c)
        return np.dot(h, w_fc) + b_fc

    return forward


def resnet(model: spec.ModelSpec):
    blocks = list(spec.resnet_blocks(model.arch["stages"]))

    def forward(params, batch):
        it = iter(params)
        take = lambda: next(it)  # noqa: E731  (params are consumed in spec order)
        x = conv2d(batch["x"], take(), None, 2, 3)
        x = max_pool(relu(batchnorm_inference(x, take(), take())), 3, 2, 1)
        for blk in blocks:
            stride = blk["stride"]
            y = relu(batchnorm_inference(conv1x1(x, take(), 1), take(), take()))
            y = relu(batchnorm_inference(conv2d(y, take(), None, stride, 1), take(), take()))
            y = batchnorm_inference(conv1x1(y, take(), 1), take(), take())
            if blk["project"]:
                x = batchnorm_inference(conv1x1(x, take(), stride), take(), take())
            x = relu(y + x)
        pooled = np.sum(x, axis=(2, 3)) / (x.shape[2] * x.shape[3])  # global average pool
        return np.dot(pooled, take()) + take()

    return forward


def attention(model: spec.ModelSpec):
    """One head of nn.MultiheadAttention: softmax(q k^T / sqrt(E)) v, then the output
    projection."""
    scale = 1.0 / math.sqrt(model.arch["embed"])

    def forward(params, batch):
        wq, bq, wk, bk, wv, bv, wo, bo = params
        x = batch["x"]  # (N, L, E)
        q = np.dot(x, wq) + bq
        k = np.dot(x, wk) + bk
        v = np.dot(x, wv) + bv
        weights = softmax(np.matmul(q, np.swapaxes(k, 1, 2)) * scale)
        return np.dot(np.matmul(weights, v), wo) + bo

    return forward


def ctc(model: spec.ModelSpec):
    def forward(params, batch):
        logits = np.dot(batch["x"], params[0]) + params[1]
        return logits - logsumexp(logits, axis=-1, keepdims=True)  # log-softmax

    return forward


def rnn_cell(model: spec.ModelSpec):
    def forward(params, batch):
        w_h, w_x = params
        return np.tanh(np.dot(batch["h0"], w_h.T) + np.dot(batch["x"], w_x.T))

    return forward


FAMILIES = {"mlp": mlp, "cnn": cnn, "lstm": lstm, "resnet": resnet, "attention": attention,
            "ctc": ctc, "rnn_cell": rnn_cell}


# ================================================================ losses
NEG = -1e30  # log(0) of the CTC recursion: finite, so no inf - inf in the VJPs


def ctc_loss(log_probs, labels, blank: int = 0):
    """CTC (Graves et al. 2006) summed over the batch: the forward (alpha) recursion in log
    space over the blank-extended labels, every sequence and label at full length, as
    F.ctc_loss(reduction="sum").  Written in autograd.numpy: autograd has no CTC primitive."""
    n, steps, classes = log_probs.shape
    states = 2 * labels.shape[1] + 1
    extended = onp.full((n, states), blank, dtype=labels.dtype)
    extended[:, 1::2] = labels
    one_hot = (extended[:, None, :] == onp.arange(classes)[None, :, None]).astype(
        log_probs.dtype)  # (N, C, S)
    emit = np.matmul(log_probs, one_hot)  # (N, T, S): log p_t(l'_s)
    can_skip = onp.zeros((n, states), dtype=bool)
    can_skip[:, 2:] = (extended[:, 2:] != blank) & (extended[:, 2:] != extended[:, :-2])
    skip_mask = onp.where(can_skip, 0.0, NEG).astype(log_probs.dtype)
    start_mask = onp.full((1, states), NEG, dtype=log_probs.dtype)
    start_mask[:, :2] = 0.0
    pad1 = onp.full((n, 1), NEG, dtype=log_probs.dtype)
    pad2 = onp.full((n, 2), NEG, dtype=log_probs.dtype)
    alpha = emit[:, 0] + start_mask
    for t in range(1, steps):
        stay = alpha
        step = np.concatenate([pad1, alpha[:, :-1]], axis=1)
        skip = np.concatenate([pad2, alpha[:, :-2]], axis=1) + skip_mask
        alpha = logsumexp(np.stack([stay, step, skip]), axis=0) + emit[:, t]
    return -np.sum(logsumexp(alpha[:, -2:], axis=1))


def l2_loss(pred, batch):
    return np.linalg.norm(batch["y"] - pred)


def xent_loss(pred, batch):
    labels = batch["y"]
    rows = onp.arange(len(labels))
    # Divided by a Python int: np.mean's VJP divides by a numpy integer (float64 result).
    return np.sum(logsumexp(pred, axis=1) - pred[rows, labels]) / len(labels)


LOSSES = {"l2": l2_loss, "xent": xent_loss, "sum": lambda pred, batch: np.sum(pred),
          "ctc": lambda pred, batch: ctc_loss(pred, batch["y"])}


FAMILY_CHOICES = {
    "cnn": {"conv": "im2col from the kernel's shifted strided slices (np.stack), then one "
                    "np.tensordot (BLAS GEMM); stride 2 gathers only the strided positions"},
    "resnet": {"conv": "im2col + np.tensordot as the CNN; 1x1 convolutions one tensordot; "
                       "batch norm in inference form (running mean 0, variance 1); max pool "
                       "folded from strided views with bool masks"},
    "lstm": {"lstm": "Python loop over the 28 steps; the input projection of all steps in "
                     "one np.dot; sigmoid as 0.5 * (tanh(x / 2) + 1)"},
    "attention": {"softmax": "exp(x - logsumexp(x)) with autograd.scipy.special.logsumexp"},
    "ctc": {"ctc": "CTC forward recursion written in autograd.numpy (log space, "
                   "logsumexp over the three transitions), autograd differentiates it"},
}
