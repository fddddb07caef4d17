"""The bytes a retained graph's saved activations take, from the spec's shapes: what
claims.graph_freed sets the bytes a retained step keeps against (beside adbench.flops, whose
shape arithmetic it shares).

A graph kept past its step keeps what its reverse pass reads of the forward.  The parameters
and the batch are alive anyway and are not counted; every tensor is counted once:
    each hidden layer's ReLU output (ReLU's backward reads it, and it is the next product's
        input: one tensor);
    each batch normalisation's input (the convolution's output) and its two per-channel
        statistics (mean and inverse standard deviation);
    a max pool's indices (int64), and the pooled features the classifier reads;
    the model's output, which the loss reads.
Float32 throughout (every cell's dtype).

Stated for the families whose saved tensors are the model's own layers (mlp, cnn, resnet).
The others' are a kernel's own layout (nn.LSTM's fused workspace, flash attention's
log-sum-exp, CTC's recursion tables) or a few hundred bytes (the RNN cell): no expectation,
and their cells are not judged.  Nor is a model whose expectation is under MIN_SAVED_BYTES:
a graph's own bookkeeping (its nodes, a tape's records: up to 12 KiB measured) would be a
tenth of it.

The examples a step differentiates are its task's (examples_of): a loss derivative's batch,
one example for an output Jacobian (spec.Workload.rows_per_batch), whatever batch size the
cell records; a Jacobian task set against a batch's activations would read a one-example
graph as a fraction, and a kept figure many times its own as a retained graph.  No ratio is
stated below the floor (expected_saved_bytes: None), and a kept figure more than FAR_ABOVE
times its expectation is more than this step's graph (far_above).

Measured (adbench.timing.ProcessMemory, the C heap, default batches): PyTorch's retained
graphs kept 1.01x this on mlp512 and mlp294x3, 1.00x on the CNN and 1.02x on ResNet50;
MXNet's 1.05x and 1.00x, Chainer's 1.00x on the MLPs and 1.33x on the CNN (its convolution
keeps its im2col buffer).
"""

from __future__ import annotations

from adbench import spec
from adbench.flops import conv_out

FLOAT32, INT64 = 4, 8
# The accuracy to which every reading a backend declares valid is shown
# (tests/test_step_memory.py): a planted allocation found within 20%.
TOLERANCE = 0.20
MIN_SAVED_BYTES = 128 * 1024
# Kept bytes over expected above this are more than one graph of the step's examples: the
# retained graphs measured kept 1.00-1.33x theirs (the module's list), a graph's bookkeeping
# at most 12 KiB over MIN_SAVED_BYTES' 128.
FAR_ABOVE = 2.0
# What a step that keeps more than its own graph keeps, by what it computes (the memory
# appendix states it beside the rows far_above flags).
BEYOND_ONE_GRAPH = {
    "jacobian": "an output Jacobian's step differentiates one example and retains no graph "
                "past its return, so bytes many times that example's activations are state "
                "the framework keeps across steps (a compiled function's cached buffers, a "
                "vectorised map's workspace over the Jacobian's rows), not a retained graph",
    "gradients": "a loss derivative's step that keeps more than its batch's activations "
                 "keeps state across steps beyond its graph (a compiled function's cached "
                 "buffers, an allocator's retained workspace)",
    # The study's own code (spec.TaskInfo.study_code) never clears its gradients, and with
    # no warm-up the baseline is read before the first step allocates them.
    "study_code": "the study's code keeps every parameter's gradient from its first step on "
                  "(it never clears them, and the baseline is read before that step), so "
                  "the bytes kept include those gradients beside any graph",
}


def mlp(model: spec.ModelSpec, batch: int) -> int:
    """Each hidden layer's ReLU output and the output (a linear model: the output only)."""
    sizes = model.arch["sizes"]
    return batch * (sum(sizes[1:-1]) + sizes[-1]) * FLOAT32


def cnn(model: spec.ModelSpec, batch: int) -> int:
    """Each convolution's ReLU output (the last one, flattened, is the classifier's input)
    and the output."""
    a = model.arch
    size, elements = model.input_shape[-1], 0
    for c_out, stride in zip(a["channels"], a["strides"]):
        size = conv_out(size, a["kernel"], stride, a["padding"])
        elements += c_out * size * size
    return batch * (elements + model.n_outputs) * FLOAT32


def batch_norm(batch: int, channels: int, size: int) -> int:
    """A batch normalisation's input and its two per-channel statistics."""
    return (batch * channels * size * size + 2 * channels) * FLOAT32


def bottleneck(block: dict, batch: int, size: int) -> tuple[int, int]:
    """A bottleneck block's saved bytes (its input is the previous block's ReLU output,
    already counted) and its output size: the 1x1 and 3x3 convolutions' batch-norm inputs
    and ReLU outputs, the last convolution's (and the projection's) batch-norm input, the
    block's ReLU output."""
    mid, out = block["mid"], block["out"]
    after = conv_out(size, 3, block["stride"], 1)
    saved = (batch_norm(batch, mid, size) + batch * mid * size * size * FLOAT32
             + batch_norm(batch, mid, after) + batch * mid * after * after * FLOAT32
             + batch_norm(batch, out, after) + batch * out * after * after * FLOAT32)
    if block["project"]:
        saved += batch_norm(batch, out, after)
    return saved, after


def resnet(model: spec.ModelSpec, batch: int) -> int:
    """torchvision's ResNet50 (adbench.flops.resnet's shapes): the stem's batch-norm input
    and ReLU output, the max pool's indices and output, every block, the pooled features
    and the output."""
    size = conv_out(model.input_shape[-1], 7, 2, 3)
    saved = batch_norm(batch, 64, size) + batch * 64 * size * size * FLOAT32
    size = conv_out(size, 3, 2, 1)
    saved += batch * 64 * size * size * (INT64 + FLOAT32)
    for block in spec.resnet_blocks(model.arch["stages"]):
        found, size = bottleneck(block, batch, size)
        saved += found
    return saved + batch * (2048 + model.n_outputs) * FLOAT32


FAMILIES = {"mlp": mlp, "cnn": cnn, "resnet": resnet}


def saved_activation_bytes(model: str, batch: int) -> int | None:
    """The bytes a retained graph of spec.MODELS[model] on `batch` examples keeps (the
    module's list); None where the family has no stated expectation."""
    found = spec.MODELS[model]
    family = FAMILIES.get(found.family)
    return None if family is None else family(found, batch)


def examples_of(task: str, batch: int) -> int:
    """The examples one step of `task` differentiates at a cell's batch size: one for an
    output Jacobian (spec.Workload.rows_per_batch), the batch for a loss derivative."""
    return 1 if spec.TASKS[task].derivative == "jacobian" else int(batch)


def expected_saved_bytes(model: str, task: str, batch: int) -> int | None:
    """What a step of `task` on spec.MODELS[model] at a cell's batch size should keep if its
    graph were retained: the saved activations of the examples it differentiates
    (examples_of); None where the family states no expectation, or the expectation is under
    MIN_SAVED_BYTES (no ratio is stated below the method's floor)."""
    saved = saved_activation_bytes(model, examples_of(task, batch))
    return saved if saved is not None and saved >= MIN_SAVED_BYTES else None


def far_above(kept_over_saved) -> bool:
    """Whether a kept figure is more than FAR_ABOVE times its expectation (False where
    either is missing)."""
    try:
        return float(kept_over_saved) > FAR_ABOVE
    except (TypeError, ValueError):
        return False


def beyond_one_graph(task: str) -> str:
    """What a step of `task` keeps when it keeps more than its own graph (BEYOND_ONE_GRAPH)."""
    info = spec.TASKS[task]
    if info.study_code:
        return BEYOND_ONE_GRAPH["study_code"]
    return BEYOND_ONE_GRAPH["jacobian" if info.derivative == "jacobian" else "gradients"]


def judged(model: str) -> bool:
    """Whether graph_freed judges the model: an expectation at its default batch, at least
    MIN_SAVED_BYTES."""
    saved = saved_activation_bytes(model, spec.MODELS[model].batch_size)
    return saved is not None and saved >= MIN_SAVED_BYTES


JUDGED_MODELS = tuple(m for m in spec.STUDY_MODELS if judged(m))
