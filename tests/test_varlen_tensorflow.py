"""The TensorFlow backend's variable-length tasks (spec.SEQUENCE_TASKS, issue 26): every
strategy on both sequence models in eager and graph mode against the float64 reference, the
timed quantities, the trace counter (Prepared.traces) with retraces planted by the batches'
lengths, one tiny XLA cell (XLA compiles per concrete shape), and what is unsupported.

Tiny workloads (test_backends.tiny: 8 samples, batches of 4, the RNN cell's of 1): the file
runs in well under 30 s on two shared cores, the LSTM's traced while-loops being most of it.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import time

import numpy as np
import pytest

import tensorflow as tf  # noqa: F401  (installed in the test Python: missing is a failure)

from adbench import reference, spec
from adbench.backends import load
from adbench.backends.tensorflow_backend import CAPABILITIES

from conftest import at_one_thread
from test_backends import TOLERANCES, tiny

pytestmark = pytest.mark.backend  # imports a framework
tb = load("tensorflow")

SEQUENCE_MODELS = [m for m, info in spec.MODELS.items() if info.sequence_features]
STRATEGY_TASK = {spec.TASKS[t].sequence: t for t in spec.SEQUENCE_TASKS}


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    at_one_thread(tb)


@functools.cache
def reference_of(model: str) -> tuple[float, list[np.ndarray]]:
    """The float64 reference of the model's sequence_gradients (every strategy shares it):
    the RNN cell's numpy BPTT, the LSTM's float64 torch eager run."""
    return reference.reference_derivatives(tiny(model, "backward_varlen"))


CELLS = [(model, strategy, mode) for model in SEQUENCE_MODELS
         for strategy in spec.SEQUENCE_STRATEGIES
         for mode in ("eager", "graph") if (strategy, mode) != ("dynamic", "eager")]


@pytest.mark.parametrize("model, strategy, mode", CELLS)
def test_every_strategy_has_the_true_length_derivative(model, strategy, mode):
    """As the harness runs a cell: the timed iterations, then the derivatives at batch 0,
    which every strategy shares (padding is masked): the reference's, within tolerance."""
    task = STRATEGY_TASK[strategy]
    workload = tiny(model, task)
    prepared = tb.prepare(workload, mode, "cpu")
    samples, traces = [], []
    for i in range(workload.warmup + workload.iterations):
        samples.append(prepared.run(i, time.perf_counter))
        traces.append(prepared.traces())
    loss, arrays = prepared.derivatives(0)
    ref_loss, ref_arrays = reference_of(model)
    assert [a.shape for a in arrays] == [p.shape for p in workload.spec.params]
    assert all(a.dtype == np.float32 for a in arrays)
    assert reference.relative_error(arrays, ref_arrays) < TOLERANCES[model]
    assert loss == pytest.approx(ref_loss, rel=1e-5)
    for sample in samples:
        assert set(sample) == set(spec.timed_quantities("tensorflow", mode, task))
        assert all(v > 0 for v in sample.values()), sample
    if mode == "eager":
        assert traces == [0] * len(traces)
    else:
        assert all(isinstance(t, int) and t >= 1 for t in traces), traces
    assert prepared.choices["sequence"] == strategy  # its description: report_spec
    assert "shape_policy" in prepared.choices
    assert all(isinstance(v, str) for v in prepared.choices.values())


def test_the_batches_have_the_strategy_s_steps():
    """What the traces below rest on: three batches, three distinct true lengths in two
    buckets (seed 7: 21, 20, 13), each batch `padded_length` steps long."""
    workload = retrace_workload("backward_varlen")
    lengths = [workload.sequence_length(i) for i in range(workload.iterations)]
    assert len(set(lengths)) == 3, lengths
    assert len({spec.padded_length("bucketed", n) for n in lengths}) == 2, lengths
    for task in spec.SEQUENCE_TASKS:
        workload = retrace_workload(task)
        for i, batch in enumerate(spec.make_batches(workload)):
            assert batch["x"].shape[1] == spec.padded_length(workload.sequence, lengths[i])


def retrace_workload(task: str) -> spec.Workload:
    """The RNN cell (batch size 1) over three batches of different lengths, two buckets."""
    return dataclasses.replace(tiny("rnn_cell", task, seed=7), iterations=3)


def traces_over_an_epoch(task: str, mode: str) -> tuple[list[int], list[int]]:
    """(each iteration's padded steps, the trace counter after it)."""
    workload = retrace_workload(task)
    prepared = tb.prepare(workload, mode, "cpu")
    steps, traces = [], []
    for i in range(workload.iterations):
        prepared.run(i, time.perf_counter)
        steps.append(spec.padded_length(workload.sequence, workload.sequence_length(i)))
        traces.append(prepared.traces())
    return steps, traces


def distinct_so_far(steps: list[int]) -> list[int]:
    return [len(set(steps[:i + 1])) for i in range(len(steps))]


def test_graph_mode_retraces_per_new_shape_and_counts_it():
    """tf.function as by default: every new length traces (true), one shape traces once
    (padded), a trace per bucket (bucketed); reduce_retracing (dynamic) traces twice, the
    second time with the time axis generalised, and never again."""
    results = {s: traces_over_an_epoch(STRATEGY_TASK[s], "graph")
               for s in spec.SEQUENCE_STRATEGIES}
    steps, traces = results["true"]
    assert traces == distinct_so_far(steps) == [1, 2, 3]
    assert results["padded"][1] == [1, 1, 1]
    steps, traces = results["bucketed"]
    assert traces == distinct_so_far(steps) == [1, 1, 2]
    assert results["dynamic"][1] == [1, 2, 2]
    assert results["dynamic"][1][-1] < results["true"][1][-1]


def test_eager_mode_traces_nothing():
    assert traces_over_an_epoch("backward_varlen", "eager")[1] == [0, 0, 0]


def test_fixed_shape_tasks_record_no_traces():
    assert tb.prepare(tiny("rnn_cell", "backward"), "graph", "cpu").traces is None


def test_xla_compiles_per_shape_without_retracing():
    """The one XLA cell: reduce_retracing keeps tf.function at two traces, but XLA compiles
    each new concrete shape, and that is what the counter reports; the derivative holds."""
    workload = retrace_workload("backward_varlen_dynamic")
    prepared = tb.prepare(workload, "xla", "cpu")
    traces = []
    for i in range(workload.iterations):
        assert set(prepared.run(i, time.perf_counter)) == set(
            spec.timed_quantities("tensorflow", "xla", workload.task))
        traces.append(prepared.traces())
    assert traces == [1, 2, 3]
    assert "per concrete input shape" in prepared.choices["shape_policy"]
    assert "reduce_retracing=True" in prepared.choices["tf_function"]
    loss, arrays = prepared.derivatives(0)
    assert traces[-1] == prepared.traces()  # batch 0's shape was compiled already
    _, ref_arrays = reference.reference_derivatives(workload)
    assert reference.relative_error(arrays, ref_arrays) < TOLERANCES["rnn_cell"]


@pytest.mark.parametrize("mode", spec.FRAMEWORKS["tensorflow"].modes)
@pytest.mark.parametrize("task", spec.SEQUENCE_TASKS)
def test_a_model_without_a_sequence_is_unsupported(task, mode):
    assert "reads no sequence" in CAPABILITIES.refusal(mode, "mlp512", task, "cpu")


@pytest.mark.parametrize("model", SEQUENCE_MODELS)
def test_dynamic_shapes_in_eager_mode_are_unsupported_with_the_reason(model):
    reason = CAPABILITIES.refusal("eager", model, "backward_varlen_dynamic", "cpu")
    assert re.search("eager mode has no dynamic-shape option.*define-by-run", reason)


@pytest.mark.parametrize("model, strategy, mode", CELLS)
def test_every_strategy_runs_where_it_is_declared_to(model, strategy, mode):
    assert CAPABILITIES.refusal(mode, model, STRATEGY_TASK[strategy], "cpu") is None
