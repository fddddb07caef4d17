#!/usr/bin/env python
"""The study's Figure 3 (first iterations) and, optionally, a figure of the Jacobian timings.

    python workflow/scripts/figures.py --iterations results/aggregate/iterations.parquet \
        --first 30 --out results/figures/first_iterations.pdf --out ....png \
        [--summary results/aggregate/summary.parquet --cells results/aggregate/cells.parquet \
         --jacobians-out results/figures/jacobians.pdf --jacobians-out ....png]

First iterations: one panel per (framework, mode) of the spec present, compiled modes first
(their first calls trace and optimise); one line per (model, task), first seed, log scale,
warm-up shaded.  Which models and tasks: those of the first table of spec.TABLES that has
data (the study's MLP backward passes when present), so the panels stay legible however large
the grid; everything present when no table matches.

Jacobians: one panel per model with output-Jacobian cells: per task and (framework, mode) a
point at the mean step time with its bootstrap interval (--bootstrap), log scale, n/a where a
cell did not complete.

Frameworks: for the first table of spec.TABLES with a time-to-first-step column (every
framework and mode on the MLPs and the RNN cell), one panel per model: per (framework, mode)
a point at its mean step with its interval and a tick at its time to first step, log scale.

Every figure has one legend of the series it drew, below its panels, and says its device,
threads and processes.  Times on log axes are points, never bars (a bar's length on a log
axis depends on where the axis starts).
"""

from __future__ import annotations

import argparse
import os
import sys
import textwrap

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from adbench import formatting as fmt  # noqa: E402
from adbench import inference, selection, stats, tables  # noqa: E402
from adbench.spec import FRAMEWORKS, MODELS, TABLES, TASKS  # noqa: E402

MS = fmt.unit_scale("ms")  # the figures draw milliseconds
NO_INTERVALS = stats.Replicates({})


# ----------------------------------------------------------------------------- shared drawing
def interval_ms(found: stats.Replicates, r, confidence: float) -> tuple[float, float, float]:
    """A summary row's mean step in ms and its bootstrap interval over the condition's
    processes (widened for their number); the interval is NaN without replicates."""
    key = (*(r[k] for k in stats.CONDITION_FIELDS), "step_s")
    if key not in found:
        return r["mean_s"] * MS, float("nan"), float("nan")
    point, reps = found[key]
    n = len(found.processes[key])
    i = inference.percentile_interval(
        point, inference.expanded(point, reps, n, confidence, log=True), confidence, n
    )
    return point * MS, i.low * MS, i.high * MS


def draw_point(ax, at: float, value: float, low: float, high: float, colour, label, across=False):
    """A point with its interval as error bars (no interval: the point alone)."""
    error = None if pd.isna(low) else [[value - low], [high - value]]
    kwargs = {"xerr": error} if across else {"yerr": error}
    x, y = (value, at) if across else (at, value)
    ax.errorbar(x, y, fmt="o", ms=4, capsize=2, color=colour, label=label, **kwargs)


def figure_legend(fig, axes, extra=()) -> None:
    """One legend for the figure, below its panels: every series drawn in any panel, once."""
    found = dict(extra)
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            found.setdefault(label, handle)
    if found:
        fig.legend(
            list(found.values()),
            list(found),
            loc="lower center",
            ncol=min(4, len(found)),
            fontsize=7,
            bbox_to_anchor=(0.5, 0),
        )


def legend_rows(fig) -> float:
    """The share of the figure's height its legend's rows take."""
    legend = fig.legends[0] if fig.legends else None
    rows = 0 if legend is None else -(-len(legend.get_texts()) // legend._ncols)
    return min(0.4, 0.35 * rows / fig.get_figheight())


def processes_text(cells: pd.DataFrame | None) -> str:
    """'1 process per cell', '1-2 processes per cell': the seeds behind the figure's cells."""
    if cells is None or cells.empty:
        return ""
    ok = cells[cells["status"] == "ok"] if "status" in cells else cells
    counts = ok.groupby(list(stats.CONDITION_FIELDS), observed=True)["seed"].nunique()
    if counts.empty:
        return ""
    low, high = int(counts.min()), int(counts.max())
    span = str(low) if low == high else f"{low}-{high}"
    return f", {span} process{'' if span == '1' else 'es'} per cell"


def task_tick(task: str) -> str:
    """A task's label wrapped to fit beside its neighbours under a narrow panel."""
    return textwrap.fill(TASKS[task].label, 12)


# ----------------------------------------------------------------------------- selection rules
def pairs_present(data: pd.DataFrame) -> list[tuple[str, str]]:
    """(framework, mode) pairs present, in spec order."""
    present = set(zip(data["framework"], data["mode"]))
    return [pair for pair in selection.pairs() if pair in present]


def panels(iterations: pd.DataFrame) -> list[tuple[str, str]]:
    """Compiled modes first: their first iterations are the point of the figure."""
    return sorted(
        pairs_present(iterations), key=lambda fm: not FRAMEWORKS[fm[0]].modes[fm[1]].compiled
    )


def lines_of(cell: pd.DataFrame) -> list[tuple[str, str]]:
    """(model, task) pairs of a panel, in spec order."""
    present = set(zip(cell["model"], cell["task"]))
    ordered = [(m, t) for m in MODELS for t in TASKS if (m, t) in present]
    return ordered + sorted(present - set(ordered))


def line_label(model: str, task: str, several_tasks: bool) -> str:
    label = MODELS[model].label if model in MODELS else model
    return f"{label}, {TASKS[task].label}" if several_tasks and task in TASKS else label


# ----------------------------------------------------------------------------- first iterations
def notice(text: str):
    """A figure that says why it has nothing to draw (the paper still builds)."""
    fig, ax = plt.subplots(figsize=(5, 1.5))
    ax.axis("off")
    ax.text(0.5, 0.5, text, ha="center", va="center")
    return fig


def plot(iterations: pd.DataFrame, first: int):
    if iterations.empty:  # every cell failed, was unsupported or timed out
        return notice("No cell of this run completed an iteration.")
    seed = iterations["seed"].min()
    data = iterations[(iterations["seed"] == seed) & (iterations["iteration"] < first)]
    device, threads = selection.first_condition(data)
    data = selection.focus_rows(data[(data["device"] == device) & (data["threads"] == threads)])
    several_tasks = data["task"].nunique() > 1
    colours = {line: f"C{i}" for i, line in enumerate(lines_of(data))}  # same in every panel
    pairs = panels(data)
    # 2 x 2 for four modes: legible at a page's width; wider grids for many frameworks.
    columns = min(len(pairs), 2 if len(pairs) <= 4 else 3 if len(pairs) <= 9 else 4)
    n_rows = -(-len(pairs) // columns)
    fig, axes = plt.subplots(
        n_rows, columns, figsize=(3.4 * columns, 2.6 * n_rows + 0.4), sharey=True, squeeze=False
    )
    for ax in axes.flat[len(pairs) :]:
        ax.set_visible(False)
    for ax, (framework, mode) in zip(axes.flat, pairs):
        cell = data[(data["framework"] == framework) & (data["mode"] == mode)]
        warm = cell.loc[cell["phase"] == "warmup", "iteration"]
        if len(warm):
            ax.axvspan(-0.5, warm.max() + 0.5, color="0.9")
        for model, task in lines_of(cell):
            rows = cell[(cell["model"] == model) & (cell["task"] == task)]
            rows = rows.sort_values("iteration")
            ax.plot(
                rows["iteration"],
                rows["step_s"] * MS,
                marker=".",
                lw=1,
                color=colours[(model, task)],
                label=line_label(model, task, several_tasks),
            )
        info = FRAMEWORKS[framework]
        ax.set_title(f"{info.label} {info.modes[mode].label}", fontsize=9)
        ax.set_yscale("log")
        ax.set_xlabel("iteration")
    for row in axes:
        row[0].set_ylabel("step time (ms)")
    # Every line in the legend, also those missing from the first panel (a failed cell).
    handles = [Patch(color="0.9", label="warm-up")] + [
        Line2D([], [], color=colour, marker=".", lw=1, label=line_label(m, t, several_tasks))
        for (m, t), colour in colours.items()
    ]
    figure_legend(fig, [], extra=[(h.get_label(), h) for h in handles])
    fig.suptitle(
        f"First {first} iterations, seed {seed}, {fmt.block(device, threads)}", fontsize=9
    )
    fig.tight_layout(rect=(0, legend_rows(fig), 1, 1))
    return fig


# ----------------------------------------------------------------------------- Jacobians
def jacobian_tasks() -> list[str]:
    return [t for t, info in TASKS.items() if info.derivative == "jacobian"]


def jacobian_data(summary: pd.DataFrame, cells: pd.DataFrame | None):
    """Mean step times of the Jacobian cells (first condition), and the cells not completed."""
    steps = summary[(summary["quantity"] == "step_s") & summary["task"].isin(jacobian_tasks())]
    wanted = (
        cells[cells["task"].isin(jacobian_tasks())]
        if cells is not None
        else steps.drop(columns=[c for c in steps.columns if c.endswith("_s")])
    )
    if wanted.empty:
        return steps, wanted, None
    device, threads = selection.first_condition(wanted)
    keep = lambda df: df[(df["device"] == device) & (df["threads"] == threads)]  # noqa: E731
    return keep(steps), keep(wanted), (device, threads)


def plot_jacobians(
    summary: pd.DataFrame,
    cells: pd.DataFrame | None,
    found: stats.Replicates = NO_INTERVALS,
    confidence: float = 0.95,
):
    steps, wanted, condition = jacobian_data(summary, cells)
    models = [m for m in MODELS if m in set(wanted["model"])]
    if not models:
        return notice("No output-Jacobian cell was measured in this run.")
    pairs = pairs_present(wanted)
    columns = min(3, len(models))
    n_rows = -(-len(models) // columns)
    fig, axes = plt.subplots(
        n_rows, columns, figsize=(3.3 * columns, 2.6 * n_rows + 0.6), squeeze=False
    )
    for ax in axes.flat[len(models) :]:
        ax.set_visible(False)
    for ax, model in zip(axes.flat, models):
        jacobian_panel(ax, model, steps, wanted, pairs, found, confidence)
    figure_legend(fig, axes.flat)
    device, threads = condition
    fig.suptitle(
        f"Output Jacobians: mean step time, {fmt.block(device, threads)}"
        f"{processes_text(wanted)}; n/a: not measured",
        fontsize=9,
    )
    fig.tight_layout(rect=(0, legend_rows(fig), 1, 1))
    return fig


def jacobian_panel(
    ax, model: str, steps: pd.DataFrame, wanted: pd.DataFrame, pairs, found, confidence
) -> None:
    tasks = [t for t in jacobian_tasks() if t in set(wanted.loc[wanted["model"] == model, "task"])]
    width = 0.8 / len(pairs)
    for i, (framework, mode) in enumerate(pairs):
        for j, task in enumerate(tasks):
            x = j - 0.4 + width * (i + 0.5)
            row = steps[
                (steps["model"] == model)
                & (steps["task"] == task)
                & (steps["framework"] == framework)
                & (steps["mode"] == mode)
            ]
            if row.empty:
                ran = wanted[
                    (wanted["model"] == model)
                    & (wanted["task"] == task)
                    & (wanted["framework"] == framework)
                    & (wanted["mode"] == mode)
                ]
                if len(ran):  # in the grid but not completed: say so instead of a gap
                    ax.text(
                        x,
                        0.02,
                        "n/a",
                        rotation=90,
                        ha="center",
                        va="bottom",
                        fontsize=6,
                        transform=ax.get_xaxis_transform(),
                    )
                continue
            draw_point(
                ax,
                x,
                *interval_ms(found, row.iloc[0], confidence),
                colour=f"C{i}",
                label=tables.column_label(framework, mode),
            )
    ax.set_xticks(range(len(tasks)))
    ax.set_xticklabels([task_tick(t) for t in tasks], fontsize=7)
    ax.set_xlim(-0.5, len(tasks) - 0.5)
    ax.set_yscale("log")
    ax.set_title(MODELS[model].label, fontsize=9)
    ax.set_ylabel("step (ms)", fontsize=8)


# ----------------------------------------------------------------------------- frameworks
def frameworks_table():
    return next((t for t in TABLES if t.first_step), None)


def frameworks_data(summary: pd.DataFrame, cells: pd.DataFrame):
    """Mean steps and times to first step of the table's cells (first condition)."""
    table = frameworks_table()
    mine = cells[cells["model"].isin(table.models) & cells["task"].isin(table.tasks)]
    if mine.empty:
        return mine, mine, None
    device, threads = selection.first_condition(mine)
    mine = mine[(mine["device"] == device) & (mine["threads"] == threads)]
    steps = summary[
        (summary["quantity"] == table.quantity)
        & summary["model"].isin(table.models)
        & summary["task"].isin(table.tasks)
        & (summary["device"] == device)
        & (summary["threads"] == threads)
    ]
    return steps, mine, (device, threads)


def plot_frameworks(
    summary: pd.DataFrame,
    cells: pd.DataFrame,
    found: stats.Replicates = NO_INTERVALS,
    confidence: float = 0.95,
):
    steps, mine, condition = frameworks_data(summary, cells)
    models = [m for m in frameworks_table().models if m in set(mine["model"])]
    if not models:
        return notice("No cell of the frameworks table was measured in this run.")
    pairs = pairs_present(mine)
    columns = min(2, len(models))
    n_rows = -(-len(models) // columns)
    fig, axes = plt.subplots(
        n_rows,
        columns,
        sharey=True,
        squeeze=False,
        figsize=(3.6 * columns, (0.22 * len(pairs) + 0.9) * n_rows + 0.5),
    )
    for ax in axes.flat[len(models) :]:
        ax.set_visible(False)
    for ax, model in zip(axes.flat, models):
        frameworks_panel(ax, model, steps, mine, pairs, found, confidence)
    figure_legend(fig, axes.flat)
    device, threads = condition
    fig.suptitle(
        "Every framework and mode: step and time to first step, "
        f"{fmt.block(device, threads)}{processes_text(mine)}; n/a: not measured",
        fontsize=9,
    )
    fig.tight_layout(rect=(0, legend_rows(fig), 1, 1))
    return fig


def frameworks_panel(ax, model: str, steps, mine, pairs, found, confidence) -> None:
    ok = mine[(mine["model"] == model) & (mine["status"] == "ok")]
    for y, (framework, mode) in enumerate(pairs):
        row = steps[
            (steps["model"] == model) & (steps["framework"] == framework) & (steps["mode"] == mode)
        ]
        first = ok[(ok["framework"] == framework) & (ok["mode"] == mode)]
        if row.empty:  # in the grid but not completed, or not in the grid
            ax.text(0.01, y, "n/a", va="center", fontsize=6, transform=ax.get_yaxis_transform())
            continue
        draw_point(
            ax, y, *interval_ms(found, row.iloc[0], confidence), "C0", "mean step", across=True
        )
        if "time_to_first_step_s" in first and first["time_to_first_step_s"].notna().any():
            ax.plot(
                first["time_to_first_step_s"].mean() * MS,
                y,
                marker="|",
                ms=9,
                color="k",
                linestyle="none",
                label="time to first step",
            )
    ax.set_yticks(range(len(pairs)))
    ax.set_yticklabels([tables.column_label(f, m) for f, m in pairs], fontsize=6)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("ms", fontsize=8)
    ax.set_title(MODELS[model].label, fontsize=9)


# ----------------------------------------------------------------------------- CLI
def save(fig, paths: list[str]) -> None:
    for path in paths:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        fig.savefig(path, dpi=150, bbox_inches="tight")
    plt.close(fig)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--iterations", required=True)
    p.add_argument("--first", type=int, default=30)
    p.add_argument("--out", action="append", required=True, help="repeat for each format")
    p.add_argument("--summary", help="summary.parquet: needed for --jacobians-out")
    p.add_argument("--cells", help="cells.parquet: marks Jacobian cells that did not complete")
    p.add_argument("--bootstrap", help="bootstrap.parquet: the points' intervals (none without)")
    p.add_argument("--confidence", type=float, default=0.95, help="the intervals' level")
    p.add_argument(
        "--jacobians-out",
        action="append",
        default=[],
        help="the Jacobian figure; repeat for each format",
    )
    p.add_argument(
        "--frameworks-out",
        action="append",
        default=[],
        help="the every-framework figure; repeat for each format",
    )
    args = p.parse_args(argv)
    if (args.jacobians_out or args.frameworks_out) and not args.summary:
        p.error("--jacobians-out and --frameworks-out need --summary")
    if args.frameworks_out and not args.cells:
        p.error("--frameworks-out needs --cells (times to first step)")
    save(plot(pd.read_parquet(args.iterations), args.first), args.out)
    found = (
        stats.replicates_by_condition(pd.read_parquet(args.bootstrap), "mean")
        if args.bootstrap
        else NO_INTERVALS
    )
    if args.jacobians_out:
        cells = pd.read_parquet(args.cells) if args.cells else None
        save(
            plot_jacobians(pd.read_parquet(args.summary), cells, found, args.confidence),
            args.jacobians_out,
        )
    if args.frameworks_out:
        save(
            plot_frameworks(
                pd.read_parquet(args.summary), pd.read_parquet(args.cells), found, args.confidence
            ),
            args.frameworks_out,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
