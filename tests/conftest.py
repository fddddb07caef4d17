"""Shared test set-up: the harness is importable as `adbench`, as the scripts import it."""

import itertools
import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = REPO / "workflow" / "scripts"
sys.path.insert(0, str(SCRIPTS))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from adbench import spec  # noqa: E402  (numpy only)


@pytest.fixture
def repo() -> Path:
    return REPO


def pytest_collection_modifyitems(config, items):
    """The end-to-end files first, in collection order otherwise: the workers (pytest-xdist,
    a file each) start the longest work first instead of finishing on it.  Among them, the
    files that read the shared run (tests/e2e.py) alternate with those that do not, so that
    while one worker makes the run the other has work of its own."""
    files = {}
    for item in items:
        files.setdefault(item.path, []).append(item)
    e2e = [f for f, its in files.items() if its[0].get_closest_marker("e2e")]
    needs_run = [f for f in e2e if any("e2e_run" in i.fixturenames for i in files[f])]
    alone = [f for f in e2e if f not in needs_run]
    order = [f for pair in itertools.zip_longest(needs_run, alone) for f in pair if f]
    order += [f for f in files if f not in order]
    items[:] = [item for f in order for item in files[f]]
    for item in items:  # the unit tier: what no other tier claims
        if not any(item.get_closest_marker(tier) for tier in HEAVY_TIERS):
            item.add_marker(pytest.mark.unit)


# The tiers beyond the unit tier (pyproject.toml's markers); a unit test is every other.
# (latex: the papers compiled, seconds each.)
HEAVY_TIERS = ("backend", "latex", "e2e", "extended")
# What a unit test may not import: the frameworks (the backend tier's), whose keys in the
# spec are their module names.
FRAMEWORK_MODULES = tuple(spec.FRAMEWORKS)


@pytest.fixture(autouse=True)
def _unit_tests_import_no_framework(request):
    """A unit test that imports a framework belongs to the backend tier: it fails here."""
    if not request.node.get_closest_marker("unit"):
        yield
        return
    before = {m for m in FRAMEWORK_MODULES if m in sys.modules}
    yield
    loaded = sorted(m for m in FRAMEWORK_MODULES if m in sys.modules and m not in before)
    assert not loaded, (f"a unit test imported {loaded}: mark its file "
                        "pytestmark = pytest.mark.backend")


def at_one_thread(backend) -> None:
    """An in-process backend at 1 thread, as a cell at 1 thread runs. Inter-op threads can
    be set once per process, before any parallel work: a later call raises, and the first
    setting stands."""
    try:
        backend.configure_threads(1)
    except RuntimeError:
        pass


@pytest.fixture(scope="session")
def e2e_run(tmp_path_factory, worker_id):
    """One finished run of the tiny config for the whole session, shared by the workers
    (tests/e2e.py): read it, never change it."""
    import e2e

    base = tmp_path_factory.getbasetemp()
    return e2e.shared_run(base if worker_id == "master" else base.parent)


@pytest.fixture
def e2e_copy(e2e_run, tmp_path):
    """A copy of the finished run that the test may change (tests/e2e.py)."""
    import e2e

    return e2e.private_copy(e2e_run, tmp_path / "run")
