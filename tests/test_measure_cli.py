"""measure.py as Snakemake runs it: one fresh process per cell, files always written."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import numpy as np
import pyarrow.parquet as pq
import pytest

from adbench import schema, spec

pytestmark = pytest.mark.backend  # imports a framework or runs a timing process

THREADS = 2


def measure(repo, tmp_path, framework="torch", mode="eager", device="cpu", *extra,
            model="mlp512", task="backward", **workload):
    cell = spec.Cell(framework, mode, model, task, device, THREADS, 4)
    out, grads = tmp_path / cell.raw_path, tmp_path / cell.gradient_path
    # Written out by hand, not through spec.CellDescription: a bad cell reaches the CLI.
    description = {"cell": dataclasses.asdict(cell),
                   "workload": {"model": model, "seed": 4, "task": task, "warmup": 2,
                                "iterations": 5, "n_samples": 512, **workload}}
    cmd = [sys.executable, str(repo / "workflow" / "scripts" / "measure.py"),
           "--cell", json.dumps(description), "--out", str(out), "--gradients", str(grads),
           *extra]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    return result, cell, out, grads


def test_torch_eager_cell_writes_rows_and_provenance(repo, tmp_path):
    result, cell, out, grads = measure(repo, tmp_path)
    assert result.returncode == 0, result.stderr
    table = pq.read_table(out)
    assert table.schema.remove_metadata() == schema.RAW_SCHEMA
    df = table.to_pandas()
    assert len(df) == 7
    assert list(df["phase"]) == ["warmup"] * 2 + ["measured"] * 5
    assert list(df["iteration"]) == list(range(7))
    info = schema.read_provenance(str(out))
    assert spec.CellDescription.from_dict(
        {k: info[k] for k in ("cell", "workload")}).cell == cell
    assert (df[["framework", "mode", "seed", "threads"]].drop_duplicates().values.tolist()
            == [["torch", "eager", 4, THREADS]])
    assert df[["forward_s", "backward_s", "step_s"]].notna().all().all()
    assert (df["step_s"] > 0).all()

    info = schema.read_provenance(str(out))
    assert (info["status"], info["message"]) == ("ok", "")
    assert info["schema_version"] == schema.SCHEMA_VERSION
    assert info["versions"]["torch"].startswith("2.")
    assert info["cpu_model"] and info["device_name"] == "cpu"
    assert "git_commit" in info and "git_dirty" in info
    assert set(info["phases"]) == {"import_s", "prepare_s", "compile_s", "timed_loop_s",
                                   "gradients_s"}
    # The paper's threads check flags a loop busier than threads + 0.5 cores.
    assert 0 < info["cpu_utilisation"] < THREADS + 0.5
    assert info["env"]["OMP_NUM_THREADS"] == str(THREADS) == str(info["threads"])
    assert info["timed_quantities"] == ["forward_s", "backward_s", "step_s"]
    assert info["cell"] == dataclasses.asdict(cell)
    assert info["workload"]["n_samples"] == 512 and info["workload"]["iterations"] == 5
    assert info["workload"]["batch_size"] == 128  # the model's default
    assert info["threads_reported"] == {"intra_op": THREADS, "inter_op": THREADS}
    assert info["choices"]
    assert info["started_at"] <= info["ended_at"]
    # A fixed count (the spec's default), its precision and the machine's load recorded;
    # no busy_share: the load is read, not judged.
    assert (info["stop_reason"], info["busy"], info["busy_retimed"]) == ("fixed", None, 0)
    assert info["precision_reached"] is None  # 5 iterations give no 95 % interval
    assert len(info["measured_attempts"]) == 1 and info["load_window_s"] > 0

    with np.load(grads) as data:
        assert str(data["status"]) == "ok" and np.isfinite(data["loss"])
        shapes = [data[f"g{i}"].shape for i in range(4)]
    assert shapes == [(784, 512), (512,), (512, 10), (10,)]


def test_a_precision_stop_ends_the_measured_phase_and_says_why(repo, tmp_path):
    # A loose precision, reached at once; a busy share no machine reaches.
    result, cell, out, _ = measure(repo, tmp_path, iterations=400, stop="precision",
                                   min_iterations=6, precision=0.9, measure_s=60,
                                   busy_share=1000.0, busy_retimes=1)
    assert result.returncode == 0, result.stderr
    info = schema.read_provenance(str(out))
    measured = pq.read_table(out).to_pandas().query("phase == 'measured'")
    assert (info["status"], info["stop_reason"]) == ("ok", "precision")
    assert 6 <= len(measured) < 400 and info["precision_reached"] <= 0.9
    assert info["busy"] is False and info["busy_retimed"] == 0
    if os.path.exists("/proc/stat"):
        assert info["load_other_cores"] is not None and info["load_loadavg_1m"] is not None


def test_cuda_cell_without_gpu_is_recorded_failed_and_retimed(repo, tmp_path):
    """The spec gives PyTorch a CUDA path and the cell asked for the device: a GPU it cannot
    see is a failure of the run (tests/test_gpu_failures.py fakes an old driver), with
    PyTorch's words and what was found, for the next run to time again."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible: the cuda cell would run")
    result, _, out, grads = measure(repo, tmp_path, "torch", "eager", "cuda")
    assert result.returncode == 0, result.stderr
    assert pq.read_table(out).num_rows == 0
    info = schema.read_provenance(str(out))
    assert info["status"] == "failed", info["message"]
    assert "torch sees no GPU" in info["message"] and "torch.cuda.init() raised" in info["message"]
    assert info["retime"] and info["cuda"]["sees_gpu"] is False
    assert info["cuda"]["runtime_cuda_version"] == torch.version.cuda
    with np.load(grads) as data:
        assert str(data["status"]) == "failed"
        assert not [k for k in data.files if k.startswith("g")]


def test_cuda_cell_of_a_framework_without_a_cuda_path_is_unsupported(repo, tmp_path):
    """What the spec declares impossible stays unsupported, and nothing is imported for it."""
    result, _, out, _ = measure(repo, tmp_path, "autograd", "eager", "cuda")
    assert result.returncode == 0, result.stderr
    info = schema.read_provenance(str(out))
    assert info["status"] == "unsupported"
    assert "autograd has no cuda build in this pipeline" in info["message"]
    assert info["retime"] is None and info["frameworks_loaded"] == []


@pytest.mark.parametrize("framework, device, reason", [
    ("tensorflow", "cpu", "runs on cuda only"),  # a GPU's memory policy, on the CPU
    ("torch", "cuda", "torch runs its own default GPU allocator in every cuda cell")])
def test_a_task_that_measures_nothing_here_is_unsupported_before_any_import(
        repo, tmp_path, framework, device, reason):
    """The default-allocator task (004's memory grab): a CPU has no GPU memory policy, and a
    framework whose default every cuda cell runs has its backward cells for it."""
    task = next(t for t, info in spec.TASKS.items() if info.default_allocator)
    result, _, out, _ = measure(repo, tmp_path, framework, "eager", device, task=task)
    assert result.returncode == 0, result.stderr
    info = schema.read_provenance(str(out))
    assert info["status"] == "unsupported" and reason in info["message"], info["message"]
    assert info["frameworks_loaded"] == []


def test_invalid_mode_exits_non_zero_naming_it(repo, tmp_path):
    result, _, out, grads = measure(repo, tmp_path, "torch", "graph")
    assert result.returncode != 0
    assert "'graph'" in result.stderr and "torch" in result.stderr
    assert not out.exists() and not grads.exists()


def test_jacobian_cell_writes_the_jacobian_of_one_example(repo, tmp_path):
    result, cell, out, grads = measure(repo, tmp_path, "torch", "eager", "cpu",
                                       jacobian_rows=3, model="cnn",
                                       task="jacobian_rows")
    assert result.returncode == 0, result.stderr
    info = schema.read_provenance(str(out))
    assert info["status"] == "ok", info["message"]
    assert info["derivative_shape"] == [3, 1, 28, 28]
    assert info["workload"]["jacobian_rows"] == 3
    with np.load(grads) as data:
        assert data["g0"].shape == (3, 1, 28, 28) and np.isnan(data["loss"])


def test_a_thread_count_the_framework_did_not_take_is_an_error():
    sys.path.insert(0, str(spec.__file__).rsplit("/adbench/", 1)[0])
    import measure as cli

    cli.check_threads({"intra_op": 2, "inter_op": 2}, 2)
    with pytest.raises(RuntimeError, match="asked for 4 threads"):
        cli.check_threads({"intra_op": 2, "inter_op": 4}, 4)


def test_a_job_given_fewer_cores_than_threads_fails_saying_so(repo, tmp_path):
    result, _, out, _ = measure(repo, tmp_path, "torch", "eager", "cpu", "--granted-threads",
                                "1")
    assert result.returncode == 0, result.stderr
    info = schema.read_provenance(str(out))
    assert info["status"] == "failed" and "given 1 core(s) for 2 threads" in info["message"]
