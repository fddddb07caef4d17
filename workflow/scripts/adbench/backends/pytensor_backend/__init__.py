"""PyTensor's backend: a symbolic graph of model and loss, pytensor.grad for the derivatives,
one pytensor.function per cell, compiled in `prepare`; modes "c" and "numba".  What it runs
and refuses is declared here (no import of pytensor); device.py (flags and caches, set
before the import), models.py (PyTensor's dialect of symbolic_graphs) and tasks.py hold the
rest (adbench.backends says what each is for).

    c      Mode(linker="cvm", optimizer="fast_run"): the FAST_RUN rewrites, C thunks run by
           the C virtual machine (g++ at compile time, modules cached in the compiledir).
    numba  the predefined NUMBA mode (NumbaLinker, FAST_RUN + numba rewrites): the whole
           graph becomes one Numba function.  It is PyTensor 3.0.7's default: config.linker
           defaults to "auto", which Mode() and get_mode("FAST_RUN") resolve to NUMBA.

The graphs are symbolic_graphs' (shared with the Theano backend) in PyTensor's dialect:
weights are shared variables (pytensor.shared, borrow=True) holding the spec's canonical
arrays, batches are the function's inputs (numpy arrays, passed as they are).

Compile caches live under $ADBENCH_CACHE_DIR/pytensor (base_compiledir for the C modules,
and the Numba caches), set here before pytensor and numba are imported.  One cache dir
serves every cell of a run, so a cell's compile_s is cold only for the first cell that
needs a module; `choices["cache"]` says what was in the cache before the cell compiled.
"""

from adbench.backends import Capabilities, Refusal, one_compiled_function

CAPABILITIES = Capabilities(
    framework="pytensor",
    refusals=(
        *one_compiled_function("PyTensor"),
        # Measured: tiny workload, 2-core machine shared with other jobs, PyTensor 3.0.7,
        # Numba 0.65.1.
        Refusal("PyTensor 3.0.7's Numba mode does not compile ResNet50 in reasonable time: "
                "the backward graph (2467 nodes after the FAST_RUN + numba rewrites, which "
                "took 130 s) had not finished Numba's compilation after 25 minutes (11.7 "
                "CPU-minutes); the 2-convolution CNN's 138-node graph takes 290 s of Numba "
                "compilation (2.1 s per node: about 85 minutes for ResNet50's, "
                "extrapolated)", modes=("numba",), families=("resnet",)),
    ),
)
