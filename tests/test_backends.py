"""The torch and TensorFlow backends: gradients against the float64 reference, timed quantities."""

from __future__ import annotations

import time

import numpy as np
import pytest

from adbench import backends, spec
from adbench.backends import UnsupportedCell

WORKLOAD = spec.Workload(model="mlp512", seed=3, n_samples=512, batch_size=128, warmup=1,
                         iterations=2)
CASES = [("torch", "eager"), ("torch", "script"), ("tensorflow", "eager"),
         ("tensorflow", "graph")]


@pytest.fixture(scope="module", params=sorted(spec.FRAMEWORKS))
def backend(request):
    pytest.importorskip(request.param)  # the framework itself; the backend must then import
    module = backends.load(request.param)
    try:  # inter-op threads can be set once per process, before any parallel work
        module.configure_threads(1)
    except RuntimeError:
        pass
    return request.param, module


@pytest.fixture(scope="module")
def reference():
    x, y = spec.make_data(WORKLOAD)
    lo, hi = WORKLOAD.batch_bounds(0)
    return spec.reference_gradients(WORKLOAD, x[lo:hi], y[lo:hi])


def test_cases_cover_every_framework_and_mode():
    assert sorted(CASES) == sorted((f, m) for f, info in spec.FRAMEWORKS.items()
                                   for m in info.modes)


def modes_of(framework):
    return [m for f, m in CASES if f == framework]


def test_load_imports_the_framework_backend(backend):
    framework, module = backend
    assert module.__name__ == f"adbench.backends.{spec.FRAMEWORKS[framework].backend}"
    assert framework in module.versions() and "numpy" in module.versions()
    assert module.device_name("cpu") == "cpu"


def test_gradients_match_the_float64_reference(backend, reference):
    framework, module = backend
    ref_loss, ref_grads = reference
    for mode in modes_of(framework):
        loss, grads = module.prepare(WORKLOAD, mode, "cpu").gradients(0)
        assert loss == pytest.approx(ref_loss, rel=1e-5), mode
        assert len(grads) == len(ref_grads)
        for i, (g, r) in enumerate(zip(grads, ref_grads)):
            assert g.shape == r.shape and g.dtype == np.float32, (mode, i)
            error = np.linalg.norm(g.astype(np.float64) - r) / np.linalg.norm(r)
            assert error < 1e-5, (mode, i, error)


def test_gradients_follow_the_batch(backend):
    """Iteration 1 uses the second batch: its gradients differ from iteration 0's."""
    framework, module = backend
    prepared = module.prepare(WORKLOAD, modes_of(framework)[0], "cpu")
    _, first = prepared.gradients(0)
    _, second = prepared.gradients(1)
    assert not np.allclose(first[0], second[0])
    _, again = prepared.gradients(0)  # no state carried over (e.g. accumulated .grad)
    assert all(np.allclose(a, b, rtol=1e-6) for a, b in zip(first, again))


def test_run_returns_exactly_the_modes_timed_quantities(backend):
    framework, module = backend
    for mode in modes_of(framework):
        prepared = module.prepare(WORKLOAD, mode, "cpu")
        expected = spec.FRAMEWORKS[framework].modes[mode].timed_quantities
        for i in range(WORKLOAD.n_batches + 1):  # the whole epoch and the wrap-around
            sample = prepared.run(i, time.perf_counter)
            assert tuple(sorted(sample)) == tuple(sorted(expected)), mode
            assert all(v > 0 for v in sample.values()), (mode, sample)
        if "forward_s" in sample:
            assert sample["step_s"] == pytest.approx(sample["forward_s"] + sample["backward_s"])


def test_unknown_mode_is_unsupported(backend):
    framework, module = backend
    with pytest.raises(UnsupportedCell, match="no mode"):
        module.prepare(WORKLOAD, "nonsense", "cpu")


def test_cuda_without_a_gpu_is_unsupported(backend):
    framework, module = backend
    if framework == "torch":
        gpu = module.torch.cuda.is_available()
    else:
        gpu = bool(module.tf.config.list_physical_devices("GPU"))
    if gpu:
        pytest.skip("a GPU is visible: the cuda cell is supported here")
    with pytest.raises(UnsupportedCell, match="cuda"):
        module.prepare(WORKLOAD, modes_of(framework)[0], "cuda")
