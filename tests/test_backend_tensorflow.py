"""The TensorFlow backend's specifics (tests/test_backends.py checks every model, task and
mode of every backend against the float64 reference): a float64 build, variables, retracing
over an epoch, thread settings (XLA's included), the cell oneDNN aborts, the retained graph
its compiled modes refuse, the study's protocol (spec.STUDY_PROTOCOL_TASK: its cells on the
study's MLPs against the reference, the region its clock reads around).

Tolerance: the largest relative L2 error over the arrays (adbench.reference.relative_error,
as the pipeline's derivative check), float32 cells vs the float64 reference.  Measured on
this suite's workloads (TF 2.21 CPU, oneDNN on), worst over tasks and modes:
    mlp512 2.6e-7, mlp354x2 2.5e-7, mlp294x3 4.5e-7, fcn 3.0e-7, dense 2.3e-7,
    fc_xent 7.9e-8, rnn_cell 2.1e-7 (numpy reference);
    cnn 1.1e-6 (conv0.bias sums over every pixel), lstm 3.8e-7, ctc 2.1e-7,
    resnet50 1.2e-6 (53 convolutions deep, long float32 sums), attention 2.8e-6 (its key
    bias has a zero gradient in exact arithmetic, so its float32 round-off is measured
    against 1% of the largest array's norm)
so one tolerance of 1e-5 serves every model with >= 3x room for another machine's summation
order; ResNet50 and the LSTM need no more.  The float64 build matches to <= 3e-15, which pins
the layout conversions (a wrong permutation would be O(1))."""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import tensorflow as tf  # noqa: F401  (installed in the test Python: missing is a failure)

from adbench import backends, reference, spec
from adbench.backends import UnsupportedCell
from adbench.backends.tensorflow_backend import CAPABILITIES, models
from adbench.backends.tensorflow_backend import tasks as tb
from protocol_recording import harness_clock, record_protocol

pytestmark = pytest.mark.backend  # imports a framework

SCRIPTS = Path(__file__).resolve().parents[1] / "workflow" / "scripts"
MODES = tuple(spec.FRAMEWORKS["tensorflow"].modes)
TOLERANCE = 1e-5  # float32 vs float64 reference, see the module docstring
FLOAT64_TOLERANCE = 1e-12  # float64 vs float64: round-off only


def small_workload(model: str, task: str) -> spec.Workload:
    """One small batch (two for ResNet50), the first 10 output rows (2 for ResNet50)."""
    model_spec = spec.MODELS[model]
    batch = 2 if model == "resnet50" else min(4, model_spec.batch_size)
    rows = 2 if model == "resnet50" else min(10, model_spec.n_outputs)
    return spec.Workload(model, seed=0, task=task, warmup=0, iterations=2, n_samples=batch,
                         batch_size=batch, jacobian_rows=rows)


@functools.lru_cache(maxsize=None)
def cached_reference(model: str, derivative: str):
    """One reference per model and derivative kind (tasks of a kind share it)."""
    task = spec.REFERENCE_TASK[derivative]
    return reference.reference_derivatives(small_workload(model, task))


def check_against_reference(workload, mode, dtype, tolerance):
    derivative = spec.TASKS[workload.task].derivative
    ref_loss, refs = cached_reference(workload.model, derivative)
    prepared = backends.load("tensorflow").prepare(workload, mode, "cpu", dtype=dtype)
    loss, arrays = prepared.derivatives(0)
    assert [a.shape for a in arrays] == [r.shape for r in refs]
    assert all(a.dtype == np.dtype(dtype) for a in arrays)
    if derivative != "jacobian":  # gradients (of every parameter, or the trainable ones)
        assert loss == pytest.approx(ref_loss, rel=tolerance)
    else:
        assert math.isnan(loss) and math.isnan(ref_loss)
    assert reference.relative_error(arrays, refs) < tolerance


# The fixed-shape tasks: the variable-length ones are tests/test_varlen_tensorflow.py's, the
# default allocator's (a GPU's, spec.TaskInfo.devices) the test below.
FIXED_SHAPE_TASKS = tuple(t for t, info in spec.TASKS.items()
                          if info.sequence is None and "cpu" in info.devices)


def test_the_default_allocator_task_is_the_backward_step():
    """Only its CUDA numerics differ (tests/test_gpu_provenance.py): the same step, the same
    gradients (measure.py refuses it on the CPU; prepared here directly)."""
    task = next(t for t, info in spec.TASKS.items() if info.default_allocator)
    ours = tb.prepare(small_workload("mlp512", task), "eager", "cpu").derivatives(0)
    backward = tb.prepare(small_workload("mlp512", "backward"), "eager", "cpu").derivatives(0)
    assert ours[0] == pytest.approx(backward[0], rel=1e-6)
    assert reference.relative_error(ours[1], backward[1]) < 1e-6


@pytest.mark.parametrize("task", tuple(t for t in spec.REFERENCE_TASK.values()
                                       if t in FIXED_SHAPE_TASKS))
@pytest.mark.parametrize("model", spec.STUDY_MODELS)
def test_float64_build_matches_the_reference_to_round_off(model, task):
    workload = small_workload(model, task)
    if CAPABILITIES.refusal("eager", model, task, "cpu"):  # nothing to freeze, say
        return
    if workload.spec.loss == "ctc":  # a declared refusal of a float64 build
        with pytest.raises(UnsupportedCell, match="float64"):
            backends.load("tensorflow").prepare(workload, "eager", "cpu", dtype="float64")
        return
    check_against_reference(workload, "eager", "float64", FLOAT64_TOLERANCE)


@pytest.mark.parametrize("model", spec.STUDY_MODELS)
def test_variables_are_the_spec_params(model):
    model_spec = spec.MODELS[model]
    built = models.build_model(model_spec)
    assert len(built.variables) == len(model_spec.params)
    assert sum(v.shape.num_elements() for v in built.variables) == model_spec.n_parameters
    rng = np.random.default_rng(0)
    for p, variable, layout in zip(model_spec.params, built.variables, built.layouts):
        array = rng.standard_normal(p.shape)
        assert layout.to_tf(array).shape == tuple(variable.shape), p.name
        np.testing.assert_array_equal(layout.to_canonical(layout.to_tf(array)), array)
    if built.keras_model is None:  # the slides' cell is raw TensorFlow ops
        assert model_spec.family == "rnn_cell"
        return
    keras_model = built.keras_model
    trainable = sum(v.shape.num_elements() for v in keras_model.trainable_weights)
    assert trainable == model_spec.n_parameters
    # count_params() also counts BatchNormalization's moving mean and variance (ResNet50).
    moving = sum(v.shape.num_elements() for v in keras_model.non_trainable_weights)
    assert keras_model.count_params() == model_spec.n_parameters + moving
    assert moving == (0 if model_spec.family != "resnet" else
                      sum(p.size for p in model_spec.params if p.name.endswith(".gamma")) * 2)


def declared(mode: str, model: str, task: str) -> bool:
    """Whether CAPABILITIES refuses the cell before it runs (measure.py never prepares it)."""
    return CAPABILITIES.refusal(mode, model, task, "cpu") is not None


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("task", FIXED_SHAPE_TASKS)
def test_run_returns_exactly_the_timed_quantities(task, mode):
    """An epoch with a shorter last batch, then the wrap-around (graph mode retraces)."""
    if declared(mode, "cnn", task):
        return
    workload = spec.Workload("cnn", seed=1, task=task, n_samples=5, batch_size=2, warmup=0,
                             iterations=7, jacobian_rows=3)
    prepared = tb.prepare(workload, mode, "cpu")
    expected = spec.timed_quantities("tensorflow", mode, task)
    for i in range(workload.n_batches + 1):
        sample = prepared.run(i, time.perf_counter)
        assert sorted(sample) == sorted(expected), (i, sample)
        assert all(v > 0 for v in sample.values())
        if "forward_s" in sample:
            assert sample["step_s"] == pytest.approx(sample["forward_s"] + sample["backward_s"])
    assert (mode in ("graph", "xla")) == ("tf_function" in prepared.choices)
    assert (mode == "xla") == ("xla_threads" in prepared.choices)
    assert all(isinstance(v, str) and v for v in prepared.choices.values())


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("task", FIXED_SHAPE_TASKS)
def test_derivatives_follow_the_batch_and_keep_no_state(task, mode):
    if declared(mode, "rnn_cell", task):
        return
    workload = spec.Workload("rnn_cell", seed=2, task=task, n_samples=4, batch_size=2,
                             warmup=0, iterations=3)
    prepared = tb.prepare(workload, mode, "cpu")
    _, first = prepared.derivatives(0)
    _, second = prepared.derivatives(1)
    _, again = prepared.derivatives(0)
    assert not np.allclose(first[0], second[0])
    for a, b in zip(first, again, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_the_reference_sees_the_first_batch_of_the_cells():
    """The reference regenerates the workload's first batch: both see the same data."""
    workload = small_workload("rnn_cell", "jacobian_rows")
    ours = spec.make_batches(workload)[0]
    theirs = spec.make_batches(dataclasses.replace(workload, iterations=1))[0]
    for key in ours:
        np.testing.assert_array_equal(ours[key], theirs[key])


@pytest.fixture(scope="module")
def fresh_process(tmp_path_factory):
    """One fresh TensorFlow process (a TensorFlow import costs seconds) that sets its thread
    pools first, as they can only be set before TensorFlow's first op, then computes the
    oneDNN-refused cell with TF_ENABLE_ONEDNN_OPTS=0.  Returns what both produced."""
    workload = small_workload("attention", "jacobian_vectorized")
    out = tmp_path_factory.mktemp("fresh")
    code = ("import json, numpy as np; from adbench import spec; "
            "from adbench.backends import load; tb = load('tensorflow'); "
            "threads = tb.configure_threads(1); "
            f"w = spec.Workload(**{dataclasses.asdict(workload)!r}); "
            f"[np.save(f'{out}/{{m}}.npy', tb.prepare(w, m, 'cpu').derivatives(0)[1][0]) "
            f"for m in {MODES!r}]; "
            f"open('{out}/threads.json', 'w').write(json.dumps(threads))")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=SCRIPTS,
                   env={**os.environ, "TF_ENABLE_ONEDNN_OPTS": "0"})
    return (json.loads((out / "threads.json").read_text()),
            {mode: np.load(out / f"{mode}.npy") for mode in MODES})


def test_configure_threads_reports_what_tensorflow_uses(fresh_process):
    threads, _ = fresh_process
    assert threads == {"intra_op": 1, "inter_op": 1}


@pytest.mark.parametrize("mode", MODES)
def test_the_cell_refused_under_onednn_runs_without_it(fresh_process, mode):
    """attention/jacobian_vectorized, refused where oneDNN would abort the process (eager,
    graph), is correct where TensorFlow runs without oneDNN (and in XLA, which runs with
    it too)."""
    _, jacobians = fresh_process
    _, refs = cached_reference("attention", "jacobian")
    assert reference.relative_error([jacobians[mode]], refs) < TOLERANCE


def test_xla_runs_on_the_configured_threads(tmp_path):
    """XLA's compiled step runs on TensorFlow's intra-op pool: at 1 thread, a matmul-heavy
    XLA loop keeps at most one core busy (CPU-seconds per wall-second, as measure.py checks
    a cell; other load on the machine can only lower it).  The compile (first call) is left
    out: XLA's LLVM codegen pool is sized by the cores, whatever the threads."""
    workload = spec.Workload("mlp512", seed=0, task="backward", warmup=0, iterations=2)
    code = ("import json, os, time; from adbench import spec, provenance; "
            "provenance.pin_threads_env(1); "
            "from adbench.backends import load; tb = load('tensorflow'); "
            "threads = tb.configure_threads(1); "
            f"p = tb.prepare(spec.Workload(**{dataclasses.asdict(workload)!r}), 'xla', 'cpu'); "
            "first = p.run(0, time.perf_counter)['step_s']; "
            "t, cpu = time.perf_counter(), provenance.cpu_seconds(); "
            "steps = [p.run(i, time.perf_counter)['step_s'] for i in range(1, 200)]; "
            "busy = (provenance.cpu_seconds() - cpu) / (time.perf_counter() - t); "
            f"open('{tmp_path}/out.json', 'w').write(json.dumps(dict(threads=threads, "
            "busy=busy, first=first, steps=steps, choices=p.choices)))")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=SCRIPTS)
    out = json.loads((tmp_path / "out.json").read_text())
    assert out["threads"] == {"intra_op": 1, "inter_op": 1}
    assert 0 < out["busy"] < 1.5, out["busy"]
    assert out["first"] > 2 * float(np.median(out["steps"]))  # the first call compiles
    assert out["choices"]["jit_compile"].startswith("True")
    assert "intra-op pool" in out["choices"]["xla_threads"]


@pytest.mark.parametrize("mode", ("graph", "xla"))
def test_compiled_modes_refuse_the_retained_graph_as_declared(mode):
    """No tape outlives a tf.function's call: a retained graph would measure nothing, so the
    compiled modes refuse backward_retained before anything runs (as JAX does); eager holds
    its persistent tape past the step (tests/test_variant_tasks.py)."""
    reason = CAPABILITIES.refusal(mode, "mlp294x3", "backward_retained", "cpu")
    assert reason and reason.startswith("no tape outlives a tf.function's call")
    assert CAPABILITIES.refusal("eager", "mlp294x3", "backward_retained", "cpu") is None


def test_onednn_abort_is_declared_only_while_onednn_is_on(tmp_path):
    """The refusal of the cell oneDNN aborts follows TF_ENABLE_ONEDNN_OPTS as TensorFlow
    reads it, without importing TensorFlow (measure.py asks before the import)."""
    code = ("import json, sys; from adbench import backends; "
            "c = backends.capabilities('tensorflow'); "
            "json.dump([c.refusal(m, 'attention', 'jacobian_vectorized', 'cpu') "
            "for m in ('eager', 'graph', 'xla')] + [sorted(sys.modules)], "
            "open(sys.argv[1], 'w'))")
    found = {}
    for value in ("0", "1", None):
        env = {k: v for k, v in os.environ.items() if k != "TF_ENABLE_ONEDNN_OPTS"}
        if value is not None:
            env["TF_ENABLE_ONEDNN_OPTS"] = value
        out = tmp_path / f"{value}.json"
        subprocess.run([sys.executable, "-c", code, str(out)], check=True, cwd=SCRIPTS,
                       env=env)
        *found[value], loaded = json.loads(out.read_text())
        assert "tensorflow" not in loaded
    assert found["0"] == [None, None, None]
    for value in ("1", None):  # on by default
        eager, graph, xla = found[value]
        assert eager == graph and "oneDNN" in eager and xla is None


def test_xla_s_refusal_of_the_lstm_s_pfor_is_recognised_from_its_error():
    """The error XLA raises at the first call of the LSTM's pfor step (TF 2.21's message)
    is the declared run-time refusal's; the same error from another model fails the cell."""
    error = tf.errors.InvalidArgumentError(
        None, None, "Detected unsupported operations when trying to compile graph "
        "__inference_step_4766[_XlaMustCompile=true] on XLA_CPU_JIT: TensorListReserve (No "
        "registered 'TensorListReserve' OpKernel for XLA_CPU_JIT devices compatible with node "
        "{{node while_init/TensorArrayV2_3}}")
    lstm = small_workload("lstm", "jacobian_vectorized")
    refused = backends.refused(CAPABILITIES, "xla", lstm, "cpu", error)
    assert str(refused).startswith("XLA (tf.function(jit_compile=True)) cannot compile the "
                                   "step: pfor over Keras' LSTM")
    assert "(InvalidArgumentError: Detected unsupported operations" in str(refused)
    cnn = small_workload("cnn", "jacobian_vectorized")
    assert backends.refused(CAPABILITIES, "xla", cnn, "cpu", error) is None


# ------------------------------------------------------------------ the study's protocol
STUDY = spec.STUDY_PROTOCOL_TASK
STUDY_MODES = ("eager", "graph")  # the study's: eager, and its @tf.function


def study_workload(model: str) -> spec.Workload:
    """An epoch of three batches, the last one short (graph mode retraces once)."""
    return spec.Workload(model, seed=3, task=STUDY, warmup=0, iterations=4, n_samples=10,
                         batch_size=4)


@pytest.mark.parametrize("mode", STUDY_MODES)
@pytest.mark.parametrize("model", spec.MLPS)
def test_the_study_protocol_matches_the_reference_on_the_studys_mlps(model, mode):
    """A cell of the study's MLPs: an epoch and its wrap-around with the mode's timed
    quantities, then the check's step against backward's float64 reference."""
    workload = study_workload(model)
    prepared = backends.load("tensorflow").prepare(workload, mode, "cpu")
    for i in range(workload.n_batches + 1):
        sample = prepared.run(i, time.perf_counter)
        assert sorted(sample) == sorted(spec.timed_quantities("tensorflow", mode, STUDY))
        assert all(v > 0 for v in sample.values())
    loss, arrays = prepared.derivatives(0)
    ref_loss, refs = reference.reference_derivatives(workload)
    assert loss == pytest.approx(ref_loss, rel=TOLERANCE)
    assert reference.relative_error(arrays, refs) < TOLERANCE
    assert prepared.choices["protocol"].startswith("the study's (000 Fig. 2)")


@pytest.mark.parametrize("mode", STUDY_MODES)
def test_the_study_protocol_clocks_what_the_study_timed(mode, monkeypatch):
    """Its clock (STUDY_CLOCK, never the harness's): eager, read before the batch is sliced,
    after the tape block and after tape.gradient (backward_s: the gradient line alone);
    graph, read around the tf.function's call alone (step_s), the slicing before it, and
    the tape and its gradient inside the call (seen where the call traces them)."""
    events = record_protocol(monkeypatch, tb, tf.GradientTape, "gradient")
    workload = study_workload("mlp512")
    prepared = tb.prepare(workload, mode, "cpu")
    for i in range(workload.n_batches + 1):
        events.clear()
        sample = prepared.run(i, harness_clock)
        if mode == "eager":
            assert events == ["clock", "slice", "clock", "gradient", "clock"], (i, events)
            assert sorted(sample) == ["backward_s", "forward_s", "step_s"]
        else:  # traced at the first call and at the shorter last batch, inside the clock
            traced = i in (0, workload.n_batches - 1)
            assert events == ["slice", "clock", *(["gradient"] if traced else []),
                              "clock"], (i, events)
            assert sorted(sample) == ["step_s"]


def test_the_study_protocol_is_refused_in_xla_and_off_the_mlps():
    assert "no XLA mode" in CAPABILITIES.refusal("xla", "mlp512", STUDY, "cpu")
    for model in ("cnn", "rnn_cell", "fc_xent"):
        assert "MLP with the l2 loss only" in CAPABILITIES.refusal("eager", model, STUDY,
                                                                  "cpu")
