"""MXNet's backend: Gluon HybridBlocks run imperatively under autograd.record() (eager), or
the same blocks after hybridize(static_alloc=True, static_shape=True) (hybrid).  What it runs
and refuses is declared here (no import of mxnet); device.py, models.py and tasks.py hold the
rest (adbench.backends says what each is for).

Models are Gluon blocks as MXNet users write them (nn.Dense, nn.Conv2D, rnn.LSTM,
nn.BatchNorm, gluon.loss), loaded with the spec's canonical arrays (Dense weights are
(out, in) here, the spec's (in, out); convolutions are NCHW/OIHW as in the spec).

MXNet's engine is asynchronous: every operator call only pushes work to the engine's worker
thread, so the clock is read only after mx.nd.waitall().  A hybridized block builds its
symbolic graph (a CachedOp) at its first call, which is the first timed iteration: compile_s
is 0 and time to first step is that iteration.

MXNet 1.9 has no Jacobian API (mx.autograd offers backward, grad and mark_variables, no
jacobian and no vmap): jacobian_vectorized and loss_jacobian are refused.  The variable-length
tasks are not implemented.
"""

from adbench import spec
from adbench.backends import Capabilities, Refusal, fixed_shapes_only

CAPABILITIES = Capabilities(
    framework="mxnet",
    refusals=(
        fixed_shapes_only("MXNet"),
        Refusal("MXNet 1.9.1 has no Jacobian API: mx.autograd offers backward, grad "
                "(vector-Jacobian products) and mark_variables, but no jacobian and no vmap "
                "to vectorise them, so the task cannot be computed as it is defined",
                tasks=("jacobian_vectorized", "loss_jacobian")),
        Refusal("MXNet's CTCLoss operator computes in float32 only: no float64 CTC loss",
                losses=("ctc",), tasks=("backward", spec.FORWARD_TASK), dtypes=("float64",)),
    ),
)
