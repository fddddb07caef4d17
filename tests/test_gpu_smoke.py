"""config/gpu-smoke.yaml, the GPU run that fits one short call (issue 25, item 9): PyTorch and
JAX on cuda, every mode of each, every task once, on one MLP and one Jacobian model, one
seed, small workloads and results under 10 MB.  Expanded as the workflow expands it."""

from __future__ import annotations

import math
from pathlib import Path

import yaml
from snakemake.utils import validate

from adbench import config as run_config
from adbench import spec

ROOT = Path(__file__).resolve().parents[1]
CONFIG = "config/gpu-smoke.yaml"
# What one cell leaves beside its gradients (raw Parquet with its provenance, the log, the
# killed log's line): at most this, from example-results/cuda-h100 (30-60 kB a cell).
PER_CELL_BYTES = 100_000


def smoke_run() -> run_config.Run:
    config = yaml.safe_load((ROOT / CONFIG).read_text())
    return run_config.checked(config, validate=validate, configfiles=[CONFIG],
                              working_dir=ROOT, core_limit=None, conda_enabled=False,
                              python="this-python")


def test_it_has_its_own_results_tree():
    assert smoke_run().results == "results-gpu-smoke"


def test_torch_and_jax_on_cuda_every_mode_every_task_one_seed():
    cells = smoke_run().cells
    assert {c.framework for c in cells} == {"torch", "jax"}
    assert {c.device for c in cells} == {"cuda"}
    assert {c.seed for c in cells} == {0} and {c.threads for c in cells} == {1}
    for framework in ("torch", "jax"):
        assert "cuda" in spec.FRAMEWORKS[framework].devices
        for mode in spec.FRAMEWORKS[framework].modes:
            tasks = [c.task for c in cells if (c.framework, c.mode) == (framework, mode)]
            assert sorted(tasks) == sorted(spec.STUDY_TASKS), (framework, mode)  # each once


def test_one_mlp_and_one_jacobian_model():
    cells = smoke_run().cells
    models = {c.model for c in cells}
    assert len(models) == 2
    (mlp,) = {c.model for c in cells if c.task == "backward"}
    assert spec.MODELS[mlp].family == "mlp"
    jacobian_models = {c.model for c in cells if c.task.startswith("jacobian")}
    assert len(jacobian_models) == 1 and jacobian_models <= models


def test_the_workload_is_small_and_in_whole_batches():
    run = smoke_run()
    for model, task in {(c.model, c.task) for c in run.cells}:
        w = run.workloads.sizes(model, task)
        assert w["warmup"] <= 3 and w["iterations"] <= 30, (model, task, w)
        assert run.workloads.budget_s(model, task) <= 120
        workload = spec.Workload(model=model, seed=0, task=task, **{
            k: w[k] for k in ("n_samples", "batch_size", "warmup", "iterations",
                              "jacobian_rows")})
        # A smaller last batch would recompile torch.compile's step inside the timed loop.
        assert workload.n_samples % workload.rows_per_batch == 0, (model, task)
        # And the data set is drawn for the iterations run, no more.
        assert workload.rows_needed() <= workload.n_samples


def test_its_results_stay_under_10_mb():
    """Each cell's derivative file is its gradients (float32, one per parameter) or its
    Jacobian; the rest of a cell is small."""
    run = smoke_run()
    total = 0
    for cell in run.cells:
        model, w = spec.MODELS[cell.model], run.workloads.sizes(cell.model, cell.task)
        if spec.TASKS[cell.task].derivative == "gradients":
            total += 4 * model.n_parameters
        else:
            total += 4 * math.prod(model.jacobian_shape(w["jacobian_rows"]))
        total += PER_CELL_BYTES
    assert total < 10e6, f"{total / 1e6:.1f} MB"


# Seconds a cell of these workloads takes on an H100, estimated from the walls of
# example-results/cuda-h100's cells (process start to record, less the iterations this config
# does not run): torch.compile 19-24 s, eager, TorchScript and jit.trace 6-9 s on an MLP's
# backward pass and 8-14 s on a Jacobian task; a refused cell pays the import alone (4-6 s).
# JAX's CUDA cells never came back from that machine: taken as PyTorch eager's.
REFUSED = {("torch", "script", "loss_jacobian"), ("torch", "trace", "loss_jacobian")}


def estimated_s(cell: spec.Cell) -> float:
    if (cell.framework, cell.mode, cell.task) in REFUSED:
        return 6
    if (cell.framework, cell.mode) == ("torch", "compile"):
        return 24
    return 9 if cell.task == "backward" else 14


def test_it_fits_a_six_minute_call():
    """The cells one after another (timing jobs never overlap), and 20 s of Snakemake."""
    total = sum(estimated_s(c) for c in smoke_run().cells) + 20
    assert total <= 6 * 60, f"{total} s"
