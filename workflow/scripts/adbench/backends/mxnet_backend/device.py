"""MXNet's environment and device: the engine's settings (before libmxnet loads), the
OpenMP and OpenBLAS threads read from the loaded libraries, the versions, and the sync
(mx.nd.waitall) before a clock read."""

from __future__ import annotations

import os
import re

# The engine and its OpenMP runtime read their settings once, when libmxnet is loaded
# (static initialisation): they are set here, before the import.  The harness
# (measure.py, backend_runner.py) pins OMP_NUM_THREADS to the cell's thread count before it
# imports this module; MXNet then gives every operator that many OpenMP threads.
# One engine worker thread runs the operators one after another (MXNet's default: more
# workers would run several operators at once, each with OMP_NUM_THREADS threads).
os.environ.setdefault("MXNET_CPU_WORKER_NTHREADS", "1")
# The default engine, ThreadedEnginePerDevice: operators run on the worker thread while
# Python goes on pushing the next ones (MXNet as its users run it).
os.environ.setdefault("MXNET_ENGINE_TYPE", "ThreadedEnginePerDevice")
ENV_AT_LOAD = {name: os.environ.get(name) for name in (
    "OMP_NUM_THREADS", "MXNET_CPU_WORKER_NTHREADS", "MXNET_ENGINE_TYPE",
    "MXNET_CPU_PRIORITY_NTHREADS", "MXNET_OMP_MAX_THREADS", "MXNET_MKLDNN_ENABLED")}

import ctypes  # noqa: E402

import mxnet as mx  # noqa: E402
import numpy as np  # noqa: E402

from adbench.backends import Backend, StepMemory, blas  # noqa: E402


# ================================================================ environment
def _mapped_library(pattern: str, under: str | None = None):
    """(path, ctypes handle) of a shared library this process has loaded (from its memory
    map), or (None, None)."""
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "/" in line}
    except OSError:
        return None, None
    for path in sorted(paths):
        if re.match(pattern, os.path.basename(path)) and (under is None or
                                                          path.startswith(under)):
            try:
                return path, ctypes.CDLL(path)
            except OSError:
                continue
    return None, None


def features() -> dict[str, bool]:
    return {f.name: f.enabled for f in mx.runtime.Features().values()}


def sync() -> None:
    """The engine's barrier: every operator pushed so far has run (before a clock read)."""
    mx.nd.waitall()


class MXNetDevice(Backend):
    """Threads, versions and the device's name of an MXNet process (CPU only here)."""

    def configure_threads(self, threads: int) -> dict:
        """What MXNet's math runs on: the OpenMP runtime libmxnet links (libgomp; oneDNN and
        MXNet's own kernels use it) and the OpenBLAS the wheel bundles (an OpenMP build).
        Both took OMP_NUM_THREADS when libmxnet loaded, and MXNet leaves them there when it
        is set; the engine's worker thread cannot be changed from here afterwards, so a count
        that differs from `threads` is reported as it is and the harness refuses the cell.
        Read from the libraries themselves (this environment has no threadpoolctl) and keyed
        as every backend keys its pools (blas.pool_key); a library not found is keyed as
        libmxnet's."""
        mxnet_dir = os.path.dirname(mx.__file__)
        omp_path, omp = _mapped_library(r"lib(gomp|omp|iomp5)[.-]")
        blas_path, openblas = _mapped_library(r"libopenblas", mxnet_dir)
        omp_threads = int(omp.omp_get_max_threads()) if omp is not None else None
        if omp is None and not features().get("OPENMP", False):
            omp_threads = 1  # a build without OpenMP runs every operator on one thread
        blas_threads = (int(openblas.openblas_get_num_threads()) if openblas is not None
                        else None)
        libmxnet = os.path.join(mxnet_dir, "libmxnet.so")
        return {blas.pool_key("openmp", omp_path or libmxnet): omp_threads,
                blas.pool_key("openblas", blas_path or libmxnet): blas_threads}

    def versions(self) -> dict[str, str]:
        return {"mxnet": mx.__version__, "numpy": np.__version__}

    def device_name(self, device: str) -> str:
        if device == "cuda" and mx.context.num_gpus() > 0:
            return "gpu(0)"
        return "cpu"

    def step_memory(self, device: str) -> StepMemory:
        """The C heap: MXNet 1.9's CPU storage allocates each array with the C allocator
        and frees it when the array goes, on the engine's thread, so freed memory returns
        once the engine has run its pending work (mx.nd.waitall: MXNet's own step before
        malloc_trim).  tests/test_step_memory.py finds a retained graph's saved
        activations in it."""
        return StepMemory("the C heap's bytes in use (glibc mallinfo2: uordblks + hblkhd), "
                          "after mx.nd.waitall()", return_freed=sync)
