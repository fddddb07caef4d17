"""Chainer's backend: chainer.links models under define-by-run, loss.backward() and
chainer.grad; eager (define-by-run) mode only, on numpy (CPU).  What it runs and refuses is
declared here (no import of chainer); device.py, models.py and tasks.py hold the rest
(adbench.backends says what each is for).

Models are chainer.Chain / ChainList of links as Chainer users write them (L.Linear,
L.Convolution2D, L.NStepLSTM, L.BatchNormalization), loaded with the spec's canonical arrays:
L.Linear keeps W as (out, in) (canonical x @ W transposed), convolutions are NCHW with
(out, in, kh, kw) kernels as the spec, and L.NStepLSTM keeps one (H, in) matrix per gate.
Derivatives are converted back outside the clock.

Chainer has no Jacobian API (no jacobian function, no vectorisation over VJPs): the
vectorised Jacobian and the loss Jacobian are refused with that reason.  The output Jacobian
row by row is chainer.grad with one-hot grad_outputs in a Python loop.  The variable-length
tasks are not implemented.
"""

from adbench.backends import Capabilities, Refusal, fixed_shapes_only

NO_JACOBIAN_API = ("Chainer 7.8.1 has no Jacobian API: no jacobian function and no "
                   "vectorisation over vector-Jacobian products (only Variable.backward and "
                   "chainer.grad, one VJP per call)")

CAPABILITIES = Capabilities(
    framework="chainer",
    refusals=(
        fixed_shapes_only("Chainer"),
        Refusal(NO_JACOBIAN_API, tasks=("jacobian_vectorized",)),
        # chainer.grad of the scalar loss is the gradient, i.e. the backward task again:
        # timing it here would not test the Jacobian API that Hypothesis 0 is about.
        Refusal(NO_JACOBIAN_API + "; chainer.grad of the scalar loss is the plain gradient, "
                "already timed as the backward task", tasks=("loss_jacobian",)),
        Refusal("Chainer 7 cannot exclude parameters from differentiation: a Parameter's "
                "requires_grad is fixed (True) when it is created and read-only, and "
                "link.disable_update() stops only the optimizer, so loss.backward() still "
                "computes the frozen part's gradients", tasks=("backward_frozen",)),
    ),
)
