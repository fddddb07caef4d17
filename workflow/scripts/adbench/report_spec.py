"""The words of the experiment and the study's tables: what only the report reads.

The experiment spec (adbench.spec) says what a timing job computes; this module says how the
report names and describes it: the labels and descriptions of every framework, mode, task
and model, the study's documents and how the paper cites them, and the study's tables as data
(which cells each shows, its title, the published numbers beside it).  No timing or reference
job imports it, so editing a title, a label or a description here re-times no cell
(tests/test_architecture.py proves it on a dry run).

Every key of spec.FRAMEWORKS, spec.TASKS and spec.MODELS has its words here, and nothing
else does (a test checks both ways).
"""

from __future__ import annotations

import dataclasses
import re

from adbench import spec


# ================================================================ names and descriptions
@dataclasses.dataclass(frozen=True)
class Text:
    """How the report names a mode or a task, and what it says it runs."""

    label: str
    description: str


@dataclasses.dataclass(frozen=True)
class FrameworkText:
    label: str
    modes: dict[str, Text]


FRAMEWORK_TEXT: dict[str, FrameworkText] = {
    "torch": FrameworkText("PyTorch", {
        "eager": Text("eager", "torch.nn modules, loss.backward() / torch.autograd on the "
                      "define-by-run graph"),
        "script": Text("TorchScript", "torch.jit.script of the model and its loss (one "
                       "scripted module); derivatives by torch.autograd"),
        "trace": Text("jit.trace", "torch.jit.trace of the model and its loss on the first "
                      "batch; derivatives by torch.autograd"),
        "compile": Text("torch.compile", "torch.compile (inductor) of the model and its loss; "
                        "derivatives by AOTAutograd's compiled backward"),
    }),
    "tensorflow": FrameworkText("TensorFlow", {
        "eager": Text("eager", "Keras layers under tf.GradientTape, then tape.gradient / "
                      "tape.jacobian"),
        "graph": Text("tf.function", "tf.function of the whole step (forward and "
                      "tape.gradient / tape.jacobian)"),
        "xla": Text("XLA", "tf.function(jit_compile=True) of the whole step: XLA compiles "
                    "forward and derivative together"),
    }),
    "jax": FrameworkText("JAX", {
        "eager": Text("eager", "jax.grad / jax.vjp / jax.jacrev dispatched op by op, no "
                      "jax.jit"),
        "jit": Text("jax.jit", "jax.jit of the whole step (forward and derivative), compiled "
                    "by XLA"),
    }),
    "autograd": FrameworkText("HIPS autograd", {
        "eager": Text("eager", "autograd.grad / autograd.make_vjp over numpy code, traced at "
                      "every call"),
    }),
    "pytensor": FrameworkText("PyTensor", {
        "c": Text("C (cvm)", "pytensor.function with the FAST_RUN rewrites and the cvm linker "
                  "(C thunks), symbolic pytensor.grad"),
        "numba": Text("Numba", "pytensor.function in NUMBA mode (its default backend), "
                      "symbolic pytensor.grad"),
    }),
    "theano": FrameworkText("Theano", {
        "c": Text("FAST_RUN", "theano.function in FAST_RUN (cvm linker, C thunks), symbolic "
                  "theano.grad"),
    }),
    "mxnet": FrameworkText("MXNet", {
        "eager": Text("imperative", "Gluon blocks under autograd.record(), then .backward()"),
        "hybrid": Text("hybridize", "Gluon hybridize(static_alloc=True, static_shape=True): a "
                       "cached symbolic graph"),
    }),
    "chainer": FrameworkText("Chainer", {
        "eager": Text("define-by-run", "chainer.links under define-by-run, then "
                      "loss.backward() / chainer.grad"),
    }),
}


def framework_label(framework: str) -> str:
    return FRAMEWORK_TEXT[framework].label


def mode_label(framework: str, mode: str) -> str:
    return FRAMEWORK_TEXT[framework].modes[mode].label


def mode_description(framework: str, mode: str) -> str:
    return FRAMEWORK_TEXT[framework].modes[mode].description


# How each variable-length strategy (spec.SEQUENCE_STRATEGIES) shapes a batch, in words.
SEQUENCE_TEXT = {
    "true": "each batch at its own length: define-by-run in eager modes; compiled modes as "
            "they behave by default (a trace or compilation per new length, or their own "
            "default policy)",
    "dynamic": "each batch at its own length, compiled modes with their dynamic-shape option "
               "(tf.function(reduce_retracing=True), torch.compile(dynamic=True)); "
               "unsupported where a mode has none",
    "padded": f"every batch padded with zeros to the maximum length, "
              f"{spec.SEQUENCE_LENGTHS[1]}, the loss masked past each example's length: one "
              "shape for the whole epoch",
    "bucketed": "each batch padded to the smallest of the buckets "
                f"{', '.join(map(str, spec.SEQUENCE_BUCKETS))} that holds it, masked "
                "likewise: one shape per bucket",
}
_SEQUENCE_LABELS = {"true": "varying length, true length",
                    "dynamic": "varying length, dynamic shapes",
                    "padded": "varying length, padded", "bucketed": "varying length, bucketed"}

TASK_TEXT: dict[str, Text] = {
    "backward": Text(
        "backward", "gradient of the scalar loss w.r.t. every parameter on a batch: one "
        "backward pass (loss.backward() / tape.gradient)"),
    "jacobian_rows": Text(
        "Jacobian, row by row", "Jacobian of the model's output w.r.t. its input for one "
        "example, one vector-Jacobian product per output row (torch.autograd.grad with "
        "one-hot grad_outputs / tape.gradient with output_gradients, in a Python loop)"),
    "jacobian_vectorized": Text(
        "Jacobian, vectorised", "the same Jacobian in one call of the framework's vectorised "
        "Jacobian (torch.func.jacrev / tape.jacobian with pfor)"),
    "loss_jacobian": Text(
        "loss Jacobian (H0)", "Jacobian of the scalar loss w.r.t. all parameters through the "
        "Jacobian API (torch.autograd.functional.jacobian / tape.jacobian) on the same batch "
        "as backward: Hypothesis 0 says it costs one backward pass"),
    "backward_frozen": Text(
        "backward, frozen part", "the backward step with the model's frozen part (its first "
        "layers) not trainable (requires_grad=False / the tape's gradient w.r.t. the "
        "trainable variables / jax.grad w.r.t. the trainable subset): the gradient of the "
        "loss w.r.t. the other parameters only"),
    "backward_retained": Text(
        "backward, graph retained", "the backward step with its graph kept after the step "
        "(loss.backward(retain_graph=True) / a persistent GradientTape) and held, as by a "
        "user who differentiates the same graph again, until the next step starts (dropped "
        "there, outside the clock)"),
    "backward_default_memory": Text(
        "backward, default GPU memory", "the backward step with the framework's GPU "
        "allocator as it comes, where every other GPU cell sets a memory policy: TensorFlow "
        "without memory growth, which reserves most of the GPU at its first op (004); run "
        "where the experiment changes a framework's default, on GPUs only"),
    "forward": Text(
        "forward alone", "the scalar loss on a batch with no derivative taken and nothing "
        "recorded for one (torch.no_grad() / no tape / a compiled function of the loss "
        "alone): the function whose cost a gradient's is set against (the cheap-gradient "
        "ratio of a mode whose step is one call)"),
    spec.STUDY_PROTOCOL_TASK: Text(
        "backward, the study's protocol", "the study's published code (000 Figs. 1-2) timed "
        "as it timed it: an epoch loop over the batches, each sliced from the epoch's data "
        "inside the loop; pred_y = pmodel(x); loss = torch.norm(true_y - pred_y); "
        "loss.backward() with the gradients accumulating over the epoch (no zero_grad) / "
        "the tape block and tape.gradient(loss, model.trainable_variables); the clock "
        "(time.time()) around the backward line in the eager modes and TorchScript, around "
        "the tf.function's call in TensorFlow's graph mode; PyTorch (eager, TorchScript) and "
        "TensorFlow (eager, tf.function) only, on the MLPs"),
    **{task: Text(
        _SEQUENCE_LABELS[spec.TASKS[task].sequence],
        f"the backward step of a sequence model on batches of varying length "
        f"({spec.SEQUENCE_LENGTHS[0]} to {spec.SEQUENCE_LENGTHS[1]} steps, drawn per batch "
        f"from the seed): {SEQUENCE_TEXT[spec.TASKS[task].sequence]}")
       for task in spec.SEQUENCE_TASKS},
}


def task_label(task: str) -> str:
    return TASK_TEXT[task].label


def task_description(task: str) -> str:
    return TASK_TEXT[task].description


@dataclasses.dataclass(frozen=True)
class ModelText:
    """How the report names a model, where the seeds name it and what we chose where they are
    silent (printed in the paper)."""

    label: str
    source: str
    choices: str
    study_parameters: int | None = None  # the study's own count, where it printed one


# The losses a model may have (spec.LOSSES), in words.
LOSS_TEXT = {
    "l2": "‖y − f(x)‖₂",
    "sum": "sum of the outputs",
    "xent": "mean softmax cross-entropy",
    "ctc": "CTC, summed over the batch",
}

_MLP_CHOICES = "ReLU hidden layers, linear output, Glorot-uniform weights, zero biases"
WIDTH_SWEEP_SOURCE = "the width sweep (the study's 512-MLP at other widths)"


def _mlp_text(model: str, study_parameters: int | None = None,
              source: str = "000 §3.1, Tables 1-2") -> ModelText:
    hidden = spec.MODELS[model].arch["sizes"][1:-1]
    return ModelText("[" + ", ".join(map(str, hidden)) + "]", source, _MLP_CHOICES,
                     study_parameters)


_A, _C, _R = spec.ATTENTION, spec.CTC, spec.RNN_CELL
MODEL_TEXT: dict[str, ModelText] = {
    "mlp512": _mlp_text("mlp512", 406528),
    "mlp354x2": _mlp_text("mlp354x2", 406392),
    "mlp294x3": _mlp_text("mlp294x3", 406308),
    **{name: _mlp_text(name, source=WIDTH_SWEEP_SOURCE) for name in spec.SWEEP_MODELS},
    "fcn": ModelText(
        "FCN", "000 §3.2, Table 3 (FCN)",
        "fully-connected network 784-256-10, ReLU; sizes not stated by the study"),
    "cnn": ModelText(
        "CNN", "000 §3.2, Table 3 (CNN)",
        "conv 3x3 1->8 (pad 1), ReLU, conv 3x3 8->16 (stride 2, pad 1), ReLU, dense 3136->10 "
        "on 28x28 images; sizes not stated by the study"),
    "lstm": ModelText(
        "LSTM", "000 §3.2, Table 3 (LSTM)",
        f"one LSTM layer, hidden {spec.LSTM_HIDDEN}, over the 28 rows of a 28x28 image (28 "
        "steps of 28 features), dense 64->10 on the last hidden state"),
    "resnet50": ModelText(
        "ResNet50", "000 §3.2, Table 4",
        "ResNet50 v1.5 (stride in the 3x3 convolution, as torchvision), 1000 classes, batch "
        "norm in inference mode (running mean 0, variance 1), 32x32 RGB input (the study's "
        "was presumably 224x224), Jacobian of the first 10 of 1000 logits"),
    "dense": ModelText(
        "Dense", "001 §3, Table 1 (dense layer)",
        "one dense layer 256->128 without activation (Keras' default); size not stated"),
    "attention": ModelText(
        "Self-attention", "001 §2 (self-attention layer)",
        f"one single-head self-attention layer (nn.MultiheadAttention / Keras "
        f"MultiHeadAttention), sequence {_A['length']}, embedding {_A['embed']}"),
    "fc_xent": ModelText(
        "FC + cross-entropy", "001 §2 (fully-connected layer with cross-entropy loss)",
        "one dense layer 784->10, mean softmax cross-entropy over integer labels"),
    "ctc": ModelText(
        "CTC", "001 §2 (CTC loss)",
        f"dense {_C['features']}->{_C['classes']} per time step and log-softmax over "
        f"{_C['steps']} steps; CTC loss (blank 0, labels of length {_C['label_length']}), "
        "summed over the batch"),
    "rnn_cell": ModelText(
        "RNN cell", "002, the slides' example",
        "the next state tanh(Wh h + Wx x) of a state h of 20 and an input x of 10, loss the "
        "sum of the next state, batch 1 as in the slides; no biases"),
}


def model_label(model: str) -> str:
    return MODEL_TEXT[model].label


# ================================================================ a reader's words
# Code inside parentheses ("(loss.backward() / tape.gradient)"): a group holding a call, a
# dotted or an underscored name, or an argument ("=").  The innermost first, so nested calls
# go too.
_CODE_GROUP = re.compile(r"\s*\((?:[^()]*?(?:\(\)|[A-Za-z]\.[A-Za-z]|[A-Za-z0-9]_[A-Za-z0-9]|=)"
                         r"[^()]*?)\)")
_LOG_GROUP = re.compile(r"\s*\(log: [^)]*\)")


def _keys_to_labels(text: str) -> str:
    """A task's or model's key, where a message names one, as the report names it."""
    words = {**{k: v.label for k, v in TASK_TEXT.items()},
             **{k: v.label for k, v in MODEL_TEXT.items()}}
    keys = sorted((k for k in words if "_" in k or any(c.isdigit() for c in k)),
                  key=len, reverse=True)
    pattern = re.compile(r"(?<![\w./])(" + "|".join(map(re.escape, keys)) + r")(?![\w/])")
    return pattern.sub(lambda m: words[m[1]], text)


def reader_message(text: str) -> str:
    """A cell's message (why it failed or was refused) as the paper prints it: its log's path
    left out (the last appendix says where logs are) and the pipeline's keys of tasks and
    models named by their labels; the framework's own words kept."""
    return " ".join(_keys_to_labels(_LOG_GROUP.sub("", str(text))).split())


def in_words(text: str) -> str:
    """A description or a message as a reader reads it: the code in its parentheses, log
    paths and the pipeline's keys of tasks and models left out or named by their labels
    (the calls themselves are printed once, in the paper's last appendix)."""
    text = _LOG_GROUP.sub("", str(text))
    while True:
        shorter = _CODE_GROUP.sub("", text)
        if shorter == text:
            break
        text = shorter
    return " ".join(_keys_to_labels(text).split())


# ================================================================ the study's documents
# The study's documents (shared/seeds), as a reader knows them: the report spec and
# claims.json cite them by number ("000 Table 1"), the paper by name (cited).
DOCUMENTS = {
    "000": "the study",
    "001": "the study's draft",
    "002": "the JIT slides",
    "003": "the PyTorch, MXNet and Theano lecture",
    "004": "the PyTorch talk",
}
_DOCUMENT_NUMBER = re.compile(r"(?<![\w.])(00[0-4])(?![\w.])(\s+(?=[^\s,;()]))?")


def cited(text: str) -> str:
    """'000 Table 1' -> 'the study, Table 1': document numbers replaced by their names."""
    return _DOCUMENT_NUMBER.sub(
        lambda m: DOCUMENTS[m[1]] + (", " if m[2] else ""), str(text)
    )


# ================================================================ the study's tables, as data
@dataclasses.dataclass(frozen=True)
class TableInfo:
    """One table of the paper: which cells it shows, what quantity, the study's numbers."""

    name: str  # <results tree>/tables/<name>.{csv,md,tex}
    title: str
    models: tuple[str, ...]
    tasks: tuple[str, ...]
    quantity: str  # a raw-schema column
    unit: str  # us | ms | s | 1e-5 s (the study's own units, so both sit side by side)
    compiled: bool | None = None  # only compiled modes (True), only eager (False), all (None)
    published: str | None = None  # report/published/<file>, the study's numbers
    study_table: str = ""  # e.g. "000 Table 3"
    improvement: bool = False  # eager -> compiled ratio per framework
    # The frameworks it shows (None: every framework of spec.FRAMEWORKS that was measured).
    frameworks: tuple[str, ...] | None = None
    # "columns": a column per (framework, mode), the study's layout, for few frameworks;
    # "rows": a row per (framework, mode) under each model, a column per task: any number.
    layout: str = "columns"
    first_step: bool = False  # a time-to-first-step column (compile + first call)


MLPS, JACOBIANS, STUDY_FRAMEWORKS = spec.MLPS, spec.JACOBIANS, spec.STUDY_FRAMEWORKS
TABLES: tuple[TableInfo, ...] = (
    TableInfo("table1_eager", "Eager mode: backward pass", MLPS, ("backward",), "backward_s",
              "us", compiled=False, published="table1_eager.csv", study_table="000 Table 1",
              frameworks=STUDY_FRAMEWORKS),
    TableInfo("table2_compiled", "Compiled mode: whole step, forward + backward", MLPS,
              ("backward",), "step_s", "us", compiled=True, published="table2_compiled.csv",
              study_table="000 Table 2", improvement=True, frameworks=STUDY_FRAMEWORKS),
    TableInfo("table3_jacobian", "Jacobian of the output w.r.t. the input: FCN, CNN, LSTM",
              spec.STUDY_JACOBIAN_MODELS, JACOBIANS, "step_s", "1e-5 s",
              published="table3_jacobian.csv", study_table="000 Table 3",
              frameworks=STUDY_FRAMEWORKS),
    TableInfo("table4_resnet50", "Jacobian of ResNet50's output w.r.t. its input",
              spec.STUDY_LARGE_MODELS, JACOBIANS, "step_s", "s",
              published="table4_resnet50.csv", study_table="000 Table 4",
              frameworks=STUDY_FRAMEWORKS),
    TableInfo("table5_dense", "Jacobian of a dense layer", ("dense",), JACOBIANS, "step_s",
              "s", published="table5_dense.csv", study_table="001 Table 1",
              frameworks=STUDY_FRAMEWORKS),
    TableInfo("table6_hypothesis0", "One backward pass vs the loss Jacobian w.r.t. all "
              "parameters", spec.STUDY_MODELS, spec.HYPOTHESIS0_TASKS, "step_s",
              "us", study_table="001 Hypothesis 0", layout="rows"),
    TableInfo("table7_layers", "The other layers the study's documents name: every task",
              ("attention", "fc_xent", "ctc", "rnn_cell"), spec.STUDY_TASKS, "step_s", "us",
              study_table="001 §2, 002", layout="rows"),
    TableInfo("table8_frameworks", "Every framework and mode: a training step of the MLPs "
              "and the RNN cell", MLPS + ("rnn_cell",), ("backward",), "step_s", "us",
              study_table="002, 003 (systems named)", improvement=True, layout="rows",
              first_step=True),
    TableInfo("table9_jacobians", "Every framework and mode: the Jacobians of the study's "
              "models", MLPS + ("dense",) + spec.STUDY_JACOBIAN_MODELS
              + spec.STUDY_LARGE_MODELS, JACOBIANS, "step_s", "ms",
              study_table="000 Tables 3-4, 001 Table 1 (extended)", layout="rows"),
)
TABLE_NAMES = tuple(t.name for t in TABLES)


def table(name: str) -> TableInfo:
    return next(t for t in TABLES if t.name == name)
