"""Statistics over raw rows (analysis environment: pandas).

The study's tables report, per model and framework, "mean ± sd" twice: the mean over trials
of each trial's mean time, and the mean over trials of each trial's standard deviation, each
with its spread over trials.  A trial here is one seed (one fresh process).  Beside them:
median and interquartile range per cell (robust to the odd slow iteration), a noise measure
(IQR / median), the warm-up the data show, and bootstrap replicates of every condition's
mean for the intervals of the ratios (adbench.inference).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from adbench import inference
from adbench.schema import QUANTITIES
from adbench.spec import CELL_FIELDS

# A cell summarised over its seeds: every cell field but the seed.
CONDITION_FIELDS = tuple(f for f in CELL_FIELDS if f != "seed")


def rows_of_ok_cells(iterations: pd.DataFrame, cells: pd.DataFrame) -> pd.DataFrame:
    """The rows the statistics use: a timed-out cell keeps its iterations in the raw data,
    but a partial run never enters a mean."""
    ok = cells.loc[cells["status"] == "ok", list(CELL_FIELDS)]
    keep = pd.MultiIndex.from_frame(iterations[list(CELL_FIELDS)]).isin(
        pd.MultiIndex.from_frame(ok))
    return iterations[keep]


def trial_stats(iterations: pd.DataFrame) -> pd.DataFrame:
    """Per cell and quantity: statistics of the measured iterations (warm-up excluded)."""
    measured = iterations[iterations["phase"] == "measured"]
    long = measured.melt(
        id_vars=list(CELL_FIELDS), value_vars=list(QUANTITIES),
        var_name="quantity", value_name="seconds",
    ).dropna(subset=["seconds"])
    grouped = long.groupby(list(CELL_FIELDS) + ["quantity"], observed=True)["seconds"]
    out = grouped.agg(
        n="count", mean="mean", std="std", median="median", min="min",
        q25=lambda s: s.quantile(0.25), q75=lambda s: s.quantile(0.75),
    ).reset_index()
    out["iqr"] = out["q75"] - out["q25"]
    out["noise"] = out["iqr"] / out["median"]
    return out


def first_iteration_stats(iterations: pd.DataFrame) -> pd.DataFrame:
    """Per cell: the first iteration's step time and its ratio to the steady-state median."""
    steps = iterations.sort_values("iteration").groupby(list(CELL_FIELDS), observed=True)
    first = steps["step_s"].first().rename("first_step_s")
    steady = (
        iterations[iterations["phase"] == "measured"]
        .groupby(list(CELL_FIELDS), observed=True)["step_s"].median().rename("median_step_s")
    )
    out = pd.concat([first, steady], axis=1).reset_index()
    out["first_over_median"] = out["first_step_s"] / out["median_step_s"]
    return out


# A variable-length task's epoch (spec.SEQUENCE_TASKS), per process: its measured iterations are
# one epoch of varying lengths, so its time is their sum, compilations included; the
# iterations that traced anew (the `traces` counter rose) are its retraces.
EPOCH = "epoch_s"
SEQUENCE_COLUMNS = [EPOCH, "epoch_steps", "epoch_mean_length", "steady_step_s", "n_traces",
                    "retrace_s"]


def sequence_epochs(iterations: pd.DataFrame) -> pd.DataFrame:
    """Per cell of a variable-length task (rows with a sequence_length): SEQUENCE_COLUMNS.
    steady_step_s is the median step of the iterations that did not trace; retrace_s the
    time the tracing iterations took beyond it; n_traces and retrace_s are NaN where the
    mode exposes no counter."""
    if "sequence_length" not in iterations:
        return pd.DataFrame(columns=[*CELL_FIELDS, *SEQUENCE_COLUMNS])
    rows = []
    sequences = iterations[iterations["sequence_length"].notna()].sort_values("iteration")
    for cell, group in sequences.groupby(list(CELL_FIELDS), observed=True):
        measured = group[group["phase"] == "measured"]
        if measured.empty:
            continue
        traces = pd.to_numeric(group["traces"], errors="coerce") if "traces" in group else None
        counted = traces is not None and traces.notna().all()
        new = (traces.diff().fillna(traces) > 0)[measured.index] if counted else \
            pd.Series(False, index=measured.index)
        steady = measured.loc[~new, "step_s"].median()
        rows.append({**dict(zip(CELL_FIELDS, cell)),
                     EPOCH: measured["step_s"].sum(),
                     "epoch_steps": int(len(measured)),
                     "epoch_mean_length": measured["sequence_length"].mean(),
                     "steady_step_s": steady,
                     "n_traces": int(new.sum()) if counted else np.nan,
                     "retrace_s": (measured.loc[new, "step_s"] - steady).clip(lower=0).sum()
                     if counted else np.nan})
    return pd.DataFrame(rows, columns=[*CELL_FIELDS, *SEQUENCE_COLUMNS])


def with_sequence_epochs(cells: pd.DataFrame, epochs: pd.DataFrame) -> pd.DataFrame:
    """cells + SEQUENCE_COLUMNS (NaN for fixed-shape cells)."""
    return cells.merge(epochs, on=list(CELL_FIELDS), how="left")


def with_time_to_first_step(cells: pd.DataFrame, first: pd.DataFrame) -> pd.DataFrame:
    """cells + time_to_first_step_s: the ahead-of-time compile (trace, pytensor.function; 0
    for modes that compile lazily) plus the first timed iteration, which pays any lazy
    compilation (tf.function, jax.jit, torch.compile) and first-call costs."""
    keys = list(CELL_FIELDS)
    out = cells.merge(first[keys + ["first_step_s"]], on=keys, how="left")
    # No column when no cell got as far as compiling (a run whose every cell failed).
    compile_s = out["phase_compile_s"] if "phase_compile_s" in out else pd.Series(
        0.0, index=out.index)
    out["time_to_first_step_s"] = pd.to_numeric(compile_s).fillna(0.0) + out["first_step_s"]
    return out.drop(columns="first_step_s")


def across_seeds(trials: pd.DataFrame) -> pd.DataFrame:
    """Per condition and quantity: the study's mean ± sd of trial means and trial stds."""
    grouped = trials.groupby(list(CONDITION_FIELDS) + ["quantity"], observed=True)
    return grouped.agg(
        n_seeds=("seed", "nunique"),
        n_iterations=("n", "min"),
        mean_s=("mean", "mean"),
        mean_sd_s=("mean", "std"),
        std_s=("std", "mean"),
        std_sd_s=("std", "std"),
        median_s=("median", "median"),
        iqr_s=("iqr", "median"),
        noise_max=("noise", "max"),
    ).reset_index()


# Eager -> compiled speed-ups: like for like (whole step, backward pass where the compiled
# mode times one) and the study's construction (its Table 2: eager backward / compiled step).
IMPROVEMENTS = {
    "improvement": ("step_s", "step_s"),
    "improvement_backward": ("backward_s", "backward_s"),
    "improvement_study_style": ("backward_s", "step_s"),
}


def improvements(summary: pd.DataFrame, eager_mode: str, compiled_mode: str,
                 framework: str) -> pd.DataFrame:
    """Eager→compiled speed-ups (IMPROVEMENTS: eager quantity / compiled quantity) for one
    framework, per condition."""
    keys = [f for f in CONDITION_FIELDS if f not in ("framework", "mode")]
    mine = summary[summary["framework"] == framework]

    def mean_of(mode, quantity):
        rows = mine[(mine["mode"] == mode) & (mine["quantity"] == quantity)]
        return rows.set_index(keys)["mean_s"]

    out = pd.DataFrame({
        name: mean_of(eager_mode, eager) / mean_of(compiled_mode, compiled)
        for name, (eager, compiled) in IMPROVEMENTS.items()
    }).dropna(how="all")
    out = out.reset_index()
    out["framework"] = framework
    out["mode"] = compiled_mode
    return out


# ----------------------------------------------------------------------------- warm-up
def steady_state_start(times: np.ndarray, window: int, tolerance: float) -> int | None:
    """How many leading iterations ran before the steady state, from the data alone.

    The steady level is the median of the series' second half; its noise band the larger of
    `tolerance` and the second half's IQR / median.  The warm-up ends at the first iteration,
    within the first window (of `window` iterations) whose median is within the band of the
    steady level, that is itself within the band.  None: no window ever reached it.
    """
    times = np.asarray(times, dtype=float)
    if len(times) < 2 * window:
        return None
    tail = times[len(times) // 2:]
    level = np.median(tail)
    q25, q75 = np.percentile(tail, [25, 75])
    band = max(tolerance, (q75 - q25) / level)
    near = np.abs(times / level - 1) <= band
    for start in range(len(times) - window + 1):
        if abs(np.median(times[start:start + window]) / level - 1) <= band:
            inside = np.flatnonzero(near[start:start + window])
            return int(start + inside[0]) if len(inside) else None
    return None


def warmup_of_cells(iterations: pd.DataFrame, window: int, tolerance: float) -> pd.DataFrame:
    """Per cell: the warm-up its step times show (warm-up and measured rows in order)."""
    keys = list(CELL_FIELDS)
    ordered = iterations.sort_values("iteration")
    found = ordered.groupby(keys, observed=True)["step_s"].apply(
        lambda s: steady_state_start(s.to_numpy(), window, tolerance))
    return found.rename("warmup_detected").reset_index()


def with_warmup_and_noise(cells: pd.DataFrame, warmup: pd.DataFrame, trials: pd.DataFrame,
                          noise_threshold: float) -> pd.DataFrame:
    """cells + warmup_detected, warmup_short (the configured warm-up is shorter than what the
    data show: measured rows include warm-up), noise (the step's IQR / median) and noisy."""
    keys = list(CELL_FIELDS)
    step_noise = trials.loc[trials["quantity"] == "step_s", keys + ["noise"]]
    out = cells.merge(warmup, on=keys, how="left").merge(step_noise, on=keys, how="left")
    detected = pd.to_numeric(out["warmup_detected"], errors="coerce")
    configured = pd.to_numeric(out["warmup"], errors="coerce")
    ran = out["status"] == "ok"
    out["warmup_short"] = ran & (detected.isna() | (detected > configured))
    out["noisy"] = ran & (out["noise"] > noise_threshold)
    return out


# ----------------------------------------------------------------------------- bootstrap
# Not a timed quantity: a process's time to its first step (compile included) over its
# steady-state step, the study's "initial execution time" (claims.first_step_only_compiled).
FIRST_OVER_STEADY = "first_step_over_steady"
BOOTSTRAP_COLUMNS = [*CELL_FIELDS, "quantity", "statistic", "point", "replicates"]


def bootstrap_replicates(iterations: pd.DataFrame, replicates: int, seed: int = 0,
                         cells: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per process (cell), quantity and statistic (inference.STATISTICS): the statistic of its
    measured iterations and `replicates` draws of it from its iterations resampled.  With
    `cells` (the cells table, time_to_first_step_s added) also FIRST_OVER_STEADY and the
    per-process readings (PER_PROCESS: the memory held after a step, a variable-length epoch)."""
    measured = iterations[iterations["phase"] == "measured"]
    keys = list(CELL_FIELDS)
    first = ({} if cells is None else
             cells.set_index(keys)["time_to_first_step_s"].dropna().to_dict())
    rows = []
    for cell, group in measured.groupby(keys, observed=True):
        name = "/".join(map(str, cell))
        for quantity in QUANTITIES:
            values = group[quantity].dropna().to_numpy() if quantity in group else []
            if not len(values):
                continue
            for statistic in inference.STATISTICS:
                # One stream per process and statistic, whatever the quantity: its
                # quantities' replicates resample the same iterations, so a ratio of two
                # of them (step over forward) pairs each iteration with itself.
                rng = inference.rng_for(f"{name}/{statistic}", seed)
                point, reps = inference.process_replicates(values, statistic, replicates, rng)
                rows.append({**dict(zip(keys, cell)), "quantity": quantity,
                             "statistic": statistic, "point": point,
                             "replicates": reps.astype(np.float32)})
                if quantity == "step_s" and cell in first:
                    rows.append({**rows[-1], "quantity": FIRST_OVER_STEADY,
                                 "point": first[cell] / point,
                                 "replicates": (first[cell] / reps).astype(np.float32)})
    if cells is not None:
        rows += memory_rows(cells, replicates)
    return pd.DataFrame(rows, columns=BOOTSTRAP_COLUMNS)


# The memory a process reads once that a claim compares (claims.graph_freed): the memory
# still held once a step returned, where the step keeps its graph: the C heap's bytes in use
# on the CPU (resident memory cannot tell: the allocator keeps freed pages resident), the
# framework's allocated device memory on a GPU (schema.MEMORY_FIELDS; a GPU step's host
# memory says nothing of the graph it keeps on the device).
HELD_AFTER_STEP = "held_after_step_bytes"
HELD_AFTER_STEP_FIELD = {"cpu": "heap_after_step_bytes", "cuda": "device_after_step_bytes"}
# What a cuda process holds on its GPU once a step returned, pool and context (nvidia-smi;
# claims.memory_grab): schema.MEMORY_FIELDS' field of the same name.
DEVICE_PROCESS = "device_process_bytes"
# The quantities a claim compares that a process reads once (memory_rows).
PER_PROCESS = (HELD_AFTER_STEP, EPOCH, DEVICE_PROCESS)


def held_after_step(cells: pd.DataFrame) -> pd.Series:
    """Each cell's HELD_AFTER_STEP, from its device's field (NaN where not recorded)."""
    held = pd.Series(np.nan, index=cells.index)
    for device, field in HELD_AFTER_STEP_FIELD.items():
        if field in cells:
            mine = cells["device"] == device
            held[mine] = pd.to_numeric(cells.loc[mine, field], errors="coerce")
    return held


def memory_rows(cells: pd.DataFrame, replicates: int) -> list[dict]:
    """The quantities read once per process (the memory held after a step, a variable-length
    epoch), so a reading's replicates are that reading repeated: the spread of a condition's
    comes from resampling its processes (inference.over_processes)."""
    rows = []
    held = cells.assign(**{HELD_AFTER_STEP: held_after_step(cells)})
    for quantity in (q for q in PER_PROCESS if q in held):
        ok = held[(held["status"] == "ok") & held[quantity].notna()]
        for record in ok.to_dict("records"):
            value = float(record[quantity])
            for statistic in inference.STATISTICS:
                rows.append({**{k: record[k] for k in CELL_FIELDS}, "quantity": quantity,
                             "statistic": statistic, "point": value,
                             "replicates": np.full(replicates, value, np.float32)})
    return rows


class Replicates(dict):
    """Condition key (*CONDITION_FIELDS, quantity) -> (point, replicates) of the condition's
    mean over its processes, processes and iterations resampled; `ratio` pairs two conditions
    by seed.  `processes[key]`: {seed: (point, replicates)} of each process."""

    def __init__(self, processes: dict[tuple, dict[int, inference.Replicated]]):
        super().__init__({
            key: inference.condition_replicates([by_seed[s] for s in sorted(by_seed)],
                                                "/".join(map(str, key)))
            for key, by_seed in processes.items()})
        self.processes = processes

    def ratio(self, numerator: tuple, denominator: tuple,
              confidence: float) -> inference.Interval | None:
        """numerator / denominator over the seeds both ran; None when either is missing."""
        if numerator not in self.processes or denominator not in self.processes:
            return None
        return inference.paired_ratio(
            self.processes[numerator], self.processes[denominator], confidence,
            key="/".join(map(str, numerator + denominator)))


def replicates_by_condition(bootstrap: pd.DataFrame, statistic: str = "mean") -> Replicates:
    """bootstrap_replicates' rows of one statistic, by (*CONDITION_FIELDS, quantity)."""
    keys = list(CONDITION_FIELDS) + ["quantity"]
    mine = bootstrap[bootstrap["statistic"] == statistic]
    processes: dict[tuple, dict[int, inference.Replicated]] = {}
    for *key, seed, point, reps in mine[keys + ["seed", "point", "replicates"]].itertuples(
            index=False):
        processes.setdefault(tuple(key), {})[int(seed)] = (point, np.asarray(reps, dtype=float))
    return Replicates(processes)
