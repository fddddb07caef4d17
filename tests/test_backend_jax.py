"""The JAX backend, in its own environment (.venvs/jax, built from envs/jax.yaml): every mode x
model x task on a tiny workload runs and matches the float64 reference or is refused as the
backend's CAPABILITIES declare (tests/isolated.py; more cells in the extended tier), the
variable-length tasks on both sequence models with their trace counts, the thread settings
XLA's CPU client takes, and the hand-written models and CTC loss in float64 against the
PyTorch float64 reference to round-off (a wrong layout or recursion is O(1))."""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest

from adbench import reference, spec
from isolated import REPO, BackendCells, tiny, venv_python
from variant_cells import variant_cells

pytestmark = pytest.mark.backend  # runs the framework in processes of its own environment

# Every study model, the MLP of depth 2 included (its cells cost about 2 s here).
CELLS = BackendCells("jax", models=spec.STUDY_MODELS, tasks=spec.STUDY_TASKS)
# Budget (the default tier): ResNet50 runs in jit mode only.  Eager ResNet50 costs ~70
# CPU-seconds here, nearly all of it XLA compiling each of its primitives' shapes once in the
# first iteration; its model code is the jit cells'.  Its loss Jacobian in jit mode (XLA
# compiling vmap of its gradient: ~20 s) is left out too: the model is checked by its other
# tasks, the transform on every other model.  The Jacobians of the CNN, the LSTM and CTC
# run in jit mode only (eager's op-by-op compilations: ~40 CPU-seconds here): their model
# code is jit's, eager's transforms are checked on every other model, and eager's scans by
# these models' backward cells, but CTC's (13 s: its recursion's slices compiled one by
# one): the LSTM's eager backward checks eager's scans, jit's CTC cells the CTC code.
# ResNet50's Jacobians in jit mode (4 s each) are left out too: its backward checks the
# model, the other models the transforms.  The extended tier (EXTENDED, below) runs them all.
EAGER_JACOBIANS_LEFT_OUT = ("cnn", "lstm")
EAGER_LEFT_OUT = ("ctc",)  # every task


def in_default_tier(cell: dict) -> bool:
    if cell["model"] == "resnet50":
        return cell["mode"] == "jit" and cell["task"] == "backward"
    if cell["mode"] != "eager":
        return True
    if cell["model"] in EAGER_LEFT_OUT:
        return False
    return cell["model"] not in EAGER_JACOBIANS_LEFT_OUT or cell["task"] == "backward"


LEFT_OUT = [c for c in CELLS.cells if not in_default_tier(c)]
CELLS.cells = [c for c in CELLS.cells if in_default_tier(c)]
CELLS.cells += variant_cells("jax")
test_cell_conforms = CELLS.cell_test()  # the fixed-shape cells
test_run_time_refusals_are_met = CELLS.refusals_test()

# The variable-length tasks (spec.SEQUENCE_TASKS), in the same runner process: the RNN cell
# in jit mode with every strategy and in eager mode at its true length, the LSTM at its
# true length in both.  The seed plants the lengths 7, 5, 11 (buckets 8, 8, 16) on the first
# three batches: short, so eager's op-by-op scans stay cheap (each new step index compiles
# one more slice: lax.scan's loop under disable_jit), a new length that shares a bucket, and
# a first batch (the one checked) that bucketing pads, so its mask is checked too.  Budget:
# eager's padded and bucketed cells (seconds of slice compilations each) are left to the
# extended tier: both modes run the same sequence code, whose mask jit's bucketed and padded
# cells check.
SEQUENCE_SEED = 5959
SEQUENCE_LENGTHS = (7, 5, 11)
SEQUENCE_CELLS = [tiny(model, task, mode, seed=SEQUENCE_SEED)
                  for mode in spec.FRAMEWORKS["jax"].modes for model in ("lstm", "rnn_cell")
                  for task in spec.SEQUENCE_TASKS
                  if (mode == "jit" or task in ("backward_varlen", "backward_varlen_dynamic"))
                  and (model == "rnn_cell" or task == "backward_varlen")]
FIRST_SEQUENCE_CELL = len(CELLS.cells)
CELLS.cells += SEQUENCE_CELLS
results = CELLS.results_fixture()
test_threads_are_set_and_honoured = CELLS.threads_test()

# The extended tier (pytest -m extended): what the default tier leaves out for time (LEFT_OUT
# above: eager ResNet50, jit ResNet50's loss Jacobian, eager's Jacobians of the CNN, the
# LSTM and CTC) and the sequence cells the default tier trims (eager's padded and bucketed
# cells, the LSTM's strategies beside its true length).
EXTENDED = BackendCells("jax", extended=True)
EXTENDED.cells = LEFT_OUT + [
    tiny(model, task, mode, seed=SEQUENCE_SEED) for mode in spec.FRAMEWORKS["jax"].modes
    for model in ("lstm", "rnn_cell") for task in spec.SEQUENCE_TASKS
    if tiny(model, task, mode, seed=SEQUENCE_SEED) not in SEQUENCE_CELLS]
extended_results, test_extended_cell_conforms = EXTENDED.extended_tests()


SCRIPTS = REPO / "workflow" / "scripts"


def _workload(cell: dict) -> spec.Workload:
    return spec.Workload(model=cell["model"], seed=cell["seed"], task=cell["task"],
                         n_samples=cell["n_samples"], batch_size=cell["batch_size"],
                         warmup=cell["warmup"], iterations=cell["iterations"])


@pytest.mark.parametrize("k", range(FIRST_SEQUENCE_CELL, len(CELLS.cells)),
                         ids=[f"{c['mode']}-{c['model']}-{c['task']}" for c in SEQUENCE_CELLS])
def test_sequence_cell_matches_the_float64_reference(results, k):
    """A variable-length cell against the float64 reference, checked as every other cell:
    the RNN cell's is the numpy BPTT, the LSTM's torch's float64 eager run."""
    cell = CELLS.cells[k]
    CELLS.check_cell(results, k)
    result = results["cells"][k]
    if result["status"] == "ok":
        strategy = spec.TASKS[cell["task"]].sequence
        assert result["choices"]["sequence"] == strategy
        assert result["choices"]["shape_policy"]


def test_sequence_traces_count_each_new_shape(results):
    """Prepared.traces after each iteration (the raw rows' `traces`): in jit mode the step's
    compiled entries, one per new shape the strategy gives a batch; 0 in eager.  Planted by
    the seed: the RNN cell's batches have lengths 7, 5, 11, so the true-length step retraces
    at 5 and at 11, the bucketed one at 11 only (7 and 5 share the bucket 8), the padded one
    never; the LSTM's (batches 7, 5, 7) retraces at 5 only, and not when 7 comes back."""
    traces = {}
    for k in range(FIRST_SEQUENCE_CELL, len(CELLS.cells)):
        cell, result = CELLS.cells[k], results["cells"][k]
        if result["status"] != "ok":
            continue
        workload = _workload(cell)
        assert [workload.sequence_length(i) for i in range(3)] == \
            [SEQUENCE_LENGTHS[i if cell["model"] == "rnn_cell" else i % 2] for i in range(3)]
        shapes = [spec.padded_length(workload.sequence, workload.sequence_length(i))
                  for i in range(len(result["traces"]))]
        expected = ([len(set(shapes[:i + 1])) for i in range(len(shapes))]
                    if cell["mode"] == "jit" else [0] * len(shapes))
        assert result["traces"] == expected, (cell, shapes)
        traces[cell["mode"], cell["model"], cell["task"]] = result["traces"]
    assert traces["jit", "rnn_cell", "backward_varlen"] == [1, 2, 3]
    assert traces["jit", "rnn_cell", "backward_bucketed"] == [1, 1, 2]
    assert traces["jit", "rnn_cell", "backward_padded"] == [1, 1, 1]
    assert traces["jit", "lstm", "backward_varlen"] == [1, 2, 2]
    assert traces["eager", "rnn_cell", "backward_varlen"] == [0, 0, 0]
    fixed = [r["traces"] for r in results["cells"][:FIRST_SEQUENCE_CELL] if r["status"] == "ok"]
    assert fixed and all(t == [None] * len(t) for t in fixed)  # no counter: schema null


def in_jax(code: str, tmp_path) -> dict:
    """Run `code` in a fresh process of the JAX environment; it writes out.json."""
    done = subprocess.run([str(venv_python("jax")), "-c", code], cwd=SCRIPTS,
                          capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1",
                               "OUT": str(tmp_path / "out.json")})
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads((tmp_path / "out.json").read_text())


@pytest.mark.parametrize("threads", [1, 2])
def test_configure_threads_sizes_the_xla_cpu_pool(threads, tmp_path):
    """PJRT_NPROC sizes XLA:CPU's intra-op pool (counted by thread name); the Eigen
    multi-threading flag is off at one thread only."""
    out = in_jax(
        "import json, os; from adbench import backends; jb = backends.load('jax'); "
        f"r = jb.configure_threads({threads}); "
        "json.dump({'reported': r, 'flags': os.environ['XLA_FLAGS'], "
        "'nproc': os.environ['PJRT_NPROC']}, open(os.environ['OUT'], 'w'))", tmp_path)
    assert out["reported"] == {"xla_cpu_intra_op_pool": threads}
    assert out["nproc"] == str(threads)
    assert f"--xla_cpu_multi_thread_eigen={'false' if threads == 1 else 'true'}" \
        in out["flags"]


FLOAT64_MODELS = ("cnn", "lstm", "attention", "ctc")  # written by hand here, torch reference


FLOAT64_CELLS = {f"{m}/{t}": tiny(m, t, "jit") for m in FLOAT64_MODELS
                 for t in ("backward", "jacobian_vectorized")}


@pytest.fixture(scope="module")
def float64_run(tmp_path_factory) -> dict:
    """One process of the JAX environment in float64: FLOAT64_CELLS' derivatives."""
    code = ("import json, os, jax, numpy as np; from adbench import spec; "
            "from adbench import backends; jb = backends.load('jax'); jb.configure_threads(1); "
            f"cells = {FLOAT64_CELLS!r}; out = {{}}\n"
            "for key, c in cells.items():\n"
            "    w = spec.Workload(model=c['model'], seed=c['seed'], task=c['task'], "
            "n_samples=c['n_samples'], batch_size=c['batch_size'], warmup=0, iterations=1)\n"
            "    loss, arrays = jb.prepare(w, c['mode'], 'cpu', dtype='float64').derivatives(0)\n"
            "    out[key] = [loss, [a.tolist() for a in arrays]]\n"
            "json.dump(out, open(os.environ['OUT'], 'w'))")
    return in_jax(code, tmp_path_factory.mktemp("float64"))


def test_float64_models_match_the_reference_to_round_off(float64_run):
    """With jax_enable_x64 the hand-written CNN, LSTM, attention and CTC loss match
    PyTorch's float64 reference to round-off: layouts, gate order and the CTC recursion
    (jit mode, the cheaper to run; both modes share the model code)."""
    out = float64_run
    for key, c in FLOAT64_CELLS.items():
        workload = spec.Workload(model=c["model"], seed=c["seed"], task=c["task"],
                                 n_samples=c["n_samples"], batch_size=c["batch_size"])
        ref_loss, refs = reference.reference_derivatives(workload)
        loss, arrays = out[key]
        arrays = [np.asarray(a, dtype=np.float64) for a in arrays]
        assert reference.relative_error(arrays, refs) < 1e-10, key
        if spec.TASKS[c["task"]].derivative == "gradients":
            assert loss == pytest.approx(ref_loss, rel=1e-12), key
