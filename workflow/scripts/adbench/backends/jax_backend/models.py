"""JAX's models: each a pure function `forward(params, x, aux) -> output` of a parameter dict
(the spec's names, canonical layouts), as JAX users write them without a model library, the
same functions on sequences (masked to each example's length), and the losses."""

from __future__ import annotations

import math
from typing import Callable

import jax
import jax.numpy as jnp
from jax import lax

from adbench import spec

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


# What each family's code is, for the cell's choices (a sequence cell's: tasks.sequence_choices).
FAMILY_CHOICES = {
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
