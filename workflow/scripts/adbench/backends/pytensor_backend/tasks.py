"""PyTensor's tasks: the task's graph (symbolic_graphs.task_graph) compiled into one
pytensor.function in the cell's mode, in prepare (compile_s), and timed as one call."""

from __future__ import annotations

import inspect
import os
import time

import adbench.backends.pytensor_backend.device  # noqa: F401  (flags, before pytensor)
import numba
import pytensor
from pytensor.compile.builders import OpFromGraph
from pytensor.compile.mode import Mode, get_mode
from pytensor.scan.op import Scan

from adbench import spec
from adbench.backends import Prepared
from adbench.backends import symbolic_graphs as graphs
from adbench.backends.pytensor_backend.device import PyTensorDevice
from adbench.backends.pytensor_backend.models import DIALECT


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


# The tasks' graphs (symbolic_graphs), every one PyTensor runs.
TASK_BUILDERS = dict(graphs.TASK_GRAPHS)


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
    model = workload.spec
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
    inputs, outputs, choices = graphs.task_graph(DIALECT, TASK_BUILDERS[workload.task],
                                                  workload, params, dtype)
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
        dtype,
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


# The device class backends.load makes this framework's Backend of (with CAPABILITIES,
# TASK_BUILDERS and prepare).
DEVICE = PyTensorDevice
