"""Honest GPU failures (issue 25, item 6): a cuda cell whose framework sees no GPU is `failed`,
with the framework's own words and the driver and CUDA versions found, and the next run
re-times it; `unsupported` stays for what the spec declares impossible.  The cell records the
CUDA stack it found whatever its status.

No GPU here: the driver, libcuda, nvidia-smi and PyTorch's CUDA calls are stand-ins
(monkeypatch, or a wrapper that patches them before running measure.py as __main__); JAX
runs for real in its CPU environment, where it sees no GPU either."""

from __future__ import annotations

import ctypes
import dataclasses
import json
import os
import stat
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from adbench import provenance, schema, spec
from adbench.backends import DeviceNotVisible, UnsupportedCell, capabilities
from conftest import REPO
from isolated import venv_python

SCRIPTS = REPO / "workflow" / "scripts"
MEASURE = SCRIPTS / "measure.py"
RUN_CELL = SCRIPTS / "run_cell.py"
sys.path.insert(0, str(SCRIPTS))
import measure as cli  # noqa: E402

GPU_VARS = ("CUDA_VISIBLE_DEVICES", "SLURM_JOB_GPUS", "SLURM_GPUS_ON_NODE", "SLURM_JOB_ID")
# What PyTorch 2.x raises from torch.cuda.init() on a driver older than its build.
TOO_OLD = ("The NVIDIA driver on your system is too old (found version 11040). Please update "
           "your GPU driver by downloading and installing a new version from the URL: "
           "http://www.nvidia.com/Download/index.aspx")


@pytest.fixture
def old_driver(monkeypatch):
    """A node whose driver (470.57.02, CUDA up to 11.4) is older than a CUDA 12.6 build, and
    on which SLURM granted GPU 0."""
    for name in GPU_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SLURM_JOB_GPUS", "0")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    monkeypatch.setattr(provenance, "gpu_driver", lambda: "470.57.02")
    monkeypatch.setattr(provenance, "driver_cuda_version", lambda: "11.4")
    return monkeypatch


# ------------------------------------------------------------------ the classification
def not_visible(**found) -> DeviceNotVisible:
    return DeviceNotVisible("device cuda requested but torch sees no GPU: ...", found)


@pytest.mark.parametrize("exc, device, status, retime", [
    (cli.TimeBudgetSpent("budget spent"), "cuda", "timeout", False),
    (UnsupportedCell("jacrev cannot transform cuDNN's LSTM"), "cuda", "unsupported", False),
    (not_visible(), "cuda", "failed", True),
    (RuntimeError("CUDA out of memory"), "cuda", "failed", False),
    (RuntimeError("boom"), "cpu", "failed", False),
])
def test_a_cells_status_comes_from_what_ended_it(exc, device, status, retime):
    got_status, message, got_retime = cli.classify(exc, device)
    assert got_status == status and bool(got_retime) == retime
    assert str(exc) in message


def test_a_failure_on_a_driver_older_than_the_build_names_both_versions(old_driver):
    found = provenance.cuda_stack("12.6", "torch.version.cuda", sees_gpu=True)
    status, message, retime = cli.classify(
        RuntimeError("CUDA error: the provided PTX was compiled with an unsupported "
                     "toolchain"), "cuda", found)
    assert status == "failed" and retime is None
    assert "unsupported toolchain" in message  # the framework's words first
    assert "470.57.02" in message and "11.4 < 12.6" in message


def test_a_failure_on_a_new_enough_driver_adds_nothing(monkeypatch):
    monkeypatch.setattr(provenance, "gpu_driver", lambda: "580.159.04")
    monkeypatch.setattr(provenance, "driver_cuda_version", lambda: "13.0")
    found = provenance.cuda_stack("12.6", "torch.version.cuda", sees_gpu=True)
    assert found["driver_older_than_runtime"] is False
    assert cli.classify(RuntimeError("boom"), "cuda", found)[1] == "RuntimeError: boom"


@pytest.mark.parametrize("framework", sorted(spec.FRAMEWORKS))
def test_only_what_the_spec_declares_impossible_is_unsupported_up_front(framework):
    """A device the framework has no path to (no CUDA build in the spec) is unsupported
    before anything is imported; a framework with one goes on to look for the GPU."""
    declared = capabilities(framework)
    mode = next(iter(spec.FRAMEWORKS[framework].modes))
    cell = spec.Cell(framework, mode, "mlp512", "backward", "cpu", 1, 0)
    cli.check_declared(declared, cell)
    on_cuda = dataclasses.replace(cell, device="cuda")
    if "cuda" in spec.FRAMEWORKS[framework].devices:
        cli.check_declared(declared, on_cuda)
    else:
        with pytest.raises(UnsupportedCell, match=f"{framework} has no cuda build"):
            cli.check_declared(declared, on_cuda)


def test_device_not_visible_is_no_unsupported_cell():
    """Every `except UnsupportedCell` (the backends' own, the test runner's) lets it through."""
    assert not issubclass(DeviceNotVisible, UnsupportedCell)


# ------------------------------------------------------------------ the CUDA stack found
@pytest.mark.parametrize("raw, text", [(12080, "12.8"), ("13000", "13.0"), (11040, "11.4"),
                                       ("12.6", "12.6"), ("12.5.1", "12.5.1"), (None, None),
                                       ("None", None)])
def test_cuda_versions_read_alike_whatever_their_source(raw, text):
    assert provenance.cuda_version(raw) == text


class FakeLibcuda:
    def __init__(self, version: int):
        self.version = version

    def cuDriverGetVersion(self, ref):  # noqa: N802 -- libcuda's name
        ref._obj.value = self.version
        return 0


def test_the_driver_cuda_version_comes_from_libcuda(monkeypatch):
    monkeypatch.setattr(ctypes, "CDLL", lambda name: FakeLibcuda(12040))
    assert provenance.driver_cuda_version() == "12.4"


def test_the_driver_cuda_version_falls_back_to_nvidia_smi_then_none(monkeypatch, tmp_path):
    def no_libcuda(name):
        raise OSError(f"{name}: cannot open shared object file")

    monkeypatch.setattr(ctypes, "CDLL", no_libcuda)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert provenance.driver_cuda_version() is None  # no driver at all
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho '| NVIDIA-SMI 580.159.04   Driver Version: 580.159.04"
                   "     CUDA Version: 13.0     |'\n")
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    assert provenance.driver_cuda_version() == "13.0"


def test_the_stack_found_says_the_driver_is_older_and_what_was_granted(old_driver):
    found = provenance.cuda_stack(12060, "jax cuda_versions", sees_gpu=False)
    assert found == {"driver_version": "470.57.02", "driver_cuda_version": "11.4",
                     "runtime_cuda_version": "12.6", "runtime_from": "jax cuda_versions",
                     "driver_older_than_runtime": True, "sees_gpu": False,
                     "cuda_visible_devices": "0", "slurm_gpus": "0"}
    text = provenance.describe_cuda(found, "jax")
    for part in ("NVIDIA driver 470.57.02 supporting CUDA up to 11.4", "jax's CUDA 12.6",
                 "11.4 < 12.6", "SLURM granted GPU(s) 0", "CUDA_VISIBLE_DEVICES='0'"):
        assert part in text, text


def test_a_driver_too_old_for_the_chosen_build_fails_naming_both_and_the_choice(monkeypatch):
    """PyTorch's default CUDA 13.0 build on a node whose driver supports CUDA up to 12.4: the
    cell fails naming both versions and the config key that picks another build."""
    for name in GPU_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(provenance, "gpu_driver", lambda: "550.54.15")
    monkeypatch.setattr(provenance, "driver_cuda_version", lambda: "12.4")
    found = provenance.cuda_stack("13.0", "torch.version.cuda", sees_gpu=False)
    status, message, retime = cli.classify(
        DeviceNotVisible(f"device cuda requested but torch sees no GPU: {TOO_OLD} "
                         f"({provenance.describe_cuda(found, 'torch')})", found), "cuda", found)
    assert status == "failed" and retime
    for part in ("NVIDIA driver 550.54.15 supporting CUDA up to 12.4", "torch's CUDA 13.0",
                 "12.4 < 13.0", "cuda_builds"):
        assert part in message, message


def test_the_stack_found_without_driver_or_cuda_build_says_so(monkeypatch):
    for name in GPU_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(provenance, "gpu_driver", lambda: None)
    monkeypatch.setattr(provenance, "driver_cuda_version", lambda: None)
    found = provenance.cuda_stack(None, "torch.version.cuda", sees_gpu=False)
    assert found["driver_older_than_runtime"] is None
    text = provenance.describe_cuda(found, "torch")
    assert "no NVIDIA driver" in text and "torch has no CUDA runtime (a CPU build)" in text
    assert "SLURM" not in text


# ------------------------------------------------------------------ the backends
@pytest.mark.backend  # imports torch
def test_torch_seeing_no_gpu_fails_with_its_words_and_the_versions(old_driver):
    """PyTorch's is_available() only says False; its init says why, and the message keeps
    those words and adds what was found."""
    from adbench.backends.torch_backend import device as tb, tasks

    def init():
        raise RuntimeError(TOO_OLD)

    old_driver.setattr(tb.torch.cuda, "is_available", lambda: False)
    old_driver.setattr(tb.torch.cuda, "init", init)
    old_driver.setattr(tb.torch.version, "cuda", "12.6")
    workload = spec.Workload("mlp512", seed=0, task="backward", n_samples=4, batch_size=4)
    with pytest.raises(DeviceNotVisible) as caught:
        tasks.prepare(workload, "eager", "cuda")
    message = str(caught.value)
    for part in (TOO_OLD, "470.57.02", "CUDA up to 11.4", "torch's CUDA 12.6", "11.4 < 12.6",
                 "SLURM granted GPU(s) 0"):
        assert part in message, message
    assert caught.value.cuda["runtime_cuda_version"] == "12.6"
    assert caught.value.cuda["sees_gpu"] is False


@pytest.mark.backend  # imports torch
def test_torch_cpu_build_says_it_has_no_cuda():
    from adbench.backends.torch_backend import device as tb

    if tb.torch.cuda.is_available():
        pytest.skip("a GPU is visible: the cuda cell would run")
    with pytest.raises(DeviceNotVisible) as caught:
        tb.torch_device("cuda")
    if tb.torch.version.cuda is None:  # the CPU wheel of the test environment
        assert "Torch not compiled with CUDA enabled" in str(caught.value)


@pytest.mark.backend
def test_jax_seeing_no_gpu_fails_with_its_words(tmp_path):
    """Real JAX, CPU jaxlib (envs/jax.yaml): jax.devices('cuda') says why."""
    code = ("import json, sys; from adbench.backends import DeviceNotVisible; "
            "from adbench.backends.jax_backend import device\n"
            "try:\n    device.jax_device('cuda')\nexcept DeviceNotVisible as exc:\n"
            "    json.dump([str(exc), exc.cuda], open(sys.argv[1], 'w'))\n")
    out = tmp_path / "jax.json"
    env = {k: v for k, v in os.environ.items() if k not in GPU_VARS}
    done = subprocess.run([str(venv_python("jax")), "-c", code, str(out)], cwd=SCRIPTS,
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-4000:]
    message, found = json.loads(out.read_text())
    assert "jax.devices('cuda') raised RuntimeError" in message
    assert "CPU jaxlib" in message and "jax has no CUDA runtime" in message
    assert found["runtime_cuda_version"] is None and found["sees_gpu"] is False


# ------------------------------------------------------------------ measure.py and run_cell.py
# measure.py as __main__ with PyTorch's CUDA and the driver faked as in old_driver.
FAKED_MEASURE = f"""
import runpy, sys
sys.path.insert(0, {str(SCRIPTS)!r})
import torch
from adbench import provenance

def init():
    raise RuntimeError({TOO_OLD!r})

torch.cuda.is_available = lambda: False
torch.cuda.init = init
torch.version.cuda = "12.6"
provenance.gpu_driver = lambda: "470.57.02"
provenance.driver_cuda_version = lambda: "11.4"
sys.argv = [{str(MEASURE)!r}, *sys.argv[1:]]
runpy.run_path({str(MEASURE)!r}, run_name="__main__")
"""


def measure_argv(tmp_path, framework="torch", device="cuda") -> list[str]:
    cell = spec.CellDescription.of(framework, "eager", "mlp512", device=device, warmup=1,
                                   iterations=2, n_samples=8, batch_size=4)
    return ["--cell", cell.to_json(),
            "--out", str(tmp_path / "raw.parquet"), "--gradients", str(tmp_path / "g.npz")]


def granted_env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in GPU_VARS}
    return {**env, "SLURM_JOB_ID": "7", "SLURM_JOB_GPUS": "0", "CUDA_VISIBLE_DEVICES": "0"}


def test_measure_records_a_gpu_it_cannot_see_as_failed_to_retime(tmp_path):
    wrapper = tmp_path / "faked_measure.py"
    wrapper.write_text(FAKED_MEASURE)
    done = subprocess.run([sys.executable, str(wrapper), *measure_argv(tmp_path)],
                          capture_output=True, text=True, timeout=300, env=granted_env())
    assert done.returncode == 0, done.stderr[-4000:]
    info = schema.read_provenance(str(tmp_path / "raw.parquet"))
    assert info["status"] == "failed", info["message"]
    assert info["message"].startswith("DeviceNotVisible: device cuda requested but torch")
    for part in (TOO_OLD, "470.57.02", "11.4 < 12.6", "SLURM granted GPU(s) 0"):
        assert part in info["message"], info["message"]
    assert info["retime"]
    assert info["cuda"]["runtime_cuda_version"] == "12.6"
    assert info["cuda"]["driver_version"] == "470.57.02"
    assert info["cuda"]["driver_older_than_runtime"] is True
    assert info["allocation"]["gpus"] == "0"
    assert pq.read_metadata(str(tmp_path / "raw.parquet")).num_rows == 0


def run_cell(tmp_path, child: list[str]) -> subprocess.CompletedProcess:
    cmd = [sys.executable, str(RUN_CELL), "--budget-s", "120", "--killed-log",
           str(tmp_path / "killed.log"), "--", *child]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=granted_env())


def test_the_next_run_retimes_a_cell_whose_gpu_was_not_seen(tmp_path):
    """run_cell.py adds a line to the cell's killed log (its count is a params value of the
    job: Snakemake re-times the cell at the next run), once per such run."""
    wrapper = tmp_path / "faked_measure.py"
    wrapper.write_text(FAKED_MEASURE)
    child = [sys.executable, str(wrapper), *measure_argv(tmp_path)]
    for runs in (1, 2):
        done = run_cell(tmp_path, child)
        # the job fails (a bad node shows), its record written
        assert done.returncode == 3, done.stderr[-4000:]
        lines = (tmp_path / "killed.log").read_text().splitlines()
        assert len(lines) == runs and "re-time" in lines[-1]
    assert schema.read_provenance(str(tmp_path / "raw.parquet"))["status"] == "failed"


def test_a_spec_impossible_cuda_cell_is_unsupported_and_not_retimed(tmp_path):
    """HIPS autograd has no CUDA path: unsupported, without importing it, whatever SLURM
    granted; no line in the killed log."""
    done = run_cell(tmp_path, [sys.executable, str(MEASURE),
                               *measure_argv(tmp_path, "autograd", "cuda")])
    assert done.returncode == 0, done.stderr[-4000:]
    info = schema.read_provenance(str(tmp_path / "raw.parquet"))
    assert info["status"] == "unsupported" and "no cuda build" in info["message"]
    assert info["retime"] is None and "autograd" not in info["frameworks_loaded"]
    assert not (tmp_path / "killed.log").exists()


def test_a_cuda_stack_that_cannot_be_read_loses_nothing(monkeypatch):
    """The record of the stack is provenance: an error reading it leaves `cuda` empty, and
    the cell keeps its own status."""
    def broken():
        raise OSError("nvidia-smi hung")

    monkeypatch.setattr(provenance, "gpu_driver", broken)

    class Backend:
        def cuda_runtime(self):
            return "12.6", "torch.version.cuda"

    assert cli.cuda_found(Backend(), "cuda", None, {"device_name": "NVIDIA H100"}) is None
    assert cli.cuda_found(Backend(), "cpu", None, {}) is None
