"""Chainer's environment: numpy's BLAS threads and the versions (numpy on the CPU, no CuPy:
the step computes synchronously, so the sync is backends.no_sync)."""

from __future__ import annotations

import chainer
import numpy as np

from adbench.backends import C_HEAP, Backend, StepMemory, blas


class ChainerDevice(Backend):
    """Chainer runs numpy on the CPU: no GPU methods."""

    def configure_threads(self, threads: int) -> dict:
        """Chainer computes with numpy on CPU (iDeep off, its default): numpy's OpenBLAS takes
        OPENBLAS_NUM_THREADS, set by the harness before the import; threadpoolctl enforces the
        same limit on the loaded library and reports what it uses."""
        return blas.limit_threads(threads)

    def versions(self) -> dict[str, str]:
        return {"chainer": chainer.__version__, "numpy": np.__version__, **blas.versions()}

    def device_name(self, device: str) -> str:
        return "cpu"

    def step_memory(self, device: str) -> StepMemory:
        """The C heap: Chainer's arrays on the CPU are numpy's: malloc's, freed when
        they go (tests/test_step_memory.py finds a kept allocation of known size in it)."""
        return C_HEAP
