"""Floating-point operations of one step of each model, counted analytically from spec.py.

What is counted: the multiply-adds of the matrix products and convolutions, two FLOPs each,
as torch.utils.flop_counter.FlopCounterMode and ADBench count them.  Element-wise work
(biases, activations, batch norm, pooling, the loss) is left out: it is a few percent of a
product's at the spec's sizes and memory-bound, so a rate against the matmul peak would
mix two different limits.

A model is a list of products (`Product`); reverse mode then costs, per product:
    the gradient w.r.t. its weights      as much as its forward (one product of the same size)
    the gradient w.r.t. its input        as much again, where that input needs a gradient
    a product of two activations         both operands' gradients (attention's QK^T and AV)
The input needs no gradient where it is the data (the model's input in a loss task, or the
rnn cell's previous state, which no task differentiates); in an output-Jacobian task only
input gradients are computed, one reverse pass per row, on one example.

Model and task lists come from spec.py; nothing framework-specific is imported here.
"""

from __future__ import annotations

import dataclasses
import math

from adbench import spec

# Where a product's input gradient is needed: "always" (an activation of the model),
# "jacobian" (the model's input: only an output-Jacobian task differentiates it), "never"
# (data no task differentiates, or a zero initial state).
ALWAYS, JACOBIAN, NEVER = "always", "jacobian", "never"


@dataclasses.dataclass(frozen=True)
class Product:
    """One matrix product or convolution of a forward pass, at a given batch."""

    name: str
    kernel: str  # "matmul", "conv", "lstm", "attention": the kernel that runs it
    flops: int  # forward FLOPs: 2 x multiply-adds
    weights: bool = True  # one operand is a parameter (else both are activations)
    input_gradient: str = ALWAYS  # see ALWAYS, JACOBIAN, NEVER

    def backward(self, jacobian: bool) -> int:
        """FLOPs of this product's reverse step: loss gradient, or output-Jacobian row."""
        needs_input = self.input_gradient == ALWAYS or (
            jacobian and self.input_gradient == JACOBIAN)
        if not self.weights:  # both operands are activations
            return 2 * self.flops
        return (0 if jacobian else self.flops) + (self.flops if needs_input else 0)


def matmul(name: str, rows: int, n_in: int, n_out: int, input_gradient: str = ALWAYS,
           kernel: str = "matmul") -> Product:
    return Product(name, kernel, 2 * rows * n_in * n_out, True, input_gradient)


def convolution(name: str, batch: int, c_in: int, c_out: int, kernel: int, out_hw: int,
                input_gradient: str = ALWAYS) -> Product:
    return Product(name, "conv", 2 * batch * out_hw * out_hw * c_out * c_in * kernel * kernel,
                   True, input_gradient)


def conv_out(size: int, kernel: int, stride: int, padding: int) -> int:
    return (size + 2 * padding - kernel) // stride + 1


# ---------------------------------------------------------------- one function per family
def mlp(model: spec.ModelSpec, batch: int) -> list[Product]:
    sizes = model.arch["sizes"]
    return [matmul(f"fc{i}", batch, a, b, JACOBIAN if i == 0 else ALWAYS)
            for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:]))]


def cnn(model: spec.ModelSpec, batch: int) -> list[Product]:
    a = model.arch
    size, channels, products = model.input_shape[-1], model.input_shape[0], []
    for i, (c_out, stride) in enumerate(zip(a["channels"], a["strides"])):
        size = conv_out(size, a["kernel"], stride, a["padding"])
        products.append(convolution(f"conv{i}", batch, channels, c_out, a["kernel"], size,
                                    JACOBIAN if i == 0 else ALWAYS))
        channels = c_out
    return products + [matmul("fc", batch, channels * size * size, model.n_outputs)]


def lstm(model: spec.ModelSpec, batch: int) -> list[Product]:
    """Per step: the input's and the previous hidden state's products with the four gates'
    weights (the initial state is zero and differentiated by no task)."""
    hidden, steps, features = model.arch["hidden"], model.arch["steps"], model.input_shape[1]
    products = []
    for t in range(steps):
        products.append(matmul(f"step{t}.input", batch, features, 4 * hidden, JACOBIAN,
                               kernel="lstm"))
        products.append(matmul(f"step{t}.hidden", batch, hidden, 4 * hidden,
                               NEVER if t == 0 else ALWAYS, kernel="lstm"))
    return products + [matmul("fc", batch, hidden, model.n_outputs)]


def resnet(model: spec.ModelSpec, batch: int) -> list[Product]:
    """torchvision's ResNet50 v1.5 at the spec's input size: 7x7/2 stem, 3x3/2 max pool,
    the bottleneck blocks (stride in the 3x3), global average pool, the classifier."""
    size = conv_out(model.input_shape[-1], 7, 2, 3)
    products = [convolution("conv1", batch, model.input_shape[0], 64, 7, size, JACOBIAN)]
    size = conv_out(size, 3, 2, 1)  # max pool
    for blk in spec.resnet_blocks(model.arch["stages"]):
        n, out = blk["name"], conv_out(size, 3, blk["stride"], 1)
        products += [convolution(f"{n}.conv1", batch, blk["in"], blk["mid"], 1, size),
                     convolution(f"{n}.conv2", batch, blk["mid"], blk["mid"], 3, out),
                     convolution(f"{n}.conv3", batch, blk["mid"], blk["out"], 1, out)]
        if blk["project"]:
            products.append(convolution(f"{n}.downsample", batch, blk["in"], blk["out"], 1,
                                        out))
        size = out
    return products + [matmul("fc", batch, 2048, model.n_outputs)]


def attention(model: spec.ModelSpec, batch: int) -> list[Product]:
    """Single-head self-attention: the q, k, v projections, the scores QK^T and their
    product with V (both operands activations), the output projection."""
    length, embed = model.arch["length"], model.arch["embed"]
    rows = batch * length
    core = 2 * batch * length * length * embed
    return [matmul("in_proj", rows, embed, 3 * embed, JACOBIAN),
            Product("scores", "attention", core, weights=False),
            Product("weighted_values", "attention", core, weights=False),
            matmul("out_proj", rows, embed, embed)]


def ctc(model: spec.ModelSpec, batch: int) -> list[Product]:
    a = model.arch
    return [matmul("fc", batch * a["steps"], a["features"], a["classes"], JACOBIAN)]


def rnn_cell(model: spec.ModelSpec, batch: int) -> list[Product]:
    a = model.arch
    return [matmul("W_h", batch, a["hidden"], a["hidden"], NEVER),
            matmul("W_x", batch, a["inputs"], a["hidden"], JACOBIAN)]


FAMILIES = {"mlp": mlp, "cnn": cnn, "lstm": lstm, "resnet": resnet, "attention": attention,
            "ctc": ctc, "rnn_cell": rnn_cell}


# ---------------------------------------------------------------- per model and task
def products(model: str, batch: int) -> list[Product]:
    """The products of one forward pass of spec.MODELS[model] on `batch` examples."""
    spec_ = spec.MODELS[model]
    return FAMILIES[spec_.family](spec_, batch)


def forward_flops(model: str, batch: int) -> int:
    return sum(p.flops for p in products(model, batch))


def backward_flops(model: str, batch: int) -> int:
    """The reverse pass of the loss gradient w.r.t. every parameter (the input is data)."""
    return sum(p.backward(jacobian=False) for p in products(model, batch))


def input_gradient_flops(model: str) -> int:
    """One vector-Jacobian product w.r.t. the input of one example: a Jacobian row."""
    return sum(p.backward(jacobian=True) for p in products(model, 1))


def task_flops(model: str, task: str, batch_size: int, jacobian_rows: int) -> dict[str, int]:
    """FLOPs of one timed iteration of a (model, task) at a workload's sizes: its forward,
    its derivative (the reverse passes) and the whole step, keyed like the raw quantities.
    Output Jacobians are of one example, one reverse pass per row (vectorised or not:
    the same products, batched); the loss Jacobian is one reverse pass, as backward."""
    if spec.TASKS[task].derivative == "loss":  # the forward alone
        forward = forward_flops(model, batch_size)
        return {"forward_s": forward, "backward_s": 0, "step_s": forward}
    if spec.TASKS[task].derivative == "jacobian":
        rows = min(jacobian_rows, spec.MODELS[model].n_outputs)
        forward, backward = forward_flops(model, 1), rows * input_gradient_flops(model)
    else:
        forward, backward = forward_flops(model, batch_size), backward_flops(model, batch_size)
    return {"forward_s": forward, "backward_s": backward, "step_s": forward + backward}


def reverse_over_forward(model: str, batch: int) -> float:
    """The FLOP count's own cheap-gradient ratio, (forward + backward) / forward: at most 3
    for products with weights, what a measured time ratio is set against."""
    forward = forward_flops(model, batch)
    return (forward + backward_flops(model, batch)) / forward if forward else math.nan
