"""Theano 1.0.5's backend: a symbolic graph of model and loss, theano.grad for the
derivatives, one theano.function per cell in FAST_RUN (cvm linker, C thunks), compiled in
`prepare`; mode "c".  What it runs and refuses is declared here (no import of theano);
device.py (flags, set before the import), models.py (Theano's dialect of symbolic_graphs) and
tasks.py hold the rest (adbench.backends says what each is for).

The graphs are symbolic_graphs' (shared with the PyTensor backend) in Theano's dialect:
weights are shared variables (theano.shared, borrow=True) holding the spec's canonical
arrays, the layouts Theano users write (T.dot(x, W) with W (in, out); NCHW images and
(out, in, kh, kw) kernels for T.nnet.conv2d).  Batches are the function's inputs.
"""

from adbench.backends import Capabilities, Refusal, one_compiled_function

CAPABILITIES = Capabilities(
    framework="theano",
    refusals=(
        *one_compiled_function("Theano"),
        Refusal("Theano 1.0.5 has no vectorised Jacobian: theano.gradient.jacobian loops over "
                "the output rows with theano.scan (one theano.grad per row), and Theano has "
                "no vmap / vectorize_graph", tasks=("jacobian_vectorized",)),
    ),
)
