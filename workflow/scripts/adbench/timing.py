"""One timing loop for every backend: warm-up, then measured iterations, raw samples only.

A backend hands over an `IterationTimer`-compatible object: `run(iteration, clock)` performs
one iteration and returns the timed quantities in seconds, reading `clock()` only after its
device is synchronised.  Nothing is averaged here; statistics are computed downstream.

The memory a step needs is read here too, around the measured phase and outside the clock:
`ProcessMemory` takes its baseline at the start of the measured phase (`time_cell` calls
its `at_measured` hook between the last warm-up iteration and the first measured one)
after releasing what the previous step keeps and returning freed memory to the system
(glibc's malloc_trim(0), and the framework's own equivalent), so that warm-up's freed pages
do not hide the step; once the last step returned it reads the peak, what is still resident
(/proc), the C heap's bytes in use, and the bytes the step keeps by the reading its backend
declares valid for the device (adbench.backends.StepMemory).
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import gc
import math
import statistics
from typing import Callable, Protocol

from adbench import machine_load
from adbench.backends import C_HEAP, StepMemory
from adbench.clock import DEFAULT_CLOCK, Clock


class Steppable(Protocol):
    def run(self, iteration: int, clock: Clock) -> dict[str, float]:
        """Run one iteration; return {'step_s': ..., optionally 'forward_s', 'backward_s'}."""


# ================================================================ when a cell stops measuring
# Why a measured phase ended (the raw file's `stop_reason`): the interval of its median step
# was narrow enough (precision), its measured time was spent (budget), it reached its most
# iterations under a precision stop (max_count), it ran a fixed count (fixed), or the
# process's time budget left no room for another iteration (timeout: status timeout).
STOP_REASONS = ("precision", "budget", "max_count", "fixed", "timeout")
CONFIDENCE = 0.95  # of the interval of the median step a precision stop reads
# A precision stop checks its interval after min_iterations, then each time the count has
# grown by this factor (at least one iteration): a check sorts every sample, so checking at
# every iteration of a 50-microsecond step would cost more than the step.
CHECK_GROWTH = 1.2


def binomial_half_cdf(n: int, j: int) -> float:
    """P(B <= j) for B ~ Binomial(n, 1/2), its terms summed in log space (2**-n underflows
    past n = 1074) from j down until they no longer add anything: O(sqrt(n)) terms."""
    log_norm, total = math.lgamma(n + 1) + n * math.log(0.5), 0.0
    for k in range(j, -1, -1):
        term = math.exp(log_norm - math.lgamma(k + 1) - math.lgamma(n - k + 1))
        total += term
        if term <= total * 1e-17:
            break
    return total


@functools.cache
def median_interval_ranks(n: int, confidence: float = CONFIDENCE) -> tuple[int, int] | None:
    """The 1-based ranks (j, n+1-j) of the order statistics that bound a distribution-free
    interval of the median of n samples, of coverage at least `confidence`: the interval
    misses the median only when fewer than j samples lie below it or fewer than j above,
    each of binomial(n, 1/2) probability P(B <= j-1), so j is the largest with
    P(B <= j-1) <= (1 - confidence)/2.  None where even (x_1, x_n) falls short (n < 6 at
    95 %).  The search starts at the normal approximation and steps to the exact rank."""
    tail = (1.0 - confidence) / 2
    z = statistics.NormalDist().inv_cdf(1.0 - tail)
    j = min(n // 2, max(0, math.floor(n / 2 - z * math.sqrt(n) / 2)))
    while j > 0 and binomial_half_cdf(n, j - 1) > tail:
        j -= 1
    while j < n // 2 and binomial_half_cdf(n, j) <= tail:
        j += 1
    return None if j == 0 else (j, n + 1 - j)


def median_precision(samples, confidence: float = CONFIDENCE) -> float | None:
    """The relative precision of the median of `samples`: the larger distance from the
    median to a bound of its distribution-free interval (median_interval_ranks), over the
    median.  None where the samples are too few for an interval or the median is not > 0."""
    ranks = median_interval_ranks(len(samples), confidence)
    if ranks is None:
        return None
    ordered = sorted(samples)
    middle = len(ordered) // 2
    median = ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2
    if not median > 0:
        return None
    low, high = ordered[ranks[0] - 1], ordered[ranks[1] - 1]
    return max(median - low, high - median) / median


def halves_apart(steps: list[float]) -> float:
    """How far apart the medians of the first and the second half of `steps` are, over the
    median of all (inf where that is not > 0)."""
    middle, whole = len(steps) // 2, statistics.median(steps)
    if not whole > 0:
        return math.inf
    return abs(statistics.median(steps[middle:]) - statistics.median(steps[:middle])) / whole


@dataclasses.dataclass(frozen=True)
class StopRule:
    """When a measured phase ends.  `fixed`: after max_iterations.  `precision`: once the
    CONFIDENCE interval of the median step is within `precision` of it (relative), or once
    `measure_s` seconds of measured phase are spent, never before min_iterations nor after
    max_iterations (which wins where it is the fewer).  spec.Workload holds the keys (workload.stop, precision, measure_s,
    min_iterations, iterations: the most iterations)."""

    stop: str
    max_iterations: int
    min_iterations: int = 1
    precision: float | None = None
    measure_s: float | None = None

    @classmethod
    def fixed(cls, iterations: int) -> StopRule:
        return cls("fixed", iterations)

    @classmethod
    def of(cls, workload) -> StopRule:
        """The rule a workload (spec.Workload) states."""
        if workload.stop == "fixed":
            return cls.fixed(workload.iterations)
        return cls("precision", workload.iterations,
                   min(workload.min_iterations, workload.iterations), workload.precision,
                   workload.measure_s)

    def reached(self, steps: list[float]) -> bool:
        """The interval of the median within `precision`, and the medians of the first and
        the second half of the steps no further apart than that (the interval assumes
        steps drawn alike: a step that drifts, slower and slower, can look precise over a
        few iterations, never over both halves)."""
        if self.precision is None:
            return False
        found = median_precision(steps)
        return found is not None and found <= self.precision \
            and halves_apart(steps) <= self.precision


@dataclasses.dataclass
class Timed:
    """What a cell's loop returns: its rows (warm-up, then the measured phase it kept), why
    the measured phase stopped (STOP_REASONS; None: it never started), the relative
    precision its median step reached (median_precision), and one record per measured
    attempt (a busy machine re-times it: machine_load)."""

    rows: list[dict]
    stop_reason: str | None = None
    precision_reached: float | None = None
    attempts: list[dict] = dataclasses.field(default_factory=list)

    @property
    def kept(self) -> dict:
        """The kept attempt's record ({} where none ran)."""
        return next((a for a in self.attempts if a.get("kept")), {})

    @property
    def busy(self) -> bool | None:
        """Whether the kept attempt ran while the machine was busy (None: not judged)."""
        return self.kept.get("busy")


def _row(iteration: int, phase: str, sample: dict, traces) -> dict:
    return {"iteration": iteration, "phase": phase, **sample,
            **({"traces": traces()} if traces is not None else {})}


def measured_phase(stepper: Steppable, first: int, rule: StopRule, clock: Clock,
                   deadline: float | None = None, traces=None) -> tuple[list[dict], str]:
    """Measured iterations from iteration `first` until `rule` stops them (or the deadline,
    a `clock` reading after which no further iteration starts; the caller checked it before
    the first): the rows and why they stopped (STOP_REASONS).  Every check reads the clock
    between iterations, outside the stepper's own readings; a fixed rule reads it only for
    the deadline."""
    rows, steps = [], []
    started = clock() if rule.measure_s is not None else None
    next_check = rule.min_iterations
    while True:
        n = len(rows)
        if n >= rule.max_iterations:
            return rows, "fixed" if rule.stop == "fixed" else "max_count"
        if deadline is not None and n and clock() >= deadline:
            return rows, "timeout"
        if rule.stop == "precision" and n >= rule.min_iterations:
            if n >= next_check:
                if rule.reached(steps):
                    return rows, "precision"
                next_check = max(n + 1, math.ceil(n * CHECK_GROWTH))
            if rule.measure_s is not None and clock() - started >= rule.measure_s:
                return rows, "budget"
        sample = stepper.run(first + n, clock)
        rows.append(_row(first + n, "measured", sample, traces))
        steps.append(sample["step_s"])


def time_cell(
    stepper: Steppable,
    warmup: int,
    rule: StopRule,
    clock: Clock = DEFAULT_CLOCK,
    progress: Callable[[str], None] | None = None,
    deadline: float | None = None,
    at_measured: Callable[[], None] | None = None,
    traces: Callable[[], int | None] | None = None,
    load=None,
) -> Timed:
    """Warm-up (`warmup` iterations), then a measured phase that `rule` stops.  With a
    deadline (a `clock` reading), no iteration starts after it (iteration 0 always runs).
    `at_measured` is called, outside the clock, just before each measured attempt (not at
    all when the deadline stops the loop before it): memory probes reset their peaks there,
    so that warm-up and compilation stay out of them.  `traces` (a compiled step's
    trace/compilation counter) is read after each iteration, outside the clock, into the
    row's `traces`.

    `load` (machine_load.BusyRule, or None: not watched) reads what the rest of the machine
    did during each measured attempt; an attempt it judges busy is measured again, at most
    load.retimes times, from the same first measured iteration.  The last attempt is kept
    (its rows, marked busy or not), unless the process's deadline cut a re-timing short:
    the complete attempt before it is kept then.  Each attempt's reading is in `attempts`,
    `kept` marking the one whose rows are returned."""
    rows = []
    for iteration in range(warmup):
        if deadline is not None and iteration and clock() >= deadline:
            return Timed(rows)
        if progress is not None and iteration == 0:
            progress("warm-up phase starts")
        rows.append(_row(iteration, "warmup", stepper.run(iteration, clock), traces))
    timed = Timed(rows)
    for attempt in range(1 + (load.retimes if load is not None else 0)):
        if deadline is not None and (warmup or attempt) and clock() >= deadline:
            if not attempt:
                return timed
            break  # the busy attempt before is kept
        if progress is not None:
            progress("measured phase starts" + (f" again (re-time {attempt})" if attempt else ""))
        if at_measured is not None:
            at_measured()
        window = load.window() if load is not None else None
        measured, reason = measured_phase(stepper, warmup, rule, clock, deadline, traces)
        record = {"iterations": len(measured), "stop_reason": reason,
                  "median_step_s": _median([r["step_s"] for r in measured])}
        if window is not None:
            record.update(window.stop())
            record["busy"] = load.busy(record)
        timed.attempts.append(record)
        if attempt and reason == "timeout":  # a re-timing cut short: the one before stays
            record["kept"] = False
            break
        for earlier in timed.attempts[:-1]:
            earlier["kept"] = False
        record["kept"], kept, kept_reason = True, measured, reason
        if not record.get("busy") or reason == "timeout":
            break
        if progress is not None:
            progress(f"busy machine: {load.describe(record)}")
    timed.rows = rows + kept
    timed.stop_reason = kept_reason
    timed.precision_reached = median_precision([r["step_s"] for r in kept])
    return timed


def stop_record(timed: Timed) -> dict:
    """A timed loop's fields of the raw file's metadata (schema.MEASURING_FIELDS)."""
    kept = timed.kept
    return {
        "stop_reason": timed.stop_reason,
        "precision_reached": timed.precision_reached,
        "busy": timed.busy,
        "busy_retimed": max(0, len(timed.attempts) - 1),
        "measured_attempts": timed.attempts,
        **{f"load_{k}": kept.get(k) for k in machine_load.READING_FIELDS},
    }


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


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
    """Warm-up then a fixed count of measured iterations (time_cell's rows): one row per
    iteration, phase marked."""
    return time_cell(stepper, warmup, StopRule.fixed(iterations), clock, progress, deadline,
                     at_measured, traces).rows


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
