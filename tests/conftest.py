"""Shared test set-up: the harness is importable as `adbench`, as the scripts import it."""

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = REPO / "workflow" / "scripts"
sys.path.insert(0, str(SCRIPTS))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


@pytest.fixture
def repo() -> Path:
    return REPO


def pytest_collection_modifyitems(config, items):
    """The end-to-end files first, in collection order otherwise: the workers (pytest-xdist,
    a file each) start the longest work first instead of finishing on it."""
    items.sort(key=lambda item: item.get_closest_marker("e2e") is None)


def at_one_thread(backend) -> None:
    """An in-process backend at 1 thread, as a cell at 1 thread runs. Inter-op threads can
    be set once per process, before any parallel work: a later call raises, and the first
    setting stands."""
    try:
        backend.configure_threads(1)
    except RuntimeError:
        pass
