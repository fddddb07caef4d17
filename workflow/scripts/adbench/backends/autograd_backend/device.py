"""autograd's environment: numpy's BLAS threads and the versions (CPU only)."""

from __future__ import annotations

import autograd.scipy.special  # noqa: F401  (loads scipy and its BLAS before the threads)
import numpy as onp

from adbench.backends import C_HEAP, Backend, StepMemory, blas


class AutogradDevice(Backend):
    """autograd runs numpy on the CPU: no GPU methods."""

    def configure_threads(self, threads: int) -> dict:
        """autograd runs numpy: its BLAS (OpenBLAS in numpy's and scipy's wheels) takes
        OPENBLAS_NUM_THREADS, which the harness sets before the import; threadpoolctl
        enforces the same limit on the loaded libraries and reports what they use."""
        return blas.limit_threads(threads)

    def versions(self) -> dict[str, str]:
        import scipy
        from importlib.metadata import version

        return {"autograd": version("autograd"), "numpy": onp.__version__,
                "scipy": scipy.__version__, **blas.versions()}

    def device_name(self, device: str) -> str:
        return "cpu"

    def step_memory(self, device: str) -> StepMemory:
        """The C heap: autograd's values are numpy arrays: malloc's, freed when they
        go (tests/test_step_memory.py finds a kept allocation of known size in it)."""
        return C_HEAP
