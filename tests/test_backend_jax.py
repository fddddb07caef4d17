"""The JAX backend, in its own environment (.venvs/jax, built from envs/jax.yaml): every mode x
model x task on a tiny workload against the float64 reference (tests/isolated.py), the
thread settings XLA's CPU client takes, and the hand-written models and CTC loss in float64
against the PyTorch float64 reference to round-off (a wrong layout or recursion is O(1))."""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest

from adbench import reference, spec
from isolated import REPO, BackendCells, tiny, venv_python
from variant_cells import variant_cells

CELLS = BackendCells("jax", known_unsupported={
    ("*", "*", "backward_retained"): "JAX is functional",
}, tasks=spec.STUDY_TASKS)
# Budget (the file under 4 minutes with the environment's build): ResNet50 runs in jit mode
# only.  Eager ResNet50 costs ~70 CPU-seconds here, nearly all of it XLA compiling each of
# its primitives' shapes once in the first iteration; its model code is the jit cells'.
CELLS.cells = [c for c in CELLS.cells if not (c["mode"] == "eager" and c["model"] == "resnet50")]
CELLS.cells += variant_cells("jax")
results = CELLS.results_fixture()
test_cell_matches_the_float64_reference = CELLS.cell_test()
test_threads_are_set_and_honoured = CELLS.threads_test()

SCRIPTS = REPO / "workflow" / "scripts"


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
        "import json, os; from adbench.backends import jax_backend as jb; "
        f"r = jb.configure_threads({threads}); "
        "json.dump({'reported': r, 'flags': os.environ['XLA_FLAGS'], "
        "'nproc': os.environ['PJRT_NPROC']}, open(os.environ['OUT'], 'w'))", tmp_path)
    assert out["reported"] == {"xla_cpu_intra_op_pool": threads}
    assert out["nproc"] == str(threads)
    assert f"--xla_cpu_multi_thread_eigen={'false' if threads == 1 else 'true'}" \
        in out["flags"]


FLOAT64_MODELS = ("cnn", "lstm", "attention", "ctc")  # written by hand here, torch reference


def test_float64_models_match_the_reference_to_round_off(tmp_path):
    """With jax_enable_x64 the hand-written CNN, LSTM, attention and CTC loss match
    PyTorch's float64 reference to round-off: layouts, gate order and the CTC recursion
    (jit mode, the cheaper to run; both modes share the model code)."""
    cells = [(m, t) for m in FLOAT64_MODELS for t in ("backward", "jacobian_vectorized")]
    workloads = {f"{m}/{t}": tiny(m, t, "jit") for m, t in cells}
    code = ("import json, os, numpy as np; from adbench import spec; "
            "from adbench.backends import jax_backend as jb; jb.configure_threads(1); "
            f"cells = {workloads!r}; out = {{}}\n"
            "for key, c in cells.items():\n"
            "    w = spec.Workload(model=c['model'], seed=c['seed'], task=c['task'], "
            "n_samples=c['n_samples'], batch_size=c['batch_size'], warmup=0, iterations=1)\n"
            "    loss, arrays = jb.prepare(w, c['mode'], 'cpu', dtype='float64').derivatives(0)\n"
            "    out[key] = [loss, [a.tolist() for a in arrays]]\n"
            "json.dump(out, open(os.environ['OUT'], 'w'))")
    out = in_jax(code, tmp_path)
    for key, c in workloads.items():
        workload = spec.Workload(model=c["model"], seed=c["seed"], task=c["task"],
                                 n_samples=c["n_samples"], batch_size=c["batch_size"])
        ref_loss, refs = reference.reference_derivatives(workload)
        loss, arrays = out[key]
        arrays = [np.asarray(a, dtype=np.float64) for a in arrays]
        assert reference.relative_error(arrays, refs) < 1e-10, key
        if spec.TASKS[c["task"]].derivative == "gradients":
            assert loss == pytest.approx(ref_loss, rel=1e-12), key
