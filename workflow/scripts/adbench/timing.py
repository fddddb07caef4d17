"""One timing loop for every backend: warm-up, then measured iterations, raw samples only.

A backend hands over an `IterationTimer`-compatible object: `run(iteration, clock)` performs
one iteration and returns the timed quantities in seconds, reading `clock()` only after its
device is synchronised.  Nothing is averaged here; statistics are computed downstream.

The memory a step needs is read here too, around the measured phase and outside the clock:
`ProcessMemory` takes its baseline at the start of the measured phase (`time_iterations`
calls its `at_measured` hook between the last warm-up iteration and the first measured one)
after releasing what the previous step keeps and returning freed memory to the system
(glibc's malloc_trim(0), and the framework's own equivalent), so that warm-up's freed pages
do not hide the step; once the last step returned it reads the peak, what is still resident
(/proc), the C heap's bytes in use, and the bytes the step keeps by the reading its backend
declares valid for the device (adbench.backends.StepMemory).
"""

from __future__ import annotations

import ctypes
import gc
from typing import Callable, Protocol

from adbench.backends import C_HEAP, StepMemory
from adbench.clock import DEFAULT_CLOCK, Clock


class Steppable(Protocol):
    def run(self, iteration: int, clock: Clock) -> dict[str, float]:
        """Run one iteration; return {'step_s': ..., optionally 'forward_s', 'backward_s'}."""


def time_iterations(
    stepper: Steppable,
    warmup: int,
    iterations: int,
    clock: Clock = DEFAULT_CLOCK,
    progress: Callable[[str], None] | None = None,
    deadline: float | None = None,
    at_measured: Callable[[], None] | None = None,
    traces: Callable[[], int | None] | None = None,
) -> list[dict]:
    """Run warm-up then measured iterations; one row per iteration, phase marked.  With a
    deadline (a `clock` reading), no iteration starts after it: fewer rows come back.
    `at_measured` is called once, outside the clock, just before the first measured
    iteration (not at all when the deadline stops the loop before it): memory probes
    reset their peaks there, so that warm-up and compilation stay out of them.  `traces`
    (a compiled step's trace/compilation counter) is read after each iteration, outside
    the clock, into the row's `traces`."""
    rows = []
    for iteration in range(warmup + iterations):
        if deadline is not None and iteration and clock() >= deadline:
            break
        if progress is not None and iteration in (0, warmup):
            progress(f"{'warm-up' if iteration < warmup else 'measured'} phase starts")
        if at_measured is not None and iteration == warmup:
            at_measured()
        sample = stepper.run(iteration, clock)
        rows.append(
            {
                "iteration": iteration,
                "phase": "warmup" if iteration < warmup else "measured",
                **sample,
                **({"traces": traces()} if traces is not None else {}),
            }
        )
    return rows


# ================================================================ memory (Linux /proc)
PROC_STATUS = "/proc/self/status"
CLEAR_REFS = "/proc/self/clear_refs"
# The raw file's memory fields (schema.MEMORY_FIELDS says what each means).
PROCESS_MEMORY_FIELDS = ("rss_baseline_bytes", "rss_peak_bytes", "rss_after_step_bytes",
                         "rss_peak_scope", "heap_baseline_bytes", "heap_after_step_bytes",
                         "kept_by_step_reading", "kept_baseline_bytes", "kept_by_step_bytes")


class _MallInfo2(ctypes.Structure):
    """glibc's struct mallinfo2 (glibc >= 2.33): the C heap's counters, size_t each."""

    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


def _libc_function(name: str):
    """glibc's function of that name, or None (another libc, an older glibc)."""
    try:
        return getattr(ctypes.CDLL("libc.so.6"), name)
    except (OSError, AttributeError):
        return None


def heap_in_use() -> int | None:
    """The C heap's bytes in use now (glibc's mallinfo2: uordblks, the allocated chunks, plus
    hblkhd, the mmapped ones, summed over every arena): what live objects hold, freed memory
    excluded, which resident memory keeps counting (the allocator keeps freed pages).  None
    without glibc's mallinfo2 (another libc, or glibc older than 2.33)."""
    mallinfo2 = _libc_function("mallinfo2")
    if mallinfo2 is None:
        return None
    mallinfo2.restype = _MallInfo2
    info = mallinfo2()
    return int(info.uordblks + info.hblkhd)


def return_freed_memory(step_memory: StepMemory = C_HEAP) -> None:
    """Freed memory back to the system: unreachable Python objects collected (a cycle may
    hold a tensor), the framework's own equivalent (step_memory.return_freed: a pool
    emptied, pending frees run), then glibc's malloc_trim(0), which returns every arena's
    free pages (resident memory then counts live memory, and a step's new pages show)."""
    gc.collect()
    if step_memory.return_freed is not None:
        step_memory.return_freed()
    trim = _libc_function("malloc_trim")
    if trim is not None:
        trim(0)


def proc_memory(path: str = PROC_STATUS) -> dict[str, int]:
    """The process's resident memory now, VmRSS, and its peak, VmHWM, in bytes, from
    /proc/self/status ({} where there is no such file: not Linux)."""
    found = {}
    try:
        with open(path) as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in ("VmRSS", "VmHWM"):
                    number, unit = value.split()
                    found[key] = int(number) * {"kB": 1024}[unit]
    except OSError:
        return {}
    return found


def reset_peak_rss(path: str = CLEAR_REFS) -> str | None:
    """Reset VmHWM to the current VmRSS (writing 5 to /proc/self/clear_refs, Linux >= 4.0);
    None where it worked, else why not (the peak then counts from the process's start)."""
    try:
        with open(path, "w") as f:
            f.write("5")
    except OSError as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


class ProcessMemory:
    """The memory of the measured phase, outside the clock.

    `start` (the timing loop's `at_measured` hook) releases what the previous step keeps
    (`release`: Prepared.release), returns freed memory (return_freed_memory), then reads
    the baseline: resident memory (VmRSS), the C heap's bytes in use, and `step_memory`'s
    reading (the backend's declaration for the device), and resets the resident peak.
    `stop`, once the last step returned, reads the peak (VmHWM), returns freed memory again,
    and reads the rest: `kept_by_step_bytes` is the reading over its baseline, the bytes a
    step allocates and keeps past its return (a retained graph's saved tensors), None where
    the declaration says it is not measurable.  The record's values are bytes, None where
    nothing could be read; `rss_peak_scope` says what the peak covers."""

    def __init__(self, step_memory: StepMemory = C_HEAP,
                 release: Callable[[], None] | None = None,
                 status: str = PROC_STATUS, clear_refs: str = CLEAR_REFS):
        self.step_memory, self.release = step_memory, release
        self.status, self.clear_refs = status, clear_refs
        self.started = False
        self.record: dict = dict.fromkeys(PROCESS_MEMORY_FIELDS)
        self.record["rss_peak_scope"] = "not measured: the measured phase did not run to its end"
        self.record["kept_by_step_reading"] = step_memory.reading

    def kept_reading(self) -> int | None:
        """The declared reading of the bytes in use now (None: not measurable)."""
        if self.step_memory.not_measurable is not None:
            return None
        if self.step_memory.in_use is None:
            return heap_in_use()
        return self.step_memory.in_use()

    def start(self) -> None:
        self.started = True
        if self.release is not None:
            self.release()
        return_freed_memory(self.step_memory)
        self.record["rss_baseline_bytes"] = proc_memory(self.status).get("VmRSS")
        self.record["heap_baseline_bytes"] = heap_in_use()
        self.record["kept_baseline_bytes"] = self.kept_reading()
        failed = reset_peak_rss(self.clear_refs)
        self.record["rss_peak_scope"] = (
            "measured phase (VmHWM reset by /proc/self/clear_refs)" if failed is None else
            f"process start: the peak could not be reset ({failed}), so it includes "
            "import, preparation and warm-up")

    def stop(self) -> dict:
        if self.started:
            peak = proc_memory(self.status).get("VmHWM")
            return_freed_memory(self.step_memory)
            now = proc_memory(self.status)
            self.record["rss_peak_bytes"] = peak
            self.record["rss_after_step_bytes"] = now.get("VmRSS")
            self.record["heap_after_step_bytes"] = heap_in_use()
            kept, baseline = self.kept_reading(), self.record["kept_baseline_bytes"]
            self.record["kept_by_step_bytes"] = (
                None if kept is None or baseline is None else kept - baseline)
            if not now:
                self.record["rss_peak_scope"] = f"not measured: no {self.status}"
        return dict(self.record)
