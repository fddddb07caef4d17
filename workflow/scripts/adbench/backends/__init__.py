"""One module per framework; each imports only its own framework.

A backend module provides:
    configure_threads(threads)                 -- before any framework work
    prepare(workload, mode, device) -> Prepared
    versions() -> dict[str, str]               -- library versions for provenance
    device_name(device) -> str                 -- e.g. the GPU's name, for provenance
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Callable

import numpy as np

from adbench.spec import FRAMEWORKS
from adbench.timing import Clock


class UnsupportedCell(RuntimeError):
    """The cell cannot run here (e.g. CUDA asked for but no GPU visible): recorded, not fatal."""


@dataclasses.dataclass
class Prepared:
    """A workload made ready to time in one framework, mode and device."""

    run: Callable[[int, Clock], dict[str, float]]  # one timed iteration
    gradients: Callable[[int], tuple[float, list[np.ndarray]]]  # loss, grads at an iteration


def load(framework: str):
    """Import a framework's backend module (and with it, only that framework)."""
    return importlib.import_module(f"adbench.backends.{FRAMEWORKS[framework].backend}")
