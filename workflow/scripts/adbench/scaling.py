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
ratio is the mean over processes of each process's median (claims.VERDICT_STATISTIC), with
its bootstrap interval paired by seed (stats.Replicates.ratio), as the verdicts compute
theirs.

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

# numpy and the spec only at import: the Snakemake driver, which has no pandas, plans the
# rules with sweep_axes and thread_counts.  The analysis imports pandas where it is used.
from adbench import flops, inference, spec
from adbench.claims import CHEAP_GRADIENT_BOUND
from adbench.report_spec import model_label, task_label
# Whose product measures a GPU's peak (measure_peak.py --device cuda, in its environment).
CUDA_PEAK_FRAMEWORK = "torch"
WITHIN, ABOVE, INCONCLUSIVE = "within", "above", "inconclusive"
NOT_MEASURED = ("not measured: forward and derivative are one call, and no forward task "
                "ran")
NOT_A_GRADIENT = "not a gradient: an output Jacobian, one reverse pass per row"
NOT_A_DERIVATIVE = "the forward alone: the denominator of its modes' ratios"
# Where a condition's forward time comes from (the table's `forward_from`).
IN_PROCESS = "same iterations"
FORWARD_TASK_SOURCE = "forward task"
ONE_PROCESS = inference.ONE_PROCESS

# The sweep axes a tree can vary, and the table column each is read from.  A batch size is
# a model's workload key, not a grid axis: one tree holds one batch size per model, so the
# batch axis spans several trees (config/sweep-batch.yaml says how to run them).
AXES = {"batch_size": "batch size", "threads": "threads", "hidden_layers": "hidden layers",
        "hidden_width": "hidden width"}
# The models an axis that varies the model draws: the study's MLPs of constant parameters
# (depth), the one-hidden-layer MLPs of the width sweep (width).
AXIS_MODELS = {"hidden_layers": spec.MLPS, "hidden_width": spec.MLP_WIDTHS}

# After the condition's fields (stats.CONDITION_FIELDS):
COLUMNS = [
    "label", "batch_size", "jacobian_rows", "hidden_layers", "hidden_width",
    "n_parameters", "n_processes", "forward_s", "forward_from", "step_s",
    "cheap_gradient_ratio",
    "cheap_gradient_ratio_low", "cheap_gradient_ratio_high", "cheap_gradient",
    "flops_forward", "flops_step", "flops_ratio", "gflops_forward", "gflops",
    "peak_gflops", "fraction_of_peak",
]


# ---------------------------------------------------------------- what a tree sweeps
def hidden_layers(model: str) -> float:
    """Depth of an MLP-family model (hidden layers); NaN for any other family."""
    m = spec.MODELS[model]
    return len(m.arch["sizes"]) - 2 if m.family == "mlp" else math.nan


def hidden_width(model: str) -> float:
    """Units of a one-hidden-layer MLP-family model; NaN for any other."""
    m = spec.MODELS[model]
    return m.arch["sizes"][1] if m.family == "mlp" and len(m.arch["sizes"]) == 3 else math.nan


def sweep_axes(cells) -> list[str]:
    """The axes a config's cells (spec.Cell) vary within one tree: threads, and depth (width)
    where more than one of the axis' models (AXIS_MODELS) is measured."""
    axes = []
    if len({c.threads for c in cells}) > 1:
        axes.append("threads")
    models = {c.model for c in cells}
    axes += [axis for axis, axis_models in AXIS_MODELS.items()
             if len(models & set(axis_models)) > 1]
    return axes


def thread_counts(cells) -> list[int]:
    """The CPU cells' thread counts: the peak is measured at each."""
    return sorted({c.threads for c in cells if c.device == "cpu"})


def measures_gpu_peak(cells) -> bool:
    """Whether the GPU's peak is measured (rule matmul_peak_cuda): where CUDA cells run."""
    return any(c.device == "cuda" for c in cells)


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
    """Per condition of the ok cells: its batch size, Jacobian rows and processes."""
    from adbench import stats

    ok = cells[cells["status"] == "ok"]
    return ok.groupby(list(stats.CONDITION_FIELDS), observed=True).agg(
        batch_size=("batch_size", "first"), jacobian_rows=("jacobian_rows", "first"),
        n_processes=("seed", "nunique")).reset_index()


def condition_row(size, found: stats.Replicates, peak: dict, confidence: float) -> dict:
    from adbench import stats
    from adbench.tables import column_label

    key = tuple(getattr(size, f) for f in stats.CONDITION_FIELDS)
    step = found.get(key + ("step_s",), (math.nan, None))[0]
    source, forward_key = forward_source(key, found)
    forward = found.get(forward_key, (math.nan, None))[0] if source else math.nan
    measured = source is not None and size.task != spec.FORWARD_TASK
    ratio = (found.ratio(key + ("step_s",), forward_key, confidence)
             if measured else None) or inference.NO_INTERVAL
    counts = flops.task_flops(size.model, size.task, int(size.batch_size),
                              int(size.jacobian_rows))
    gflops = counts["step_s"] / step / 1e9 if step > 0 else math.nan
    peak_rate = peak_of(peak, size.device, int(size.threads))
    return {
        **dict(zip(stats.CONDITION_FIELDS, key)),
        "label": column_label(size.framework, size.mode),
        "batch_size": int(size.batch_size), "jacobian_rows": int(size.jacobian_rows),
        "hidden_layers": hidden_layers(size.model), "hidden_width": hidden_width(size.model),
        "n_parameters": spec.MODELS[size.model].n_parameters,
        "n_processes": int(size.n_processes), "forward_s": forward,
        "forward_from": source or "", "step_s": step,
        "cheap_gradient_ratio": ratio.point, "cheap_gradient_ratio_low": ratio.low,
        "cheap_gradient_ratio_high": ratio.high,
        "cheap_gradient": cheap_gradient(size.task, measured, ratio),
        "flops_forward": counts["forward_s"], "flops_step": counts["step_s"],
        "flops_ratio": counts["step_s"] / counts["forward_s"],
        "gflops_forward": (counts["forward_s"] / forward / 1e9 if forward > 0 else math.nan),
        "gflops": gflops, "peak_gflops": peak_rate, "fraction_of_peak": gflops / peak_rate,
    }


def forward_source(key: tuple, found) -> tuple[str | None, tuple | None]:
    """Where a condition's forward time is read (the module docstring's rule): its own
    iterations' `forward_s`, else the forward task's `step_s` in the same (framework, mode,
    model, device, threads); (None, None) where neither was measured."""
    from adbench import stats

    if key + ("forward_s",) in found:
        return IN_PROCESS, key + ("forward_s",)
    named = dict(zip(stats.CONDITION_FIELDS, key))
    forward = tuple({**named, "task": spec.FORWARD_TASK}.values()) + ("step_s",)
    return (FORWARD_TASK_SOURCE, forward) if forward in found else (None, None)


def scaling_table(cells: pd.DataFrame, bootstrap: pd.DataFrame, peak: dict,
                  confidence: float) -> pd.DataFrame:
    """One row per condition of the ok cells (see the module docstring), in the cells'
    order."""
    import pandas as pd

    from adbench import stats
    from adbench.claims import VERDICT_STATISTIC

    found = stats.replicates_by_condition(bootstrap, VERDICT_STATISTIC)
    rows = [condition_row(size, found, peak, confidence)
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
    from adbench import stats

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


def series(table: pd.DataFrame, axis: str) -> list[tuple[str, pd.DataFrame]]:
    """(legend label, rows sorted along the axis) per series drawn (`along`): the (framework,
    mode) label, and the model, task, device, threads or batch size where several are drawn."""
    from adbench.tables import column_label

    data = along(table, axis)
    keys = series_keys(data, axis)
    several = [k for k in keys if k not in ("framework", "mode") and data[k].nunique() > 1]
    out = []
    for values, rows in data.groupby(keys, observed=True, sort=False):
        named = dict(zip(keys, values))
        extra = [series_word(k, named[k]) for k in several]
        label = ", ".join([column_label(named["framework"], named["mode"]), *extra])
        out.append((spec_order(named), label, rows.sort_values(axis)))
    return [(label, rows) for _, label, rows in sorted(out, key=lambda item: item[0])]


def spec_order(named: dict) -> tuple[int, int]:
    """A series' place: its framework's and mode's in spec.FRAMEWORKS, as every figure."""
    framework = spec.FRAMEWORKS[named["framework"]]
    return list(spec.FRAMEWORKS).index(named["framework"]), list(framework.modes).index(
        named["mode"])


def series_word(key: str, value) -> str:
    if key == "model":
        return model_label(value)
    if key == "task":
        return task_label(value)
    if key == "batch_size":
        return f"batch {value}"
    if key == "threads":
        return f"{value} thread{'s' if int(value) != 1 else ''}"
    return str(value)


# ---------------------------------------------------------------- the paper's section
# How the paper names a verdict, in its text and in its table (the keys: the table's
# `cheap_gradient` values).
VERDICT_WORDS = {WITHIN: "within the bound", ABOVE: "above the bound",
                 INCONCLUSIVE: "inconclusive (the interval spans the bound)",
                 ONE_PROCESS: "from one process (not judged)",
                 NOT_MEASURED: "without a forward time (one compiled call, no forward "
                               "task)"}
VERDICT_SHORT = {WITHIN: "within", ABOVE: "above", INCONCLUSIVE: "inconclusive",
                 ONE_PROCESS: "1 process", NOT_MEASURED: "n/a"}


def scaling_context(table_path, peak_paths, figures: dict[str, str]) -> dict | None:
    """The context of report/sections/scaling.tex.j2, its key `scaling`: tables/scaling.csv
    (scaling.py), the peak files (measure_peak.py) and the figures drawn, {axis: path};
    every text escaped for LaTeX.  Rows: the gradient tasks' conditions (the bound is a
    gradient's)."""
    import pandas as pd

    from adbench import formatting as fmt

    table = pd.read_csv(table_path)
    if table.empty or "task" not in table:  # no ok cell: nothing to say
        return None
    gradients = table[[spec.TASKS[t].derivative == "gradients" for t in table["task"]]]
    measured = gradients[gradients["cheap_gradient"] != NOT_MEASURED]
    return {
        "measured": not gradients.empty,
        "bound": f"{CHEAP_GRADIENT_BOUND:g}",
        "peaks": peak_rows(read_peaks(peak_paths)),
        "rows": [context_row(r, fmt) for r in gradients.itertuples(index=False)],
        "counts": {fmt.latex(VERDICT_WORDS.get(v, v)): int(n) for v, n in
                   gradients["cheap_gradient"].value_counts().items()},
        "ratio_span": fmt.span(measured["cheap_gradient_ratio"], tex=True),
        "flops_ratio_span": fmt.span(gradients["flops_ratio"], tex=True),
        "share_span": fmt.span(gradients["fraction_of_peak"], tex=True),
        "slowest": extreme_row(gradients, fmt, smallest=True),
        "fastest": extreme_row(gradients, fmt, smallest=False),
        "figures": [{"axis": axis, "axis_text": AXES[axis], "file": path.rsplit("/", 1)[-1],
                     "label": f"fig:scaling-{axis.replace('_', '-')}"}
                    for axis, path in figures.items()],
    }


def peak_rows(peak: dict) -> list[dict]:
    """A row per measured rate: the CPU's per thread count, then the GPU's (where PyTorch saw
    one: a file with only its reason gives no row)."""
    from adbench import formatting as fmt

    rates = [(fmt.threads_text(t), rate) for t, rate in
             sorted(peak.get("threads", {}).items(), key=lambda i: int(i[0]))]
    if (peak.get("cuda") or {}).get("gflops"):
        rates.append((f"the GPU ({peak['cuda']['gpu_name']})", peak["cuda"]))
    return [{"where": fmt.latex(where), "gflops": fmt.number(rate["gflops"]),
             "bound": fmt.number(rate["bound"]["gflops"]),
             "share": fmt.percent(rate["fraction_of_bound"], None, tex=True),
             "size": rate["size"], "blas": fmt.latex(rate.get("blas", "numpy"))}
            for where, rate in rates]


def context_row(r, fmt) -> dict:
    return {
        "mode": fmt.latex(r.label), "model": fmt.latex(model_label(r.model)),
        "task": fmt.latex(task_label(r.task)), "threads": int(r.threads),
        "batch": int(r.batch_size),
        "ratio": fmt.ratio(r.cheap_gradient_ratio, r.cheap_gradient_ratio_low,
                           r.cheap_gradient_ratio_high, tex=True),
        "verdict": fmt.latex(VERDICT_SHORT.get(r.cheap_gradient, r.cheap_gradient)),
        "gflops": fmt.number(r.gflops),
        "share": fmt.percent(r.fraction_of_peak, None, tex=True),
    }


def extreme_row(table, fmt, smallest: bool) -> dict | None:
    """The condition whose rate is the smallest (or largest) share of the peak: where the
    framework's overhead dominates the arithmetic most (or least)."""
    rated = table.dropna(subset=["fraction_of_peak"])
    if rated.empty:
        return None
    r = rated.loc[rated["fraction_of_peak"].idxmin() if smallest
                  else rated["fraction_of_peak"].idxmax()]
    return {"mode": fmt.latex(r["label"]), "model": fmt.latex(model_label(r["model"])),
            "task": fmt.latex(task_label(r["task"])),
            "share": fmt.percent(r["fraction_of_peak"], None, tex=True),
            "step": fmt.milliseconds(r["step_s"])}
