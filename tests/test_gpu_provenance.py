"""What a cell records about its GPU and its allocation, and the CUDA numerics every framework
takes from spec.CUDA_NUMERICS.  Nothing here needs a GPU: a cpu cell must record None and
change no CUDA switch; the numerics functions are called directly (torch's flags and
TensorFlow's and JAX's switches can be set without a device); nvidia-smi is a stand-in."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from adbench import provenance, schema, spec
from adbench.backends import load
from isolated import REPO, venv_python

SLURM_VARS = ("SLURM_JOB_ID", "SLURMD_NODENAME", "SLURM_NODELIST", "SLURM_CPUS_ON_NODE",
              "SLURM_JOB_CPUS_PER_NODE", "SLURM_CPUS_PER_TASK", "SLURM_JOB_GPUS",
              "SLURM_GPUS_ON_NODE", "SLURM_JOB_PARTITION", "CUDA_VISIBLE_DEVICES")
FLIPPED = {k: not v for k, v in spec.CUDA_NUMERICS.items()}


@pytest.fixture
def no_slurm(monkeypatch):
    for name in SLURM_VARS:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


# ------------------------------------------------------------------ allocation
def test_allocation_outside_a_scheduler_is_all_none(no_slurm):
    assert provenance.allocation() == {"scheduler": None, "job_id": None, "node": None,
                                       "cpus": None, "gpus": None,
                                       "cuda_visible_devices": None, "partition": None}


def test_allocation_under_slurm_reads_the_job_variables(no_slurm):
    for name, value in {"SLURM_JOB_ID": "4711", "SLURMD_NODENAME": "gpu03",
                        "SLURM_NODELIST": "gpu[03]", "SLURM_CPUS_PER_TASK": "8",
                        "SLURM_CPUS_ON_NODE": "16", "SLURM_JOB_GPUS": "2",
                        "SLURM_GPUS_ON_NODE": "1", "SLURM_JOB_PARTITION": "a100",
                        "CUDA_VISIBLE_DEVICES": "0"}.items():
        no_slurm.setenv(name, value)
    assert provenance.allocation() == {"scheduler": "slurm", "job_id": "4711",
                                       "node": "gpu03", "cpus": "8", "gpus": "2",
                                       "cuda_visible_devices": "0", "partition": "a100"}


def test_allocation_falls_back_to_the_other_slurm_variables(no_slurm):
    """Not every site or srun sets the same ones (no --cpus-per-task, no slurmd name)."""
    for name, value in {"SLURM_JOB_ID": "12", "SLURM_NODELIST": "node[1]",
                        "SLURM_JOB_CPUS_PER_NODE": "4", "SLURM_GPUS_ON_NODE": "1"}.items():
        no_slurm.setenv(name, value)
    got = provenance.allocation()
    assert (got["node"], got["cpus"], got["gpus"], got["partition"]) == (
        "node[1]", "4", "1", None)


def test_the_cpus_granted_are_the_affinity_not_the_nodes_count(no_slurm):
    no_slurm.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2})
    no_slurm.setattr(os, "cpu_count", lambda: 64)
    assert provenance.cpus_granted() == 3
    assert provenance.machine()["cpus_granted"] == 3
    assert provenance.machine()["cpu_count"] == 64  # the node's, kept for the paper


def test_slurms_cpus_per_task_bound_the_cpus_granted(no_slurm):
    """A node without task binding leaves the affinity at the whole node: SLURM's count is
    what the job was given; where the affinity is narrower, the affinity."""
    no_slurm.setattr(os, "sched_getaffinity", lambda pid: set(range(64)))
    no_slurm.setenv("SLURM_CPUS_PER_TASK", "4")
    assert provenance.cpus_granted() == 4
    no_slurm.setattr(os, "sched_getaffinity", lambda pid: {5, 6})
    assert provenance.cpus_granted() == 2


# ------------------------------------------------------------------ gpu info
@pytest.fixture
def fake_nvidia_smi(tmp_path, monkeypatch):
    """An nvidia-smi on PATH alone that logs its arguments and prints one GPU."""
    script = tmp_path / "nvidia-smi"
    script.write_text('#!/bin/sh\necho "$@" >> "${0%/*}/calls"\n'
                      'echo "NVIDIA H100 80GB HBM3, 550.54.15, 81559"\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", str(tmp_path))
    return tmp_path / "calls"


def test_gpu_on_cpu_is_none_whatever_is_installed(fake_nvidia_smi):
    assert provenance.gpu("cpu", {"name": "anything"}) is None


def test_gpu_without_framework_or_nvidia_smi_is_none(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi
    assert provenance.gpu("cuda", None) is None
    assert provenance.gpu_driver() is None


def test_gpu_takes_the_framework_view_and_fills_in_from_nvidia_smi(fake_nvidia_smi,
                                                                   monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,2")
    got = provenance.gpu("cuda", {"name": "NVIDIA H100 80GB HBM3", "cudnn_version": "91002",
                                  "cuda_version": None})
    assert got == {"name": "NVIDIA H100 80GB HBM3", "driver_version": "550.54.15",
                   "total_memory_bytes": 81559 * 2**20, "cudnn_version": "91002",
                   "sources": ["framework", "nvidia-smi"]}
    assert "--id=1" in fake_nvidia_smi.read_text()  # the job's first visible GPU


def test_a_process_gpu_memory_is_nvidia_smi_s_reading_of_its_pid(tmp_path, monkeypatch):
    """The memory a process holds on its GPUs (a planted listing: this pid on two GPUs, another
    process, a line without a number), summed, in bytes; None where it is not listed."""
    script = tmp_path / "nvidia-smi"
    script.write_text('#!/bin/sh\necho "$@" >> "${0%/*}/calls"\n'
                      'printf "4242, 81000\\n17, 500\\n4242, 300\\n99, [N/A]\\n"\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert provenance.gpu_process_memory(4242) == 81300 * 2**20
    assert provenance.gpu_process_memory(99) is None and provenance.gpu_process_memory(5) is None
    assert "--query-compute-apps=pid,used_memory" in (tmp_path / "calls").read_text()
    monkeypatch.setenv("PATH", str(tmp_path / "none"))  # no nvidia-smi
    assert provenance.gpu_process_memory(4242) is None


GPU_PROBES = ("gpu_info", "peak_memory", "peak_reserved_memory", "device_memory_in_use")


@pytest.mark.backend
@pytest.mark.parametrize("framework", ["torch", "tensorflow"])
def test_backends_report_no_gpu_and_no_peak_on_cpu(framework):
    backend = load(framework)
    backend.reset_peak_memory("cpu")
    assert {probe: getattr(backend, probe)("cpu") for probe in GPU_PROBES} == dict.fromkeys(
        GPU_PROBES)


@pytest.mark.backend
def test_tensorflow_reads_the_gpu_memory_its_allocator_holds(monkeypatch):
    """A cuda cell's device memory in use after the step and its peak are TensorFlow's
    allocator's readings of GPU:0 (get_memory_info's 'current' and 'peak'); a planted GPU and
    planted readings stand in for the device."""
    import tensorflow as tf

    from adbench.backends.tensorflow_backend import device

    asked = []

    def memory_info(name):
        asked.append(name)
        return {"current": 3 * 2**20, "peak": 7 * 2**20}

    backend = load("tensorflow")
    monkeypatch.setattr(device, "gpus", lambda: ["a planted GPU"])
    monkeypatch.setattr(tf.config.experimental, "get_memory_info", memory_info)
    assert backend.device_memory_in_use("cuda") == 3 * 2**20
    assert backend.peak_memory("cuda") == 7 * 2**20
    assert asked == ["GPU:0", "GPU:0"]
    assert backend.device_memory_in_use("cpu") is None and backend.peak_memory("cpu") is None


# ------------------------------------------------------------------ numerics
TORCH_FLAGS = (("cuda.matmul", "allow_tf32"), ("cudnn", "allow_tf32"), ("cudnn", "benchmark"))


@pytest.fixture
def torch_flags():
    """PyTorch's TF32 and cuDNN switches, restored after the test (legacy API only: mixing
    it with torch's fp32_precision API makes reading them an error)."""
    import torch

    def owner(path):
        obj = torch.backends
        for part in path.split("."):
            obj = getattr(obj, part)
        return obj

    def read():
        return {(p, n): getattr(owner(p), n) for p, n in TORCH_FLAGS}

    def write(values):
        for (p, n), v in values.items():
            setattr(owner(p), n, v)

    saved = read()
    yield read, write
    write(saved)


@pytest.mark.backend
def test_a_cpu_cell_leaves_the_cuda_switches_alone(torch_flags):
    tb = load("torch")
    read, write = torch_flags
    unusual = {key: True for key in TORCH_FLAGS}  # what no CUDA_NUMERICS would set at once
    write(unusual)
    workload = spec.Workload("mlp512", seed=0, task="backward", n_samples=4, batch_size=4)
    prepared = tb.prepare(workload, "eager", "cpu")
    assert read() == unusual
    assert not [k for k in prepared.choices if k.startswith("cuda_")]


@pytest.mark.backend
@pytest.mark.parametrize("numerics", [spec.CUDA_NUMERICS, FLIPPED], ids=["spec", "flipped"])
def test_torch_applies_the_cuda_numerics_of_the_spec(torch_flags, numerics):
    from adbench.backends.torch_backend import device

    read, _ = torch_flags
    choices = device.apply_cuda_numerics(numerics)
    assert read() == {("cuda.matmul", "allow_tf32"): numerics["tf32"],
                      ("cudnn", "allow_tf32"): numerics["tf32"],
                      ("cudnn", "benchmark"): numerics["cudnn_autotune"]}
    assert f"benchmark={numerics['cudnn_autotune']}" in choices["cuda_autotune"]
    assert all(isinstance(v, str) for v in choices.values())


NUMERICS_PROBE = r'''
import importlib, json, os, sys
from adbench import spec
from adbench.backends import Backend, load

framework, flipped, out = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
backend = load(framework)
# A package backend's CUDA switches are a helper of its device module.
device = (importlib.import_module(type(backend).__module__.rsplit(".", 1)[0] + ".device")
          if isinstance(backend, Backend) else backend)
keys = ("TF_CUDNN_USE_AUTOTUNE", "XLA_FLAGS")
result = {"before": {k: os.environ.get(k) for k in keys}}
if framework == "jax":  # XLA reads XLA_FLAGS at the client's start, in configure_threads
    device.cuda_plugin_installed = lambda: True  # as in envs/jax-cuda.yaml
    backend.configure_threads(1)
    result["cuda_env_flags"] = os.environ["XLA_FLAGS"]
else:
    backend.configure_threads(1)
workload = spec.Workload("mlp512", seed=0, task="backward", n_samples=4, batch_size=4)
choices = backend.prepare(workload, "eager", "cpu").choices
result["cpu_choices"] = sorted(k for k in choices if k.startswith("cuda_"))
result["after_cpu"] = {k: os.environ.get(k) for k in keys}
if framework == "tensorflow":
    import tensorflow as tf
    result["tf32_after_cpu"] = tf.config.experimental.tensor_float_32_execution_enabled()
default = next(t for t, info in spec.TASKS.items() if info.default_allocator)
for name, numerics in (("spec", spec.CUDA_NUMERICS), ("flipped", flipped),
                       ("default_allocator", spec.cuda_numerics(default))):
    result[name] = device.apply_cuda_numerics(numerics)
if framework == "jax":
    spec.CUDA_NUMERICS = flipped
    result["flipped_flags"] = device.cuda_autotune_flags()
json.dump(result, open(out, "w"))
'''


@pytest.mark.backend
@pytest.mark.parametrize("framework", ["tensorflow", "jax"])
def test_tensorflow_and_jax_apply_the_cuda_numerics_of_the_spec(framework, tmp_path):
    """Their CUDA switches follow spec.CUDA_NUMERICS and flip with it; a cpu cell sets
    none of them (each in its own environment)."""
    out = tmp_path / "numerics.json"
    env = {k: v for k, v in os.environ.items()
           if k not in ("XLA_FLAGS", "TF_CUDNN_USE_AUTOTUNE")}
    done = subprocess.run(
        [str(venv_python(framework)), "-c", NUMERICS_PROBE, framework, json.dumps(FLIPPED),
         str(out)], cwd=REPO / "workflow" / "scripts", capture_output=True, text=True,
        timeout=300, env={**env, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONDONTWRITEBYTECODE": "1"})
    assert done.returncode == 0, done.stderr[-4000:]
    got = json.loads(out.read_text())
    assert got["cpu_choices"] == []
    off = not spec.CUDA_NUMERICS["cudnn_autotune"]
    if framework == "tensorflow":
        assert got["after_cpu"] == got["before"] and got["tf32_after_cpu"] is True  # TF default
        for name, numerics in (("spec", spec.CUDA_NUMERICS), ("flipped", FLIPPED)):
            assert got[name]["cuda_tf32"].endswith(str(numerics["tf32"]))
            autotune = "1" if numerics["cudnn_autotune"] else "0"
            assert f"TF_CUDNN_USE_AUTOTUNE={autotune}" in got[name]["cuda_autotune"]
        # The default-allocator task leaves memory growth to TensorFlow, and says so.
        assert "left unset" in got["default_allocator"]["cuda_memory"]
        assert "left unset" not in got["spec"]["cuda_memory"]
    else:
        assert ("--xla_gpu_autotune_level=0" in got["cuda_env_flags"]) == off
        assert got["after_cpu"]["XLA_FLAGS"] == got["cuda_env_flags"]  # prepare left them
        assert bool(got["flipped_flags"]) == (not off)
        for name, numerics in (("spec", spec.CUDA_NUMERICS), ("flipped", FLIPPED)):
            precision = "tensorfloat32" if numerics["tf32"] else "highest"
            assert got[name]["cuda_tf32"] == f"jax_default_matmul_precision={precision}"


@pytest.mark.backend
def test_jax_reports_no_gpu_and_no_peak_on_cpu(tmp_path):
    """JAX's GPU probes (methods of its Backend) measure nothing on a cpu cell."""
    code = ("import json, sys; from adbench import backends; b = backends.load('jax'); "
            "b.configure_threads(1); b.reset_peak_memory('cpu'); "
            f"json.dump({{p: getattr(b, p)('cpu') for p in {GPU_PROBES!r}}}, "
            "open(sys.argv[1], 'w'))")
    done = subprocess.run([str(venv_python("jax")), "-c", code, str(tmp_path / "o.json")],
                          cwd=REPO / "workflow" / "scripts", capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    assert json.loads((tmp_path / "o.json").read_text()) == dict.fromkeys(GPU_PROBES)


@pytest.mark.backend
def test_jax_keeps_a_cpu_environment_s_xla_flags(tmp_path):
    """Without the CUDA plugin (envs/jax.yaml) no GPU flag joins XLA_FLAGS."""
    code = ("import json, os, sys; from adbench import backends; "
            "from adbench.backends.jax_backend import device; "
            "backends.load('jax').configure_threads(1); "
            "json.dump([device.cuda_plugin_installed(), os.environ['XLA_FLAGS']], "
            "open(sys.argv[1], 'w'))")
    done = subprocess.run([str(venv_python("jax")), "-c", code, str(tmp_path / "o.json")],
                          cwd=REPO / "workflow" / "scripts", capture_output=True, text=True,
                          timeout=300, env={**os.environ, "XLA_FLAGS": ""})
    assert done.returncode == 0, done.stderr[-4000:]
    plugin, flags = json.loads((tmp_path / "o.json").read_text())
    assert plugin is False and flags == "--xla_cpu_multi_thread_eigen=false"


# ------------------------------------------------------------------ measure.py
def run_measure(tmp_path, device: str, env: dict) -> dict:
    out = tmp_path / f"{device}.parquet"
    cmd = [sys.executable, str(REPO / "workflow" / "scripts" / "measure.py"),
           "--cell", spec.CellDescription.of("torch", "eager", "mlp512", device=device,
                                             warmup=1, iterations=2, n_samples=8,
                                             batch_size=4).to_json(), "--out", str(out),
           "--gradients", str(tmp_path / f"{device}.npz")]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    return schema.read_provenance(str(out))


@pytest.mark.backend  # runs measure.py on torch
def test_a_cell_records_allocation_gpu_and_peak_memory(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in SLURM_VARS}
    info = run_measure(tmp_path, "cpu", {**env, "SLURM_JOB_ID": "99",
                                         "SLURMD_NODENAME": "node9",
                                         "SLURM_JOB_PARTITION": "short"})
    assert info["status"] == "ok"
    assert info["allocation"]["scheduler"] == "slurm"
    assert (info["allocation"]["job_id"], info["allocation"]["node"],
            info["allocation"]["partition"]) == ("99", "node9", "short")
    assert info["gpu"] is None and info["peak_device_memory_bytes"] is None
    assert info["cpus_granted"] == len(os.sched_getaffinity(0))


@pytest.mark.backend  # runs measure.py on torch
def test_a_cuda_cell_without_a_gpu_records_the_cuda_stack_it_found(tmp_path):
    """No GPU: `gpu` and the peak stay empty, `cuda` says what was found (the runtime of
    this PyTorch, no driver here) and the cell is failed (tests/test_gpu_failures.py)."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible: the cuda cell would run")
    env = {k: v for k, v in os.environ.items() if k not in SLURM_VARS}
    info = run_measure(tmp_path, "cuda", env)
    assert info["status"] == "failed"
    assert info["allocation"]["scheduler"] is None
    assert info["gpu"] is None and info["peak_device_memory_bytes"] is None
    assert info["cuda"]["runtime_cuda_version"] == torch.version.cuda
    assert info["cuda"]["runtime_from"] == "torch.version.cuda"
    assert info["cuda"]["sees_gpu"] is False and info["cuda"]["cuda_visible_devices"] is None
    assert pq.read_metadata(str(tmp_path / "cuda.parquet")).num_rows == 0


@pytest.mark.backend  # runs measure.py on torch
def test_a_cpu_cell_records_no_cuda_stack(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in SLURM_VARS}
    info = run_measure(tmp_path, "cpu", env)
    assert info["status"] == "ok" and info["cuda"] is None and info["retime"] is None
