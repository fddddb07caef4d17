"""Theano's tasks: the task's graph (symbolic_graphs.task_graph) compiled into one
theano.function in FAST_RUN, in prepare (compile_s), and timed as one call."""

from __future__ import annotations

import os
import time

import adbench.backends.theano_backend.device  # noqa: F401  (flags, before theano)
import theano

from adbench import spec
from adbench.backends import Prepared
from adbench.backends import symbolic_graphs as graphs
from adbench.backends.theano_backend.device import BATCHED_DOT_PERFORM, TheanoDevice
from adbench.backends.theano_backend.models import DIALECT


# The tasks' graphs (symbolic_graphs), but the vectorised Jacobian: Theano has none
# (CAPABILITIES).
TASK_BUILDERS = {task: graph for task, graph in graphs.TASK_GRAPHS.items()
                 if task != "jacobian_vectorized"}


# ================================================================ compilation
MODE_CHOICE = (
    "theano.function(mode='FAST_RUN'): Mode(linker='cvm', optimizer='fast_run'), "
    "C thunks (g++) run by the C VM"
)


def _cache_state() -> str:
    compiledir = theano.config.compiledir
    modules = (
        [d for d in os.listdir(compiledir) if d.startswith("tmp")]
        if os.path.isdir(compiledir)
        else []
    )
    return (
        f"{'warm' if modules else 'cold (empty)'} before this cell: {len(modules)} C "
        f"modules in {compiledir}; the cache dir is shared by every cell run with the "
        "same ADBENCH_CACHE_DIR, so a later cell's compile_s reuses what earlier cells "
        "compiled; Theano's own lazylinker/cutils modules are built at import"
    )


def prepare(workload: spec.Workload, mode: str, device: str, dtype: str = "float32") -> Prepared:
    model = workload.spec
    params = graphs.shared_params(theano.shared, workload, dtype)
    batches = graphs.batch_arguments(workload, dtype)
    cache = _cache_state()

    t = time.perf_counter()
    inputs, outputs, choices = graphs.task_graph(DIALECT, TASK_BUILDERS[workload.task],
                                                  workload, params, dtype)
    function = theano.function(inputs, outputs, mode="FAST_RUN")
    compile_s = time.perf_counter() - t
    graphs.check_output_dtypes(function, dtype)
    run, derivatives = graphs.timed_function(function, batches, len(inputs), workload,
                                             dtype)

    choices.update(
        {
            "mode": MODE_CHOICE,
            "compile_s": graphs.compile_work(workload) + "theano.function (graph "
            "optimisation, C code generation, g++ of the modules not in the compiledir)",
            "cache": cache,
            "blas": f"blas.ldflags={theano.config.blas.ldflags!r}"
            + (
                " (empty: Theano's NumPy C-API BLAS fallback, numpy's OpenBLAS)"
                if not theano.config.blas.ldflags
                else ""
            ),
            "openmp": str(theano.config.openmp),
            "python_3_11": (
                "C Scan (Cython 0.28.5) does not build: Theano's Python scan loop "
                "(Scan.execute) runs scans"
                if model.family == "lstm"
                or model.loss == "ctc"
                or workload.task == "jacobian_rows"
                else "no workaround involved"
            ),
            "dtype": dtype,
        }
    )
    if model.family in ("cnn", "resnet"):
        choices["conv"] = (
            "T.nnet.conv2d(filter_flip=False) -> CorrMM (im2col + the "
            "fallback gemm) in FAST_RUN"
        )
    if model.family in ("attention", "ctc") and BATCHED_DOT_PERFORM:
        choices["batched_dot"] = (
            "T.batched_dot runs BatchedDot's Python perform (numpy.dot "
            "per batch element): its C code does not link against "
            "Theano's NumPy BLAS fallback (undefined symbol dgemm_)"
        )
    if model.loss == "ctc":
        choices["ctc"] = (
            "CTC written in Theano: log-space alpha recursion with theano.scan "
            "(theano.tensor.nnet.ctc needs the external warp-ctc library)"
        )
    prepared = Prepared(run, derivatives, choices, compile_s)
    prepared.function = function  # for the tests
    return prepared


# The device class backends.load makes this framework's Backend of (with CAPABILITIES,
# TASK_BUILDERS and prepare).
DEVICE = TheanoDevice
