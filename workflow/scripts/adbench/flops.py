"""Floating-point operations of one step of each model, counted analytically from spec.py.

What is counted: the multiply-adds of the matrix products and convolutions, two FLOPs each,
as torch.utils.flop_counter.FlopCounterMode and ADBench count them.  Element-wise work
(biases, activations, batch norm, pooling, the loss) is left out: it is a few percent of a
product's at the spec's sizes and memory-bound, so a rate against the matmul peak would
mix two different limits.

A model is a list of products (`Product`), in forward order; reverse mode then costs, per
product:
    the gradient w.r.t. its weights      as much as its forward (one product of the same size)
    the gradient w.r.t. its input        as much again, where that input needs a gradient
    a product of two activations         both operands' gradients (attention's QK^T and AV)
The input needs no gradient where it is the data (the model's input in a loss task, or the
rnn cell's previous state, which no task differentiates); in an output-Jacobian task only
input gradients are computed, one reverse pass per row, on one example.

As a cell runs it (issue 38): a frozen task (spec.TaskInfo.frozen) computes no weight
gradient of its frozen part (spec.ModelSpec.frozen) and no input gradient below the first
trained product (nothing there needs one: autograd records nothing through the frozen
part); a variable-length task runs its recurrent products over the batch's steps as its
strategy pads them (spec.padded_length: a masked step costs as much as a true one), so its
count is per batch, and a cell's is the mean over its measured batches (steps_as_run).

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
    # The spec parameter its weights are (a name, or the prefix of a layer's: "fc0."), which
    # a frozen task may freeze; None: no parameter of its own (or a packed one never frozen).
    param: str | None = None

    def backward(self, jacobian: bool, trained: bool = True, below: bool = True) -> int:
        """FLOPs of this product's reverse step: loss gradient, or output-Jacobian row.
        `trained`: its weights get a gradient; `below`: a trained parameter precedes it,
        so an activation input needs one (False only in a frozen task)."""
        needs_input = (self.input_gradient == ALWAYS and below) or (
            jacobian and self.input_gradient == JACOBIAN)
        if not self.weights:  # both operands are activations
            return 2 * self.flops if needs_input else 0
        return (0 if jacobian or not trained else self.flops) + (
            self.flops if needs_input else 0)

    def frozen_in(self, frozen: tuple[str, ...]) -> bool:
        """Whether its weights are among the frozen parameters' names."""
        return self.param is not None and any(n.startswith(self.param) for n in frozen)


def matmul(name: str, rows: int, n_in: int, n_out: int, input_gradient: str = ALWAYS,
           kernel: str = "matmul", param: str | None = None) -> Product:
    """A product with a weight matrix; its parameter is `param`, else the layer `name`'s."""
    return Product(name, kernel, 2 * rows * n_in * n_out, True, input_gradient,
                   param or f"{name}.")


def convolution(name: str, batch: int, c_in: int, c_out: int, kernel: int, out_hw: int,
                input_gradient: str = ALWAYS) -> Product:
    return Product(name, "conv", 2 * batch * out_hw * out_hw * c_out * c_in * kernel * kernel,
                   True, input_gradient, f"{name}.")


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


def lstm(model: spec.ModelSpec, batch: int, steps: int | None = None) -> list[Product]:
    """Per step (the model's, or a variable-length batch's `steps`): the input's and the
    previous hidden state's products with the four gates' weights (the initial state is
    zero and differentiated by no task)."""
    hidden, features = model.arch["hidden"], model.input_shape[1]
    products = []
    for t in range(steps or model.arch["steps"]):
        products.append(matmul(f"step{t}.input", batch, features, 4 * hidden, JACOBIAN,
                               kernel="lstm", param="lstm.W_ih"))
        products.append(matmul(f"step{t}.hidden", batch, hidden, 4 * hidden,
                               NEVER if t == 0 else ALWAYS, kernel="lstm", param="lstm.W_hh"))
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
    return [matmul("in_proj", rows, embed, 3 * embed, JACOBIAN, param="attn.q."),
            Product("scores", "attention", core, weights=False),
            Product("weighted_values", "attention", core, weights=False),
            matmul("out_proj", rows, embed, embed, param="attn.o.")]


def ctc(model: spec.ModelSpec, batch: int) -> list[Product]:
    a = model.arch
    return [matmul("fc", batch * a["steps"], a["features"], a["classes"], JACOBIAN)]


def rnn_cell(model: spec.ModelSpec, batch: int, steps: int | None = None) -> list[Product]:
    """One step of the cell from the given state h0 (data); a variable-length batch's
    `steps`: the cell unrolled, each later step's state an activation."""
    a, products = model.arch, []
    for t in range(steps or 1):
        products.append(matmul(f"step{t}.W_h", batch, a["hidden"], a["hidden"],
                               NEVER if t == 0 else ALWAYS, param="W_h"))
        products.append(matmul(f"step{t}.W_x", batch, a["inputs"], a["hidden"], JACOBIAN,
                               param="W_x"))
    return products


FAMILIES = {"mlp": mlp, "cnn": cnn, "lstm": lstm, "resnet": resnet, "attention": attention,
            "ctc": ctc, "rnn_cell": rnn_cell}
# The families that read a sequence whose length can vary: their products take `steps`.
SEQUENCE_FAMILIES = ("lstm", "rnn_cell")


# ---------------------------------------------------------------- per model and task
def products(model: str, batch: int, steps: int | None = None) -> list[Product]:
    """The products of one forward pass of spec.MODELS[model] on `batch` examples (of
    `steps` time steps, a variable-length batch of a sequence model)."""
    spec_ = spec.MODELS[model]
    if steps is not None:
        if spec_.family not in SEQUENCE_FAMILIES:
            raise ValueError(f"{model} reads no sequence whose length could vary")
        return FAMILIES[spec_.family](spec_, batch, steps)
    return FAMILIES[spec_.family](spec_, batch)


def reverse_flops(found: list[Product], jacobian: bool = False,
                  frozen: tuple[str, ...] = ()) -> int:
    """The reverse pass over products in forward order, `frozen` the parameters a frozen
    task does not train: no weight gradient for them, and no input gradient below the
    first trained product."""
    total, below = 0, not frozen
    for p in found:
        trained = not p.frozen_in(frozen)
        total += p.backward(jacobian, trained=trained, below=below)
        below = below or (trained and p.param is not None)
    return total


def forward_flops(model: str, batch: int, steps: int | None = None) -> int:
    return sum(p.flops for p in products(model, batch, steps))


def backward_flops(model: str, batch: int, frozen: tuple[str, ...] = (),
                   steps: int | None = None) -> int:
    """The reverse pass of the loss gradient w.r.t. every parameter outside `frozen` (the
    input is data)."""
    return reverse_flops(products(model, batch, steps), frozen=frozen)


def input_gradient_flops(model: str) -> int:
    """One vector-Jacobian product w.r.t. the input of one example: a Jacobian row."""
    return reverse_flops(products(model, 1), jacobian=True)


def task_flops(model: str, task: str, batch_size: int, jacobian_rows: int,
               steps: float | None = None) -> dict[str, float]:
    """FLOPs of one timed iteration of a (model, task) at a workload's sizes: its forward,
    its derivative (the reverse passes) and the whole step, keyed like the raw quantities.
    Output Jacobians are of one example, one reverse pass per row (vectorised or not:
    the same products, batched); the loss Jacobian is one reverse pass, as backward.  A
    frozen task's reverse pass leaves out its frozen part (the module's rule); a
    variable-length task's is at `steps`, the time steps of its batches as the strategy
    pads them (steps_as_run: their mean, to which the count is proportional).  A
    derivative kind (adbench.derivatives.KINDS) with no count here is a ValueError naming
    it, never priced as another kind's."""
    info = spec.TASKS[task]
    kind = info.derivative
    if kind == "sequence_gradients":
        if steps is None:
            raise ValueError(f"{task} runs batches of varying length: give their steps")
        return sequence_flops(model, batch_size, steps)
    if kind == "loss":  # the forward alone
        forward = forward_flops(model, batch_size)
        return {"forward_s": forward, "backward_s": 0, "step_s": forward}
    if kind == "jacobian":
        rows = min(jacobian_rows, spec.MODELS[model].n_outputs)
        forward, backward = forward_flops(model, 1), rows * input_gradient_flops(model)
    elif kind in ("gradients", "trainable_gradients"):
        frozen = spec.MODELS[model].frozen if info.frozen else ()
        forward = forward_flops(model, batch_size)
        backward = backward_flops(model, batch_size, frozen)
    else:
        raise ValueError(f"task {task!r}: no FLOP count for derivative kind {kind!r} "
                         "(adbench.flops.task_flops prices gradients, trainable_gradients, "
                         "sequence_gradients, jacobian and loss)")
    return {"forward_s": forward, "backward_s": backward, "step_s": forward + backward}


def sequence_flops(model: str, batch: int, steps: float) -> dict[str, float]:
    """A variable-length batch's step at (mean) `steps` time steps: the per-step products
    scale with the steps, the rest (the LSTM's dense layer) does not."""
    one, two = (forward_flops(model, batch, n) for n in (1, 2))
    backward_one, backward_two = (backward_flops(model, batch, steps=n) for n in (1, 2))
    forward = one + (two - one) * (steps - 1)
    backward = backward_one + (backward_two - backward_one) * (steps - 1)
    return {"forward_s": forward, "backward_s": backward, "step_s": forward + backward}


def steps_as_run(workload: spec.Workload) -> float | None:
    """The mean time steps of a variable-length task's measured batches as its strategy pads
    them (spec.padded_length of each batch's true length); None for a fixed-shape task."""
    if workload.sequence is None:
        return None
    measured = range(workload.warmup, workload.total_iterations)
    return sum(spec.padded_length(workload.sequence, workload.sequence_length(i))
               for i in measured) / len(measured)


def reverse_over_forward(model: str, batch: int) -> float:
    """The FLOP count's own cheap-gradient ratio, (forward + backward) / forward: at most 3
    for products with weights, what a measured time ratio is set against."""
    forward = forward_flops(model, batch)
    return (forward + backward_flops(model, batch)) / forward if forward else math.nan
