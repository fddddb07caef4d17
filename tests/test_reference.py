"""adbench.reference: the float64 ground truth, checked by central finite differences."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from adbench import derivatives, reference, spec

NUMPY_MODELS = [m for m, info in spec.MODELS.items() if info.reference == "numpy"]
EPS = 1e-6


def workload(model, task):
    return spec.Workload(model=model, seed=3, task=task, n_samples=8, batch_size=4, warmup=0,
                         iterations=1)


def loss_at(w, params, batch):
    """The model's loss in float64, written independently of reference.py's backward pass."""
    m = w.spec
    if m.family == "rnn_cell":
        return np.tanh(batch["h0"] @ params[0].T + batch["x"] @ params[1].T).sum()
    out = forward(params, batch["x"])
    if m.loss == "l2":
        return np.linalg.norm(batch["y"] - out)
    logp = out - out.max(1, keepdims=True)
    logp = logp - np.log(np.exp(logp).sum(1, keepdims=True))
    return -logp[np.arange(len(out)), batch["y"]].mean()


def forward(params, x):
    for i in range(0, len(params), 2):
        x = x @ params[i] + params[i + 1]
        if i < len(params) - 2:
            x = np.maximum(x, 0.0)
    return x


def float64_inputs(w):
    batch = {k: v.astype(np.float64) if v.dtype == np.float32 else v
             for k, v in spec.make_batches(w)[0].items()}
    return [p.astype(np.float64) for p in spec.make_params(w)], batch


@pytest.mark.parametrize("model", NUMPY_MODELS)
def test_gradients_match_central_finite_differences(model):
    w = workload(model, "backward")
    loss, grads = reference.reference_derivatives(w)
    params, batch = float64_inputs(w)
    assert loss == pytest.approx(loss_at(w, params, batch), rel=1e-12)
    rng = np.random.default_rng(0)
    for t, g in enumerate(grads):
        assert g.shape == params[t].shape
        for idx in [np.unravel_index(np.argmax(np.abs(g)), g.shape),
                    tuple(int(rng.integers(n)) for n in g.shape)]:
            plus, minus = [p.copy() for p in params], [p.copy() for p in params]
            plus[t][idx] += EPS
            minus[t][idx] -= EPS
            numeric = (loss_at(w, plus, batch) - loss_at(w, minus, batch)) / (2 * EPS)
            assert g[idx] == pytest.approx(numeric, rel=1e-5, abs=1e-8), (t, idx)


@pytest.mark.parametrize("model", NUMPY_MODELS)
def test_jacobian_matches_central_finite_differences(model):
    w = workload(model, "jacobian_rows")
    _, (jac,) = reference.reference_derivatives(w)
    params, batch = float64_inputs(w)
    assert jac.shape == w.spec.jacobian_shape(w.jacobian_rows)

    def output(x):
        if w.spec.family == "rnn_cell":
            return np.tanh(batch["h0"] @ params[0].T + x @ params[1].T).reshape(-1)
        return forward(params, x).reshape(-1)

    x = batch["x"]
    for col in range(0, x.shape[1], max(1, x.shape[1] // 5)):
        plus, minus = x.copy(), x.copy()
        plus[0, col] += EPS
        minus[0, col] -= EPS
        numeric = (output(plus) - output(minus))[: w.jacobian_rows] / (2 * EPS)
        np.testing.assert_allclose(jac[:, col], numeric, rtol=1e-5, atol=1e-8)


def test_loss_jacobian_shares_the_backward_reference():
    a = reference.reference_derivatives(workload("mlp512", "backward"))
    b = reference.reference_derivatives(workload("mlp512", "loss_jacobian"))
    assert a[0] == b[0] and all(np.array_equal(x, y) for x, y in zip(a[1], b[1]))


def test_the_study_protocol_shares_the_backward_reference():
    """Its derivative is checked one step at a time (the backends clear the accumulated
    .grad outside the clock for the check): one backward pass's gradients."""
    a = reference.reference_derivatives(workload("mlp512", "backward"))
    b = reference.reference_derivatives(workload("mlp512", spec.STUDY_PROTOCOL_TASK))
    assert a[0] == b[0] and all(np.array_equal(x, y) for x, y in zip(a[1], b[1]))


def test_relative_error_floors_tiny_arrays_and_rejects_mismatches():
    ref = [np.ones(100), np.zeros(3)]  # a zero gradient (attention's key bias) next to others
    assert reference.relative_error([np.ones(100), np.full(3, 1e-9)], ref) < 1e-7
    assert reference.relative_error([np.ones(100) * 1.01, np.zeros(3)], ref) == pytest.approx(
        0.01)
    assert reference.relative_error([np.ones(100)], ref) == float("inf")
    assert reference.relative_error([np.ones(99), np.zeros(3)], ref) == float("inf")


def test_derivative_files_round_trip(tmp_path):
    path = str(tmp_path / "d" / "x.npz")
    derivatives.write_derivatives(path, "ok", 1.5, [np.arange(3.0), np.eye(2)])
    status, loss, arrays = derivatives.read_derivatives(path)
    assert (status, loss) == ("ok", 1.5)
    assert [a.shape for a in arrays] == [(3,), (2, 2)]
    derivatives.write_derivatives(path, "failed", None, [])
    assert derivatives.read_derivatives(path)[0] == "failed"
    assert np.isnan(derivatives.read_derivatives(path)[1])


def test_reference_ignores_the_cells_iteration_counts():
    w = workload("fc_xent", "backward")
    long = dataclasses.replace(w, warmup=10, iterations=500)
    a, b = reference.reference_derivatives(w), reference.reference_derivatives(long)
    assert all(np.array_equal(x, y) for x, y in zip(a[1], b[1]))


@pytest.mark.parametrize("model", ["mlp294x3", "rnn_cell"])
def test_a_frozen_tasks_reference_is_the_whole_gradient_restricted_to_the_trained(model):
    """Computed whole (the all-trainable path), then restricted: never by the frozen path."""
    whole_loss, whole = reference.reference_derivatives(workload(model, "backward"))
    loss, arrays = reference.reference_derivatives(workload(model, "backward_frozen"))
    trained = spec.MODELS[model].trained("backward_frozen")
    assert 0 < len(arrays) == len(trained) < len(whole)
    assert loss == whole_loss
    assert all(np.array_equal(a, whole[i]) for a, i in zip(arrays, trained))
    assert [a.shape for a in arrays] == [spec.MODELS[model].params[i].shape for i in trained]


def test_make_reference_writes_a_frozen_tasks_reference(tmp_path):
    import subprocess
    import sys

    script = spec.__file__.replace("adbench/spec.py", "make_reference.py")
    out = tmp_path / "ref.npz"
    done = subprocess.run([sys.executable, script, "--model", "rnn_cell", "--derivative",
                           "trainable_gradients", "--seed", "3", "--batch-size", "4",
                           "--n-samples", "8", "--out", str(out)], capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr
    _, _, arrays = derivatives.read_derivatives(str(out))
    _, expected = reference.reference_derivatives(workload("rnn_cell", "backward_frozen"))
    assert len(arrays) == 1 and np.array_equal(arrays[0], expected[0])


# ------------------------------------------------------------------ the derivative kinds
def test_every_task_names_a_declared_derivative_kind_and_its_reference_task():
    for task, info in spec.TASKS.items():
        assert info.derivative in derivatives.KINDS, task
        assert spec.TASKS[spec.REFERENCE_TASK[info.derivative]].derivative == info.derivative


def test_a_kind_shapes_what_a_backend_returns():
    """derivatives.checked, the one shape of Prepared.derivatives: the loss and one array
    per parameter, nan and the Jacobian, the loss alone as one array of the cell's dtype."""
    grads = [np.ones((2, 3), np.float32), np.zeros(3, np.float32)]
    loss, arrays = derivatives.checked("gradients", np.float32(2.5), grads, "float32")
    assert loss == 2.5 and [a.shape for a in arrays] == [(2, 3), (3,)]
    loss, arrays = derivatives.checked("jacobian", None, [grads[0]], "float32")
    assert np.isnan(loss) and arrays[0] is grads[0]
    loss, arrays = derivatives.checked("loss", 2.5, [], "float32")
    assert loss == 2.5 and arrays[0].dtype == np.float32 and arrays[0].tolist() == [2.5]
    # a backend's conversion to the spec's layouts, told what the arrays are taken w.r.t.
    seen = []
    derivatives.checked("trainable_gradients", 1.0, grads, "float32",
                        lambda wrt, a: seen.append(wrt) or a)
    assert seen == ["parameters"]


@pytest.mark.parametrize("call", [
    lambda: derivatives.kind("hessian_vector"),
    lambda: derivatives.checked("hessian_vector", 1.0, [], "float32"),
])
def test_an_undeclared_kind_is_an_error_naming_it(call):
    with pytest.raises(ValueError, match="'hessian_vector'"):
        call()


def test_a_task_of_an_undeclared_kind_has_no_reference(monkeypatch):
    monkeypatch.setitem(spec.TASKS, "toy_task", spec.TaskInfo("hessian_vector", separable=True))
    with pytest.raises(ValueError, match="'hessian_vector'"):
        reference.reference_derivatives(workload("mlp512", "toy_task"))


def test_a_numpy_reference_computes_only_the_kinds_it_declares(monkeypatch):
    """A kind with a reference task but no numpy formula is refused, not answered with the
    gradients."""
    monkeypatch.setitem(spec.TASKS, "toy_task", spec.TaskInfo("hessian_vector", separable=True))
    monkeypatch.setitem(spec.REFERENCE_TASK, "hessian_vector", "toy_task")
    monkeypatch.setitem(derivatives.KINDS, "hessian_vector", derivatives.Kind("parameters"))
    with pytest.raises(ValueError, match="no numpy reference of derivative kind"):
        reference.reference_derivatives(workload("mlp512", "toy_task"))
