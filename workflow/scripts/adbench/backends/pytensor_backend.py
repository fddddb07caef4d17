"""PyTensor backend: a symbolic graph of model and loss, pytensor.grad for the derivatives,
one pytensor.function per cell, compiled in `prepare`; modes "c" and "numba".

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

from __future__ import annotations

import functools
import inspect
import os
import time

# ================================================================ caches, before the import
# (the backends package imports no framework)
from adbench.backends import Prepared, UnsupportedCell, blas, cache_dir, compose_flags

CACHE_DIR = cache_dir("pytensor")
os.environ["PYTENSOR_FLAGS"] = compose_flags(
    os.environ.get("PYTENSOR_FLAGS", ""),
    forced={"base_compiledir": CACHE_DIR},
    # float32 Python literals (1 / sqrt(E), the CTC's -1e30): no silent float64 upcasts.
    defaults={"floatX": "float32"},
)
# Numba's own file cache (functions PyTensor jits with cache=True); PyTensor's cache of the
# graphs it generates is <base_compiledir>/numba.
os.environ["NUMBA_CACHE_DIR"] = os.path.join(CACHE_DIR, "numba_functions")
if os.environ.get("OMP_NUM_THREADS") and "NUMBA_NUM_THREADS" not in os.environ:
    os.environ["NUMBA_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"]

import numba  # noqa: E402
import numpy as np  # noqa: E402
import pytensor  # noqa: E402
import pytensor.tensor as pt  # noqa: E402
import scipy  # noqa: E402
from pytensor.compile.builders import OpFromGraph  # noqa: E402
from pytensor.compile.mode import Mode, get_mode  # noqa: E402
from pytensor.gradient import jacobian as pt_jacobian  # noqa: E402
from pytensor.scan.op import Scan  # noqa: E402

from adbench import spec  # noqa: E402
from adbench.backends import symbolic_graphs as graphs  # noqa: E402


# ================================================================ environment
def configure_threads(threads: int) -> dict:
    """OpenBLAS (numpy's, used by the C thunks' BLAS fallback and by numpy-based perform
    methods; scipy's, which Numba's np.dot calls) reads OPENBLAS_NUM_THREADS, pinned by the
    harness before the import; threadpoolctl sets it again and reports it.  PyTensor's own C
    code runs one thread (config.openmp False, reported in choices); Numba's thread pool
    (used only by parallel=True code, which PyTensor does not generate by default) is set
    too."""
    import scipy.linalg  # noqa: F401  (loads scipy's OpenBLAS, which Numba's BLAS calls use)

    pools = blas.limit_threads(threads)
    try:
        numba.set_num_threads(threads)
    except ValueError:  # more than NUMBA_NUM_THREADS, fixed when numba was imported
        pass
    return {"numba": numba.get_num_threads(), **pools}


def versions() -> dict[str, str]:
    return {
        "pytensor": pytensor.__version__,
        "numpy": np.__version__,
        "numba": numba.__version__,
        "scipy": scipy.__version__,
    }


def device_name(device: str) -> str:
    return "cpu"


# ================================================================ PyTensor's dialect
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


# ================================================================ modes
MODES = {
    "c": (
        (
            "pytensor.compile.mode.Mode(linker='cvm', optimizer='fast_run'): FAST_RUN "
            "rewrites, C thunks (g++) run by the C VM"
        ),
        lambda: Mode(linker="cvm", optimizer="fast_run"),
    ),
    "numba": (
        (
            "get_mode('NUMBA'): NumbaLinker with FAST_RUN + numba rewrites, the whole "
            "graph jitted as one Numba function; PyTensor 3.0.7's default mode "
            "(config.linker 'auto' resolves to numba)"
        ),
        lambda: get_mode("NUMBA"),
    ),
}


LINKERS = {"c": "cvm", "numba": "auto"}

# Cells refused before compiling, with what was measured (tiny workload, 2-core machine
# shared with other jobs, PyTensor 3.0.7, Numba 0.65.1).
REFUSED = {
    (
        "numba",
        "resnet",
    ): "PyTensor 3.0.7's Numba mode does not compile ResNet50 in reasonable time: the "
    "backward graph (2467 nodes after the FAST_RUN + numba rewrites, which took 130 s) "
    "had not finished Numba's compilation after 25 minutes (11.7 CPU-minutes); the "
    "2-convolution CNN's 138-node graph takes 290 s of Numba compilation (2.1 s per "
    "node: about 85 minutes for ResNet50's, extrapolated)",
}


# ================================================================ compilation
def _cache_state() -> str:
    c_modules = (
        [d for d in pytensor.config.compiledir.glob("tmp*") if d.is_dir()]
        if pytensor.config.compiledir.exists()
        else []
    )
    numba_dir = pytensor.config.base_compiledir / "numba"
    numba_files = sum(len(files) for _, _, files in os.walk(numba_dir))
    state = "cold (empty)" if not c_modules and not numba_files else "warm"
    return (
        f"{state} before this cell: {len(c_modules)} C modules, {numba_files} Numba cache "
        f"files under {pytensor.config.base_compiledir}; the cache dir is shared by every "
        "cell run with the same ADBENCH_CACHE_DIR, so a later cell's compile_s reuses "
        "what earlier cells compiled"
    )


def _compile_inner_functions(fgraph, seen: set | None = None) -> int:
    """Compile, in prepare, the functions the C VM would otherwise compile at the first call:
    the inner graphs of OpFromGraph nodes (PyTensor 3.0.7's Softmax and LogSoftmax are
    OpFromGraph ops that the C linker runs through `op.fn`, compiled lazily), also inside
    Scan's inner functions.  Nothing is computed.  Returns how many were compiled."""
    seen = set() if seen is None else seen
    count = 0
    for node in fgraph.apply_nodes:
        op = node.op
        if id(op) in seen:
            continue
        seen.add(id(op))
        if isinstance(op, OpFromGraph):
            count += 1 + _compile_inner_functions(op.fn.maker.fgraph, seen)
        elif isinstance(op, Scan):
            count += _compile_inner_functions(op.fn.maker.fgraph, seen)
    return count


def _numba_compile(function, args) -> str:
    """Compile the Numba function for the exact types of the first call, in prepare (the
    NumbaLinker jits lazily, at the first call, otherwise); no step is run."""
    jit_fn = getattr(function.vm, "jit_fn", None)
    if jit_fn is None or not hasattr(jit_fn, "compile"):
        return "lazy: no Numba dispatcher found; compiled at the first call"
    given = iter(args)
    values = tuple(c.data if c.implicit else next(given) for c in function.input_storage)
    if jit_fn.py_func.__code__.co_flags & inspect.CO_VARARGS:
        # PyTensor's cached wrapper is `def f(*args)`: Numba's dispatcher folds the call's
        # arguments into one tuple and types that.
        jit_fn.compile((numba.typeof(values),))
    else:
        jit_fn.compile(tuple(numba.typeof(v) for v in values))
    return "Numba dispatcher compiled in prepare for the first call's argument types"


def numba_signatures(function) -> int | None:
    """How many signatures the Numba function has compiled (1: no recompilation)."""
    jit_fn = getattr(function.vm, "jit_fn", None)
    return len(jit_fn.signatures) if jit_fn is not None else None


def _no_new_signature(function):
    """A check after each timed call: the Numba function compiled nothing new in it."""
    compiled = numba_signatures(function)

    def check():
        if numba_signatures(function) != compiled:
            raise RuntimeError(
                "Numba compiled a new signature during a timed call: the "
                "compilation in prepare did not match the call's types"
            )

    return check


def prepare(workload: spec.Workload, mode: str, device: str, dtype: str = "float32") -> Prepared:
    if mode not in MODES:
        raise UnsupportedCell(f"pytensor has no mode {mode!r}")
    if device != "cpu":
        raise UnsupportedCell(
            "the pytensor backend runs on CPU only (its C and Numba " "linkers are CPU backends)"
        )
    model = workload.spec
    if model.family not in graphs.FAMILIES:
        raise UnsupportedCell(f"pytensor backend has no model family {model.family!r}")
    if (mode, model.family) in REFUSED:
        raise UnsupportedCell(REFUSED[mode, model.family])
    params = graphs.shared_params(pytensor.shared, workload, dtype)
    batches = graphs.batch_arguments(workload, dtype)
    mode_label, make_mode = MODES[mode]
    # The linker of the functions PyTensor compiles for itself with the default mode (the
    # inner graphs of OpFromGraph ops in C mode): "auto" is Numba; a C-mode user picks the C
    # backend with PYTENSOR_FLAGS=linker=cvm, set here per cell (one cell per process in
    # the pipeline; the tests run cells of both modes in one process, in turn).
    pytensor.config.linker = LINKERS[mode]
    cache = _cache_state()

    t = time.perf_counter()
    inputs, outputs, choices = graphs.task_graph(DIALECT, workload, params, dtype)
    function = pytensor.function(inputs, outputs, mode=make_mode())
    inner = _compile_inner_functions(function.maker.fgraph) if mode == "c" else None
    jit = _numba_compile(function, batches[0][: len(inputs)]) if mode == "numba" else None
    compile_s = time.perf_counter() - t
    graphs.check_output_dtypes(function, dtype)
    run, derivatives = graphs.timed_function(
        function,
        batches,
        len(inputs),
        workload,
        after_call=_no_new_signature(function) if mode == "numba" else None,
    )

    choices.update(
        {
            "mode": mode_label,
            "compile_s": graphs.compile_work(workload) + "pytensor.function (rewrites, C "
            "code generation and g++ / Numba code generation)"
            + (
                " + Numba's LLVM compilation for the first call's types" if mode == "numba" else ""
            ),
            "cache": cache,
            "blas": f"blas__ldflags={pytensor.config.blas__ldflags!r}"
            + (
                " (empty: PyTensor's NumPy C-API BLAS fallback)"
                if not pytensor.config.blas__ldflags
                else ""
            ),
            "openmp": str(pytensor.config.openmp),
            "trust_input": "False (pytensor.function's default: inputs are checked at each call)",
            "dtype": dtype,
        }
    )
    if mode == "c":
        choices["linker"] = (
            f"config.linker='cvm' (PyTensor's default 'auto' is Numba): the "
            f"{inner} inner function(s) of OpFromGraph ops (Softmax, "
            "LogSoftmax), which the C VM compiles lazily at the first call, "
            "are compiled in C, in prepare"
        )
    if mode == "numba":
        choices["numba"] = f"{jit}; fastmath={pytensor.config.numba__fastmath} (default)"
    if model.family == "cnn" or model.family == "resnet":
        choices["conv"] = (
            "im2col: kernel*kernel strided slices stacked, one tensordot per "
            "convolution (PyTensor 3.0.7 has no multi-channel conv2d op)"
        )
    if model.family == "resnet":
        choices["pool"] = "max pool as the max over the 9 strided slices of the -inf-padded input"
    if model.loss == "ctc":
        choices["ctc"] = (
            "CTC written in PyTensor: log-space alpha recursion with "
            "pytensor.scan (no CTC op in PyTensor)"
        )
    prepared = Prepared(run, derivatives, choices, compile_s)
    prepared.function = function  # for the tests (e.g. Numba signatures after the loop)
    return prepared
