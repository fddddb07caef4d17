"""One module per framework; each imports only its own framework.

A backend module provides:
    configure_threads(threads) -> dict         -- before any framework work; returns what
                                                  the framework reports it now uses
    prepare(workload, mode, device, dtype="float32") -> Prepared
    versions() -> dict[str, str]               -- library versions for provenance
    device_name(device) -> str                 -- e.g. the GPU's name, for provenance

Shared by the backends: `no_sync` (the sync of a step that has finished when it returns),
`blas` (the BLAS/OpenMP thread pools, limited and recorded in one key format) and
`symbolic_graphs` (the models' graphs for PyTensor and Theano, written once against the
tensor module each passes in).

A backend with a CUDA path (spec.FRAMEWORKS[...].cuda_env) also provides, used by its own
`prepare` and by measure.py on cuda cells only:
    device_sync(device) -> () -> None          -- waits for the device's queued work; the
                                                  timer calls it before every clock read
    apply_cuda_numerics(numerics) -> dict      -- sets spec.CUDA_NUMERICS (TF32, autotuning,
                                                  memory growth); returns what it set, for
                                                  the cell's `choices`
    gpu_info(device) -> dict                   -- name, driver, CUDA/cuDNN, memory
    cuda_runtime() -> (str | None, str)        -- the CUDA runtime the framework got (or was
                                                  built with), and where that was read; no
                                                  GPU needed
    reset_peak_memory(device), peak_memory(device) -> int | None
                                               -- peak device memory of the timed loop
    peak_reserved_memory(device), device_memory_in_use(device) -> int | None
                                               -- optional: the allocator's peak reserved
                                                  memory; what is still allocated once the
                                                  last step returned

`prepare` builds the workload's model (spec.MODELS[workload.model]) the way that framework's
users write it, loads the spec's canonical arrays into it (converting layouts once, here),
places every batch on the device, and returns a `Prepared` for the workload's task.  Tasks
(spec.TASKS) are implemented once per backend, generically over models.  What a cell cannot
run raises `UnsupportedCell` with the reason; a cuda cell whose framework sees no GPU raises
`device_not_visible(...)` instead (a failure of the run, re-timed by the next one).

Compilation: a mode that compiles or traces ahead of time (jit.trace, pytensor.function)
does it in `prepare` and reports the seconds in `Prepared.compile_s`; a mode that compiles
lazily (tf.function, jax.jit, torch.compile) leaves it 0 and pays in its first iteration.
Time to first step = compile_s + the first iteration's step_s, for every mode alike.
`Prepared.traces` counts a compiled step's traces/compilations (a variable-length task's
new lengths retrace it), read after every iteration into the raw rows.

Variable-length tasks (spec.SEQUENCE_TASKS, on models with spec.ModelSpec.sequence_features):
the batches of spec.make_batches carry `x` of shape (batch, steps, features), `steps` as the
task's strategy pads them, and `lengths` (int64, per example); the model reads each example's
state at its true last step (the LSTM's output gathered at lengths - 1, the RNN cell's state
kept past it by a mask), so every strategy's gradient is the true-length one.
Compile caches go under os.environ["ADBENCH_CACHE_DIR"] (set by measure.py, inside the
results tree), never the user's home; `choices` says whether a cache was cold or shared.

`Prepared.derivatives(i)` returns, at iteration i's batch, outside the clock:
    task derivative "gradients": (loss, [dloss/dparam for every spec param, canonical layout])
    task derivative "trainable_gradients": the same for the params a frozen task trains
                                 (trained_params: every one outside spec.ModelSpec.frozen)
    task derivative "jacobian":  (nan,  [J]) with J of shape spec.jacobian_shape(rows):
                                 d output.flatten()[:rows] / d x (one example, canonical layout)
    task derivative "loss":      derivatives.loss_as_array(loss): the forward task
                                 (spec.FORWARD_TASK) takes no derivative, its loss is checked

The forward task times the loss alone, as the mode runs a function its users do not
differentiate: eager with nothing recorded for a derivative (no tape, torch.no_grad()), a
compiled mode's compiled function of the loss (its own trace or compilation, as the step's).
"""

from __future__ import annotations

import dataclasses
import importlib
import os
from typing import Callable

import numpy as np

from adbench.spec import FRAMEWORKS, TASKS
from adbench.clock import Clock


class UnsupportedCell(RuntimeError):
    """The cell cannot run in this framework or mode (a model, task or device it has no path
    for): recorded `unsupported` with the reason, not fatal, and not re-timed."""


class DeviceNotVisible(RuntimeError):
    """A cuda cell whose framework sees no GPU, though the spec gives the framework a CUDA
    path (spec.FRAMEWORKS[...].devices) and the cell asked for the device: the run failed (a
    node without the card, a driver older than the build's CUDA, a CPU build installed, a
    GPU the scheduler did not pass on).  measure.py records it `failed`, with the
    framework's words and the versions found (`cuda`: provenance.cuda_stack), and
    run_cell.py has the next run re-time it.  Never `unsupported`."""

    def __init__(self, message: str, cuda: dict):
        super().__init__(message)
        self.cuda = cuda


def device_not_visible(framework: str, words: str, runtime: str | None,
                       runtime_from: str | None = None) -> DeviceNotVisible:
    """The failure a backend raises when its framework sees no GPU on a cuda cell: `words`,
    the framework's own account (its exception or what it reports), then the driver and the
    CUDA versions found, and the GPUs the job was given (provenance.describe_cuda)."""
    from adbench import provenance

    found = provenance.cuda_stack(runtime, runtime_from, sees_gpu=False)
    return DeviceNotVisible(f"device cuda requested but {framework} sees no GPU: {words} "
                            f"({provenance.describe_cuda(found, framework)})", found)


@dataclasses.dataclass
class Prepared:
    """A workload made ready to time in one framework, mode and device."""

    run: Callable[[int, Clock], dict[str, float]]  # one timed iteration
    derivatives: Callable[[int], tuple[float, list[np.ndarray]]]  # see the module docstring
    # Implementation choices that move the numbers (recorded in the cell's provenance); a
    # mode may add what happened in its loop (torch.compile's fallback): read after it.
    choices: dict[str, str] = dataclasses.field(default_factory=dict)
    # Seconds of ahead-of-time compilation or tracing inside prepare (see the docstring).
    compile_s: float = 0.0
    # The traces/compilations of the step so far (read after each iteration, outside the
    # clock): a compiled mode's counter (tf.function's tracing count, jax.jit's cache size,
    # Dynamo's compiled frames); 0 in an eager mode; None where the mode does not expose one.
    traces: Callable[[], int | None] | None = None


def trained_params(workload) -> list[int]:
    """The indices (spec order) of the parameters the workload's task differentiates
    (spec.ModelSpec.trained): a frozen task (spec.TaskInfo.frozen) on a model whose spec
    defines no frozen part is refused, in every backend alike."""
    model = workload.spec
    if TASKS[workload.task].frozen and not model.frozen:
        raise UnsupportedCell(f"{workload.model} has no frozen part (spec.ModelSpec.frozen "
                              f"is empty: a single layer, or no first layers to freeze)")
    return model.trained(workload.task)


def check_sequence_model(workload) -> None:
    """A variable-length task (spec.TaskInfo.sequence) on a model that reads no sequence is
    `unsupported`, in every framework alike (measure.py asks before importing one)."""
    if workload.sequence is not None and workload.spec.sequence_features is None:
        raise UnsupportedCell(f"{workload.model} reads no sequence whose length could vary "
                              f"(spec.ModelSpec.sequence_features is None)")


def no_sync() -> None:
    """The sync of a step whose work has finished when its call returns (CPU kernels, a
    compiled function that computes synchronously): nothing to wait for."""


def cache_dir(framework: str) -> str:
    """The framework's compile cache under ADBENCH_CACHE_DIR (results/cache when unset)."""
    root = os.environ.get("ADBENCH_CACHE_DIR") or os.path.join("results", "cache")
    return os.path.join(os.path.abspath(root), framework)


def compose_flags(flags: str, forced: dict[str, str], defaults: dict[str, str]) -> str:
    """A Theano-style flag string (THEANO_FLAGS, PYTENSOR_FLAGS: "name=value,...") with
    `forced` replacing the user's entries (and a user's `compiledir`, which would override
    base_compiledir), `defaults` added where the user set nothing; the user's other flags
    are kept."""
    entries = [f for f in flags.split(",") if f.strip()]
    names = {f.split("=", 1)[0].strip() for f in entries}
    entries = [f for f in entries
               if f.split("=", 1)[0].strip() not in {*forced, "compiledir"}]
    entries += [f"{k}={v}" for k, v in defaults.items() if k not in names]
    entries += [f"{k}={v}" for k, v in forced.items()]
    return ",".join(entries)


def load(framework: str):
    """Import a framework's backend module (and with it, only that framework)."""
    return importlib.import_module(f"adbench.backends.{FRAMEWORKS[framework].backend}")
