"""Every clock read of the real timing loop follows the backend's device sync, in every mode
of PyTorch, TensorFlow and JAX (on CPU: the sync is the backend's own, wrapped by a recorder).

Each backend chooses its sync in one function, `device_sync(device)` (its device.py's), and
`prepare` (its tasks.py's) takes it from there.  The probe below replaces that function, where
prepare looks it up, by one returning a recorder around the real sync, prepares a tiny cell,
and runs `timing.time_iterations` with a clock that logs its reads into the same event log: a
clock read not immediately after a sync would time work the device may not have finished (on
a GPU).  Each framework runs in its own environment's Python
(torch: this one), all of its cells in one process.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys

import pytest

from adbench import spec
from isolated import REPO, venv_python

pytestmark = pytest.mark.backend  # runs each framework in a process of its own

MODES = {"torch": ("eager", "script"), "tensorflow": ("eager", "graph"), "jax": ("eager", "jit")}
TASKS = ("backward", "jacobian_rows", "jacobian_vectorized")
WARMUP, ITERATIONS = 1, 2

PROBE = r'''
import json, sys, time
from adbench import spec, timing
from adbench.backends import load

framework, cells, out = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
backend = load(framework)
backend.configure_threads(1)
# Where prepare looks device_sync up: the module of the package's prepare (its tasks.py,
# which backends.load builds the Backend from).
owner = sys.modules[backend._prepare.__module__]


class RecordingSync:
    """The backend's real sync, then a "sync" event ("sync:result" when it waited for a
    result the timed call handed over, as JAX's does)."""

    def __init__(self, real, log):
        self.real, self.log = real, log

    def __call__(self):
        waited = getattr(self.real, "pending", None) is not None
        self.real()
        self.log.append("sync:result" if waited else "sync")

    def __getattr__(self, name):  # JAX's hold(): the timed call hands its result over
        return getattr(self.real, name)


def events(mode, task):
    log = []
    real = owner.device_sync
    owner.device_sync = lambda device: RecordingSync(real(device), log)
    try:
        workload = spec.Workload("mlp512", seed=0, task=task, n_samples=4, batch_size=4,
                                 jacobian_rows=3, warmup=WARMUP, iterations=ITERATIONS)
        prepared = backend.prepare(workload, mode, "cpu")
    finally:
        owner.device_sync = real

    def clock():
        log.append("clock")
        return time.perf_counter()

    rows = timing.time_iterations(prepared, warmup=WARMUP, iterations=ITERATIONS, clock=clock)
    return {"log": log, "rows": len(rows),
            "quantities": sorted(k for k in rows[0] if k.endswith("_s"))}


cuda_sync = owner.device_sync("cuda")
summary = {"cells": {f"{mode}/{task}": events(mode, task) for mode, task in cells},
           "cuda_sync": f"{getattr(cuda_sync, '__module__', '')}."
                        f"{getattr(cuda_sync, '__qualname__', type(cuda_sync).__qualname__)}"}
json.dump(summary, open(out, "w"))
'''.replace("WARMUP", str(WARMUP)).replace("ITERATIONS", str(ITERATIONS))


def python_of(framework: str) -> str:
    """torch runs in this Python; TensorFlow and JAX in their own environments."""
    return sys.executable if framework == "torch" else str(venv_python(framework))


@pytest.fixture(scope="module", params=list(MODES))
def probed(request, tmp_path_factory):
    framework = request.param
    out = tmp_path_factory.mktemp(f"sync-{framework}") / "events.json"
    cells = list(itertools.product(MODES[framework], TASKS))
    done = subprocess.run(
        [python_of(framework), "-c", PROBE, framework, json.dumps(cells), str(out)],
        cwd=REPO / "workflow" / "scripts", capture_output=True, text=True, timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1", "TF_CPP_MIN_LOG_LEVEL": "2",
             "PYTHONDONTWRITEBYTECODE": "1"})
    assert done.returncode == 0, done.stderr[-4000:]
    return framework, json.loads(out.read_text())


def test_every_clock_read_follows_a_device_sync(probed):
    framework, summary = probed
    for key, cell in summary["cells"].items():
        log = cell["log"]
        clocks = [i for i, event in enumerate(log) if event == "clock"]
        assert clocks, (framework, key, log)
        unsynced = [i for i in clocks if i == 0 or not log[i - 1].startswith("sync")]
        assert not unsynced, (framework, key, log)


def test_the_clock_is_read_as_often_as_the_timer_says(probed):
    """Three reads per iteration where forward and backward are timed apart, else two: the
    recorded events are the real loop's, through the cell's own timer."""
    framework, summary = probed
    for (mode, task), key in ((c, "/".join(c)) for c in itertools.product(MODES[framework],
                                                                          TASKS)):
        cell = summary["cells"][key]
        quantities = spec.timed_quantities(framework, mode, task)
        assert cell["quantities"] == sorted(quantities), key
        per_iteration = 3 if "forward_s" in quantities else 2
        assert cell["rows"] == WARMUP + ITERATIONS
        assert cell["log"].count("clock") == per_iteration * cell["rows"], (key, cell["log"])


def test_jax_waits_for_each_timed_result_before_the_clock(probed):
    """JAX has no device-wide barrier: its sync waits for the result the timed call handed
    over.  Every clock read that ends a timed interval (all but an iteration's first) must
    come right after such a wait."""
    framework, summary = probed
    if framework != "jax":
        assert all("sync:result" not in c["log"] for c in summary["cells"].values())
        return
    for key, cell in summary["cells"].items():
        log = cell["log"]
        ends = log.count("clock") - cell["rows"]
        assert log.count("sync:result") == ends, (key, log)
        assert all(log[i + 1] == "clock" for i, e in enumerate(log) if e == "sync:result")


def test_cuda_syncs_the_device(probed):
    """On cuda the sync is the framework's device-wide one (JAX: its wait on results)."""
    framework, summary = probed
    expected = {"torch": "torch.cuda.synchronize",
                "tensorflow": "sync_devices",
                "jax": "ResultSync"}[framework]
    assert expected in summary["cuda_sync"], summary["cuda_sync"]
