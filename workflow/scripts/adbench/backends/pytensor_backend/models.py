"""PyTensor's dialect of the symbolic graphs (symbolic_graphs, shared with Theano): the ops
and APIs in which PyTensor differs, weights as shared variables (pytensor.shared,
borrow=True) holding the spec's canonical arrays."""

from __future__ import annotations

import functools

import adbench.backends.pytensor_backend.device  # noqa: F401  (flags, before pytensor)
import pytensor
import pytensor.tensor as pt
from pytensor.gradient import jacobian as pt_jacobian

from adbench.backends import symbolic_graphs as graphs


def _scan(fn, sequences, outputs_info, non_sequences) -> list:
    return pytensor.scan(
        fn,
        sequences=sequences,
        outputs_info=outputs_info,
        non_sequences=non_sequences,
        return_updates=False,
        return_list=True,
    )


def _xent(logits, labels):
    log_p = pt.special.log_softmax(logits, axis=-1)
    return -pt.mean(log_p[pt.arange(labels.shape[0]), labels])


def _jacobian_rows(out, x, rows: int):
    return pt_jacobian(out, x, vectorize=False), (
        "pytensor.gradient.jacobian(out, x, vectorize=False): pytensor.scan over the rows, one "
        "pytensor.grad of out[r] w.r.t. x per iteration (FAST_RUN hoists the loop-invariant "
        "forward out of the scan). A Python loop of pytensor.grad calls unrolled into one "
        "graph was not used: the 128-row attention Jacobian had not finished compiling after "
        "5 minutes in C mode"
    )


def _jacobian_vectorized(out, x, rows: int):
    return pt_jacobian(out, x, vectorize=True), (
        "pytensor.gradient.jacobian(out, x, vectorize=True): one pullback with a symbolic "
        "cotangent, vectorize_graph over the rows of eye"
    )


DIALECT = graphs.Dialect(
    framework=pytensor,
    label="PyTensor",
    scan=_scan,
    tensor=lambda name, dtype, shape: pt.tensor(name, dtype=dtype, shape=shape),
    sigmoid=pt.sigmoid,
    softmax=functools.partial(pt.special.softmax, axis=-1),
    log_softmax=functools.partial(pt.special.log_softmax, axis=-1),
    batched_matmul=pt.matmul,
    xent=_xent,
    # PyTensor 3.0.7 has no multi-channel convolution op (tensor.nnet and tensor.conv are
    # gone; its signal.convolve2d is single-channel scipy.signal-style): im2col.
    conv2d=functools.partial(graphs.im2col_conv2d, pt),
    max_pool=functools.partial(graphs.window_max_pool, pt),
    jacobian_rows=_jacobian_rows,
    jacobian_vectorized=_jacobian_vectorized,
)
