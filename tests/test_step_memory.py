"""The bytes a step keeps (issue 38, item 6), read as each backend declares valid for the CPU
(Backend.step_memory), shown valid per framework in its own environment: a planted
allocation of known size that the step keeps is found within activation_memory.TOLERANCE,
by adbench.timing.ProcessMemory around the one timing loop, as measure.py reads it
(tests/step_memory_runner.py).

The plant, computed from the model's shapes, never from a measurement:
    a framework that keeps a graph past its step (backward_retained runs in its first mode):
        the retained graph's saved activations, activation_memory.saved_activation_bytes
        (RETAINED: an MLP whose 2048 ReLU outputs per example dominate, 16.9 MB)
    the others (no graph outlives their step): the step's derivatives, kept until the next
        step starts: every parameter's bytes (GRADIENTS: 26 MB of mlp8192's)
and the same step without it (the backward task; the derivatives dropped before returning)
keeps under QUIET of it.  TensorFlow's default (oneDNN on) serves tensors from a BFC pool:
declared not measurable, and nothing is recorded; with oneDNN off its C heap is shown valid.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from adbench import activation_memory, backends, spec
from isolated import REPO, venv_python

pytestmark = pytest.mark.backend  # runs each framework's environment

RUNNER = REPO / "tests" / "step_memory_runner.py"
RETAINED = {"model": "mlp2048", "batch_size": 2048, "warmup": 2, "iterations": 2}
GRADIENTS = {"model": "mlp8192", "batch_size": 128, "warmup": 2, "iterations": 2}
QUIET = 0.05  # what a step without the plant may keep, as a share of the plant


def first_mode(framework: str) -> str:
    return next(iter(spec.FRAMEWORKS[framework].modes))


def keeps_a_graph(framework: str) -> bool:
    """Whether backward_retained runs in the framework's first mode (its declaration)."""
    return backends.capabilities(framework).refusal(
        first_mode(framework), RETAINED["model"], "backward_retained", "cpu") is None


def python_of(framework: str) -> str:
    """The framework's environment; PyTorch's tests run in this one (as test_backend_torch)."""
    return sys.executable if framework == "torch" else str(venv_python(framework))


def measured(framework: str, env: dict | None = None, **cell) -> dict:
    """The memory record of a loop in the framework's environment (step_memory_runner)."""
    args = {"framework": framework, "mode": first_mode(framework), **cell}
    done = subprocess.run([python_of(framework), str(RUNNER), json.dumps(args)],
                          cwd=REPO, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", **(env or {})})
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def planted_and_control(framework: str, env: dict | None = None) -> tuple[int, dict, dict]:
    """The planted bytes, the record of the step that keeps them and of the one that does
    not."""
    if keeps_a_graph(framework):
        planted = activation_memory.saved_activation_bytes(RETAINED["model"],
                                                           RETAINED["batch_size"])
        return (planted,
                measured(framework, env, task="backward_retained", plant="step", **RETAINED),
                measured(framework, env, task="backward", plant="step", **RETAINED))
    planted = spec.MODELS[GRADIENTS["model"]].n_parameters * 4  # float32
    return (planted,
            measured(framework, env, task="backward", plant="derivatives", **GRADIENTS),
            measured(framework, env, task="backward", plant="derivatives", keep=False,
                     **GRADIENTS))


def assert_found(planted: int, kept: dict, control: dict) -> None:
    found = kept["kept_by_step_bytes"]
    assert found is not None, kept["kept_by_step_reading"]
    assert abs(found / planted - 1) <= activation_memory.TOLERANCE, (found, planted)
    assert abs(control["kept_by_step_bytes"]) < QUIET * planted, (control, planted)


MEASURED_ON_CPU = [f for f in spec.FRAMEWORKS if f != "tensorflow"]


@pytest.mark.parametrize("framework", MEASURED_ON_CPU)
def test_a_planted_allocation_the_step_keeps_is_found_within_the_tolerance(framework):
    assert_found(*planted_and_control(framework))


def test_tensorflow_with_onednn_off_its_c_heap_finds_a_retained_tapes_activations():
    assert keeps_a_graph("tensorflow")
    assert_found(*planted_and_control("tensorflow", {"TF_ENABLE_ONEDNN_OPTS": "0"}))


def test_tensorflow_with_onednn_on_records_its_kept_bytes_as_not_measurable():
    record = measured("tensorflow", {"TF_ENABLE_ONEDNN_OPTS": "1"}, task="backward_retained",
                      plant="step", **{**RETAINED, "batch_size": 16, "warmup": 1,
                                       "iterations": 1})
    assert record["kept_by_step_reading"].startswith(backends.NOT_MEASURABLE)
    assert "BFC" in record["kept_by_step_reading"]
    assert record["kept_by_step_bytes"] is None and record["kept_baseline_bytes"] is None
    assert record["rss_baseline_bytes"] and record["heap_after_step_bytes"]  # still read


def torch_sees_a_gpu() -> bool:
    done = subprocess.run([sys.executable, "-c", "import torch; "
                           "print(torch.cuda.is_available())"], capture_output=True, text=True)
    return done.stdout.strip() == "True"


@pytest.mark.skipif(not torch_sees_a_gpu(), reason="needs a GPU PyTorch sees")
def test_on_a_gpu_pytorchs_allocated_bytes_find_a_retained_graphs_activations():
    """The cuda declaration (torch.cuda.memory_allocated), shown as the CPU's is."""
    planted = activation_memory.saved_activation_bytes(RETAINED["model"],
                                                       RETAINED["batch_size"])
    kept, control = (measured("torch", task=task, plant="step", device="cuda", **RETAINED)
                     for task in ("backward_retained", "backward"))
    assert kept["kept_by_step_reading"].startswith("torch.cuda.memory_allocated")
    assert_found(planted, kept, control)
