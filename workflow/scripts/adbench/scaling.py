"""How a derivative's cost grows: the cheap-gradient ratio and the FLOP rate of each condition
(analysis environment: numpy, pandas).

The cheap-gradient ratio is a condition's step over its forward, (forward + reverse) /
forward, from the times the cells record, by one rule (forward_source):
- a cell whose forward and derivative are two calls (spec.timed_quantities: eager modes and
  TorchScript) records `forward_s` beside `step_s` in every iteration: the ratio is measured
  in the same process and loop (IN_PROCESS);
- a whole-step mode (tf.function, XLA, jax.jit, PyTensor), or a task computed in one call
  (the vectorised and loss Jacobians), records `step_s` alone: its forward is the forward
  task's step (spec.FORWARD_TASK: the loss alone, compiled the same way), paired by seed
  (FORWARD_TASK_SOURCE), where the tree ran that task; else the ratio is not measured (n/a,
  said), and its FLOP rate still is.
The bound is a gradient's: the ratio of an output-Jacobian task (a reverse pass per row) is
shown, not judged; the forward task's own row is the denominator, not judged either.  The
ratio is the comparisons product's (adbench.comparisons, kind cheap_gradient): the mean over
processes of each process's median (claims.VERDICT_STATISTIC), with its bootstrap interval
paired by seed, the one the verdicts read.

Griewank & Walther (Evaluating Derivatives, 2nd ed., SIAM 2008) bound the gradient's
cost by a small constant times the function's: at most about 4 to 5 in operations counts
(CHEAP_GRADIENT_BOUND).  A condition is "within" where its interval lies at or under the
bound, "above" where it lies over it, "inconclusive" where it spans it; one process gives a
ratio without a verdict (inference.MIN_PROCESSES).

FLOPs per step are adbench.flops' (analytic, 2 per multiply-add), the rate is FLOPs over the
mean median step, set against the machine's measured float32 matmul peak: a CPU cell's at
its thread count (measure_peak.py's peak.json), a CUDA cell's on the GPU (peak_cuda.json).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

from adbench import comparisons as cmp
from adbench import flops, inference, spec, stats
from adbench.claims import CHEAP_GRADIENT_BOUND, VERDICT_STATISTIC
from adbench.comparisons import FORWARD_TASK_SOURCE, IN_PROCESS  # noqa: F401  (the table's)
from adbench.sweeps import AXIS_MODELS, hidden_layers, hidden_width
WITHIN, ABOVE, INCONCLUSIVE = "within", "above", "inconclusive"
NOT_MEASURED = ("not measured: forward and derivative are one call, and no forward task "
                "ran")
NOT_A_GRADIENT = "not a gradient: an output Jacobian, one reverse pass per row"
NOT_A_DERIVATIVE = "the forward alone: the denominator of its modes' ratios"
# Where a condition's forward time comes from (the table's `forward_from`):
# comparisons.IN_PROCESS or comparisons.FORWARD_TASK_SOURCE.
ONE_PROCESS = inference.ONE_PROCESS

# The sweep axes a tree can vary, and the table column each is read from.  A batch size is
# a model's workload key, not a grid axis: one tree holds one batch size per model, so the
# batch axis spans several trees (config/sweep-batch.yaml says how to run them).
AXES = {"batch_size": "batch size", "threads": "threads", "hidden_layers": "hidden layers",
        "hidden_width": "hidden width"}

# After the condition's fields (stats.CONDITION_FIELDS):
COLUMNS = [
    "batch_size", "jacobian_rows", "hidden_layers", "hidden_width",
    "n_parameters", "n_processes", "forward_s", "forward_from", "step_s",
    "cheap_gradient_ratio",
    "cheap_gradient_ratio_low", "cheap_gradient_ratio_high", "cheap_gradient_basis",
    "cheap_gradient",
    "flops_forward", "flops_step", "flops_ratio", "gflops_forward", "gflops",
    "peak_gflops", "fraction_of_peak",
]


# ---------------------------------------------------------------- the table
def verdict(interval: inference.Interval, bound: float = CHEAP_GRADIENT_BOUND) -> str:
    if not interval.judged:
        return ONE_PROCESS
    if interval.high <= bound:
        return WITHIN
    if interval.low > bound:
        return ABOVE
    return INCONCLUSIVE


def cheap_gradient(task: str, measured: bool, ratio: inference.Interval) -> str:
    """The verdict of a gradient task's ratio (the bound is a gradient's); why none else."""
    if task == spec.FORWARD_TASK:
        return NOT_A_DERIVATIVE
    if not measured:
        return NOT_MEASURED
    if spec.TASKS[task].derivative != "gradients":
        return NOT_A_GRADIENT
    return verdict(ratio)


def peak_of(peak: dict, device: str, threads: int) -> float:
    """The measured matmul GFLOP/s of a cell's device: the CPU's at `threads`, the GPU's; NaN
    where not measured (no peak file, or a GPU that PyTorch did not see)."""
    rate = peak.get("threads", {}).get(str(threads)) if device == "cpu" else peak.get(device)
    return float(rate["gflops"]) if rate and rate.get("gflops") else math.nan


def condition_sizes(cells: pd.DataFrame) -> pd.DataFrame:
    """Per condition of the ok cells: its batch size, Jacobian rows, processes and, for a
    variable-length task, the mean time steps its measured batches ran at (steps)."""
    ok = cells[cells["status"] == "ok"]
    ok = ok.assign(steps=[steps_as_run(r) for r in ok.to_dict("records")])
    return ok.groupby(list(stats.CONDITION_FIELDS), observed=True).agg(
        batch_size=("batch_size", "first"), jacobian_rows=("jacobian_rows", "first"),
        n_processes=("seed", "nunique"), steps=("steps", "mean")).reset_index()


def steps_as_run(cell: dict) -> float:
    """A variable-length cell's mean padded steps over its measured batches (flops.steps_as_run
    of its workload, its n_samples the model's where the cells do not carry it); NaN for a
    fixed-shape task."""
    if spec.TASKS[cell["task"]].sequence is None:
        return math.nan
    n_samples = cell.get("n_samples")
    workload = spec.Workload(cell["model"], int(cell["seed"]), task=cell["task"],
                             n_samples=None if is_missing(n_samples) else int(n_samples),
                             batch_size=int(cell["batch_size"]), warmup=int(cell["warmup"]),
                             iterations=int(cell["iterations"]))
    return flops.steps_as_run(workload)


def is_missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def condition_row(size, made: dict, steps: dict, peak: dict) -> dict:
    """One condition's row: its cheap-gradient comparison (the comparisons product), or its
    step alone where it has no forward to be set against; FLOPs and rates from adbench.flops
    and the measured peak."""
    key = tuple(getattr(size, f) for f in stats.CONDITION_FIELDS)
    found = made.get(key)
    if found is not None:
        step, forward, source = (found["numerator_point"], found["denominator_point"],
                                 found["name"])
        ratio = inference.Interval(found["ratio"], found["low"], found["high"],
                                   np.array([]), int(found["n_processes"]))
    else:
        step, forward, source = steps.get(key, math.nan), math.nan, None
        ratio = inference.NO_INTERVAL
    measured = source is not None and size.task != spec.FORWARD_TASK
    counts = flops.task_flops(size.model, size.task, int(size.batch_size),
                              int(size.jacobian_rows),
                              None if math.isnan(size.steps) else float(size.steps))
    gflops = counts["step_s"] / step / 1e9 if step > 0 else math.nan
    peak_rate = peak_of(peak, size.device, int(size.threads))
    return {
        **dict(zip(stats.CONDITION_FIELDS, key)),
        "batch_size": int(size.batch_size), "jacobian_rows": int(size.jacobian_rows),
        "hidden_layers": hidden_layers(size.model), "hidden_width": hidden_width(size.model),
        "n_parameters": spec.MODELS[size.model].n_parameters,
        "n_processes": int(size.n_processes), "forward_s": forward,
        "forward_from": source or "", "step_s": step,
        "cheap_gradient_ratio": ratio.point, "cheap_gradient_ratio_low": ratio.low,
        "cheap_gradient_ratio_high": ratio.high,
        "cheap_gradient_basis": found["basis"] if found is not None else "",
        "cheap_gradient": cheap_gradient(size.task, measured, ratio),
        "flops_forward": counts["forward_s"], "flops_step": counts["step_s"],
        "flops_ratio": counts["step_s"] / counts["forward_s"],
        "gflops_forward": (counts["forward_s"] / forward / 1e9 if forward > 0 else math.nan),
        "gflops": gflops, "peak_gflops": peak_rate, "fraction_of_peak": gflops / peak_rate,
    }


def cheap_gradient_comparisons(made: pd.DataFrame) -> dict[tuple, dict]:
    """The comparisons product's cheap-gradient rows by their condition (the numerator's)."""
    rows = made[(made["kind"] == "cheap_gradient") & (made["level"] == "comparison")]
    out = {}
    for r in rows.to_dict("records"):
        named = {f: r.get(f"numerator_{f}", r.get(f)) for f in stats.CONDITION_FIELDS}
        out[tuple(named[f] for f in stats.CONDITION_FIELDS)] = r
    return out


def scaling_table(cells: pd.DataFrame, made: pd.DataFrame, conditions: pd.DataFrame,
                  peak: dict) -> pd.DataFrame:
    """One row per condition of the ok cells (see the module docstring), in the cells'
    order: the comparisons product's cheap-gradient ratios (`made`), the conditions
    product's median steps where a condition has none."""
    ratios = cheap_gradient_comparisons(made)
    steps = {k[:-1]: v[0] for k, v in cmp.estimates(conditions, VERDICT_STATISTIC).items()
             if k[-1] == "step_s"}
    rows = [condition_row(size, ratios, steps, peak)
            for size in condition_sizes(cells).itertuples(index=False)]
    return pd.DataFrame(rows, columns=[*stats.CONDITION_FIELDS, *COLUMNS])


def read_peaks(paths) -> dict:
    """The peak files of a tree merged: the CPU's rates by thread count (`threads`) and the
    GPU's (`cuda`), each from the file that measured it."""
    merged = {}
    for path in paths or ():
        with open(path) as f:
            merged.update({k: v for k, v in json.load(f).items() if k in ("threads", "cuda")})
    return merged


# ---------------------------------------------------------------- series of one axis
def series_keys(table: pd.DataFrame, axis: str) -> list[str]:
    """The columns that name one series along `axis`: every condition field but the one the
    axis varies (the model, for depth), the batch size where it is not the axis."""
    varied = {"hidden_layers": "model", "hidden_width": "model", "threads": "threads",
              "batch_size": None}[axis]
    keys = [f for f in stats.CONDITION_FIELDS if f != varied]
    return keys + ([] if axis == "batch_size" else ["batch_size"])


def along(table: pd.DataFrame, axis: str) -> pd.DataFrame:
    """The rows a figure of `axis` draws: those of series with more than one point on it
    (a condition measured at one point says nothing of growth), depth and width over their
    models only (AXIS_MODELS); the forward task's rows are the ratios' denominators, not
    series of their own."""
    data = table.dropna(subset=[axis])
    data = data[data["task"] != spec.FORWARD_TASK]
    if axis in AXIS_MODELS:
        data = data[data["model"].isin(AXIS_MODELS[axis])]
    keys = series_keys(data, axis)
    points = data.groupby(keys, observed=True)[axis].transform("nunique")
    return data[points > 1]
