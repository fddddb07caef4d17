"""Statistics over raw rows (analysis environment: pandas).

The study's tables report, per model and framework, "mean ± sd" twice: the mean over trials
of each trial's mean time, and the mean over trials of each trial's standard deviation, each
with its spread over trials.  A trial here is one seed (one fresh process).  Beside them:
median and interquartile range per cell (robust to the odd slow iteration), a noise measure
(IQR / median), the warm-up the data show, and bootstrap replicates of every process's
statistics, from which adbench.comparisons makes every interval the outputs print.

A process is a cell measured on one machine (PROCESS_FIELDS: the cell's fields and the
machine, machine_of): trees measured on different machines are analysed together, each
machine its own stratum, never averaged with another (CONDITION_FIELDS holds the machine).

Warm-up, by rule (`steady_rows`): the measured statistics start where the steady state the
data show starts (steady_state_start) whenever that is later than the configured warm-up;
the iterations dropped are counted per cell (warmup_dropped).  A cell whose steady state is
never reached keeps its measured iterations and says so (no_steady_state).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from adbench import inference
from adbench.activation_memory import expected_saved_bytes
from adbench.schema import QUANTITIES
from adbench.spec import CELL_FIELDS, TASKS

# One process: a cell as measured on one machine.
PROCESS_FIELDS = (*CELL_FIELDS, "machine")
# A cell summarised over its seeds, on one machine: every process field but the seed.
CONDITION_FIELDS = tuple(f for f in PROCESS_FIELDS if f != "seed")


def machine_of(record: dict) -> str:
    """What a process ran on, as its provenance records it: the CPU model, and a cuda cell's
    GPU and driver.  One stratum of the analysis per machine."""
    def given(key):  # None, NaN (a record read back from a frame) and "" are not given
        value = record.get(key)
        return None if value is None or pd.isna(value) or value == "" else value

    cpu = given("cpu_model") or "unknown CPU"
    if record.get("device") != "cuda":
        return cpu
    gpu = given("device_name") or "unknown GPU"
    driver = given("gpu_driver")
    return f"{gpu} (driver {driver}), {cpu}" if driver else f"{gpu}, {cpu}"


def rows_of_ok_cells(iterations: pd.DataFrame, cells: pd.DataFrame) -> pd.DataFrame:
    """The rows the statistics use: a timed-out cell keeps its iterations in the raw data,
    but a partial run never enters a mean."""
    ok = cells.loc[cells["status"] == "ok", list(PROCESS_FIELDS)]
    keep = pd.MultiIndex.from_frame(iterations[list(PROCESS_FIELDS)]).isin(
        pd.MultiIndex.from_frame(ok))
    return iterations[keep]


def trial_stats(iterations: pd.DataFrame) -> pd.DataFrame:
    """Per cell and quantity: statistics of the measured iterations (warm-up excluded)."""
    measured = iterations[iterations["phase"] == "measured"]
    long = measured.melt(
        id_vars=list(PROCESS_FIELDS), value_vars=list(QUANTITIES),
        var_name="quantity", value_name="seconds",
    ).dropna(subset=["seconds"])
    grouped = long.groupby(list(PROCESS_FIELDS) + ["quantity"], observed=True)["seconds"]
    out = grouped.agg(
        n="count", mean="mean", std="std", median="median", min="min",
        q25=lambda s: s.quantile(0.25), q75=lambda s: s.quantile(0.75),
    ).reset_index()
    out["iqr"] = out["q75"] - out["q25"]
    out["noise"] = out["iqr"] / out["median"]
    return out


def first_iteration_stats(iterations: pd.DataFrame, steady: pd.DataFrame) -> pd.DataFrame:
    """Per cell: the first iteration's step time (of every row) and its ratio to the
    steady-state median (of the counted rows: steady_rows)."""
    steps = iterations.sort_values("iteration").groupby(list(PROCESS_FIELDS), observed=True)
    first = steps["step_s"].first().rename("first_step_s")
    steady = (
        steady.groupby(list(PROCESS_FIELDS), observed=True)["step_s"].median()
        .rename("median_step_s")
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
        return pd.DataFrame(columns=[*PROCESS_FIELDS, *SEQUENCE_COLUMNS])
    rows = []
    sequences = iterations[iterations["sequence_length"].notna()].sort_values("iteration")
    for cell, group in sequences.groupby(list(PROCESS_FIELDS), observed=True):
        measured = group[group["phase"] == "measured"]
        if measured.empty:
            continue
        traces = pd.to_numeric(group["traces"], errors="coerce") if "traces" in group else None
        counted = traces is not None and traces.notna().all()
        new = (traces.diff().fillna(traces) > 0)[measured.index] if counted else \
            pd.Series(False, index=measured.index)
        steady = measured.loc[~new, "step_s"].median()
        rows.append({**dict(zip(PROCESS_FIELDS, cell)),
                     EPOCH: measured["step_s"].sum(),
                     "epoch_steps": int(len(measured)),
                     "epoch_mean_length": measured["sequence_length"].mean(),
                     "steady_step_s": steady,
                     "n_traces": int(new.sum()) if counted else np.nan,
                     "retrace_s": (measured.loc[new, "step_s"] - steady).clip(lower=0).sum()
                     if counted else np.nan})
    return pd.DataFrame(rows, columns=[*PROCESS_FIELDS, *SEQUENCE_COLUMNS])


def with_sequence_epochs(cells: pd.DataFrame, epochs: pd.DataFrame) -> pd.DataFrame:
    """cells + SEQUENCE_COLUMNS (NaN for fixed-shape cells)."""
    return cells.merge(epochs, on=list(PROCESS_FIELDS), how="left")


def with_time_to_first_step(cells: pd.DataFrame, first: pd.DataFrame) -> pd.DataFrame:
    """cells + time_to_first_step_s: the ahead-of-time compile (trace, pytensor.function; 0
    for modes that compile lazily) plus the first timed iteration, which pays any lazy
    compilation (tf.function, jax.jit, torch.compile) and first-call costs."""
    keys = list(PROCESS_FIELDS)
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


# Eager -> compiled speed-ups (adbench.comparisons makes them): like for like (whole step,
# backward pass where the compiled mode times one) and the study's construction (its Table 2:
# eager backward / compiled step), as (eager quantity, compiled quantity).
IMPROVEMENTS = {
    "improvement": ("step_s", "step_s"),
    "improvement_backward": ("backward_s", "backward_s"),
    "improvement_study_style": ("backward_s", "step_s"),
}


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
    keys = list(PROCESS_FIELDS)
    ordered = iterations.sort_values("iteration")
    found = ordered.groupby(keys, observed=True)["step_s"].apply(
        lambda s: steady_state_start(s.to_numpy(), window, tolerance))
    return found.rename("warmup_detected").reset_index()


def with_warmup(cells: pd.DataFrame, warmup: pd.DataFrame) -> pd.DataFrame:
    """cells + warmup_detected (warmup_of_cells), warmup_dropped (the measured iterations
    before the detected steady state: not in any statistic, steady_rows) and no_steady_state
    (no window reached the steady level: every measured iteration kept).  A variable-length
    task's iterations vary by design (its batches' lengths, its retraces): no steady level to
    detect, nothing dropped; nor from a task that runs the study's code as the study timed it
    (TaskInfo.study_code): its statistic is the mean of every batch, the first ones included."""
    out = cells.merge(warmup, on=list(PROCESS_FIELDS), how="left")
    detected = pd.to_numeric(out["warmup_detected"], errors="coerce")
    configured = pd.to_numeric(out["warmup"], errors="coerce").fillna(0)
    keeps_every_step = out["task"].map(
        lambda t: TASKS[t].sequence is not None or bool(TASKS[t].study_code))
    ran = (out["status"] == "ok") & ~keeps_every_step
    out["warmup_dropped"] = ((detected - configured).clip(lower=0).where(ran, 0)
                             .fillna(0).astype(int))
    out["no_steady_state"] = ran & detected.isna()
    return out


def steady_rows(iterations: pd.DataFrame, cells: pd.DataFrame) -> pd.DataFrame:
    """The measured rows every statistic uses: each cell's from its configured warm-up plus
    its warmup_dropped on (with_warmup)."""
    keys = list(PROCESS_FIELDS)
    first = cells[keys + ["warmup", "warmup_dropped"]].copy()
    first["first_counted"] = (pd.to_numeric(first["warmup"], errors="coerce").fillna(0)
                              + first["warmup_dropped"])
    rows = iterations.merge(first[keys + ["first_counted"]], on=keys, how="left")
    counted = (rows["phase"] == "measured") & (rows["iteration"] >= rows["first_counted"])
    return iterations[counted.to_numpy()]


def with_noise(cells: pd.DataFrame, trials: pd.DataFrame,
               noise_threshold: float) -> pd.DataFrame:
    """cells + noise (the step's IQR / median over its counted iterations) and noisy."""
    keys = list(PROCESS_FIELDS)
    step_noise = trials.loc[trials["quantity"] == "step_s", keys + ["noise"]]
    out = cells.merge(step_noise, on=keys, how="left")
    out["noisy"] = (out["status"] == "ok") & (out["noise"] > noise_threshold)
    return out


# ----------------------------------------------------------------------------- bootstrap
# Not a timed quantity: a process's time to its first step (compile included) over its
# steady-state step, the study's "initial execution time" (claims.first_step_only_compiled).
FIRST_OVER_STEADY = "first_step_over_steady"
BOOTSTRAP_COLUMNS = [*PROCESS_FIELDS, "quantity", "statistic", "point", "replicates"]


def bootstrap_replicates(iterations: pd.DataFrame, replicates: int, seed: int = 0,
                         cells: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per process (cell), quantity and statistic (inference.STATISTICS): the statistic of its
    measured iterations and `replicates` draws of it from its iterations resampled.  With
    `cells` (the cells table, time_to_first_step_s added) also FIRST_OVER_STEADY and the
    per-process readings (PER_PROCESS: the bytes a step keeps, a variable-length epoch)."""
    measured = iterations[iterations["phase"] == "measured"]
    keys = list(PROCESS_FIELDS)
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


# The bytes a step keeps past its return (claims.graph_freed), read once per process as its
# backend declares valid for its device (schema.MEMORY_FIELDS' field of the same name: the
# C heap on the CPU, the framework's allocated bytes on a GPU; None where not measurable),
# and the same over the bytes its saved activations should take (adbench.activation_memory,
# from the spec's shapes at the cell's batch; NaN where no expectation is stated).
KEPT_BY_STEP = "kept_by_step_bytes"
KEPT_OVER_SAVED = "kept_over_saved_activations"
# What a cuda process holds on its GPU once a step returned, pool and context (nvidia-smi;
# claims.memory_grab): schema.MEMORY_FIELDS' field of the same name.
DEVICE_PROCESS = "device_process_bytes"
# The quantities a claim compares that a process reads once (memory_rows).
PER_PROCESS = (KEPT_BY_STEP, KEPT_OVER_SAVED, EPOCH, DEVICE_PROCESS)


def saved_activations(cells: pd.DataFrame) -> pd.Series:
    """Each cell's saved activations' expected bytes for the examples its task
    differentiates (adbench.activation_memory: the batch, one example for an output
    Jacobian; NaN where no expectation is stated or it is under the method's floor, or the
    cell records no batch)."""
    batch = cells.get("batch_size", pd.Series(np.nan, index=cells.index))
    found = [expected_saved_bytes(m, t, int(b)) if pd.notna(b) else None
             for m, t, b in zip(cells["model"], cells["task"], batch)]
    return pd.Series([np.nan if f is None else float(f) for f in found], index=cells.index,
                     dtype=float)


def kept_over_saved(cells: pd.DataFrame) -> pd.Series:
    """Each cell's KEPT_BY_STEP over its saved activations' expected bytes (NaN where either
    is missing: not measurable, or no expectation stated)."""
    kept = cells.get(KEPT_BY_STEP, pd.Series(np.nan, index=cells.index))
    return pd.to_numeric(kept, errors="coerce") / saved_activations(cells)


def memory_rows(cells: pd.DataFrame, replicates: int) -> list[dict]:
    """The quantities read once per process (the bytes a step keeps, a variable-length
    epoch), so a reading's replicates are that reading repeated: the spread of a condition's
    comes from resampling its processes (inference.over_processes)."""
    rows = []
    read = cells.assign(**{KEPT_OVER_SAVED: kept_over_saved(cells)})
    for quantity in (q for q in PER_PROCESS if q in read):
        ok = read[(read["status"] == "ok") & pd.to_numeric(read[quantity],
                                                           errors="coerce").notna()]
        for record in ok.to_dict("records"):
            value = float(record[quantity])
            for statistic in inference.STATISTICS:
                rows.append({**{k: record[k] for k in PROCESS_FIELDS}, "quantity": quantity,
                             "statistic": statistic, "point": value,
                             "replicates": np.full(replicates, value, np.float32)})
    return rows


class Replicates(dict):
    """Condition key (*CONDITION_FIELDS, quantity) -> (point, replicates) of the condition's
    mean over its processes, processes and iterations resampled (adbench.comparisons pairs
    two of them by seed).  `processes[key]`: {seed: (point, replicates)} of each process."""

    def __init__(self, processes: dict[tuple, dict[int, inference.Replicated]]):
        super().__init__({
            key: inference.condition_replicates([by_seed[s] for s in sorted(by_seed)],
                                                "/".join(map(str, key)))
            for key, by_seed in processes.items()})
        self.processes = processes


def replicates_by_condition(bootstrap: pd.DataFrame, statistic: str = "mean") -> Replicates:
    """bootstrap_replicates' rows of one statistic, by (*CONDITION_FIELDS, quantity)."""
    keys = list(CONDITION_FIELDS) + ["quantity"]
    mine = bootstrap[bootstrap["statistic"] == statistic]
    processes: dict[tuple, dict[int, inference.Replicated]] = {}
    for *key, seed, point, reps in mine[keys + ["seed", "point", "replicates"]].itertuples(
            index=False):
        processes.setdefault(tuple(key), {})[int(seed)] = (point, np.asarray(reps, dtype=float))
    return Replicates(processes)
