"""Every backend, every model, task and mode on a tiny workload: derivatives against the
float64 reference, the timed quantities of the spec, unsupported cells with a reason."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import numpy as np
import pytest
import yaml

from adbench import backends, reference, spec
from adbench.backends import UnsupportedCell

from conftest import REPO

# Tolerances of a float32 cell against the float64 reference (relative L2, largest array):
# the pipeline's own defaults, with their reasons, from the config schema.
CHECK = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())[
    "properties"]["gradient_check"]["properties"]
TOLERANCES = {m: CHECK["models"]["default"].get(m, CHECK["tolerance"]["default"])
              for m in spec.MODELS}

# The cells a backend refuses, (framework, mode, model, task) with "*" for any, and a phrase
# of the reason it must give. Any other refusal fails: nothing is dropped unnoticed.
KNOWN_UNSUPPORTED = {
    # torch.func's stateless API does not accept a TorchScript module.
    ("torch", "script", "*", "loss_jacobian"): "stateless API",
    # torch.func.jacrev cannot transform TorchScript's optimised graphs of some models.
    ("torch", "script", "*", "jacobian_vectorized"): "jacrev",
    # TF 2.21's oneDNN matmul aborts the process on a shape pfor makes of MultiHeadAttention.
    ("tensorflow", "*", "attention", "jacobian_vectorized"): "oneDNN",
}


def known_reason(framework, mode, model, task):
    for key, phrase in KNOWN_UNSUPPORTED.items():
        if all(k in ("*", v) for k, v in zip(key, (framework, mode, model, task))):
            return phrase
    return None


def tiny(model: str, task: str, seed: int = 3) -> spec.Workload:
    """A few small batches; ResNet50 with two images and two Jacobian rows."""
    m = spec.MODELS[model]
    return spec.Workload(model=model, seed=seed, task=task, warmup=0, iterations=2,
                         n_samples=min(m.n_samples, 8), batch_size=min(m.batch_size, 4),
                         jacobian_rows=2 if model == "resnet50" else None)


@pytest.fixture(scope="module", params=sorted(spec.FRAMEWORKS))
def backend(request):
    pytest.importorskip(request.param)  # the framework itself; the backend must then import
    module = backends.load(request.param)
    try:  # inter-op threads can be set once per process, before any parallel work
        module.configure_threads(1)
    except RuntimeError:
        pass
    return request.param, module


def test_load_imports_the_framework_backend(backend):
    framework, module = backend
    assert module.__name__ == f"adbench.backends.{spec.FRAMEWORKS[framework].backend}"
    assert framework in module.versions() and "numpy" in module.versions()
    assert module.device_name("cpu") == "cpu"


@pytest.mark.parametrize("task", sorted(spec.TASKS))
@pytest.mark.parametrize("model", list(spec.MODELS))
def test_derivatives_match_the_float64_reference(backend, model, task):
    framework, module = backend
    workload = tiny(model, task)
    ref_loss, ref_arrays = reference.reference_derivatives(workload)
    for mode in spec.FRAMEWORKS[framework].modes:
        try:
            prepared = module.prepare(workload, mode, "cpu")
        except UnsupportedCell as why:
            phrase = known_reason(framework, mode, model, task)
            assert phrase and phrase in str(why), f"unexpected refusal: {why}"
            continue
        loss, arrays = prepared.derivatives(0)
        assert [a.shape for a in arrays] == [r.shape for r in ref_arrays], mode
        assert all(a.dtype == np.float32 for a in arrays), mode
        error = reference.relative_error(arrays, ref_arrays)
        assert error < TOLERANCES[model], (mode, error)
        if spec.TASKS[task].derivative == "gradients":  # one per spec parameter, its shape
            assert [a.shape for a in arrays] == [p.shape for p in workload.spec.params], mode
            assert loss == pytest.approx(ref_loss, rel=1e-5), mode
        else:
            assert [a.shape for a in arrays] == [workload.spec.jacobian_shape(
                workload.jacobian_rows)], mode
        sample = prepared.run(1, time.perf_counter)
        assert set(sample) == set(spec.timed_quantities(framework, mode, task)), mode
        assert all(v > 0 for v in sample.values()), (mode, sample)
        if "forward_s" in sample:
            assert sample["step_s"] == pytest.approx(sample["forward_s"] + sample["backward_s"])


def test_derivatives_follow_the_batch_and_carry_no_state(backend):
    """Iteration 1 uses the second batch; computing again gives the same (no accumulated .grad)."""
    framework, module = backend
    prepared = module.prepare(tiny("mlp512", "backward"), "eager", "cpu")
    _, first = prepared.derivatives(0)
    _, second = prepared.derivatives(1)
    assert not np.allclose(first[0], second[0])
    _, again = prepared.derivatives(0)
    assert all(np.allclose(a, b, rtol=1e-6) for a, b in zip(first, again))


def test_a_whole_epoch_wraps_around(backend):
    framework, module = backend
    workload = spec.Workload(model="mlp512", seed=0, n_samples=300, batch_size=128, warmup=0,
                             iterations=4)
    prepared = module.prepare(workload, "eager", "cpu")
    for i in range(workload.n_batches + 1):  # three batches (the last one short), then again
        assert prepared.run(i, time.perf_counter)["step_s"] > 0


def test_choices_are_recorded(backend):
    framework, module = backend
    for task in spec.TASKS:
        prepared = module.prepare(tiny("rnn_cell", task), "eager", "cpu")
        assert prepared.choices and all(isinstance(v, str) for v in prepared.choices.values())


@pytest.mark.parametrize("threads", [1, 2])
def test_threads_are_set_and_reported_in_a_fresh_process(backend, threads):
    """As a timing job does it: before the framework's first op, then read back."""
    framework, _ = backend
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]);"
            "from adbench.backends import load;"
            f"print(json.dumps(load({framework!r}).configure_threads({threads})))")
    done = subprocess.run([sys.executable, "-c", code, str(REPO / "workflow" / "scripts")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    reported = json.loads(done.stdout.strip().splitlines()[-1])
    assert reported and all(int(v) == threads for v in reported.values()), reported


def test_unknown_mode_is_unsupported(backend):
    framework, module = backend
    with pytest.raises(UnsupportedCell, match="mode"):
        module.prepare(tiny("mlp512", "backward"), "nonsense", "cpu")


def test_cuda_without_a_gpu_is_unsupported(backend):
    framework, module = backend
    if framework == "torch":
        gpu = module.torch.cuda.is_available()
    else:
        gpu = bool(module.tf.config.list_physical_devices("GPU"))
    if gpu:
        pytest.skip("a GPU is visible: the cuda cell is supported here")
    with pytest.raises(UnsupportedCell, match="cuda"):
        module.prepare(tiny("mlp512", "backward"), "eager", "cuda")


# ------------------------------------------------------------------ PyTorch specifics
@pytest.mark.parametrize("model", list(spec.MODELS))
def test_torch_models_train_exactly_the_spec_parameters(model):
    torch_backend = pytest.importorskip("adbench.backends.torch_backend")
    torch = torch_backend.torch
    workload = tiny(model, "backward")
    net, binds = torch_backend.build(workload.spec, spec.make_params(workload),
                                     torch.device("cpu"), torch.float32, "eager")
    trainable = sum(p.numel() for p in net.parameters() if p.requires_grad)
    assert trainable == workload.spec.n_parameters
    assert len(binds) == len([p for p in net.parameters() if p.requires_grad])


def test_torch_script_shares_the_loaded_parameters():
    torch_backend = pytest.importorskip("adbench.backends.torch_backend")
    torch = torch_backend.torch
    workload = tiny("cnn", "backward")
    arrays = spec.make_params(workload)
    net, binds = torch_backend.build(workload.spec, arrays, torch.device("cpu"),
                                     torch.float32, "script")
    assert isinstance(net, torch.jit.ScriptModule)
    scripted = {id(p) for p in net.parameters()}
    assert all(id(p) in scripted for p, _, _ in binds)
    assert np.array_equal(binds[0][0].detach().numpy(), arrays[0])
