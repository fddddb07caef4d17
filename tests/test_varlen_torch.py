"""The variable-length tasks (spec.SEQUENCE_TASKS, issue 26 item 2) in the PyTorch backend:
every strategy in eager and TorchScript (script, trace) on both sequence models against the
float64 reference (the RNN cell's numpy BPTT; the LSTM's, this backend's float64 eager, also
checked against the fixed-shape model on the batch cut at its true length), the refusals,
and Prepared.traces under torch.compile: a new length is a counted retrace, a padded epoch
one shape, a recompile limit hit recorded, the RNN cell's loop retraced per length even with
dynamic=True.  torch.compile runs with AOTAutograd's eager backend here (Dynamo's tracing,
guards and counters are Inductor's; its C++ compilations take 5-30 s a cell on this
machine).  Tiny workloads: batches of 4 sequences (the RNN cell's of 1), the seed's first
lengths 55 and 5 steps."""

from __future__ import annotations

import time

import numpy as np
import pytest

import torch  # missing torch is a failure

from adbench import reference, spec
from adbench.backends import load
from adbench.backends.torch_backend import CAPABILITIES, models, tasks

from conftest import at_one_thread
from test_backends import TOLERANCES, tiny

pytestmark = pytest.mark.backend  # imports a framework
torch_backend = load("torch")

SEQUENCE_MODELS = [m for m, s in spec.MODELS.items() if s.sequence_features is not None]
NOT_COMPILED = ("eager", "script", "trace")


def expected_refusal(mode: str, model: str, strategy: str) -> str | None:
    """A phrase of the reason, where the cell is unsupported (declared: measure.py refuses it
    before anything runs)."""
    if strategy == "dynamic":
        return "needs none" if mode == "eager" else "no dynamic-shape option"
    if mode == "trace" and model == "rnn_cell" and strategy != "padded":
        return "unrolls the RNN cell's Python loop"
    return None


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    at_one_thread(torch_backend)


def test_the_sequence_models_are_the_lstm_and_the_rnn_cell():
    assert sorted(SEQUENCE_MODELS) == ["lstm", "rnn_cell"]
    assert all(t in tasks.TASK_BUILDERS for t in spec.SEQUENCE_TASKS)
    # none refused outright: every mode runs some model's sequence cells
    assert not [r for r in CAPABILITIES.refusals
                if set(r.tasks) == set(spec.SEQUENCE_TASKS) and not r.modes]


@pytest.mark.parametrize("task", spec.SEQUENCE_TASKS)
@pytest.mark.parametrize("model", SEQUENCE_MODELS)
def test_every_strategy_has_the_true_length_derivative(model, task):
    """As the harness runs a cell: the timed iterations (both batches, two lengths), then
    the derivatives at the first batch, against the float64 reference; the second batch's
    (another length than the one a trace recorded) against eager's."""
    workload = tiny(model, task)
    strategy = workload.sequence
    assert workload.sequence_length(0) != workload.sequence_length(1)
    ref_loss, ref_arrays = reference.reference_derivatives(workload)
    eager_second = None
    for mode in NOT_COMPILED:
        refusal = expected_refusal(mode, model, strategy)
        declared = CAPABILITIES.refusal(mode, model, task, "cpu")
        assert (refusal is None) == (declared is None), (mode, declared)
        if refusal:
            assert refusal in declared, declared
            continue
        prepared = torch_backend.prepare(workload, mode, "cpu")
        samples, traces = [], []
        for i in range(workload.total_iterations):
            samples.append(prepared.run(i, time.perf_counter))
            traces.append(prepared.traces())
        loss, arrays = prepared.derivatives(0)
        assert [a.shape for a in arrays] == [p.shape for p in workload.spec.params], mode
        assert all(a.dtype == np.float32 for a in arrays), mode
        assert reference.relative_error(arrays, ref_arrays) < TOLERANCES[model], mode
        assert loss == pytest.approx(ref_loss, rel=1e-5), mode
        for sample in samples:
            assert set(sample) == set(spec.timed_quantities("torch", mode, task)), mode
            assert all(v > 0 for v in sample.values()), (mode, sample)
            assert sample["step_s"] == pytest.approx(sample["forward_s"] + sample["backward_s"])
        # Eager traces nothing; TorchScript exposes no count of its specialisations.
        assert traces == ([0, 0] if mode == "eager" else [None, None]), mode
        choices = prepared.choices
        assert all(isinstance(v, str) for v in choices.values()), mode
        assert choices["sequence_strategy"] == strategy, mode  # its description: report_spec
        assert choices["shape_policy"] and choices["sequence_model"], mode
        second = prepared.derivatives(1)
        if eager_second is None:
            eager_second = second
        assert second[0] == pytest.approx(eager_second[0], rel=1e-5), mode
        assert reference.relative_error(second[1], eager_second[1]) < 1e-5, mode


@pytest.mark.parametrize("model", SEQUENCE_MODELS)
def test_a_batch_padded_past_its_length_has_its_true_length_derivative(model):
    """Independently of the gather and the mask: the fixed-shape model (WithLoss, the
    `backward` task's module) on the batch cut at its true length, in float64."""
    workload = tiny(model, "backward_padded")
    loss, arrays = torch_backend.prepare(workload, "eager", "cpu",
                                         dtype="float64").derivatives(0)
    net, binds = models.build(workload.spec, spec.make_params(workload),
                                     torch.device("cpu"), torch.float64)
    batch = spec.make_batches(workload)[0]
    length = workload.sequence_length(0)
    assert batch["x"].shape[1] == spec.SEQUENCE_LENGTHS[1] > length
    assert (batch["lengths"] == length).all() and not batch["x"][:, length:].any()
    x = torch.from_numpy(batch["x"][:, :length]).double()
    aux = torch.from_numpy(batch["h0" if model == "rnn_cell" else "y"]).double()
    if model == "rnn_cell":  # the fixed-shape module is one step: unroll it here
        h = aux
        for t in range(length):
            h = net.model(x[:, t], h)
        fixed = h.sum()
    else:
        fixed = net(x, aux)
    fixed.backward()
    assert loss == pytest.approx(float(fixed.detach()), rel=1e-12)
    grads = models.to_canonical(binds, [p.grad for p, _, _ in binds])
    assert reference.relative_error(arrays, grads) < 1e-12


@pytest.fixture
def aot_eager(monkeypatch, tmp_path):
    """torch.compile with AOTAutograd's eager backend instead of Inductor: Dynamo traces,
    guards, recompiles and counts as it does for Inductor (what these tests check), without
    Inductor's C++ compilations (5-30 s a cell here; test_backends.py runs Inductor on the
    LSTM's fixed-shape cells)."""
    monkeypatch.setenv("ADBENCH_CACHE_DIR", str(tmp_path))
    compile_ = torch.compile
    monkeypatch.setattr(torch, "compile",
                        lambda model, **kw: compile_(model, **{**kw, "backend": "aot_eager"}))


def test_a_new_length_is_a_counted_retrace_and_padding_is_one_shape(aot_eager, monkeypatch):
    """torch.compile on the LSTM (only its loss is compiled: Dynamo does not trace nn.LSTM):
    the calling frame's guards saw x's shape, so a batch of a new length retraces it, and
    Prepared.traces counts that; padded, the epoch has one shape, so nothing retraces, even
    at a recompile limit of 1 (where a second length makes Dynamo fall back to eager, which
    the choices then record)."""
    true_length = torch_backend.prepare(tiny("lstm", "backward_varlen"), "compile", "cpu")
    true_length.run(0, time.perf_counter)
    first = true_length.traces()
    assert first >= 1
    true_length.run(1, time.perf_counter)
    assert true_length.traces() == first + 1
    assert "compile_fallback" not in true_length.choices
    assert "dynamic=None" in true_length.choices["shape_policy"]

    from torch._dynamo import config

    monkeypatch.setattr(config, "recompile_limit", 1)
    padded = torch_backend.prepare(tiny("lstm", "backward_padded"), "compile", "cpu")
    padded.run(0, time.perf_counter)
    first = padded.traces()
    padded.run(1, time.perf_counter)
    assert padded.traces() == first >= 1
    assert "compile_fallback" not in padded.choices
    assert padded.choices["sequence_shapes"].startswith("1 distinct")
    # The same limit on the true lengths: the second length falls back, recorded.
    fallback = torch_backend.prepare(tiny("lstm", "backward_varlen"), "compile", "cpu")
    fallback.run(0, time.perf_counter)
    first = fallback.traces()
    fallback.run(1, time.perf_counter)
    assert fallback.traces() == first
    assert "recompile_limit hit at iteration 1" in fallback.choices["compile_fallback"]
    loss, arrays = fallback.derivatives(0)
    ref_loss, ref_arrays = reference.reference_derivatives(tiny("lstm", "backward_varlen"))
    assert reference.relative_error(arrays, ref_arrays) < TOLERANCES["lstm"]


def test_dynamic_shapes_still_retrace_the_rnn_cells_loop_per_length(aot_eager):
    """torch.compile(dynamic=True) on the RNN cell: its Python loop over range(T) makes
    Dynamo guard on T, so each new length is traced anew all the same, and counted (a seed
    whose first lengths are short: 4 and 7 steps, unrolled)."""
    workload = tiny("rnn_cell", "backward_varlen_dynamic", seed=110)
    assert [workload.sequence_length(i) for i in range(2)] == [4, 7]
    prepared = torch_backend.prepare(workload, "compile", "cpu")
    assert "dynamic=True" in prepared.choices["model"]
    assert "dynamic=True" in prepared.choices["shape_policy"]
    assert prepared.traces() == 0 and prepared.compile_s == 0
    counts = []
    for i in range(3):  # the third iteration is the first batch again: no retrace
        assert set(prepared.run(i % 2, time.perf_counter)) == {"forward_s", "backward_s",
                                                                "step_s"}
        counts.append(prepared.traces())
    assert counts == [1, 2, 2]
    loss, arrays = prepared.derivatives(0)
    ref_loss, ref_arrays = reference.reference_derivatives(workload)
    assert reference.relative_error(arrays, ref_arrays) < TOLERANCES["rnn_cell"]
    assert loss == pytest.approx(ref_loss, rel=1e-5)


def test_a_model_without_a_sequence_is_unsupported():
    for task in spec.SEQUENCE_TASKS:
        assert "reads no sequence" in CAPABILITIES.refusal("eager", "mlp512", task, "cpu")


def test_dynamic_shapes_in_eager_are_unsupported_with_the_reason():
    reason = CAPABILITIES.refusal("eager", "lstm", "backward_varlen_dynamic", "cpu")
    assert "define-by-run runs every batch at its own length" in reason


def test_the_fixed_shape_tasks_record_no_traces():
    prepared = torch_backend.prepare(tiny("rnn_cell", "backward"), "eager", "cpu")
    assert prepared.traces is None
    assert "sequence_strategy" not in prepared.choices
