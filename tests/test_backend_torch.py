"""What the PyTorch backend does differently on CUDA, learnt from the H100 run in
example-results/cuda-h100 and checked here on the CPU: LSTM cells there failed in cuDNN's
RNN backward (eval mode) and in jacrev over cuDNN's LSTM kernel.  And the study's protocol
(spec.STUDY_PROTOCOL_TASK): its cells on the study's MLPs against the float64 reference, the
region its clock reads around, its gradients accumulating as in the study's code."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

from adbench import backends, reference, spec
from adbench.backends.torch_backend import CAPABILITIES, models, tasks
from protocol_recording import harness_clock, record_protocol

pytestmark = pytest.mark.backend  # imports a framework


def lstm_net():
    model = spec.MODELS["lstm"]
    workload = spec.Workload(model="lstm", seed=0, task="jacobian_rows")
    net, _ = models.build(model, spec.make_params(workload), torch.device("cpu"), torch.float64)
    x = torch.from_numpy(spec.make_batches(workload)[0]["x"]).double().requires_grad_()
    return net, x


def test_the_rnn_layers_cudnn_needs_in_train_mode_compute_what_eval_mode_computes():
    """On CUDA the LSTM layer is put in train mode (cuDNN's RNN backward refuses eval mode):
    without dropout its output and input gradient are the eval-mode ones; on the CPU it stays
    in eval mode, and only the CUDA cells' provenance says so."""
    net, x = lstm_net()
    rnns = models._cudnn_rnns(net)
    assert [type(m) for m in rnns] == [torch.nn.LSTM] and not rnns[0].training
    results = {}
    for training in (False, True):
        rnns[0].train(training)
        out = net.model(x, None)
        (grad,) = torch.autograd.grad(out.sum(), x)
        results[training] = (out.detach(), grad)
    assert torch.equal(results[False][0], results[True][0])
    assert torch.equal(results[False][1], results[True][1])
    assert "train mode" in models.inference_mode(net, "cuda")
    assert "train mode" not in models.inference_mode(net, "cpu")


@pytest.mark.parametrize("mode", list(spec.FRAMEWORKS["torch"].modes))
def test_jacrev_over_cudnns_lstm_is_refused_with_its_reason(mode):
    """The error jacrev raised over cuDNN's LSTM on the H100 makes the cell unsupported, with
    PyTorch's issue named (as measure.py classifies a cell's exception); the same error from
    another model, or on the CPU, still fails the cell."""
    error = NotImplementedError("Cannot access storage of TensorWrapper")
    lstm = spec.Workload(model="lstm", seed=0, task="jacobian_vectorized")
    refused = backends.refused(CAPABILITIES, mode, lstm, "cuda", error)
    assert refused is not None
    assert re.fullmatch(r"torch.func.jacrev \(vmap\) cannot transform cuDNN's LSTM kernel on "
                        r"CUDA \(PyTorch issue #110422\) \(NotImplementedError: Cannot access "
                        r"storage of TensorWrapper\)", str(refused)), str(refused)
    fcn = spec.Workload(model="fcn", seed=0, task="jacobian_vectorized")
    assert backends.refused(CAPABILITIES, mode, fcn, "cuda", error) is None
    assert backends.refused(CAPABILITIES, mode, lstm, "cpu", error) is None


def test_a_compile_cell_that_compiles_no_graph_fails_unless_declared():
    """torch.compile's silent fallback to eager is stopped at the first call (NoCompiledGraph,
    outside the clock); only the LSTM's Jacobians are declared to meet it."""
    from torch._dynamo.utils import counters

    workload = spec.Workload(model="mlp512", seed=0, task="backward", n_samples=8,
                             batch_size=4, warmup=0, iterations=1)
    prepared = backends.Prepared(run=lambda i, clock: {"step_s": 1.0},
                                 derivatives=lambda i: (0.0, []))
    before = counters["aot_autograd"]["total"]
    tasks._require_a_graph(prepared, workload)  # a "step" that compiles nothing
    with pytest.raises(tasks.NoCompiledGraph, match="compiled no graph") as caught:
        prepared.run(0, None)
    assert counters["aot_autograd"]["total"] == before
    assert backends.refused(CAPABILITIES, "compile", workload, "cpu", caught.value) is None
    lstm = spec.Workload(model="lstm", seed=0, task="jacobian_rows")
    refused = backends.refused(CAPABILITIES, "compile", lstm, "cpu", caught.value)
    assert str(refused).startswith("torch.compile compiles no graph of the LSTM alone")


def test_the_compile_mode_names_the_kernels_inductor_generates_on_each_device():
    assert set(tasks.INDUCTOR_KERNELS) == set(spec.DEVICES)
    assert "Triton" in tasks.MODE_CHOICES["compile"].format(
        kernels=tasks.INDUCTOR_KERNELS["cuda"])
    workload = spec.Workload(model="dense", seed=0, task="backward", n_samples=8,
                             batch_size=4, warmup=0, iterations=1)
    choices = tasks.prepare(workload, "compile", "cpu").choices
    assert "Inductor C++/OpenMP kernels" in choices["model"]


def test_inductors_precompiled_headers_live_in_the_temp_directory_a_process_is_given(tmp_path):
    """run_cell.py makes each cell's headers cold by giving it its own TMPDIR: that works only
    while torch puts them there (not under TORCHINDUCTOR_CACHE_DIR)."""
    code = "from torch._inductor import codecache; print(codecache._HEADER_DIR)"
    env = {**os.environ, "TMPDIR": str(tmp_path), "TORCHINDUCTOR_CACHE_DIR": "/nowhere"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().startswith(str(tmp_path) + os.sep)


def test_a_compiled_cell_records_whether_the_precompiled_headers_were_there(tmp_path,
                                                                             monkeypatch):
    from torch._inductor import codecache, config

    monkeypatch.setattr(codecache, "_HEADER_DIR", str(tmp_path / "headers"))
    assert tasks._precompiled_headers().startswith("cold:")
    (tmp_path / "headers").mkdir()
    (tmp_path / "headers" / "locks").mkdir()
    assert tasks._precompiled_headers().startswith("cold:")  # a directory is not a header
    (tmp_path / "headers" / "c123.h.gch").write_bytes(b"")
    assert tasks._precompiled_headers().startswith("warm:")
    monkeypatch.setattr(config, "cpp_cache_precompile_headers", False)
    assert tasks._precompiled_headers().startswith("off")


# ------------------------------------------------------------------ the study's protocol
STUDY = spec.STUDY_PROTOCOL_TASK
STUDY_MODES = ("eager", "script")  # the study's: eager, and its `script` of the model


def study_workload(model: str, seed: int = 3) -> spec.Workload:
    """An epoch of three batches, the last one short."""
    return spec.Workload(model=model, seed=seed, task=STUDY, warmup=0, iterations=4,
                         n_samples=10, batch_size=4)


@pytest.mark.parametrize("mode", STUDY_MODES)
@pytest.mark.parametrize("model", spec.MLPS)
def test_the_study_protocol_matches_the_reference_on_the_studys_mlps(model, mode):
    """A cell of the study's MLPs, as measure.py runs it: an epoch and its wrap-around
    with the timed quantities of a separable task, then the check's one step against
    backward's float64 reference (the accumulated .grad never reaches the check)."""
    workload = study_workload(model)
    prepared = backends.load("torch").prepare(workload, mode, "cpu")
    for i in range(workload.n_batches + 1):
        sample = prepared.run(i, time.perf_counter)
        assert sorted(sample) == sorted(spec.timed_quantities("torch", mode, STUDY))
        assert all(v > 0 for v in sample.values())
    loss, arrays = prepared.derivatives(0)
    ref_loss, refs = reference.reference_derivatives(workload)
    assert loss == pytest.approx(ref_loss, rel=1e-5)
    assert reference.relative_error(arrays, refs) < 1e-5
    assert prepared.choices["protocol"].startswith("the study's (000 Fig. 1)")


@pytest.mark.parametrize("mode", STUDY_MODES)
def test_the_study_protocol_clocks_the_backward_line_with_the_studys_clock(mode,
                                                                          monkeypatch):
    """In both of the study's modes its clock (STUDY_CLOCK, never the harness's) is read
    before the batch is sliced from the epoch, after the forward lines, and after
    loss.backward(): backward_s is the backward line alone, as the study timed it."""
    events = record_protocol(monkeypatch, tasks, torch.Tensor, "backward")
    workload = study_workload("mlp512")
    prepared = tasks.prepare(workload, mode, "cpu")
    for i in range(workload.n_batches + 1):
        events.clear()
        sample = prepared.run(i, harness_clock)
        assert events == ["clock", "slice", "clock", "backward", "clock"], (i, events)
        assert sample["step_s"] == pytest.approx(sample["forward_s"] + sample["backward_s"])


def test_the_study_protocol_accumulates_the_gradients_as_its_code_does():
    """No .grad cleared between the timed steps (the study's code has no zero_grad): after
    two steps each parameter's .grad is the sum of the two batches' gradients; the check's
    step leaves no .grad behind, so the timed epoch starts as the study's did."""
    workload = study_workload("mlp294x3")
    dev = torch.device("cpu")
    net, binds = models.build(workload.spec, spec.make_params(workload), dev, torch.float32)
    batches = [tuple(models.as_tensor(b[k], dev, torch.float32) for k in ("x", "y"))
               for b in spec.make_batches(workload)]
    prepared = tasks.study_task(net, binds, batches, workload, lambda: None, "eager")
    params = [p for p, _, _ in binds]
    _, first = prepared.derivatives(0)
    _, second = prepared.derivatives(1)
    assert all(p.grad is None for p in params)
    prepared.run(0, None)
    prepared.run(1, None)
    accumulated = models.to_canonical(binds, [p.grad for p in params])
    for total, a, b in zip(accumulated, first, second, strict=True):
        np.testing.assert_allclose(total, a + b, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("mode", ["trace", "compile"])
def test_the_study_protocol_has_no_trace_or_compile_mode(mode):
    why = CAPABILITIES.refusal(mode, "mlp512", STUDY, "cpu")
    assert why and "no trace or torch.compile mode" in why
    assert CAPABILITIES.refusal(mode, "mlp512", "backward", "cpu") is None
