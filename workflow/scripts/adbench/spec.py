"""Framework-neutral description of the experiment grid and its workloads.

This is the one place for the valid (framework, mode) table, the model registry and the
raw-file layout.  Nothing here imports a deep-learning framework: the Snakefile, the timing
jobs in every framework's environment and the analysis scripts all import it.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import re
import string
from typing import Iterable, Iterator

import numpy as np


@dataclasses.dataclass(frozen=True)
class ModeInfo:
    """How one (framework, mode) pair runs and what its timing can separate."""

    compiled: bool
    label: str
    description: str

    @property
    def timed_quantities(self) -> tuple[str, ...]:
        # A compiled step fuses forward and backward: only the whole step can be timed.
        return ("step_s",) if self.compiled else ("forward_s", "backward_s", "step_s")


@dataclasses.dataclass(frozen=True)
class FrameworkInfo:
    """A framework: its label, the pin file its jobs run in, its backend module, its modes."""

    label: str
    env: str  # envs/<env>.yaml
    backend: str  # adbench.backends.<backend>
    modes: dict[str, ModeInfo]


# The valid (framework, mode) pairs: the only table of them in the project.
FRAMEWORKS: dict[str, FrameworkInfo] = {
    "torch": FrameworkInfo(
        label="PyTorch",
        env="torch",
        backend="torch_backend",
        modes={
            "eager": ModeInfo(False, "eager", "loss.backward() on the define-by-run graph"),
            "script": ModeInfo(
                True, "TorchScript", "torch.jit.script of the whole step (forward + autograd.grad)"
            ),
        },
    ),
    "tensorflow": FrameworkInfo(
        label="TensorFlow",
        env="tensorflow",
        backend="tensorflow_backend",
        modes={
            "eager": ModeInfo(False, "eager", "tf.GradientTape, then tape.gradient()"),
            "graph": ModeInfo(
                True, "tf.function", "tf.function of the whole step (forward + tape.gradient)"
            ),
        },
    ),
}
ANALYSIS_ENV = "analysis"

DEVICES = ("cpu", "cuda")
# Tables the pipeline writes (results/tables/<name>.{csv,md,tex}); built by adbench.tables.
TABLE_NAMES = ("table1_eager", "table2_compiled")
TASKS = ("backward",)


@dataclasses.dataclass(frozen=True)
class MLP:
    """The study's multi-layer perceptron: ReLU hidden layers, linear output (§3.1.1)."""

    hidden: tuple[int, ...]
    n_inputs: int = 784
    n_outputs: int = 10

    @property
    def layer_sizes(self) -> tuple[int, ...]:
        return (self.n_inputs, *self.hidden, self.n_outputs)

    @property
    def n_parameters(self) -> int:
        sizes = self.layer_sizes
        return sum(a * b + b for a, b in zip(sizes[:-1], sizes[1:]))

    @property
    def label(self) -> str:
        return "[" + ", ".join(str(h) for h in self.hidden) + "]"


# Model registry: config names -> architectures (the study's three ~406k-parameter MLPs).
MODELS: dict[str, MLP] = {
    "mlp512": MLP(hidden=(512,)),
    "mlp354x2": MLP(hidden=(354, 354)),
    "mlp294x3": MLP(hidden=(294, 294, 294)),
}


@dataclasses.dataclass(frozen=True)
class Workload:
    """What one timing job computes: data shape, iteration counts, model."""

    model: str
    seed: int
    n_samples: int = 60000
    batch_size: int = 128
    warmup: int = 5
    iterations: int = 469

    @property
    def architecture(self) -> MLP:
        return MODELS[self.model]

    @property
    def n_batches(self) -> int:
        return math.ceil(self.n_samples / self.batch_size)

    @property
    def total_iterations(self) -> int:
        return self.warmup + self.iterations

    def batch_bounds(self, iteration: int) -> tuple[int, int]:
        """Rows of the data set used at an iteration: batches cycle through the epoch."""
        start = (iteration % self.n_batches) * self.batch_size
        return start, min(start + self.batch_size, self.n_samples)

    def rows_needed(self) -> int:
        """Only the rows the job will touch are generated (a short run needs few)."""
        if self.total_iterations >= self.n_batches:
            return self.n_samples
        return self.batch_bounds(self.total_iterations - 1)[1]


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
        return RAW_PATTERN.format(**dataclasses.asdict(self))

    @property
    def gradient_path(self) -> str:
        return GRADIENT_PATTERN.format(**dataclasses.asdict(self))


CELL_FIELDS = tuple(f.name for f in dataclasses.fields(Cell))
_CELL_SUFFIX = "{device}/{framework}/{mode}/{model}/{task}/t{threads}/seed{seed}"
RAW_PATTERN = "results/raw/" + _CELL_SUFFIX + ".parquet"
GRADIENT_PATTERN = "results/gradients/" + _CELL_SUFFIX + ".npz"


_FIELD_REGEX = {"threads": r"\d+", "seed": r"\d+"}


def cell_from_path(path: str, pattern: str = RAW_PATTERN) -> Cell:
    """The cell a raw (or gradient) file belongs to, parsed back from its path."""
    regex = "(?:^|/)"  # whole path components: "myresults/raw/..." is not a raw path
    for literal, field, _, _ in string.Formatter().parse(pattern):
        regex += re.escape(literal) + (rf"(?P<{field}>{_FIELD_REGEX.get(field, '[^/]+')})"
                                        if field else "")
    match = re.search(regex + "$", path)
    if not match:
        raise ValueError(f"{path}: does not match the layout {pattern}")
    fields = match.groupdict()
    return Cell(**{k: int(v) if k in ("threads", "seed") else v for k, v in fields.items()})


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
    """Every valid cell of a validated config grid, in a stable order."""
    pairs = [
        (framework, mode)
        for framework, modes in grid["frameworks"].items()
        for mode in modes
        if framework in FRAMEWORKS and mode in FRAMEWORKS[framework].modes
    ]
    for (framework, mode), model, task, device, threads, seed in itertools.product(
        pairs, grid["models"], grid["tasks"], grid["devices"], grid["threads"], grid["seeds"]
    ):
        yield Cell(framework, mode, model, task, device, int(threads), int(seed))


# ---------------------------------------------------------------- data and weights
def make_data(workload: Workload) -> tuple[np.ndarray, np.ndarray]:
    """Synthetic MNIST-shaped data (pixels in [0, 1), one-hot labels), float32, from the seed."""
    rng = np.random.default_rng([workload.seed, 1])
    arch = workload.architecture
    rows = workload.rows_needed()
    x = rng.random((rows, arch.n_inputs), dtype=np.float32)
    labels = rng.integers(0, arch.n_outputs, size=rows)
    y = np.eye(arch.n_outputs, dtype=np.float32)[labels]
    return x, y


def make_batches(workload: Workload) -> list[tuple[np.ndarray, np.ndarray]]:
    """The distinct batches a job uses, in order; iteration i uses batch i % len(batches)."""
    x, y = make_data(workload)
    bounds = [workload.batch_bounds(i)
              for i in range(min(workload.total_iterations, workload.n_batches))]
    return [(x[lo:hi], y[lo:hi]) for lo, hi in bounds]


def make_weights(workload: Workload) -> list[tuple[np.ndarray, np.ndarray]]:
    """Glorot-uniform weights (in, out) and zero biases, float32, from the seed.

    Every backend computes x @ W + b with these exact arrays, so all frameworks start equal.
    """
    rng = np.random.default_rng([workload.seed, 0])
    sizes = workload.architecture.layer_sizes
    layers = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        limit = math.sqrt(6.0 / (fan_in + fan_out))
        w = rng.uniform(-limit, limit, size=(fan_in, fan_out)).astype(np.float32)
        layers.append((w, np.zeros(fan_out, dtype=np.float32)))
    return layers


def reference_gradients(
    workload: Workload, x: np.ndarray, y: np.ndarray
) -> tuple[float, list[np.ndarray]]:
    """Loss and gradients of ||y - mlp(x)||_2 in float64 numpy: the backends' ground truth."""
    params = [p.astype(np.float64) for layer in make_weights(workload) for p in layer]
    activations = [x.astype(np.float64)]
    n_layers = len(params) // 2
    for i in range(n_layers):
        z = activations[-1] @ params[2 * i] + params[2 * i + 1]
        activations.append(np.maximum(z, 0.0) if i < n_layers - 1 else z)
    diff = y.astype(np.float64) - activations[-1]
    loss = float(np.linalg.norm(diff))
    grad_out = -diff / loss
    grads: list[np.ndarray] = [np.empty(0)] * len(params)
    for i in reversed(range(n_layers)):
        grads[2 * i] = activations[i].T @ grad_out
        grads[2 * i + 1] = grad_out.sum(axis=0)
        grad_out = grad_out @ params[2 * i].T
        grad_out = grad_out * (activations[i] > 0)
    return loss, grads
