"""Theano's dialect of the symbolic graphs (symbolic_graphs, shared with PyTensor): the ops
and APIs in which Theano differs, weights as shared variables (theano.shared, borrow=True)
holding the spec's canonical arrays, the layouts Theano users write (T.dot(x, W) with W
(in, out); NCHW images and (out, in, kh, kw) kernels for T.nnet.conv2d)."""

from __future__ import annotations

import adbench.backends.theano_backend.device  # noqa: F401  (flags, before theano)
import numpy as np
import theano
import theano.tensor as T
from theano.tensor.signal.pool import pool_2d

from adbench.backends import symbolic_graphs as graphs


def _scan(fn, sequences, outputs_info, non_sequences) -> list:
    outputs, _ = theano.scan(
        fn, sequences=sequences, outputs_info=outputs_info, non_sequences=non_sequences
    )
    return outputs if isinstance(outputs, list) else [outputs]


def _tensor(name: str, dtype: str, shape: tuple):
    """Theano 1.0.5 types have no static shape: every axis free (none broadcastable)."""
    return T.TensorType(dtype, (False,) * len(shape))(name)


def _rows(f):
    """A 2-D-only Theano op (softmax, logsoftmax) over the last axis of x."""
    return lambda x: f(x.reshape((-1, x.shape[-1]))).reshape(x.shape)


def _xent(logits, labels):  # rewritten by FAST_RUN into the fused softmax cross-entropy op
    return T.nnet.categorical_crossentropy(T.nnet.softmax(logits), labels).mean()


def _conv2d(x, w, size, shape, stride: int, pad: int):
    """Cross-correlation (filter_flip=False); FAST_RUN turns it into CorrMM (im2col + gemm)
    and its gradients into CorrMM_gradWeights / gradInputs."""
    return T.nnet.conv2d(
        x,
        w,
        filter_shape=shape,
        border_mode=(pad, pad),
        subsample=(stride, stride),
        filter_flip=False,
    )


def _max_pool(x, size, kernel: int, stride: int, pad: int):
    # Zero padding: the input is a ReLU's output (>= 0), so it never wins the max.
    return pool_2d(
        x,
        ws=(kernel, kernel),
        ignore_border=True,
        stride=(stride, stride),
        pad=(pad, pad),
        mode="max",
    )


# jacobian_rows: "scan" (the framework's row-by-row Jacobian, as in the PyTensor backend) or
# "loop" (a Python loop of theano.grad unrolled into one graph).  Measured (tiny workloads,
# 1 thread): dense 128 rows 1.4 ms (scan) vs 0.9 ms (loop), mlp512 0.43 vs 0.38 ms; the loop
# compiles for 30 s for the 128-row attention Jacobian.
ROWS_API = "scan"


def _jacobian_rows(out, x, rows: int):
    if ROWS_API == "scan":
        return theano.gradient.jacobian(out, x), (  # (rows, 1, *input)
            "theano.gradient.jacobian(out, x): theano.scan over the rows, one theano.grad of "
            "out[r] w.r.t. x per iteration (the scan optimisations hoist the loop-invariant "
            "forward out of the loop); the scan loop is Theano's Python one (Scan.execute): "
            "its Cython loop does not build on Python 3.11"
        )
    # One-hot cotangents as a shared matrix (an input of the graph, not a constant the
    # optimizer could fold), one theano.grad per row: the Python loop is unrolled into
    # one graph, as tf.function unrolls it.
    one_hot = theano.shared(np.eye(rows, dtype=x.dtype), name="one_hot")
    vjps = [theano.grad(None, wrt=x, known_grads={out: one_hot[r]}) for r in range(rows)]
    return T.concatenate(vjps, axis=0), (
        "a Python loop of theano.grad(None, x, known_grads={out: one_hot[r]}) per row "
        "(one-hot rows of a shared matrix), unrolled into one compiled function"
    )


DIALECT = graphs.Dialect(
    framework=theano,
    label="Theano",
    scan=_scan,
    tensor=_tensor,
    sigmoid=T.nnet.sigmoid,
    softmax=_rows(T.nnet.softmax),
    log_softmax=_rows(T.nnet.logsoftmax),
    batched_matmul=T.batched_dot,
    xent=_xent,
    conv2d=_conv2d,
    max_pool=_max_pool,
    jacobian_rows=_jacobian_rows,
    jacobian_vectorized=None,  # Theano has none (CAPABILITIES refuse the task)
)
