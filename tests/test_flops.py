"""The analytic FLOP counts (adbench.flops) against torch.utils.flop_counter.FlopCounterMode
on the PyTorch backend's own models (torch_backend.build), forward and reverse.

Tolerance: none. Both count 2 FLOPs per multiply-add of the matrix products and
convolutions and nothing else, so the integers must be equal.  Where FlopCounterMode has no
formula for the CPU kernel that runs a product, those products are left out of the
comparison, with the reason (UNCOUNTED); every model is still compared on the rest.
"""

from __future__ import annotations

import functools

import pytest

from adbench import flops, spec

torch = pytest.importorskip("torch")
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from adbench.backends import torch_backend as tb  # noqa: E402

# Kernels FlopCounterMode does not count on the CPU (torch 2.13), so their products are left
# out of its comparison: it has formulas for mm, addmm, bmm, convolution and the CUDA SDPA
# kernels only.
UNCOUNTED = {
    "lstm": "nn.LSTM runs as one fused CPU kernel (aten.mkldnn_rnn_layer), no formula",
    "attention": "nn.MultiheadAttention's QK^T and AV run in "
                 "aten._scaled_dot_product_flash_attention_for_cpu, no formula",
}
BATCH = 3  # small and odd: a count proportional to the batch is not an accident


def counted(products) -> int:
    return sum(p.flops for p in products if p.kernel not in UNCOUNTED)


def counted_backward(products, jacobian: bool) -> int:
    return sum(p.backward(jacobian) for p in products if p.kernel not in UNCOUNTED)


@functools.cache  # built once per model: ResNet50's weights take seconds to draw
def torch_model(model: str):
    """The backend's WithLoss module and a batch of BATCH examples (float32, CPU)."""
    workload = spec.Workload(model, 0, batch_size=BATCH, n_samples=BATCH, warmup=0,
                             iterations=1)
    net, _ = tb.build(workload.spec, spec.make_params(workload), torch.device("cpu"),
                      torch.float32)
    data = spec.make_batches(workload)[0]
    x = torch.from_numpy(data["x"])
    aux = torch.from_numpy(data["h0" if "h0" in data else "y"])
    return net, x, aux


def flop_count(fn) -> int:
    with FlopCounterMode(display=False) as counter:
        result = fn()
    return counter.get_total_flops(), result


@pytest.mark.parametrize("model", list(spec.MODELS))
def test_forward_and_backward_flops_equal_flop_counter_modes(model):
    net, x, aux = torch_model(model)
    forward, loss = flop_count(lambda: net(x, aux))
    backward, _ = flop_count(loss.backward)
    products = flops.products(model, BATCH)
    assert forward == counted(products)
    assert backward == counted_backward(products, jacobian=False)


@pytest.mark.parametrize("model", list(spec.MODELS))
def test_a_jacobian_rows_reverse_pass_equals_flop_counter_modes(model):
    """One row of the output Jacobian: torch.autograd.grad w.r.t. one example's input, as
    the backend's jacobian_rows task computes it."""
    net, x, aux = torch_model(model)
    x, aux = x[:1].clone().requires_grad_(True), aux[:1]
    out = net.model(x, aux).reshape(-1)
    cotangent = torch.zeros_like(out)
    cotangent[0] = 1
    row, _ = flop_count(lambda: torch.autograd.grad(out, x, cotangent))
    assert row == counted_backward(flops.products(model, 1), jacobian=True)


def test_every_model_has_a_count_and_uncounted_kernels_are_named():
    kernels = {p.kernel for m in spec.MODELS for p in flops.products(m, 1)}
    assert kernels <= {"matmul", "conv"} | set(UNCOUNTED)
    assert all(flops.forward_flops(m, 1) > 0 for m in spec.MODELS)


def test_hand_counts():
    """A few counts by hand: the study's 512-MLP and the slides' RNN cell."""
    assert flops.forward_flops("mlp512", 128) == 2 * 128 * (784 * 512 + 512 * 10)
    # weight gradients of both layers, the input gradient of the second only
    assert flops.backward_flops("mlp512", 128) == 2 * 128 * (784 * 512 + 2 * 512 * 10)
    assert flops.forward_flops("rnn_cell", 1) == 2 * (20 * 20 + 10 * 20)
    assert flops.input_gradient_flops("rnn_cell") == 2 * 10 * 20  # W_x only: h0 is data


def test_task_flops_keys_and_jacobian_rows():
    step = flops.task_flops("mlp512", "backward", 128, 10)
    assert step["step_s"] == step["forward_s"] + step["backward_s"]
    rows = flops.task_flops("mlp512", "jacobian_rows", 128, 10)
    assert rows["forward_s"] == flops.forward_flops("mlp512", 1)
    assert rows["backward_s"] == 10 * flops.input_gradient_flops("mlp512")
    assert flops.task_flops("mlp512", "jacobian_vectorized", 128, 10) == rows
    assert flops.task_flops("mlp512", "loss_jacobian", 128, 10) == step
    # more rows asked than outputs: the model's outputs
    assert flops.task_flops("mlp512", "jacobian_rows", 1, 99) == rows


def test_reverse_mode_costs_at_most_three_forwards_in_flops():
    """Products with weights: weight and input gradients cost one forward each."""
    for model in spec.MODELS:
        assert 1 < flops.reverse_over_forward(model, 8) <= 3
