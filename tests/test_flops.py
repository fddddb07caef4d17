"""The analytic FLOP counts (adbench.flops) against torch.utils.flop_counter.FlopCounterMode
on the PyTorch backend's own models (torch_backend.models.build), forward and reverse, as the
cells run them: every model, the frozen tasks with their frozen part not trainable (the
backend's own freeze), the variable-length tasks at a batch's steps.

Tolerance: none. Both count 2 FLOPs per multiply-add of the matrix products and
convolutions and nothing else, so the integers must be equal.  FlopCounterMode counts the
products it has a formula for: the LSTM and attention are counted with oneDNN off (nn.LSTM
then runs its steps as matrix products, not one fused aten.mkldnn_rnn_layer) and with
scaled-dot-product attention's math kernel (CPU flash attention's fused kernel has no
formula; it computes the same QK^T and AV products).
"""

from __future__ import annotations

import contextlib
import functools

import pytest

from adbench import flops, spec

torch = pytest.importorskip("torch")
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from adbench.backends.torch_backend import models as tb  # noqa: E402
from adbench.backends.torch_backend import tasks as tt  # noqa: E402

pytestmark = pytest.mark.backend  # imports a framework or runs a timing process

BATCH = 3  # small and odd: a count proportional to the batch is not an accident
FROZEN = [m for m in spec.MODELS if spec.MODELS[m].frozen]
SEQUENCE = [m for m in spec.MODELS if spec.MODELS[m].sequence_features]


@contextlib.contextmanager
def products_counted():
    """oneDNN off and attention's math kernel: every product is one FlopCounterMode sees."""
    with torch.backends.mkldnn.flags(enabled=False), sdpa_kernel(SDPBackend.MATH):
        yield


def torch_model(model: str, task: str = "backward"):
    """The backend's WithLoss module (its frozen part frozen as the backend freezes it) and
    a batch of BATCH examples (float32, CPU)."""
    workload = spec.Workload(model, 0, task=task, batch_size=BATCH, n_samples=BATCH,
                             warmup=0, iterations=1)
    net, binds = tb.build(workload.spec, spec.make_params(workload), torch.device("cpu"),
                          torch.float32)
    tt.freeze(binds, workload)
    data = spec.make_batches(workload)[0]
    x = torch.from_numpy(data["x"])
    aux = torch.from_numpy(data["h0" if "h0" in data else "y"])
    return net, x, aux


@functools.cache  # built once per model: ResNet50's weights take seconds to draw
def torch_backward_model(model: str):
    return torch_model(model)


def flop_count(fn):
    with products_counted(), FlopCounterMode(display=False) as counter:
        result = fn()
    return counter.get_total_flops(), result


@pytest.mark.parametrize("model", list(spec.MODELS))
def test_forward_and_backward_flops_equal_flop_counter_modes(model):
    net, x, aux = torch_backward_model(model)
    forward, loss = flop_count(lambda: net(x, aux))
    backward, _ = flop_count(loss.backward)
    counts = flops.task_flops(model, "backward", BATCH, 1)
    assert (forward, backward) == (counts["forward_s"], counts["backward_s"])


@pytest.mark.parametrize("model", FROZEN)
def test_a_frozen_tasks_reverse_pass_leaves_its_frozen_part_out(model):
    """No weight gradient of the frozen part, no input gradient below the first trained
    product: autograd records nothing there."""
    net, x, aux = torch_model(model, "backward_frozen")
    forward, loss = flop_count(lambda: net(x, aux))
    backward, _ = flop_count(loss.backward)
    counts = flops.task_flops(model, "backward_frozen", BATCH, 1)
    assert (forward, backward) == (counts["forward_s"], counts["backward_s"])
    assert counts["backward_s"] < flops.task_flops(model, "backward", BATCH, 1)["backward_s"]


@pytest.mark.parametrize("steps", [1, 5])
@pytest.mark.parametrize("model", SEQUENCE)
def test_a_variable_length_batch_is_counted_at_its_steps(model, steps):
    """The backend's SequenceLoss on a batch of `steps` time steps (its true lengths shorter:
    the masked steps cost as much)."""
    net, _, aux = torch_backward_model(model)
    module = tb.SequenceLoss(net.model, net.loss)
    x = torch.ones(BATCH, steps, spec.MODELS[model].sequence_features)
    lengths = torch.full((BATCH,), max(1, steps - 2), dtype=torch.int64)
    forward, loss = flop_count(lambda: module(x, aux, lengths))
    backward, _ = flop_count(loss.backward)
    counts = flops.task_flops(model, "backward_varlen", BATCH, 1, steps=steps)
    assert (forward, backward) == (counts["forward_s"], counts["backward_s"])


@pytest.mark.parametrize("model", list(spec.MODELS))
def test_a_jacobian_rows_reverse_pass_equals_flop_counter_modes(model):
    """One row of the output Jacobian: torch.autograd.grad w.r.t. one example's input, as
    the backend's jacobian_rows task computes it."""
    net, x, aux = torch_backward_model(model)
    x, aux = x[:1].clone().requires_grad_(True), aux[:1]
    with products_counted():
        out = net.model(x, aux).reshape(-1)
    cotangent = torch.zeros_like(out)
    cotangent[0] = 1
    row, _ = flop_count(lambda: torch.autograd.grad(out, x, cotangent))
    assert row == flops.input_gradient_flops(model)


def test_every_model_has_a_count_and_every_weight_names_a_spec_parameter():
    kernels = {p.kernel for m in spec.MODELS for p in flops.products(m, 1)}
    assert kernels <= {"matmul", "conv", "lstm", "attention"}
    assert all(flops.forward_flops(m, 1) > 0 for m in spec.MODELS)
    for model, info in spec.MODELS.items():
        names = [p.name for p in info.params]
        for product in flops.products(model, 1):
            assert product.param is None or any(n.startswith(product.param) for n in names), \
                (model, product)


def test_hand_counts():
    """A few counts by hand: the study's 512-MLP, the slides' RNN cell, their frozen parts."""
    assert flops.forward_flops("mlp512", 128) == 2 * 128 * (784 * 512 + 512 * 10)
    # weight gradients of both layers, the input gradient of the second only
    assert flops.backward_flops("mlp512", 128) == 2 * 128 * (784 * 512 + 2 * 512 * 10)
    # fc0 frozen: fc1's weight gradient only (its input is below nothing trained)
    assert flops.task_flops("mlp512", "backward_frozen", 128, 10)["backward_s"] == \
        2 * 128 * 512 * 10
    assert flops.forward_flops("rnn_cell", 1) == 2 * (20 * 20 + 10 * 20)
    assert flops.input_gradient_flops("rnn_cell") == 2 * 10 * 20  # W_x only: h0 is data
    # W_h frozen: W_x's weight gradient only
    assert flops.task_flops("rnn_cell", "backward_frozen", 1, 1)["backward_s"] == 2 * 10 * 20


def test_task_flops_keys_and_jacobian_rows():
    step = flops.task_flops("mlp512", "backward", 128, 10)
    assert step["step_s"] == step["forward_s"] + step["backward_s"]
    rows = flops.task_flops("mlp512", "jacobian_rows", 128, 10)
    assert rows["forward_s"] == flops.forward_flops("mlp512", 1)
    assert rows["backward_s"] == 10 * flops.input_gradient_flops("mlp512")
    assert flops.task_flops("mlp512", "jacobian_vectorized", 128, 10) == rows
    assert flops.task_flops("mlp512", "loss_jacobian", 128, 10) == step
    # the study's protocol computes a backward pass per batch: priced as one
    assert flops.task_flops("mlp512", spec.STUDY_PROTOCOL_TASK, 128, 10) == step
    # more rows asked than outputs: the model's outputs
    assert flops.task_flops("mlp512", "jacobian_rows", 1, 99) == rows


def test_a_variable_length_tasks_count_is_at_the_steps_its_strategy_runs():
    """Per batch its padded steps (spec.padded_length), a cell's the mean over its measured
    batches; a mean's count is the mean of the batches' (the count is affine in steps)."""
    def workload(task):
        return spec.Workload("lstm", 3, task=task, batch_size=16, n_samples=160, warmup=2,
                             iterations=20)

    true = [workload("backward_varlen").sequence_length(i) for i in range(2, 22)]
    assert flops.steps_as_run(workload("backward_varlen")) == pytest.approx(sum(true) / 20)
    assert flops.steps_as_run(workload("backward_padded")) == spec.SEQUENCE_LENGTHS[1]
    bucketed = flops.steps_as_run(workload("backward_bucketed"))
    assert sum(true) / 20 <= bucketed <= spec.SEQUENCE_LENGTHS[1]
    assert flops.steps_as_run(workload("backward")) is None
    per_batch = [flops.task_flops("lstm", "backward_varlen", 16, 1, steps=n)["step_s"]
                 for n in true]
    mean = flops.task_flops("lstm", "backward_varlen", 16, 1, steps=sum(true) / 20)
    assert mean["step_s"] == pytest.approx(sum(per_batch) / 20)
    with pytest.raises(ValueError, match="varying length"):
        flops.task_flops("lstm", "backward_padded", 16, 1)


def test_reverse_mode_costs_at_most_three_forwards_in_flops():
    """Products with weights: weight and input gradients cost one forward each."""
    for model in spec.MODELS:
        assert 1 < flops.reverse_over_forward(model, 8) <= 3


@pytest.mark.parametrize("kind", ["hessian_vector", "gradient"])
def test_a_derivative_kind_with_no_count_is_refused_by_name(monkeypatch, kind):
    """A task of a kind task_flops has no count for (a new kind, or a typo) is a ValueError
    naming the kind, never priced as one backward pass."""
    monkeypatch.setitem(spec.TASKS, "toy_task", spec.TaskInfo(kind, separable=True))
    with pytest.raises(ValueError, match=repr(kind)):
        flops.task_flops("mlp512", "toy_task", BATCH, 10)
