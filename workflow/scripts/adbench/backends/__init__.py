"""The backend interface: what every framework's backend declares and provides.

Each framework is one package, adbench/backends/<spec.FRAMEWORKS[...].backend>/, the same
four files in every one:

    __init__.py   CAPABILITIES: the model families it builds, the tasks it implements and
                  the cells it refuses, with why (Refusal): data, no framework import, so
                  that measure.py refuses a cell before importing anything and the
                  conformance test (tests/isolated.py) checks every declaration
    device.py     threads, versions, the device: sync, CUDA numerics, GPU probes (a
                  subclass of Backend, below, without prepare)
    models.py     the model families, built as the framework's users write them, loading
                  the spec's canonical arrays (layouts converted once, there)
    tasks.py      what `load` builds the Backend from (the framework is imported from here
                  down): TASK_BUILDERS, the task registry (spec task name -> its builder,
                  the same shape in every backend); `prepare`, which builds the workload's
                  model and calls the task's builder; DEVICE, the device.py class

A backend imports only its own framework, this module and the layers below it (spec,
clock, derivatives, provenance).

A new task is its spec entry (spec.TASKS) and, in each backend, one TASK_BUILDERS entry or
a Refusal: `Capabilities.registry_problems` names a task declared runnable without a
builder, or a builder of a task every cell refuses (the conformance tests ask it of every
backend).  What a task's derivative is (its kind: spec.TaskInfo.derivative) is declared once,
in adbench.derivatives.KINDS, and shaped there (`derivatives.checked`).

Backend (below) is the interface: configure_threads, versions and device_name are the
device class's; prepare is the package's, called through Backend.prepare, which refuses a
declared refusal first; a backend with a CUDA path (spec.FRAMEWORKS[...].cuda_env)
overrides the GPU methods, whose defaults measure nothing (None).

`prepare` builds the workload's model (spec.MODELS[workload.model]) the way that framework's
users write it, loads the spec's canonical arrays into it (converting layouts once, there),
places every batch on the device, and returns a `Prepared` for the workload's task.  Tasks
(spec.TASKS) are implemented once per backend, generically over models.

Refusing a cell, one way: a Refusal in CAPABILITIES, whose reason is the cell's message.
A refusal without `errors` is known before anything runs (Capabilities.refusal: measure.py
asks before the import, Backend.prepare again, with the dtype of a float64 build); one with
`errors` is a failure the framework meets at run time (a transform that raises on some
model), recognised by the exception's class and message (Capabilities.refusal_of) wherever
the cell raises it, so that a release that fixes it shows: the cell runs, and the
conformance test says the refusal is stale.  A cuda cell whose framework sees no GPU raises
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
Compile caches go under os.environ["ADBENCH_CACHE_DIR"] (set by measure.py), never the
user's home; `choices` says whether a cache was cold or shared.

`Prepared.derivatives(i)` returns, at iteration i's batch, outside the clock, the task's
derivative in its kind's shape (adbench.derivatives: Kind, checked): (loss, [one array per
differentiated spec parameter, canonical layout]), (nan, [J]) for an output Jacobian, or
the loss itself as one array for the forward task (spec.FORWARD_TASK), which takes none.

The forward task times the loss alone, as the mode runs a function its users do not
differentiate: eager with nothing recorded for a derivative (no tape, torch.no_grad()), a
compiled mode's compiled function of the loss (its own trace or compilation, as the step's).

Memory a step keeps: `Backend.step_memory(device)` declares how the bytes a step allocates
and keeps past its return are read on that device (StepMemory): the reading its backend's
test shows valid (tests/test_step_memory.py plants an allocation of known size that the step
keeps and finds it within 20%), or why none is (`memory_not_measurable`): the default, so
that no backend is read by a method nobody checked.  `Prepared.release` drops what a step
keeps until the next one starts (a retained graph), so that the baseline at the start of the
measured phase holds none of it (adbench.timing.ProcessMemory).
"""

from __future__ import annotations

import abc
import dataclasses
import functools
import importlib
import os
import re
from typing import Callable, Mapping

import numpy as np

from adbench import spec
from adbench.clock import Clock
from adbench.spec import FRAMEWORKS, TASKS


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


# ================================================================ what a backend declares
@dataclasses.dataclass(frozen=True)
class Refusal:
    """Cells a backend cannot run, and why: `reason`, a sentence, is the cell's message.

    Each of modes, tasks, families, models, losses, devices and dtypes narrows the cells it
    covers (empty: any).  A timing cell is float32; `dtypes` ("float64") refuses a float64
    build only (the reference's, the tests').  `errors` (exception class names) and
    `pattern` (a regular expression of the message) make it a refusal met at run time: it
    covers a cell only when the cell raises such an exception."""

    reason: str
    modes: tuple[str, ...] = ()
    tasks: tuple[str, ...] = ()
    families: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    devices: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()
    pattern: str = ""
    losses: tuple[str, ...] = ()
    dtypes: tuple[str, ...] = ()

    @property
    def at_run_time(self) -> bool:
        return bool(self.errors)

    def covers(self, mode: str, model: str, task: str, device: str,
               dtype: str = "float32") -> bool:
        info = spec.MODELS[model]
        return all(not allowed or value in allowed for value, allowed in (
            (mode, self.modes), (task, self.tasks), (info.family, self.families),
            (model, self.models), (info.loss, self.losses), (device, self.devices),
            (dtype, self.dtypes)))

    def matches(self, exc: BaseException) -> bool:
        names = {cls.__name__ for cls in type(exc).__mro__}
        return bool(names & set(self.errors)) and re.search(self.pattern, str(exc)) is not None

    def message(self, exc: BaseException | None = None) -> str:
        """The cell's message: the reason, and for a run-time refusal the line of the
        framework's error that showed it."""
        if exc is None:
            return self.reason
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        found = next((line for line in lines if re.search(self.pattern, line)),
                     lines[0] if lines else "")
        return f"{self.reason} ({type(exc).__name__}: {found[:300]})"


@dataclasses.dataclass(frozen=True)
class Capabilities:
    """What a backend can run: its modes and devices are the spec's (spec.FRAMEWORKS), and
    every model family and task of the spec unless a Refusal here says otherwise, with why.
    A task or family new to the spec is thus the backend's to implement (its task builder,
    its model) or to refuse here: the conformance test fails on one it does neither."""

    framework: str
    refusals: tuple[Refusal, ...] = ()

    @property
    def modes(self) -> tuple[str, ...]:
        return tuple(FRAMEWORKS[self.framework].modes)

    @property
    def devices(self) -> tuple[str, ...]:
        return FRAMEWORKS[self.framework].devices

    def refusal(self, mode: str, model: str, task: str, device: str,
                dtype: str = "float32") -> str | None:
        """Why the cell cannot run, known before anything runs; None: it runs (or meets a
        run-time refusal).  `dtype`: a cell's float32, or a float64 build's."""
        fw, info = self.framework, spec.MODELS[model]
        if mode not in self.modes:  # the spec's cells never have one: a caller's slip
            return f"{fw} has no mode {mode!r}"
        if dtype not in DTYPES:
            return f"the {fw} backend runs float32 (float64 for tests), not {dtype}"
        if device not in self.devices:
            return f"{fw} has no {device} build in this pipeline"
        why = spec.task_refusal(fw, task, device)
        if why:
            return why
        if TASKS[task].sequence is not None and info.sequence_features is None:
            return f"{model} reads no sequence whose length could vary"
        if TASKS[task].frozen and not info.frozen:
            return f"{model} has no frozen part (a single layer, or no first layers to freeze)"
        return next((r.reason for r in self.refusals
                     if not r.at_run_time and r.covers(mode, model, task, device, dtype)),
                    None)

    @functools.cached_property
    def tasks(self) -> tuple[str, ...]:
        """The spec's tasks this backend runs in some cell (a float32 cell no refusal
        known before the run covers): those its TASK_BUILDERS must build."""
        return tuple(task for task in TASKS if any(
            self.refusal(mode, model, task, device) is None
            for mode in self.modes for model in spec.MODELS for device in self.devices))

    def registry_problems(self, registry: Mapping[str, Callable]) -> list[str]:
        """How a task registry (a backend's TASK_BUILDERS) disagrees with this declaration:
        a task some cell runs without a builder, a builder of a task every cell refuses or
        the spec does not know."""
        fw = self.framework
        return ([f"{fw}: task {t!r} runs in some cell but has no builder in TASK_BUILDERS: "
                 "implement it there, or declare a Refusal" for t in self.tasks
                 if t not in registry]
                + [f"{fw}: TASK_BUILDERS builds {t!r}, which every cell refuses"
                   for t in registry if t in TASKS and t not in self.tasks]
                + [f"{fw}: TASK_BUILDERS names {t!r}, a task the spec does not know"
                   for t in registry if t not in TASKS])

    def refusal_of(self, mode: str, model: str, task: str, device: str,
                   exc: BaseException) -> Refusal | None:
        """The run-time refusal an exception of the cell shows, or None (a failure)."""
        return next((r for r in self.refusals if r.at_run_time
                     and r.covers(mode, model, task, device) and r.matches(exc)), None)

    def problems(self) -> list[str]:
        """Declarations naming what the spec does not know (a typo would refuse nothing)."""
        known = {"modes": self.modes, "tasks": TASKS, "families": MODEL_FAMILIES,
                 "models": spec.MODELS, "devices": spec.DEVICES, "dtypes": DTYPES,
                 "losses": {m.loss for m in spec.MODELS.values()}}
        problems = []
        for r in self.refusals:
            problems += [f"{self.framework}: a refusal names unknown {kind} {name!r}"
                         for kind in known for name in getattr(r, kind)
                         if name not in known[kind]]
            if r.pattern and not r.errors:
                problems.append(f"{self.framework}: a refusal with a pattern and no errors")
        return problems


def fixed_shapes_only(backend: str) -> Refusal:
    """The refusal of the variable-length tasks by a backend whose models read fixed
    shapes (`backend`: its name in the message, e.g. "MXNet")."""
    return Refusal(f"the {backend} backend implements no batches of varying length: its "
                   "models read fixed shapes", tasks=spec.SEQUENCE_TASKS)


def one_compiled_function(framework: str) -> tuple[Refusal, ...]:
    """The refusals of a backend that compiles each step into one function of fixed shapes
    (PyTensor, Theano): the variable-length tasks, and backward_retained (nothing of a step
    outlives its call)."""
    return (fixed_shapes_only(framework),
            Refusal(f"{framework} compiles the step into one function whose intermediates "
                    "live only during a call: no graph outlives the step to retain",
                    tasks=("backward_retained",)))


# The model families of the spec: what a backend may build.
MODEL_FAMILIES = tuple(dict.fromkeys(m.family for m in spec.MODELS.values()))
# The dtypes a backend builds: a timing cell's float32, the float64 build of the reference
# (adbench.reference) and of the tests.
DTYPES = ("float32", "float64")


def refused(capabilities: Capabilities, mode: str, workload, device: str,
            exc: BaseException) -> UnsupportedCell | None:
    """A cell's exception as its declared run-time refusal (UnsupportedCell with the
    refusal's message), or None where no refusal covers it."""
    if isinstance(exc, UnsupportedCell):
        return exc
    found = capabilities.refusal_of(mode, workload.model, workload.task, device, exc)
    return None if found is None else UnsupportedCell(found.message(exc))


# ================================================================ the memory a step keeps
@dataclasses.dataclass(frozen=True)
class StepMemory:
    """How the bytes a step keeps are read on one device (Backend.step_memory): a reading of
    the bytes in use, taken at the start of the measured phase and once the last step
    returned, each time after freed memory went back (glibc's malloc_trim(0), and
    `return_freed`, the framework's own equivalent: its pool emptied, its pending frees run).

    `reading` says what is read, for the cell's record; `in_use` reads it (None: the C heap's
    bytes in use, glibc mallinfo2, which adbench.timing reads); `not_measurable` says why no
    reading is valid on the device (then nothing is read, and no verdict uses the cell)."""

    reading: str
    in_use: Callable[[], int | None] | None = None
    return_freed: Callable[[], None] | None = None
    not_measurable: str | None = None


# The reading of every framework whose host tensors come from the C heap (malloc, freed on
# release): glibc counts exactly the bytes of the live chunks.
C_HEAP = StepMemory("the C heap's bytes in use (glibc mallinfo2: uordblks + hblkhd)")
NOT_MEASURABLE = "not measurable on this device"


def memory_not_measurable(why: str) -> StepMemory:
    """The declaration of a device where no reading of a step's bytes is valid."""
    return StepMemory(f"{NOT_MEASURABLE}: {why}", not_measurable=why)


# ================================================================ what a backend provides
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
    # Drops what the last step keeps until the next one starts (backward_retained's graph),
    # outside the clock; None where a step keeps nothing past its return.  The step calls
    # it itself as it starts; measure.py calls it before the memory baseline.
    release: Callable[[], None] | None = None


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


class Backend(abc.ABC):
    """A framework's backend, one per process: its package's device class (device.py), made
    by `load` with what the package declares: its CAPABILITIES, its task registry
    (TASK_BUILDERS) and its `prepare`."""

    def __init__(self, capabilities: Capabilities, tasks: Mapping[str, Callable],
                 prepare: Callable[..., Prepared]):
        self.capabilities = capabilities
        self.tasks = tasks  # spec task name -> the backend's builder of it
        self._prepare = prepare

    @abc.abstractmethod
    def configure_threads(self, threads: int) -> dict:
        """Before any framework work: the thread settings; returns what the framework
        reports it now uses."""

    @abc.abstractmethod
    def versions(self) -> dict[str, str]:
        """The library versions, for the cell's provenance."""

    @abc.abstractmethod
    def device_name(self, device: str) -> str:
        """What the cell ran on (the GPU's name on cuda)."""

    def prepare(self, workload: spec.Workload, mode: str, device: str,
                dtype: str = "float32") -> Prepared:
        """The workload made ready to time by the package's prepare (the module docstring);
        a cell the declaration refuses (a float64 build's refusals too) raises its
        UnsupportedCell here, before anything is built."""
        why = self.capabilities.refusal(mode, workload.model, workload.task, device, dtype)
        if why:
            raise UnsupportedCell(why)
        if workload.task not in self.tasks:
            raise NotImplementedError(
                f"{self.capabilities.framework} has no builder of task {workload.task!r} in "
                "its TASK_BUILDERS and no Refusal of it (Capabilities.registry_problems)")
        return self._prepare(workload, mode, device, dtype)

    # ---------------------------------------------------------------- the GPU
    # A backend with a CUDA path overrides these; the defaults measure nothing.
    def cuda_runtime(self) -> tuple[str | None, str | None]:
        """The CUDA runtime the framework got (or was built with), and where that was read;
        no GPU needed."""
        return None, None

    def gpu_info(self, device: str) -> dict | None:
        """The GPU's name, driver, CUDA/cuDNN and memory (cuda cells)."""
        return None

    def reset_peak_memory(self, device: str) -> None:
        """Starts the device's peak over (at the first measured iteration)."""

    def peak_memory(self, device: str) -> int | None:
        """The peak device memory allocated since reset_peak_memory."""
        return None

    def peak_reserved_memory(self, device: str) -> int | None:
        """The allocator's peak reserved device memory, where it reports one."""
        return None

    def device_memory_in_use(self, device: str) -> int | None:
        """The device memory still allocated once the last step returned."""
        return None

    # ---------------------------------------------------------------- the memory a step keeps
    def step_memory(self, device: str) -> StepMemory:
        """How the bytes a step keeps are read on `device` (StepMemory): a backend declares
        the reading its test shows valid; by default none is."""
        return memory_not_measurable(f"no reading of the bytes a step keeps is shown valid "
                                     f"for {self.capabilities.framework} on {device}")


def package(framework: str):
    """A framework's backend package (its CAPABILITIES): no framework is imported."""
    return importlib.import_module(f"adbench.backends.{FRAMEWORKS[framework].backend}")


def capabilities(framework: str) -> Capabilities:
    return package(framework).CAPABILITIES


def backend_module(framework: str) -> str:
    """The module `load` builds a framework's Backend from (the rules name it as a code
    input of the framework's timing jobs: it imports the rest of the package)."""
    return f"adbench.backends.{FRAMEWORKS[framework].backend}.tasks"


def load(framework: str) -> Backend:
    """A framework's backend (and with it, only that framework), built from what its
    package declares: CAPABILITIES (__init__.py); DEVICE, TASK_BUILDERS and prepare
    (tasks.py)."""
    tasks = importlib.import_module(backend_module(framework))
    return tasks.DEVICE(capabilities(framework), tasks.TASK_BUILDERS, tasks.prepare)
