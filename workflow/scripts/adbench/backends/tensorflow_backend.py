"""TensorFlow backend: eager (GradientTape) and graph (tf.function of the whole step)."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from adbench.backends import Prepared, UnsupportedCell
from adbench.spec import Workload, make_batches, make_weights
from adbench.timing import split_timer, whole_timer


def configure_threads(threads: int) -> None:
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)


def versions() -> dict[str, str]:
    info = {"tensorflow": tf.__version__, "numpy": np.__version__}
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


def mlp_forward(x, params):
    n_layers = len(params) // 2
    for i in range(n_layers):
        x = tf.matmul(x, params[2 * i]) + params[2 * i + 1]
        if i < n_layers - 1:
            x = tf.nn.relu(x)
    return x


def prepare(workload: Workload, mode: str, device: str) -> Prepared:
    if device == "cuda" and not _gpus():
        raise UnsupportedCell("device cuda requested but TensorFlow sees no GPU")
    tf_device = "/GPU:0" if device == "cuda" else "/CPU:0"
    sync = tf.test.experimental.sync_devices if device == "cuda" else (lambda: None)
    arch = workload.architecture
    with tf.device(tf_device):
        # All batches placed on the device up front: data transfer is not part of the timing.
        batches = [(tf.constant(x), tf.constant(y)) for x, y in make_batches(workload)]
        params = [tf.Variable(array) for layer in make_weights(workload) for array in layer]
    batch = lambda i: batches[i % len(batches)]  # noqa: E731

    def forward(i):
        tape = tf.GradientTape()
        with tape:
            loss = tf.norm(batch(i)[1] - mlp_forward(batch(i)[0], params))
        return tape, loss

    def backward(tape_and_loss):
        tape, loss = tape_and_loss
        return tape.gradient(loss, params)

    if mode == "eager":

        def run(i, clock):
            with tf.device(tf_device):
                return split_timer(lambda: forward(i), backward, sync, clock)

        def gradients(i):
            with tf.device(tf_device):
                tape_and_loss = forward(i)
                grads = backward(tape_and_loss)
            return float(tape_and_loss[1]), [g.numpy() for g in grads]

    elif mode == "graph":
        # A batch dimension of None: the shorter last batch of the epoch does not retrace.
        signature = [
            tf.TensorSpec([None, arch.n_inputs], tf.float32),
            tf.TensorSpec([None, arch.n_outputs], tf.float32),
        ]

        @tf.function(input_signature=signature)
        def whole_step(xb, yb):
            with tf.GradientTape() as tape:
                loss = tf.norm(yb - mlp_forward(xb, params))
            return loss, tape.gradient(loss, params)

        def run(i, clock):
            with tf.device(tf_device):
                return whole_timer(lambda: whole_step(*batch(i)), sync, clock)

        def gradients(i):
            with tf.device(tf_device):
                loss, grads = whole_step(*batch(i))
            return float(loss), [g.numpy() for g in grads]

    else:
        raise UnsupportedCell(f"tensorflow has no mode {mode!r}")
    return Prepared(run=run, gradients=gradients)
