"""TensorFlow's backend: Keras layers under tf.GradientTape (eager), or the whole step in one
tf.function (graph), or in one tf.function(jit_compile=True) that XLA compiles (xla); every
task of the spec.  What it runs and refuses is declared here (no import of TensorFlow);
device.py, models.py and tasks.py hold the rest (adbench.backends says what each is for).

Each model family is built the way Keras users write it; the spec's canonical arrays are
loaded into it once, converted to TensorFlow's layouts (NHWC images, HWIO kernels), and
derivatives are converted back outside the clock.  The tasks are written once, as a
`forward` (what runs under the tape) and a `derive` (the tape call), over every model; the
forward task (spec.FORWARD_TASK) is the loss alone, with no tape and a `derive` that takes
nothing.
"""

import os

from adbench import spec
from adbench.backends import MODEL_FAMILIES, Capabilities, Refusal

DYNAMIC_TASK = spec.sequence_task("dynamic")


def onednn_requested() -> bool:
    """Whether TensorFlow will run its oneDNN kernels on the CPU: TF_ENABLE_ONEDNN_OPTS as
    TensorFlow reads it at its import (on unless set to 0 or false), read here without
    importing it."""
    return os.environ.get("TF_ENABLE_ONEDNN_OPTS", "1").strip().lower() not in ("0", "false")


# Cells that abort the whole process (not an exception a cell could record), in the modes
# that run TensorFlow's own kernels (eager, graph; XLA compiles the batched matmul itself).
ONEDNN_ABORT = Refusal(
    "pfor turns Keras MultiHeadAttention's projections into BatchMatMulV2 of shape "
    "(rows, 1, L, E) x (E, E), which TensorFlow's oneDNN kernel on the CPU aborts the process "
    "on (dnnl::error / SIGSEGV; tf.matmul(tf.ones([4, 1, 8, 16]), tf.ones([16, 16])) "
    "reproduces it); the cell runs with TF_ENABLE_ONEDNN_OPTS=0",
    modes=("eager", "graph"), families=("attention",), tasks=("jacobian_vectorized",),
    devices=("cpu",))

# The study's protocol (spec.STUDY_PROTOCOL_TASK) is its published code: the Keras MLP of
# 000 §3.1 with tf.norm's loss, eager or in one tf.function (its `@tf.function`).
STUDY_MLPS_ONLY = ("the study's protocol is its published code for its MLPs (000 §3.1, Fig. 2: "
                   "pred_y = model(x); loss = tf.norm(true_y - pred_y); tape.gradient(loss, "
                   "model.trainable_variables)): a Keras MLP with the l2 loss only")
STUDY_PROTOCOL = (
    Refusal(STUDY_MLPS_ONLY, tasks=(spec.STUDY_PROTOCOL_TASK,),
            families=tuple(f for f in MODEL_FAMILIES if f != "mlp")),
    Refusal(STUDY_MLPS_ONLY, tasks=(spec.STUDY_PROTOCOL_TASK,),
            losses=tuple(loss for loss in spec.LOSSES if loss != "l2")),
    Refusal("the study runs its TensorFlow code eagerly or in a tf.function (000 §3.1.3): "
            "its protocol has no XLA mode", modes=("xla",), tasks=(spec.STUDY_PROTOCOL_TASK,)),
)

CAPABILITIES = Capabilities(
    framework="tensorflow",
    refusals=(
        *STUDY_PROTOCOL,
        Refusal("tensorflow's eager mode has no dynamic-shape option (reduce_retracing and "
                "input_signature are tf.function's): it needs none, define-by-run already "
                "runs each batch at its own length (task backward_varlen)",
                modes=("eager",), tasks=(DYNAMIC_TASK,)),
        Refusal("no tape outlives a tf.function's call: the step's tf.GradientTape is made "
                "and dropped inside the compiled function (tf.function, XLA), so there is no "
                "graph to retain past the step; only eager mode holds its persistent tape "
                "after the step", modes=("graph", "xla"), tasks=("backward_retained",)),
        *((ONEDNN_ABORT,) if onednn_requested() else ()),
        Refusal("tf.nn.ctc_loss with dense labels (ctc_loss_dense) mixes in float32 "
                "constants: it cannot run in float64", losses=("ctc",), dtypes=("float64",)),
        # ---------------------------------------------------------------- met at run time
        # XLA compiles at the step's first call (the first timed iteration), which raises.
        Refusal("XLA (tf.function(jit_compile=True)) cannot compile the step: pfor over Keras' "
                "LSTM, whose tf.while_loop keeps its steps in TensorLists, makes TensorList "
                "ops that XLA has no kernel for", modes=("xla",), families=("lstm",),
                tasks=("jacobian_vectorized", "loss_jacobian"),
                errors=("InvalidArgumentError", "UnimplementedError"),
                pattern=r"No registered 'TensorList\w+' OpKernel for XLA_\w+_JIT"),
    ),
)
