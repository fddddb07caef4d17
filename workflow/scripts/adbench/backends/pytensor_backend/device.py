"""PyTensor's environment: its flags and compile caches (set before pytensor and numba are
imported), the BLAS and Numba threads, and the versions (CPU only: its C and Numba linkers
are CPU backends; a compiled function computes synchronously, so the sync is
backends.no_sync)."""

from __future__ import annotations

import os

# ================================================================ caches, before the import
# (the backends package imports no framework)
from adbench.backends import blas, cache_dir, compose_flags

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
import scipy  # noqa: E402

from adbench.backends import C_HEAP, Backend, StepMemory  # noqa: E402


class PyTensorDevice(Backend):
    """PyTensor runs on the CPU: no GPU methods."""

    def configure_threads(self, threads: int) -> dict:
        """OpenBLAS (numpy's, used by the C thunks' BLAS fallback and by numpy-based perform
        methods; scipy's, which Numba's np.dot calls) reads OPENBLAS_NUM_THREADS, pinned by
        the harness before the import; threadpoolctl sets it again and reports it.
        PyTensor's own C code runs one thread (config.openmp False, reported in choices);
        Numba's thread pool (used only by parallel=True code, which PyTensor does not
        generate by default) is set too."""
        import scipy.linalg  # noqa: F401  (loads scipy's OpenBLAS, which Numba's BLAS calls)

        pools = blas.limit_threads(threads)
        try:
            numba.set_num_threads(threads)
        except ValueError:  # more than NUMBA_NUM_THREADS, fixed when numba was imported
            pass
        return {"numba": numba.get_num_threads(), **pools}

    def versions(self) -> dict[str, str]:
        return {
            "pytensor": pytensor.__version__,
            "numpy": np.__version__,
            "numba": numba.__version__,
            "scipy": scipy.__version__,
        }

    def device_name(self, device: str) -> str:
        return "cpu"

    def step_memory(self, device: str) -> StepMemory:
        """The C heap: PyTensor's storage is numpy arrays (and Numba's runtime
        allocations in numba mode): malloc's, freed when they go
        (tests/test_step_memory.py finds a kept allocation of known size in it)."""
        return C_HEAP
