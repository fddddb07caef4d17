"""The PyTensor backend in its own environment (.venvs/pytensor, built from envs/pytensor.yaml
if missing): cells of MODES x MODELS x TASKS on tiny workloads run and match the float64
reference or are refused as the backend's CAPABILITIES declare (tests/isolated.py), the
thread settings, and where the compile caches go.

Budget (this file, environment build included, under 4 minutes): compilation dominates.
Both modes compile from an empty cache dir here, as a fresh run does: g++ for each new C op,
Numba's LLVM for each cell's whole graph (tens of seconds per model).  Measured per cell
(2 cores, other jobs running): C mode cnn 60-80 s, lstm 40 s, ctc 30 s, attention 10 s,
resnet50 backward 320 s; Numba mode cnn 220 s, ctc 65 s, lstm 40 s, attention 17 s.  So
by default the C mode runs the MLPs, dense, fc_xent, rnn_cell and attention, the Numba mode
mlp512 and rnn_cell (a dense and a recurrent graph: dense and fc_xent add ops the C mode
already checks, at tens of seconds of LLVM each).  The extended tier (pytest -m extended)
runs more of them (EXTENDED below); ADBENCH_FULL_BACKEND_TESTS=1 runs every model but ResNet50
in both modes (about 25 minutes), ADBENCH_FULL_BACKEND_TESTS=resnet50 adds it.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess

import pytest

from adbench import spec
from isolated import REPO, BackendCells, tiny, venv_python
from variant_cells import variant_cells

pytestmark = pytest.mark.backend  # runs the framework in processes of its own environment

FULL = os.environ.get("ADBENCH_FULL_BACKEND_TESTS", "")
ALL_BUT_RESNET = [m for m in spec.STUDY_MODELS if m != "resnet50"]
MODELS = {
    # mlp354x2 after mlp294x3: its ops are compiled by then (it costs under a second)
    "c": ["mlp512", "mlp294x3", "mlp354x2", "fcn", "dense", "fc_xent", "rnn_cell", "attention"],
    "numba": ["mlp512", "rnn_cell"],
}
if FULL:
    MODELS = {mode: ALL_BUT_RESNET + (["resnet50"] if "resnet50" in FULL else [])
              for mode in MODELS}

CELLS = BackendCells("pytensor")
CELLS.cells = [tiny(model, task, mode) for mode in MODELS
               for model, task in itertools.product(MODELS[mode], spec.STUDY_TASKS)]
# Budget: a Jacobian's graph is the costliest to compile (Numba's mlp512 row loop ~18 s,
# attention's in C mode 12 s, Numba's RNN-cell row loop 17 s).  Numba's batched Jacobians
# run on the RNN cell, attention's backward in C mode; C mode's Jacobians (its row loop
# included) run on five other models.  The extended tier runs them all.
JACOBIANS_LEFT_OUT = {("numba", "mlp512"), ("c", "attention")}
CELLS_LEFT_OUT = {("numba", "rnn_cell", "jacobian_rows")}


def in_default_tier(cell: dict) -> bool:
    if FULL:
        return True
    if (cell["mode"], cell["model"], cell["task"]) in CELLS_LEFT_OUT:
        return False
    return cell["task"] == "backward" or (cell["mode"], cell["model"]) not in JACOBIANS_LEFT_OUT


LEFT_OUT = [c for c in CELLS.cells if not in_default_tier(c)]
CELLS.cells = [c for c in CELLS.cells if in_default_tier(c)]
CELLS.cells += variant_cells("pytensor", modes=["c"])  # Numba: tens of seconds a graph
results = CELLS.results_fixture()
test_cell_conforms = CELLS.cell_test()
test_run_time_refusals_are_met = CELLS.refusals_test()
test_threads_are_set_and_honoured = CELLS.threads_test()
# numpy's OpenBLAS (the C thunks' BLAS fallback) and scipy's (Numba's np.dot)
test_thread_record_keys_pools_one_way = CELLS.pool_keys_test(("openblas:numpy", "openblas:scipy"))


# The extended tier (pytest -m extended): the Jacobians the default tier leaves out for time
# (LEFT_OUT: Numba's MLP Jacobians, C mode's attention Jacobians), and the models of their own
# kind it leaves out: C mode's CNN, LSTM and CTC; Numba's LSTM, CTC and attention (about
# 11 minutes in all, 2 cores). In no tier, for CI's time (ADBENCH_FULL_BACKEND_TESTS runs
# them): C mode's ResNet50 (5 minutes a cell), Numba's CNN (4 minutes a cell) and its other
# dense models (the ops of its mlp512, checked by default).
EXTENDED_MODELS = {"c": ["cnn", "lstm", "ctc"], "numba": ["lstm", "ctc", "attention"]}
EXTENDED = BackendCells("pytensor", extended=True)
EXTENDED.cells = LEFT_OUT + [
    tiny(model, task, mode) for mode, models in EXTENDED_MODELS.items() for model in models
    for task in spec.STUDY_TASKS if model not in MODELS[mode]]
extended_results, test_extended_cell_conforms = EXTENDED.extended_tests()


def test_threads_reported_cover_numba(results):
    assert results["threads_reported"]["numba"] == 1


def test_choices_state_the_mode_and_cache(results):
    ok = [(cell, r) for cell, r in zip(CELLS.cells, results["cells"]) if r["status"] == "ok"]
    for cell, r in ok:
        choices = r["choices"]
        assert ("NUMBA" in choices["mode"]) == (cell["mode"] == "numba")
        assert choices["cache"].startswith(("cold", "warm"))
        if cell["mode"] == "numba":  # compiled in prepare, not at the first timed call
            assert choices["numba"].startswith("Numba dispatcher compiled in prepare")
        else:
            assert choices["linker"].startswith("config.linker='cvm'")
    assert ok[0][1]["choices"]["cache"].startswith("cold")  # the first cell's cache was empty
    assert all(r["compile_s"] > 0 for _, r in ok)


def test_compile_caches_stay_in_the_cache_dir(tmp_path):
    """Flags are composed before the import: the user's kept, the compiledir and Numba's
    caches under ADBENCH_CACHE_DIR/pytensor, nothing written to $HOME."""
    home, cache, scratch = tmp_path / "home", tmp_path / "cache", tmp_path / "tmp"
    home.mkdir()
    scratch.mkdir()  # PyTensor's numba sources go there (run_cell.py removes a cell's)
    code = (
        "import json, os, numpy as np; from adbench import backends; backends.load('pytensor'); "
        "from adbench.backends.pytensor_backend.tasks import MODES; "
        "import pytensor, pytensor.tensor as pt; "
        "x = pt.vector('x', dtype='float32'); "
        "f = pytensor.function([x], pytensor.grad((x ** 2).sum(), x), mode=MODES['c'][1]()); "
        "g = pytensor.function([x], pytensor.grad((x ** 3).sum(), x), mode='NUMBA'); "
        "v = np.arange(3, dtype='float32'); assert np.allclose(f(v), 2 * v); "
        "assert np.allclose(g(v), 3 * v ** 2); "
        "print(json.dumps({'base': str(pytensor.config.base_compiledir), "
        "'compiledir': str(pytensor.config.compiledir), "
        "'numba_cache': os.environ['NUMBA_CACHE_DIR'], "
        "'exception_verbosity': pytensor.config.exception_verbosity, "
        "'floatX': pytensor.config.floatX, 'default_mode': type(pytensor.compile.mode."
        "get_default_mode().linker).__name__}))")
    done = subprocess.run(
        [str(venv_python("pytensor")), "-c", code], cwd=REPO / "workflow" / "scripts",
        capture_output=True, text=True, check=False,
        env={**os.environ, "HOME": str(home), "ADBENCH_CACHE_DIR": str(cache),
             "TMPDIR": str(scratch),
             "PYTENSOR_FLAGS": "exception_verbosity=high,base_compiledir=/nonexistent"})
    assert done.returncode == 0, done.stderr[-3000:]
    info = json.loads(done.stdout.strip().splitlines()[-1])
    assert info["base"] == str(cache / "pytensor")
    assert info["compiledir"].startswith(str(cache / "pytensor"))
    assert info["numba_cache"].startswith(str(cache / "pytensor"))
    assert info["exception_verbosity"] == "high"  # the user's flag is kept
    assert info["floatX"] == "float32"
    assert info["default_mode"] == "NumbaLinker"  # PyTensor 3.0.7's default, as choices say
    assert any((cache / "pytensor").rglob("*.so"))  # C modules
    assert any((cache / "pytensor" / "numba").rglob("*.nbi"))  # PyTensor's Numba cache
    assert not list(home.rglob("*")), list(home.rglob("*"))
