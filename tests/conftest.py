"""Shared test set-up: the harness is importable as `adbench`, as the scripts import it."""

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


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config, items):
    """Before `-m` selects: the unit tier is every test no other tier claims.  After it
    (the order of what was selected): see `ordered_for_workers`."""
    for item in items:
        if not any(item.get_closest_marker(tier) for tier in HEAVY_TIERS):
            item.add_marker(pytest.mark.unit)
    result = yield
    items[:] = ordered_for_workers(items)
    return result


def ordered_for_workers(items: list) -> list:
    """The workers (pytest-xdist, a file each, in this order) start the longest work first
    instead of finishing on it, and never wait idle for the shared run (tests/e2e.py): the
    first file that reads it (and so makes it), then the end-to-end files that do not read
    it, then the backend tier's files (minutes in all, more than the run takes), then the
    other files that read the run (made by then), then the rest in collection order."""
    files = {}
    for item in items:
        files.setdefault(item.path, []).append(item)
    def tier(f, marker):
        return bool(files[f][0].get_closest_marker(marker))
    e2e = [f for f in files if tier(f, "e2e")]
    readers = [f for f in e2e if any("e2e_run" in i.fixturenames for i in files[f])]
    alone = [f for f in e2e if f not in readers]
    backend = [f for f in files if tier(f, "backend") and f not in e2e]
    order = [*readers[:1], *alone, *backend, *readers[1:]]
    order += [f for f in files if f not in order]
    return [item for f in order for item in files[f]]


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
