"""The conformance test of a backend, run in its own environment (its numpy and pins clash
with ours): every cell of its modes x models x tasks either runs and matches the float64
reference, or is refused as its package declares (adbench.backends.Capabilities): a cell it
declares it refuses comes back with that reason; a cell refused at run time, with a declared
run-time refusal covering it; a run-time refusal no cell of the run meets is stale.  What a
backend can do is declared once, in the backend; nothing here lists it again.

A framework's test file gets the generic tests:

    from isolated import BackendCells
    CELLS = BackendCells("jax")
    results = CELLS.results_fixture()
    test_cell_conforms = CELLS.cell_test()
    test_run_time_refusals_are_met = CELLS.refusals_test()
    test_threads_are_honoured = CELLS.threads_test()

The environment is built from envs/<env>.yaml into .venvs/<env> exactly as the pipeline does
it (build_env.py), unless its receipt is newer than the pin file; a build that fails is a
test failure, never a skip.  All of a framework's cells run in one process of that
environment (tests/backend_runner.py); this process compares them with the float64
references.
"""

from __future__ import annotations

import fcntl
import itertools
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from adbench import backends, derivatives, reference, spec

REPO = Path(__file__).resolve().parents[1]
RUNNER = REPO / "tests" / "backend_runner.py"
CHECK = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())[
    "properties"]["gradient_check"]["properties"]
TOLERANCES = {m: CHECK["models"]["default"].get(m, CHECK["tolerance"]["default"])
              for m in spec.MODELS}

# The one key of a BLAS/OpenMP pool in a thread record (backends/blas.py): threadpoolctl's
# internal_api, the package that ships the library or the library's own name (no folder, no
# '.libs', no version), and '/<library>' for a second pool of one owner.
POOL_KEY = re.compile(r"(openblas|mkl|blis|flexiblas|openmp):[\w+-]+(/[\w+-]+)?")
NAMES_A_POOL = re.compile(r"blas|omp|mkl|blis|:", re.IGNORECASE)


def pool_key_problems(record: dict) -> list[str]:
    """The keys of a thread record that name a BLAS/OpenMP pool in another format."""
    return [k for k in record if NAMES_A_POOL.search(k) and not POOL_KEY.fullmatch(k)]


def venv_python(framework: str) -> Path:
    """The framework's environment, built now if it is missing or older than its pins.
    Built once per session: the test workers (pytest-xdist) take a lock per environment."""
    env = spec.FRAMEWORKS[framework].env
    pins, receipt = REPO / "envs" / f"{env}.yaml", REPO / ".venvs" / f"{env}.json"
    constraints = REPO / "envs" / f"{env}.build-constraints.txt"
    newest_input = max(p.stat().st_mtime for p in (pins, constraints) if p.exists())
    receipt.parent.mkdir(exist_ok=True)
    with open(REPO / ".venvs" / f"{env}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not receipt.exists() or receipt.stat().st_mtime < newest_input:
            build_venv(env, pins, receipt)
    return REPO / ".venvs" / env / "bin" / "python"


def build_venv(env: str, pins: Path, receipt: Path) -> None:
    """Exactly as the pipeline builds it (build_env.py); a failure is a test failure."""
    done = subprocess.run(
        [sys.executable, str(REPO / "workflow/scripts/build_env.py"), str(pins),
         "--prefix", str(REPO / ".venvs" / env), "--receipt", str(receipt)],
        cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, f"building .venvs/{env} failed:\n{done.stderr[-4000:]}"


def tiny(model: str, task: str, mode: str, seed: int = 3) -> dict:
    """A few small batches; ResNet50 with two images and two Jacobian rows."""
    m = spec.MODELS[model]
    return {"mode": mode, "model": model, "task": task, "seed": seed, "warmup": 1,
            "iterations": 2, "n_samples": min(m.n_samples, 8),
            "batch_size": min(m.batch_size, 4),
            "jacobian_rows": 2 if model == "resnet50" else None}


# The models every backend's cells cover by default: the study's, less the MLP of depth 2
# (the family's code is the same at every depth, run here at depths 1 and 3: mlp512 and
# mlp294x3; mlp354x2 runs in the default config, every framework in all-frameworks.yaml).
BACKEND_TEST_MODELS = [m for m in spec.STUDY_MODELS if m != "mlp354x2"]

# The tasks every backend's cells cover by default; the variable-length ones (a sequence
# model's, spec.SEQUENCE_TASKS) are tested where a backend implements them, a GPU's memory
# policy (spec.TaskInfo.devices) by measure.py's refusal on the CPU.
FIXED_SHAPE_TASKS = [t for t, info in spec.TASKS.items()
                     if info.sequence is None and "cpu" in info.devices]


class BackendCells:
    """The tiny cells of one framework's modes x models x tasks, run in its environment."""

    def __init__(self, framework: str, models=None, tasks=None, modes=None,
                 extended: bool = False):
        """`extended`: these cells belong to the extended tier (pytest -m extended, which
        .ci/run runs): the tests made here are marked so, and their fixture runs only when
        they are selected."""
        self.framework = framework
        self.tier = pytest.mark.extended if extended else (lambda test: test)
        self.capabilities = backends.capabilities(framework)  # declared: no framework import
        modes = modes or list(spec.FRAMEWORKS[framework].modes)
        self.cells = [tiny(model, task, mode) for mode, model, task in itertools.product(
            modes, models or BACKEND_TEST_MODELS, tasks or FIXED_SHAPE_TASKS)]

    def declared(self, cell: dict) -> str | None:
        """The reason the backend declares it refuses the cell with, before it runs."""
        return self.capabilities.refusal(cell["mode"], cell["model"], cell["task"], "cpu")

    def run_time_refusals(self, cell: dict) -> list[backends.Refusal]:
        return [r for r in self.capabilities.refusals if r.at_run_time
                and r.covers(cell["mode"], cell["model"], cell["task"], "cpu")]

    def run(self, outdir: Path) -> dict:
        python = venv_python(self.framework)
        cells_file = outdir / "cells.json"
        cells_file.write_text(json.dumps(self.cells))
        scratch = outdir / "tmp"  # as run_cell.py does: what the runner leaves stays in here
        scratch.mkdir()
        done = subprocess.run([str(python), str(RUNNER), self.framework, str(cells_file),
                               str(outdir)], cwd=REPO, capture_output=True, text=True,
                              env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1",
                                   "TMPDIR": str(scratch)})
        assert done.returncode == 0, f"runner crashed:\n{done.stderr[-6000:]}"
        summary = json.loads((outdir / "results.json").read_text())
        summary["outdir"] = outdir
        return summary

    # ---------------------------------------------------------------- test factories
    def results_fixture(self):
        @pytest.fixture(scope="module")
        def results(tmp_path_factory):
            return self.run(tmp_path_factory.mktemp(self.framework))
        return results

    def extended_tests(self):
        """The fixture (`extended_results`) and cell test of a set made with extended=True,
        beside the default set's `results` in the same file."""
        @pytest.fixture(scope="module")
        def extended_results(tmp_path_factory):
            return self.run(tmp_path_factory.mktemp(f"{self.framework}-extended"))

        @pytest.mark.parametrize("k", range(len(self.cells)), ids=self.ids())
        def test_extended_cell_conforms(extended_results, k):
            self.check_cell(extended_results, k)
        return extended_results, self.tier(test_extended_cell_conforms)

    def ids(self) -> list[str]:
        return [f"{c['mode']}-{c['model']}-{c['task']}" for c in self.cells]

    def cell_test(self):
        @pytest.mark.parametrize("k", range(len(self.cells)), ids=self.ids())
        def test_cell_conforms(results, k):
            self.check_cell(results, k)
        return self.tier(test_cell_conforms)

    def refusals_test(self):
        def test_run_time_refusals_are_met(results):
            """A declared run-time refusal that covers cells of this run but that none of
            them met is stale: the framework runs them now."""
            met = {m for c in results["cells"] if c.get("at_run_time")
                   for m in [c["message"]]}
            for refusal in self.capabilities.refusals:
                covered = [c for c in self.cells if refusal in self.run_time_refusals(c)
                           and not self.declared(c)]
                if refusal.at_run_time and covered:
                    assert any(m.startswith(refusal.reason) for m in met), \
                        f"no cell met the run-time refusal {refusal.reason!r}: drop it"
        return self.tier(test_run_time_refusals_are_met)

    def threads_test(self):
        def test_threads_are_set_and_honoured(results):
            """What the framework reports, and the cores its loops kept busy at 1 thread."""
            reported = results["threads_reported"]
            assert reported and all(int(v) == 1 for v in reported.values()
                                    if v is not None), reported
            busy = [c["cpu_utilisation"] for c in results["cells"] if c["status"] == "ok"]
            # Median over cells: a short loop's CPU clock is coarse (10 ms ticks).
            assert busy and float(np.median(busy)) < 1.5, busy
        return self.tier(test_threads_are_set_and_honoured)

    def pool_keys_test(self, pools: tuple[str, ...]):
        def test_thread_record_keys_pools_one_way(results):
            """Every BLAS/OpenMP pool reported is keyed in the one format, so a cell's
            thread record compares across frameworks; `pools` are among them."""
            reported = results["threads_reported"]
            assert not pool_key_problems(reported), reported
            assert set(pools) <= set(reported), reported
        return self.tier(test_thread_record_keys_pools_one_way)

    # ---------------------------------------------------------------- the check of one cell
    def check_cell(self, results: dict, k: int) -> None:
        cell, result = self.cells[k], results["cells"][k]
        declared = self.declared(cell)
        if declared:
            assert (result["status"], result["message"]) == ("unsupported", declared)
            return
        if result["status"] == "failed":
            pytest.fail(f"{result['message']}\n{result.get('traceback', '')}")
        if result["status"] == "unsupported":
            reasons = [r.reason for r in self.run_time_refusals(cell)]
            assert result.get("at_run_time") and any(
                result["message"].startswith(r) for r in reasons), \
                f"refused without a declared refusal: {result['message']}"
            return
        workload = spec.Workload(model=cell["model"], seed=cell["seed"], task=cell["task"],
                                 n_samples=cell["n_samples"], batch_size=cell["batch_size"],
                                 jacobian_rows=cell["jacobian_rows"])
        status, loss, arrays = derivatives.read_derivatives(str(results["outdir"] / f"{k}.npz"))
        ref_loss, ref_arrays = reference.reference_derivatives(workload)
        assert [a.shape for a in arrays] == [r.shape for r in ref_arrays]
        assert all(a.dtype == np.float32 for a in arrays)
        assert reference.relative_error(arrays, ref_arrays) < TOLERANCES[cell["model"]]
        if spec.TASKS[cell["task"]].derivative != "jacobian":  # a loss's derivative
            assert loss == pytest.approx(ref_loss, rel=1e-5)
        assert result["quantities"] == sorted(spec.timed_quantities(
            self.framework, cell["mode"], cell["task"]))
        assert all(s > 0 for s in result["steps"])
        assert result["choices"] and all(isinstance(v, str) for v in result["choices"].values())
        assert result["compile_s"] >= 0
