"""The paper's section on how a derivative's cost grows (report/sections/scaling.tex.j2) and
the scaling figures' series: the scaling table of adbench.scaling, named and formatted.
Text escaped for LaTeX."""

from __future__ import annotations

from typing import TYPE_CHECKING

from adbench import formatting as fmt
from adbench import plotting, spec
from adbench.report_spec import model_label, task_label
from adbench.scaling import (
    ABOVE,
    AXES,
    CHEAP_GRADIENT_BOUND,
    INCONCLUSIVE,
    NOT_MEASURED,
    ONE_PROCESS,
    WITHIN,
    along,
    read_peaks,
    series_keys,
)
from adbench.tables import column_label

if TYPE_CHECKING:
    import pandas as pd


# ---------------------------------------------------------------- series of one axis
def series(table: pd.DataFrame, axis: str) -> list[tuple[str, pd.DataFrame]]:
    """(legend label, rows sorted along the axis) per series drawn (`along`): the (framework,
    mode) label, and the model, task, device, threads or batch size where several are drawn."""
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

    table = pd.read_csv(table_path)
    if table.empty or "task" not in table:  # no ok cell: nothing to say
        return None
    gradients = table[[spec.TASKS[t].derivative == "gradients" for t in table["task"]]]
    measured = gradients[gradients["cheap_gradient"] != NOT_MEASURED]
    return {
        "measured": not gradients.empty,
        "bound": f"{CHEAP_GRADIENT_BOUND:g}",
        "peaks": peak_rows(read_peaks(peak_paths)),
        "rows": [context_row(r) for r in gradients.itertuples(index=False)],
        "counts": {fmt.latex(VERDICT_WORDS.get(v, v)): int(n) for v, n in
                   gradients["cheap_gradient"].value_counts().items()},
        "ratio_span": fmt.span(measured["cheap_gradient_ratio"], tex=True),
        "flops_ratio_span": fmt.span(gradients["flops_ratio"], tex=True),
        "share_span": fmt.span(gradients["fraction_of_peak"], tex=True),
        "slowest": extreme_row(gradients, smallest=True),
        "fastest": extreme_row(gradients, smallest=False),
        "figures": [{"axis": axis, "axis_text": AXES[axis], "file": path.rsplit("/", 1)[-1],
                     "width": plotting.width_option(path),
                     "label": f"fig:scaling-{axis.replace('_', '-')}"}
                    for axis, path in figures.items()],
    }


def peak_rows(peak: dict) -> list[dict]:
    """A row per measured rate: the CPU's per thread count, then the GPU's (where PyTorch saw
    one: a file with only its reason gives no row)."""
    rates = [(fmt.threads_text(t), rate) for t, rate in
             sorted(peak.get("threads", {}).items(), key=lambda i: int(i[0]))]
    if (peak.get("cuda") or {}).get("gflops"):
        rates.append((f"the GPU ({peak['cuda']['gpu_name']})", peak["cuda"]))
    return [{"where": fmt.latex(where), "gflops": fmt.number(rate["gflops"]),
             "bound": fmt.number(rate["bound"]["gflops"]),
             "share": fmt.percent(rate["fraction_of_bound"], None, tex=True),
             "size": rate["size"], "blas": fmt.latex(rate.get("blas", "numpy"))}
            for where, rate in rates]


def verdict_text(r) -> str:
    """A ratio's verdict with the processes it rests on ('within; 2 processes'): a ratio of
    two processes and one of twenty read alike otherwise."""
    short = VERDICT_SHORT.get(r.cheap_gradient, r.cheap_gradient)
    n = getattr(r, "n_processes", None)
    if r.cheap_gradient in (ONE_PROCESS, NOT_MEASURED) or fmt.missing(n):
        return short
    return f"{short}; {fmt.counted(int(n), 'process', 'processes')}"


def context_row(r) -> dict:
    return {
        "mode": fmt.latex(column_label(r.framework, r.mode)),
        "model": fmt.latex(model_label(r.model)),
        "task": fmt.latex(task_label(r.task)), "threads": int(r.threads),
        "batch": int(r.batch_size),
        "ratio": fmt.ratio(r.cheap_gradient_ratio, r.cheap_gradient_ratio_low,
                           r.cheap_gradient_ratio_high, tex=True),
        "verdict": fmt.latex(verdict_text(r)),
        "gflops": fmt.number(r.gflops),
        "share": fmt.percent(r.fraction_of_peak, None, tex=True),
    }


def extreme_row(table, smallest: bool) -> dict | None:
    """The condition whose rate is the smallest (or largest) share of the peak: where the
    framework's overhead dominates the arithmetic most (or least)."""
    rated = table.dropna(subset=["fraction_of_peak"])
    if rated.empty:
        return None
    r = rated.loc[rated["fraction_of_peak"].idxmin() if smallest
                  else rated["fraction_of_peak"].idxmax()]
    return {"mode": fmt.latex(column_label(r["framework"], r["mode"])),
            "model": fmt.latex(model_label(r["model"])),
            "task": fmt.latex(task_label(r["task"])),
            "share": fmt.percent(r["fraction_of_peak"], None, tex=True),
            "step": fmt.milliseconds(r["step_s"])}
