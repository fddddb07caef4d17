"""One timing loop for every backend: warm-up, then measured iterations, raw samples only.

A backend hands over an `IterationTimer`-compatible object: `run(iteration, clock)` performs
one iteration and returns the timed quantities in seconds, reading `clock()` only after its
device is synchronised.  Nothing is averaged here; statistics are computed downstream.

The memory a step needs is read here too, around the measured phase and outside the clock:
`ProcessMemory` reads the process's resident memory from Linux's /proc (the baseline, the
peak and what is held once the last step returned); `time_iterations` calls its
`at_measured` hook between the last warm-up iteration and the first measured one.
"""

from __future__ import annotations

import ctypes
from typing import Callable, Protocol

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
                         "rss_peak_scope", "heap_after_step_bytes")


class _MallInfo2(ctypes.Structure):
    """glibc's struct mallinfo2 (glibc >= 2.33): the C heap's counters, size_t each."""

    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


def heap_in_use() -> int | None:
    """The C heap's bytes in use now (glibc's mallinfo2: uordblks, the allocated chunks, plus
    hblkhd, the mmapped ones): what live objects hold, freed memory excluded, which resident
    memory keeps counting (the allocator keeps freed pages).  None without glibc's
    mallinfo2 (another libc, or glibc older than 2.33)."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        mallinfo2 = libc.mallinfo2
    except (OSError, AttributeError):
        return None
    mallinfo2.restype = _MallInfo2
    info = mallinfo2()
    return int(info.uordblks + info.hblkhd)


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
    """The resident memory of the measured phase, outside the clock: `start` (the timing
    loop's `at_measured` hook) reads the baseline VmRSS and resets the peak; `stop`, once
    the last step returned, reads the peak (VmHWM), what is still resident (VmRSS) and the
    C heap's bytes in use (heap_in_use: what live objects still hold).  The
    record's values are bytes, None where /proc could not say; `rss_peak_scope` says what
    the peak covers."""

    def __init__(self, status: str = PROC_STATUS, clear_refs: str = CLEAR_REFS):
        self.status, self.clear_refs = status, clear_refs
        self.started = False
        self.record: dict = dict.fromkeys(PROCESS_MEMORY_FIELDS)
        self.record["rss_peak_scope"] = "not measured: the measured phase did not run to its end"

    def start(self) -> None:
        self.started = True
        self.record["rss_baseline_bytes"] = proc_memory(self.status).get("VmRSS")
        failed = reset_peak_rss(self.clear_refs)
        self.record["rss_peak_scope"] = (
            "measured phase (VmHWM reset by /proc/self/clear_refs)" if failed is None else
            f"process start: the peak could not be reset ({failed}), so it includes "
            "import, preparation and warm-up")

    def stop(self) -> dict:
        if self.started:
            now = proc_memory(self.status)
            self.record["rss_peak_bytes"] = now.get("VmHWM")
            self.record["rss_after_step_bytes"] = now.get("VmRSS")
            self.record["heap_after_step_bytes"] = heap_in_use()
            if not now:
                self.record["rss_peak_scope"] = f"not measured: no {self.status}"
        return dict(self.record)
