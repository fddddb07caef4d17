"""The experiment spec: what a timing job computes, framework-neutral, and nothing else.

The one place for the valid (framework, mode) table, the tasks, the model registry, the
workloads, the cells and the raw-file layout.  Nothing here imports a deep-learning
framework, and nothing here is words for the report (labels, descriptions, the study's
tables: adbench.report_spec): every timing and reference job imports this module, so an
edit here re-times every cell, and an edit of the report's words re-times none.

Canonical layouts (every backend converts to its own once, at preparation, and converts
gradients and Jacobians back before they are compared):
    dense weight   (in, out)            y = x @ W + b
    conv weight    (out, in, kh, kw)    images (N, C, H, W)
    LSTM           W_ih (in, 4H), W_hh (H, 4H), b (4H); gates i, f, g, o
    attention      W_q, W_k, W_v, W_o (E, E) as x @ W; biases (E,)
    rnn_cell       W_h (20, 20), W_x (20, 10) as in the slides: tanh(W_h h^T + W_x x^T)
    batch norm     gamma, beta (C,); inference mode, running mean 0 and variance 1
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
from typing import Iterable, Iterator

import numpy as np


# ================================================================ frameworks and modes
@dataclasses.dataclass(frozen=True)
class ModeInfo:
    """How one (framework, mode) pair runs (its words: report_spec.FRAMEWORK_TEXT)."""

    compiled: bool
    # The whole step (forward and derivative) is one compiled call: it cannot be split.
    whole_step: bool = False


EAGER, COMPILED, WHOLE_STEP = ModeInfo(False), ModeInfo(True), ModeInfo(True, whole_step=True)


@dataclasses.dataclass(frozen=True)
class FrameworkInfo:
    """A framework: the pin file its jobs run in, its backend module, its modes."""

    env: str  # envs/<env>.yaml: its CPU build
    backend: str  # adbench.backends.<backend>
    modes: dict[str, ModeInfo]
    # envs/<cuda_env>.yaml: its CUDA build, for cuda cells (built only where one runs); None:
    # the framework has no CUDA path here, and a grid expands no cuda cell of it.
    cuda_env: str | None = None

    @property
    def devices(self) -> tuple[str, ...]:
        return ("cpu", "cuda") if self.cuda_env else ("cpu",)

    def env_for(self, device: str) -> str:
        """The pin file a cell on `device` runs in."""
        return self.cuda_env if device == "cuda" and self.cuda_env else self.env


# The valid (framework, mode) pairs: the only table of them in the project.  A key is the
# framework's Python module name (environments: current checks that it imports).  A
# framework's non-compiled mode is named "eager" wherever it has one (the baseline of its
# improvements).  What each mode runs, in words: report_spec.FRAMEWORK_TEXT.
FRAMEWORKS: dict[str, FrameworkInfo] = {
    "torch": FrameworkInfo(
        env="torch", cuda_env="torch-cuda", backend="torch_backend",
        modes={"eager": EAGER, "script": COMPILED, "trace": COMPILED, "compile": COMPILED},
    ),
    "tensorflow": FrameworkInfo(
        env="tensorflow", cuda_env="tensorflow-cuda", backend="tensorflow_backend",
        modes={"eager": EAGER, "graph": WHOLE_STEP, "xla": WHOLE_STEP},
    ),
    "jax": FrameworkInfo(
        env="jax", cuda_env="jax-cuda", backend="jax_backend",
        modes={"eager": EAGER, "jit": WHOLE_STEP},
    ),
    "autograd": FrameworkInfo(env="autograd", backend="autograd_backend",
                              modes={"eager": EAGER}),
    "pytensor": FrameworkInfo(env="pytensor", backend="pytensor_backend",
                              modes={"c": WHOLE_STEP, "numba": WHOLE_STEP}),
    "theano": FrameworkInfo(env="theano", backend="theano_backend", modes={"c": WHOLE_STEP}),
    "mxnet": FrameworkInfo(env="mxnet", backend="mxnet_backend",
                           modes={"eager": EAGER, "hybrid": COMPILED}),
    "chainer": FrameworkInfo(env="chainer", backend="chainer_backend", modes={"eager": EAGER}),
}
ANALYSIS_ENV = "analysis"
DEVICES = ("cpu", "cuda")
# Numerics of every CUDA cell, the same in every framework (each backend applies them before
# building anything, and records them): float32 matmuls in full float32 (TF32 off; TF32 on
# trades precision for speed differently per framework), no cuDNN autotuning (it picks
# kernels by timing them, so two runs may time different kernels), and TensorFlow allocating
# GPU memory as it grows rather than all at start.
CUDA_NUMERICS = {"tf32": False, "cudnn_autotune": False, "tf_memory_growth": True}
# The keys of CUDA_NUMERICS that change a framework's GPU memory policy from its own default,
# per framework (the others run theirs in every cell: PyTorch's caching allocator, JAX
# preallocating 75% of the GPU).  A task with TaskInfo.default_allocator leaves them unset.
CUDA_MEMORY_POLICY = {"tensorflow": "tf_memory_growth"}


# ================================================================ tasks
@dataclasses.dataclass(frozen=True)
class TaskInfo:
    """What one iteration computes, and which derivative the correctness check compares
    (its words: report_spec.TASK_TEXT)."""

    # "gradients" (of the loss, per parameter), "trainable_gradients" (the same, of the
    # parameters outside the model's frozen part only: ModelSpec.frozen), "jacobian"
    # (output w.r.t. input), "sequence_gradients" (a variable-length task's) or "loss" (no
    # derivative: the loss itself is checked).  Each kind has its own float64 reference.
    derivative: str
    # Forward and derivative are two calls the clock can separate (outside whole-step modes).
    separable: bool
    # The task this one changes in one respect (the claims compare the two, paired by seed).
    variant_of: str | None = None
    # How a variable-length task shapes its batches (SEQUENCE_STRATEGIES), None: fixed shapes.
    sequence: str | None = None
    # The framework's GPU allocator as it comes: CUDA_MEMORY_POLICY's settings not applied.
    default_allocator: bool = False
    # The devices whose cells can measure what the task is about (others are unsupported).
    devices: tuple[str, ...] = DEVICES
    # The frameworks whose published code the task runs as written (the study's protocol,
    # emulated: its Figures 1-2); (): every framework runs it its own way.  Others are
    # unsupported (task_refusal).
    study_code: tuple[str, ...] = ()

    @property
    def frozen(self) -> bool:
        """The model's frozen part is not trainable: no derivative is taken through it."""
        return self.derivative == "trainable_gradients"


# Variable-length inputs (004: a dynamic graph runs each input at its own length, a static
# one pads): each batch of a sequence model gets its own length, drawn from the seed
# uniformly in SEQUENCE_LENGTHS (inclusive), the same for every framework, mode and
# strategy.  A strategy says how long the batch the framework sees is ("true", "dynamic":
# its own length, with the compiled modes' dynamic-shape option for "dynamic"; "padded": to
# the maximum; "bucketed": to the smallest bucket that holds it); the loss reads each
# example's state at its true last step (a mask past it), so every strategy has the same
# derivative: the true-length one (derivative "sequence_gradients").
SEQUENCE_LENGTHS = (4, 64)
SEQUENCE_BUCKETS = (8, 16, 32, 64)  # bucketing pads to the smallest bucket that holds a batch
SEQUENCE_STRATEGIES = ("true", "dynamic", "padded", "bucketed")


def padded_length(strategy: str, length: int) -> int:
    """The time steps of a batch of true length `length` as a strategy shapes it."""
    if strategy == "padded":
        return SEQUENCE_LENGTHS[1]
    if strategy == "bucketed":
        return next(b for b in SEQUENCE_BUCKETS if b >= length)
    return length


# The study's protocol emulated: its published code timed as it timed it (TASKS' entry).
STUDY_PROTOCOL_TASK = "backward_study"

TASKS: dict[str, TaskInfo] = {
    # One backward pass: the gradient of the scalar loss w.r.t. every parameter on a batch.
    "backward": TaskInfo("gradients", separable=True),
    # The Jacobian of the output w.r.t. the input of one example: a VJP per output row...
    "jacobian_rows": TaskInfo("jacobian", separable=True),
    # ...or in one call of the framework's vectorised Jacobian.
    "jacobian_vectorized": TaskInfo("jacobian", separable=False),
    # The loss's Jacobian w.r.t. all parameters through the Jacobian API (Hypothesis 0).
    "loss_jacobian": TaskInfo("gradients", separable=False),
    # The backward step with the model's frozen part (ModelSpec.frozen) not trainable.
    "backward_frozen": TaskInfo("trainable_gradients", separable=True, variant_of="backward"),
    # The backward step with its graph kept after the step until the next one starts.
    "backward_retained": TaskInfo("gradients", separable=True, variant_of="backward"),
    # The backward step with the GPU allocator as it comes (CUDA_MEMORY_POLICY not set).
    "backward_default_memory": TaskInfo("gradients", separable=True, variant_of="backward",
                                        default_allocator=True, devices=("cuda",)),
    # The loss alone, nothing recorded for a derivative: the cheap-gradient ratio's base.
    "forward": TaskInfo("loss", separable=False),
    # The study's protocol emulated (000 §3.1, Figs. 1-2): an epoch loop over the batches,
    # each sliced from the epoch's data inside the loop, the study's lines as written (no
    # .grad cleared: PyTorch's gradients accumulate as in its code), the clock around what
    # it timed.  Its derivative is checked one step at a time, from no accumulated .grad.
    STUDY_PROTOCOL_TASK: TaskInfo("gradients", separable=True,
                                  study_code=("torch", "tensorflow")),
    # The backward step on batches of varying length, shaped by each strategy.
    **{task: TaskInfo("sequence_gradients", separable=True, variant_of="backward",
                      sequence=strategy)
       for task, strategy in (("backward_varlen", "true"),
                              ("backward_varlen_dynamic", "dynamic"),
                              ("backward_padded", "padded"),
                              ("backward_bucketed", "bucketed"))},
}
# The variable-length tasks (TaskInfo.sequence), in SEQUENCE_STRATEGIES' order.
SEQUENCE_TASKS = tuple(t for s in SEQUENCE_STRATEGIES for t, info in TASKS.items()
                       if info.sequence == s)


def sequence_task(strategy: str) -> str:
    """The variable-length task of a strategy (SEQUENCE_STRATEGIES)."""
    return next(t for t in SEQUENCE_TASKS if TASKS[t].sequence == strategy)


# The forward alone: the denominator of the cheap-gradient ratio (adbench.scaling).
FORWARD_TASK = "forward"
# The tasks of the study's own experiments (the others vary one of them: TaskInfo.variant_of,
# time the forward alone, or run the study's published code: TaskInfo.study_code).
STUDY_TASKS = tuple(t for t, info in TASKS.items()
                    if info.variant_of is None and not info.study_code and t != FORWARD_TASK)
# The task whose data sizes each derivative kind's reference shares with its cells.
REFERENCE_TASK = {"gradients": "backward", "trainable_gradients": "backward_frozen",
                  "jacobian": "jacobian_rows", "sequence_gradients": "backward_varlen",
                  "loss": FORWARD_TASK}
JACOBIANS = ("jacobian_rows", "jacobian_vectorized")  # the study's two output Jacobians
HYPOTHESIS0_TASKS = ("backward", "loss_jacobian")  # Hypothesis 0: equal costs


def cuda_numerics(task: str) -> dict:
    """CUDA_NUMERICS as a cuda cell of `task` applies them: without the memory policy's keys
    where the task runs the framework's allocator as it comes."""
    if not TASKS[task].default_allocator:
        return dict(CUDA_NUMERICS)
    return {k: v for k, v in CUDA_NUMERICS.items() if k not in CUDA_MEMORY_POLICY.values()}


def task_refusal(framework: str, task: str, device: str) -> str | None:
    """Why a (framework, task, device) measures nothing the task is about, or None."""
    info = TASKS[task]
    if device not in info.devices:
        return f"the task {task} runs on {', '.join(info.devices)} only"
    if info.study_code and framework not in info.study_code:
        return (f"the task {task} runs the study's published code, which it gives for "
                f"{' and '.join(info.study_code)} only")
    if info.default_allocator and framework not in CUDA_MEMORY_POLICY:
        return (f"{framework} runs its own default GPU allocator in every cuda cell (the "
                f"experiment sets none of its memory policy): its backward cells are {task}'s")
    return None


def pairs(frameworks=None, compiled: bool | None = None) -> list[tuple[str, str]]:
    """(framework, mode) of the spec in its order, optionally only some frameworks, or only
    compiled (True) or eager (False) modes."""
    return [
        (framework, mode)
        for framework, info in FRAMEWORKS.items()
        if frameworks is None or framework in frameworks
        for mode, mode_info in info.modes.items()
        if compiled is None or mode_info.compiled == compiled
    ]


def eager_mode_of(framework: str) -> str | None:
    """The framework's first non-compiled mode: the baseline of its compiled modes."""
    return next((m for m, info in FRAMEWORKS[framework].modes.items() if not info.compiled), None)


def timed_quantities(framework: str, mode: str, task: str) -> tuple[str, ...]:
    """The quantities (raw-schema columns) a cell records."""
    split = TASKS[task].separable and not FRAMEWORKS[framework].modes[mode].whole_step
    return ("forward_s", "backward_s", "step_s") if split else ("step_s",)


# ================================================================ models
@dataclasses.dataclass(frozen=True)
class Param:
    """One parameter array, canonical layout; drawn from the seed by `init`."""

    name: str
    shape: tuple[int, ...]
    init: str = "glorot"  # glorot (uniform, from fan_in/fan_out) | lecun | zeros | ones
    fan_in: int = 0
    fan_out: int = 0

    @property
    def size(self) -> int:
        return math.prod(self.shape)


def dense(name: str, n_in: int, n_out: int, bias: bool = True) -> list[Param]:
    params = [Param(f"{name}.weight", (n_in, n_out), "glorot", n_in, n_out)]
    return params + ([Param(f"{name}.bias", (n_out,), "zeros")] if bias else [])


def conv(name: str, c_in: int, c_out: int, k: int, init: str = "glorot",
         bias: bool = True) -> list[Param]:
    params = [Param(f"{name}.weight", (c_out, c_in, k, k), init, c_in * k * k, c_out * k * k)]
    return params + ([Param(f"{name}.bias", (c_out,), "zeros")] if bias else [])


def batchnorm(name: str, channels: int) -> list[Param]:
    return [Param(f"{name}.gamma", (channels,), "ones"),
            Param(f"{name}.beta", (channels,), "zeros")]


# The losses a model may have (in words: report_spec.LOSS_TEXT).
LOSSES = ("l2", "sum", "xent", "ctc")


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """A model of the study, framework-neutral: every backend builds it from this (its name,
    source and the choices made where the seeds are silent: report_spec.MODEL_TEXT)."""

    family: str  # which forward function a backend uses: mlp, cnn, lstm, resnet, ...
    input_shape: tuple[int, ...]  # one example, canonical layout
    output_shape: tuple[int, ...]  # one example
    loss: str  # a key of LOSSES
    params: tuple[Param, ...]
    arch: dict = dataclasses.field(default_factory=dict)  # family-specific sizes
    target: str = "normal"  # l2 targets: onehot | normal
    batch_size: int = 128
    n_samples: int = 60000
    jacobian_rows: int | None = None  # rows of the output Jacobian computed (None: all)
    reference: str = "numpy"  # float64 ground truth: numpy, or a float64 torch run
    # The parameters (by name) a frozen task (TaskInfo.frozen) does not train: the model's
    # first layers, as a user fine-tuning the rest freezes them; () where the model has no
    # such part (a single layer), and its frozen cells are unsupported.
    frozen: tuple[str, ...] = ()
    # Features per time step where the model reads a sequence whose length can vary (its
    # variable-length tasks: TaskInfo.sequence); None: it cannot, and those cells are
    # unsupported.
    sequence_features: int | None = None

    @property
    def n_parameters(self) -> int:
        return sum(p.size for p in self.params)

    @property
    def n_outputs(self) -> int:
        return math.prod(self.output_shape)

    @property
    def n_jacobian_rows(self) -> int:
        return self.jacobian_rows or self.n_outputs

    def jacobian_shape(self, rows: int | None = None) -> tuple[int, ...]:
        return (rows or self.n_jacobian_rows, *self.input_shape)

    def trained(self, task: str) -> list[int]:
        """The indices (spec order) of the parameters a loss task differentiates: all, or
        those outside the frozen part for a frozen task."""
        frozen = set(self.frozen) if TASKS[task].frozen else set()
        return [i for i, p in enumerate(self.params) if p.name not in frozen]


def named(params, *prefixes: str) -> tuple[str, ...]:
    """The names of the parameters under the given prefixes ("fc0." names fc0's weight and
    bias): how a model's frozen part is written."""
    return tuple(p.name for p in params if p.name.startswith(prefixes))


def first_half_of_layers(n_layers: int) -> tuple[str, ...]:
    """An MLP's first half of its dense layers (rounded down), fc0, fc1, ...: its frozen part."""
    return tuple(f"fc{i}." for i in range(n_layers // 2))


MNIST = dict(input_shape=(784,), output_shape=(10,))
IMAGE = dict(input_shape=(1, 28, 28), output_shape=(10,))


def _mlp(hidden: tuple[int, ...]) -> ModelSpec:
    """ReLU hidden layers, linear output, Glorot-uniform weights, zero biases."""
    sizes = (784, *hidden, 10)
    params = [p for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:]))
              for p in dense(f"fc{i}", a, b)]
    return ModelSpec(
        family="mlp", loss="l2", target="onehot", params=tuple(params),
        arch={"sizes": sizes}, frozen=named(params, *first_half_of_layers(len(sizes) - 1)),
        **MNIST)


# The width sweep (config/sweep-width.yaml): the study's 512-MLP at other widths, one hidden
# layer each, a factor of 4 apart. Ours, not the study's: a size of a family every backend
# builds from arch["sizes"], so the backend tests check the family on the study's models.
SWEEP_WIDTHS = (32, 128, 2048, 8192)
SWEEP_MODELS = tuple(f"mlp{w}" for w in SWEEP_WIDTHS)


# ---------------------------------------------------------------- ResNet50 (torchvision v1.5)
RESNET50_STAGES = ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2))  # planes, blocks, stride
RESNET_EXPANSION = 4


def resnet_blocks(stages=RESNET50_STAGES) -> Iterator[dict]:
    """The bottleneck blocks in order: name, in/mid/out channels, stride, projection shortcut."""
    in_ch = 64
    for s, (planes, blocks, stride) in enumerate(stages):
        for b in range(blocks):
            out_ch = planes * RESNET_EXPANSION
            yield {"name": f"layer{s + 1}.{b}", "in": in_ch, "mid": planes, "out": out_ch,
                   "stride": stride if b == 0 else 1, "project": b == 0}
            in_ch = out_ch


def _resnet50_params(n_classes: int) -> list[Param]:
    params = conv("conv1", 3, 64, 7, "lecun", bias=False) + batchnorm("bn1", 64)
    for blk in resnet_blocks():
        n = blk["name"]
        params += conv(f"{n}.conv1", blk["in"], blk["mid"], 1, "lecun", bias=False)
        params += batchnorm(f"{n}.bn1", blk["mid"])
        params += conv(f"{n}.conv2", blk["mid"], blk["mid"], 3, "lecun", bias=False)
        params += batchnorm(f"{n}.bn2", blk["mid"])
        params += conv(f"{n}.conv3", blk["mid"], blk["out"], 1, "lecun", bias=False)
        params += batchnorm(f"{n}.bn3", blk["out"])
        if blk["project"]:
            params += conv(f"{n}.downsample", blk["in"], blk["out"], 1, "lecun", bias=False)
            params += batchnorm(f"{n}.downsample_bn", blk["out"])
    return params + dense("fc", 2048, n_classes)


CNN_CHANNELS = (8, 16)
LSTM_HIDDEN = 64
ATTENTION = {"length": 8, "embed": 16}
CTC = {"steps": 16, "features": 8, "classes": 6, "label_length": 4}  # class 0 is the blank
RNN_CELL = {"hidden": 20, "inputs": 10}

# Model registry: config names -> models. Sizes the seeds leave open are our choices, stated
# in report_spec.MODEL_TEXT and printed in the paper.
MODELS: dict[str, ModelSpec] = {
    "mlp512": _mlp((512,)),
    "mlp354x2": _mlp((354, 354)),
    "mlp294x3": _mlp((294, 294, 294)),
    **{name: _mlp((width,)) for name, width in zip(SWEEP_MODELS, SWEEP_WIDTHS)},
    "fcn": ModelSpec(
        family="mlp", loss="l2", target="onehot",
        params=tuple(dense("fc0", 784, 256) + dense("fc1", 256, 10)),
        arch={"sizes": (784, 256, 10)}, frozen=("fc0.weight", "fc0.bias"), **MNIST),
    "cnn": ModelSpec(
        family="cnn", loss="l2", target="onehot", reference="torch",
        params=tuple(conv("conv0", 1, CNN_CHANNELS[0], 3) + conv("conv1", *CNN_CHANNELS, 3)
                     + dense("fc", CNN_CHANNELS[1] * 14 * 14, 10)),
        arch={"channels": CNN_CHANNELS, "kernel": 3, "strides": (1, 2), "padding": 1},
        frozen=("conv0.weight", "conv0.bias", "conv1.weight", "conv1.bias"), **IMAGE),
    "lstm": ModelSpec(
        family="lstm", input_shape=(28, 28), output_shape=(10,), loss="l2", target="onehot",
        reference="torch",
        params=(Param("lstm.W_ih", (28, 4 * LSTM_HIDDEN), "glorot", 28, 4 * LSTM_HIDDEN),
                Param("lstm.W_hh", (LSTM_HIDDEN, 4 * LSTM_HIDDEN), "glorot", LSTM_HIDDEN,
                      4 * LSTM_HIDDEN),
                Param("lstm.bias", (4 * LSTM_HIDDEN,), "zeros"),
                *dense("fc", LSTM_HIDDEN, 10)),
        arch={"hidden": LSTM_HIDDEN, "steps": 28},
        frozen=("lstm.W_ih", "lstm.W_hh", "lstm.bias"), sequence_features=28),
    "resnet50": ModelSpec(
        family="resnet", input_shape=(3, 32, 32), output_shape=(1000,), loss="l2",
        target="onehot", params=tuple(_resnet50_params(1000)),
        arch={"stages": RESNET50_STAGES}, batch_size=8, n_samples=64, jacobian_rows=10,
        reference="torch",
        frozen=named(_resnet50_params(1000), "conv1.", "bn1.", "layer")),  # all but fc
    "dense": ModelSpec(
        family="mlp", input_shape=(256,), output_shape=(128,), loss="l2",
        params=tuple(dense("fc0", 256, 128)), arch={"sizes": (256, 128), "linear": True}),
    "attention": ModelSpec(
        family="attention", input_shape=(ATTENTION["length"], ATTENTION["embed"]),
        output_shape=(ATTENTION["length"], ATTENTION["embed"]), loss="l2", reference="torch",
        params=tuple(p for n in ("q", "k", "v", "o")
                     for p in dense(f"attn.{n}", ATTENTION["embed"], ATTENTION["embed"])),
        arch=ATTENTION),
    "fc_xent": ModelSpec(
        family="mlp", loss="xent", params=tuple(dense("fc0", 784, 10)),
        arch={"sizes": (784, 10), "linear": True}, **MNIST),
    "ctc": ModelSpec(
        family="ctc", input_shape=(CTC["steps"], CTC["features"]),
        output_shape=(CTC["steps"], CTC["classes"]), loss="ctc", reference="torch",
        params=tuple(dense("fc", CTC["features"], CTC["classes"])), arch=CTC,
        batch_size=16, n_samples=1024),
    "rnn_cell": ModelSpec(
        family="rnn_cell", input_shape=(RNN_CELL["inputs"],),
        output_shape=(RNN_CELL["hidden"],), loss="sum",
        params=(Param("W_h", (20, 20), "glorot", 20, 20),
                Param("W_x", (20, 10), "glorot", 10, 20)),
        arch=RNN_CELL, batch_size=1, n_samples=469, frozen=("W_h",),
        sequence_features=RNN_CELL["inputs"]),
}


# ================================================================ the study's groups of cells
MLPS = ("mlp512", "mlp354x2", "mlp294x3")  # the study's: depth at constant parameters
# One hidden layer, width growing (the study's mlp512 among them), in order of width.
MLP_WIDTHS = tuple(f"mlp{w}" for w in sorted((*SWEEP_WIDTHS, 512)))
# The models of the seeds' documents: MODELS less the sweep's own sizes. The study's claims
# and tables range over these; a sweep model is measured by its sweep's config alone.
STUDY_MODELS = tuple(m for m in MODELS if m not in SWEEP_MODELS)
STUDY_JACOBIAN_MODELS = ("fcn", "cnn", "lstm")  # the study's Table 3: its "small" models
STUDY_LARGE_MODELS = ("resnet50",)  # its Table 4: the "larger model"
STUDY_FRAMEWORKS = ("torch", "tensorflow")  # what the study's own tables compare


# ================================================================ workloads and cells
@dataclasses.dataclass(frozen=True)
class Workload:
    """What one timing job computes: model, task, data shape, iteration counts, and when its
    measured phase stops (adbench.timing.StopRule): `fixed`, after `iterations`, or
    `precision`, once the 95 % interval of the median step is within `precision` of it,
    or `measure_s` seconds were measured, between `min_iterations` and `iterations` (the
    most; where it is the fewer, it wins).  A measured phase while other processes took
    more than `busy_share` of a core is measured again, at most `busy_retimes` times
    (adbench.machine_load.BusyRule; None: not judged).
    Without a config: the study's protocol, a fixed count, nothing re-timed (the config's
    defaults are workflow/schemas/config.schema.yaml's)."""

    model: str
    seed: int
    task: str = "backward"
    n_samples: int | None = None  # None: the model's default
    batch_size: int | None = None
    warmup: int = 5
    iterations: int = 469
    jacobian_rows: int | None = None
    stop: str = "fixed"
    min_iterations: int | None = None
    precision: float | None = None
    measure_s: float | None = None
    busy_share: float | None = None
    busy_retimes: int = 0

    def __post_init__(self):
        spec = MODELS[self.model]
        defaults = {"n_samples": spec.n_samples, "batch_size": spec.batch_size,
                    "jacobian_rows": spec.n_jacobian_rows}
        for name, default in defaults.items():
            if getattr(self, name) is None:
                object.__setattr__(self, name, default)

    @property
    def spec(self) -> ModelSpec:
        return MODELS[self.model]

    @property
    def per_example(self) -> bool:
        """Output Jacobians are of one example (batch 1); loss derivatives use batches."""
        return TASKS[self.task].derivative == "jacobian"

    @property
    def rows_per_batch(self) -> int:
        return 1 if self.per_example else self.batch_size

    @property
    def n_batches(self) -> int:
        return math.ceil(self.n_samples / self.rows_per_batch)

    @property
    def total_iterations(self) -> int:
        return self.warmup + self.iterations

    def batch_bounds(self, iteration: int) -> tuple[int, int]:
        """Rows of the data set used at an iteration: batches cycle through the epoch."""
        start = (iteration % self.n_batches) * self.rows_per_batch
        return start, min(start + self.rows_per_batch, self.n_samples)

    def rows_needed(self) -> int:
        """Only the rows the job will touch are generated (a short run needs few)."""
        if self.total_iterations >= self.n_batches:
            return self.n_samples
        return self.batch_bounds(self.total_iterations - 1)[1]

    @property
    def sequence(self) -> str | None:
        """The task's variable-length strategy (SEQUENCES), None: fixed shapes."""
        return TASKS[self.task].sequence

    def batch_lengths(self) -> np.ndarray:
        """Each batch's true length (a variable-length task's), from the seed alone: the same
        for every strategy, framework and mode, whatever the iteration counts."""
        low, high = SEQUENCE_LENGTHS
        return np.random.default_rng([self.seed, 2]).integers(low, high + 1, self.n_batches)

    def sequence_length(self, iteration: int) -> int | None:
        """The true length of the batch an iteration uses; None for a fixed-shape task."""
        if self.sequence is None:
            return None
        return int(self.batch_lengths()[iteration % self.n_batches])


@dataclasses.dataclass(frozen=True)
class Cell:
    """One point of the grid: one Snakemake job, one process, one Parquet file."""

    framework: str
    mode: str
    model: str
    task: str
    device: str
    threads: int
    seed: int

    @property
    def raw_path(self) -> str:
        return RAW_PATTERN.format_map(vars(self))  # vars, not asdict: no deep copy per path

    @property
    def gradient_path(self) -> str:
        return GRADIENT_PATTERN.format_map(vars(self))

    @property
    def log_path(self) -> str:
        return LOG_PATTERN.format_map(vars(self))

    @property
    def reference_path(self) -> str:
        return REFERENCE_PATTERN.format(model=self.model, seed=self.seed,
                                        derivative=TASKS[self.task].derivative)


CELL_FIELDS = tuple(f.name for f in dataclasses.fields(Cell))
WORKLOAD_SIZES = ("warmup", "iterations", "n_samples", "batch_size", "jacobian_rows")
# When a measured phase stops and when a busy machine re-times it (Workload's docstring).
WORKLOAD_STOPPING = ("stop", "min_iterations", "precision", "measure_s", "busy_share",
                     "busy_retimes")
STOPS = ("precision", "fixed")


@dataclasses.dataclass(frozen=True)
class CellDescription:
    """One timing job's whole input: the cell (its coordinates) and its workload (data sizes
    and iterations).  Written once, by the workflow, from the config; handed to the timing
    job whole (measure.py --cell); stored in the cell's raw file and derivative file; read
    back from there by the analysis.  A cell's paths are its human index, never its truth."""

    cell: Cell
    workload: Workload

    def __post_init__(self):
        problems = description_problems(self.cell, self.workload)
        if problems:
            raise ValueError("; ".join(problems))

    def as_dict(self) -> dict:
        return {"cell": dataclasses.asdict(self.cell),
                "workload": dataclasses.asdict(self.workload)}

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: dict) -> CellDescription:
        """From as_dict's shape (a raw file's metadata holds it): an unknown or missing key
        is an error naming it."""
        parts = {"cell": Cell, "workload": Workload}
        if not isinstance(data, dict) or set(data) - set(parts) or not set(parts) <= set(data):
            raise ValueError(f"a cell description has the keys {sorted(parts)}, got "
                             f"{sorted(data) if isinstance(data, dict) else type(data).__name__}")
        values = {}
        for name, kind in parts.items():
            fields = {f.name for f in dataclasses.fields(kind)}
            given = data[name]
            if set(given) - fields:
                raise ValueError(f"{name}: unknown key(s) {sorted(set(given) - fields)} "
                                 f"(known: {sorted(fields)})")
            if name == "workload" and given.get("model") not in MODELS:
                raise ValueError(f"workload.model: unknown model {given.get('model')!r}")
            values[name] = given
        cell = Cell(**values["cell"])
        return cls(cell, Workload(**values["workload"]))

    @classmethod
    def from_json(cls, text: str) -> CellDescription:
        return cls.from_dict(json.loads(text))

    @classmethod
    def of(cls, framework: str, mode: str, model: str, task: str = "backward",
           device: str = "cpu", threads: int = 1, seed: int = 0,
           **workload) -> CellDescription:
        """A description from its coordinates and any workload sizes (the model's defaults
        for the others)."""
        cell = Cell(framework, mode, model, task, device, threads, seed)
        return cls(cell, Workload(model=model, seed=seed, task=task, **workload))


def description_problems(cell: Cell, workload: Workload) -> list[str]:
    """What makes a (cell, workload) no cell of this experiment, each naming its key."""
    problems = []
    if cell.framework not in FRAMEWORKS:
        problems.append(f"cell.framework: unknown framework {cell.framework!r}")
    elif cell.mode not in FRAMEWORKS[cell.framework].modes:
        problems.append(f"cell.mode: {cell.mode!r} is not a {cell.framework} mode (valid: "
                        f"{', '.join(FRAMEWORKS[cell.framework].modes)})")
    for key, known in (("model", MODELS), ("task", TASKS), ("device", DEVICES)):
        if getattr(cell, key) not in known:
            problems.append(f"cell.{key}: unknown {key} {getattr(cell, key)!r}")
    for key in ("model", "task", "seed"):
        if getattr(cell, key) != getattr(workload, key):
            problems.append(f"workload.{key}: {getattr(workload, key)!r} is not the cell's "
                            f"{getattr(cell, key)!r}")
    sizes = {"cell.threads": cell.threads, "workload.iterations": workload.iterations,
             "workload.n_samples": workload.n_samples,
             "workload.batch_size": workload.batch_size,
             "workload.jacobian_rows": workload.jacobian_rows}
    problems += [f"{key}: {value!r} is not a whole number >= 1" for key, value in sizes.items()
                 if not isinstance(value, int) or value < 1]
    if not isinstance(workload.warmup, int) or workload.warmup < 0:
        problems.append(f"workload.warmup: {workload.warmup!r} is not a whole number >= 0")
    if not isinstance(cell.seed, int) or cell.seed < 0:
        problems.append(f"cell.seed: {cell.seed!r} is not a whole number >= 0")
    return problems + stopping_problems(workload)


def _positive(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0


def stopping_problems(workload: Workload) -> list[str]:
    """What makes a workload's stop rule or busy rule unusable, each naming its key."""
    w, problems = workload, []
    if w.stop not in STOPS:
        problems.append(f"workload.stop: {w.stop!r} is not one of {', '.join(STOPS)}")
    if w.stop == "precision":
        if not (_positive(w.precision) and w.precision < 1):
            problems.append(f"workload.precision: {w.precision!r} is not a fraction of the "
                            "median in (0, 1), e.g. 0.02")
        if not isinstance(w.min_iterations, int) or w.min_iterations < 1:
            problems.append(f"workload.min_iterations: {w.min_iterations!r} is not a whole "
                            "number >= 1")
    if w.measure_s is not None and not _positive(w.measure_s):
        problems.append(f"workload.measure_s: {w.measure_s!r} is not a number of seconds > 0")
    if w.busy_share is not None and not (_positive(w.busy_share) or w.busy_share == 0):
        problems.append(f"workload.busy_share: {w.busy_share!r} is not a share of a core >= 0")
    if not isinstance(w.busy_retimes, int) or w.busy_retimes < 0:
        problems.append(f"workload.busy_retimes: {w.busy_retimes!r} is not a whole number >= 0")
    return problems
# Paths of a results tree, relative to its root: results/ for the default config, the
# `results` key of any other (workflow/rules/common.smk), so configs never share cells.
# A cell's place in each per-cell folder (raw/, gradients/, logs/measure/, ...).
CELL_PATH = "{device}/{framework}/{mode}/{model}/{task}/t{threads}/seed{seed}"
RAW_PATTERN = "raw/" + CELL_PATH + ".parquet"
# Loss and derivatives (gradients or Jacobian) of a cell at its first batch, for the check.
GRADIENT_PATTERN = "gradients/" + CELL_PATH + ".npz"
LOG_PATTERN = "logs/measure/" + CELL_PATH + ".log"  # the timing job's log: what went wrong
# The float64 ground truth of a model's derivative, shared by every cell that computes it.
REFERENCE_PATTERN = "reference/{model}/{derivative}/seed{seed}.npz"


def invalid_pairs(frameworks: dict[str, Iterable[str]]) -> list[str]:
    """Messages for every framework or mode the table does not know."""
    problems = []
    for framework, modes in frameworks.items():
        if framework not in FRAMEWORKS:
            problems.append(
                f"grid.frameworks: unknown framework {framework!r} "
                f"(valid: {', '.join(FRAMEWORKS)})"
            )
            continue
        valid = FRAMEWORKS[framework].modes
        for mode in modes:
            if mode not in valid:
                problems.append(
                    f"grid.frameworks.{framework}: mode {mode!r} is not a {framework} mode "
                    f"(valid: {', '.join(valid)})"
                )
    return problems


def expand_grid(grid: dict) -> Iterator[Cell]:
    """Every valid cell of a validated config grid, in a stable order; a device a framework
    has no path for (FrameworkInfo.devices) gives no cell (see devices_without_a_path)."""
    pairs = [
        (framework, mode)
        for framework, modes in grid["frameworks"].items()
        for mode in modes
        if framework in FRAMEWORKS and mode in FRAMEWORKS[framework].modes
    ]
    for (framework, mode), model, task, device, threads, seed in itertools.product(
        pairs, grid["models"], grid["tasks"], grid["devices"], grid["threads"], grid["seeds"]
    ):
        if device in FRAMEWORKS[framework].devices:
            yield Cell(framework, mode, model, task, device, int(threads), int(seed))


# The axes a config's grid may leave out (the schema's $defs/grid names them). Not schema
# defaults: every_grid shares the grid's axes and must not override a grid with them.
GRID_DEFAULTS = {"tasks": ["backward"], "devices": ["cpu"], "threads": [1]}


def config_grids(config: dict) -> list[dict]:
    """A config's grids (one written as a mapping is a list of one), each with the defaults
    for the axes it leaves out and every_grid's keys in place of its own."""
    grids = config["grid"] if isinstance(config["grid"], list) else [config["grid"]]
    return [{**GRID_DEFAULTS, **grid, **config.get("every_grid", {})} for grid in grids]


def grid_cells(grids: list[dict]) -> list[Cell]:
    """The union of the grids' cells (config_grids), each once, in a stable order."""
    return list(dict.fromkeys(cell for grid in grids for cell in expand_grid(grid)))


def config_cells(config: dict) -> list[Cell]:
    """A config's cells: what its timing jobs measure."""
    return grid_cells(config_grids(config))


def devices_without_a_path(grid: dict) -> list[str]:
    """'theano on cuda', ...: what a grid asks for that expand_grid leaves out, to say so."""
    return [f"{framework} on {device}" for framework in grid["frameworks"]
            if framework in FRAMEWORKS for device in grid["devices"]
            if device not in FRAMEWORKS[framework].devices]


# ================================================================ data and weights
def make_data(workload: Workload) -> dict[str, np.ndarray]:
    """The synthetic data set, from the seed: inputs `x`, targets `y`, and `h0` for rnn_cell.

    MNIST-shaped models get pixels in [0, 1) and one-hot labels, as in the study.  Each array
    has its own random stream, so its first rows do not depend on how many rows a job needs.
    """
    spec, rows = workload.spec, workload.rows_needed()
    stream = lambda k: np.random.default_rng([workload.seed, 1, k])  # noqa: E731
    shape = spec.input_shape
    if workload.sequence is not None:  # the longest sequence; batches take their length of it
        if spec.sequence_features is None:
            raise ValueError(f"{workload.model} reads no sequence: no data for {workload.task}")
        shape = (SEQUENCE_LENGTHS[1], spec.sequence_features)
    if spec.target == "onehot" or spec.loss == "xent":
        x = stream(0).random((rows, *shape), dtype=np.float32)
        labels = stream(1).integers(0, spec.n_outputs, size=rows)
        if spec.loss == "xent":
            return {"x": x, "y": labels.astype(np.int64)}
        return {"x": x, "y": np.eye(spec.n_outputs, dtype=np.float32)[labels]}
    x = stream(0).standard_normal((rows, *shape), dtype=np.float32)
    if spec.loss == "l2":
        return {"x": x, "y": stream(1).standard_normal((rows, *spec.output_shape),
                                                       dtype=np.float32)}
    if spec.loss == "ctc":  # label sequences without the blank (class 0)
        labels = stream(1).integers(1, spec.arch["classes"],
                                    size=(rows, spec.arch["label_length"]))
        return {"x": x, "y": labels.astype(np.int64)}
    if spec.family == "rnn_cell":
        return {"x": x, "h0": stream(2).standard_normal((rows, spec.arch["hidden"]),
                                                        dtype=np.float32)}
    return {"x": x}


def epoch_bounds(sizes: list[int]) -> list[tuple[int, int]]:
    """Each batch's [start, end) rows in an epoch whose batches, of these sizes, are
    concatenated in order (the study's loop slices its batches from one array so)."""
    ends = np.cumsum(sizes).tolist()
    return list(zip([0, *ends[:-1]], ends))


def make_batches(workload: Workload) -> list[dict[str, np.ndarray]]:
    """The distinct batches a job uses, in order; iteration i uses batch i % len(batches).

    A variable-length task's batch i holds the first `padded_length` steps of its sequences,
    zeros past its true length, and `lengths` (int64, per example): the true length, where
    the loss reads each example's state (backends mask the steps past it)."""
    data = make_data(workload)
    bounds = [workload.batch_bounds(i)
              for i in range(min(workload.total_iterations, workload.n_batches))]
    batches = [{k: v[lo:hi] for k, v in data.items()} for lo, hi in bounds]
    if workload.sequence is None:
        return batches
    for i, batch in enumerate(batches):
        length = workload.sequence_length(i)
        x = batch["x"][:, :padded_length(workload.sequence, length)].copy()
        x[:, length:] = 0.0
        batch["x"] = x
        batch["lengths"] = np.full(len(x), length, dtype=np.int64)
    return batches


def make_params(workload: Workload) -> list[np.ndarray]:
    """Every parameter of the model in canonical order and layout, float32, from the seed.

    Glorot-uniform (or LeCun-uniform) weights, zero biases, unit batch-norm scales: every
    backend loads these exact arrays, so all frameworks start equal.
    """
    rng = np.random.default_rng([workload.seed, 0])
    arrays = []
    for p in workload.spec.params:
        if p.init in ("glorot", "lecun"):
            scale = 6.0 / (p.fan_in + p.fan_out) if p.init == "glorot" else 3.0 / p.fan_in
            limit = math.sqrt(scale)
            arrays.append(rng.uniform(-limit, limit, size=p.shape).astype(np.float32))
        else:
            fill = {"zeros": 0.0, "ones": 1.0}[p.init]
            arrays.append(np.full(p.shape, fill, dtype=np.float32))
    return arrays
