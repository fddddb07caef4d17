"""JAX's backend: every model a plain jax.numpy / jax.lax function of a parameter dict; eager
(op by op, no jit) and jit (the whole step in one jax.jit) modes; every task of the spec but
the retained graph.  What it runs and refuses is declared here (no import of jax);
device.py, models.py and tasks.py hold the rest (adbench.backends says what each is for).

No model library (flax, haiku, optax): the models are the pure functions JAX users write,
`forward(params, x, aux) -> output`, with `params` a dict from the spec's parameter names to
arrays in the spec's canonical layouts (x @ W dense weights, NCHW images, OIHW kernels: XLA
chooses its own physical layouts), so no conversion is needed either way.  `aux` is the
batch's second array: rnn_cell's previous hidden state, else the targets (ignored by the
model).

What "eager" means in JAX: no jax.jit anywhere, and every step runs under jax.disable_jit(),
so the jax.numpy functions JAX implements with an internal jit (jnp.linalg.norm,
jax.nn.log_softmax, ...) and the body of lax.scan also run primitive by primitive.  Each
primitive is still executed by XLA: JAX compiles it once per shape and dtype and caches the
executable in the process (JAX's own op-by-op dispatch), so the first iterations pay those
small compilations.  jax.grad/jax.vjp/jax.jacrev trace the Python function at every call.

Variable-length tasks (spec.SEQUENCE_TASKS): the LSTM and the RNN cell on sequences
(models.SEQUENCE_FAMILIES), the same code for every strategy, masked to each example's
length.  Eager runs every batch at whatever length it has.  jax.jit compiles once per new
input shape (true length: per new length; padded: once; bucketed: per bucket), counted by
Prepared.traces (the jitted step's cache size).  The dynamic-shape strategy is refused in
both modes (below): jax.jit has none (padding and bucketing are JAX's answer), eager needs
none.
"""

from adbench import spec
from adbench.backends import Capabilities, Refusal

# The task of the strategy "dynamic": a compiled mode's dynamic-shape option.
DYNAMIC_TASK = spec.sequence_task("dynamic")

CAPABILITIES = Capabilities(
    framework="jax",
    refusals=(
        Refusal("JAX is functional: no graph outlives the call that differentiates (a "
                "step's residuals live in the pullback jax.vjp returns, and nothing retains "
                "or frees a graph between steps), so there is no retain_graph to set",
                tasks=("backward_retained",)),
        Refusal("jax.jit has no dynamic-shape option (no argument of jax.jit nor jax.config "
                "flag makes one compilation serve several input shapes): each compilation "
                "is specialised to its arguments' shapes, so JAX's answer to varying "
                "lengths is padding or bucketing (backward_padded, backward_bucketed); "
                "jax.jit's default, a compilation per new length, is backward_varlen",
                modes=("jit",), tasks=(DYNAMIC_TASK,)),
        Refusal("eager JAX needs no dynamic-shape option: op by op, every batch already runs "
                "at its own length, which is backward_varlen's eager cell",
                modes=("eager",), tasks=(DYNAMIC_TASK,)),
    ),
)

