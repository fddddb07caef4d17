#!/usr/bin/env python
"""The study's Figure 3 (first iterations) and, optionally, the figures of the tables and of
the memory per cell.

    python workflow/scripts/figures.py --iterations results/aggregate/iterations.parquet \
        --first 30 --out results/figures/first_iterations.pdf --out ....png \
        [--summary results/aggregate/summary.parquet --cells results/aggregate/cells.parquet \
         --bootstrap results/aggregate/bootstrap.parquet --published report/published \
         --jacobians-out results/figures/jacobians.pdf --jacobians-out ....png \
         --frameworks-out ... --mlp-backward-out ... --hypothesis0-out ... \
         --memory-per-cell-out ...]

First iterations: one panel per (framework, mode) of the spec present, compiled modes first
(their first calls trace and optimise); one line per (model, task), first seed, log scale,
warm-up shaded.  Which models and tasks: those of the first table of report_spec.TABLES that has
data (the study's MLP backward passes when present), so the panels stay legible however large
the grid; everything present when no table matches.

Jacobians: one panel per model with output-Jacobian cells: per task and (framework, mode) a
point at the mean step time with its bootstrap interval (--bootstrap), log scale, n/a where a
cell did not complete.

Frameworks: for the first table of report_spec.TABLES with a time-to-first-step column (every
framework and mode on the MLPs and the RNN cell), one panel per model: per (framework, mode)
a point at its mean step with its interval and a tick at its time to first step, log scale.

MLP backward: the study's Tables 1-2 (tables.tables_drawn_in), a panel each: per model and
(framework, mode) our mean with its interval and the study's published mean beside it.

Hypothesis 0: per model and (framework, mode) the loss Jacobian's mean step against one
backward pass's, intervals on both axes, log-log, with the line of equality.

Memory per cell: per model a panel, per (framework, mode) and task the measured loop's peak
resident memory over the baseline before it and the memory resident after its last step
(tables.memory_table: medians over processes), MiB, log scale.

Every figure has one legend of the series it drew, below its panels, and says its device,
threads and processes.  Times on log axes are points, never bars (a bar's length on a log
axis depends on where the axis starts).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import textwrap

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from adbench import formatting as fmt  # noqa: E402
from adbench import inference, selection, stats, tables  # noqa: E402
from adbench.report_spec import TABLES, cited, model_label, task_label  # noqa: E402
from adbench.spec import FRAMEWORKS, MODELS, TASKS  # noqa: E402

MS = fmt.unit_scale("ms")  # the figures draw milliseconds
NO_INTERVALS = stats.Replicates({})


# ----------------------------------------------------------------------------- shared drawing
def interval_ms(found: stats.Replicates, r, confidence: float) -> tuple[float, float, float]:
    """A summary row's mean (of its quantity, the step unless it says) in ms and its
    bootstrap interval over the condition's processes (widened for their number); the interval
    is NaN without replicates."""
    key = (*(r[k] for k in stats.CONDITION_FIELDS), r["quantity"] if "quantity" in r else "step_s")
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


def finish(fig) -> None:
    """Every figure's last touch: plain log-axis labels, and the panels laid out above the
    figure's legend."""
    tidy_log_ticks(fig)
    fig.tight_layout(rect=(0, legend_rows(fig), 1, 1))


def tidy_log_ticks(fig) -> None:
    """Log axes labelled at 1, 2, 3 and 5 times each power of ten as plain numbers (1, 2 and 5
    over a decade or more, the powers alone over three or more), minor ticks unlabelled:
    matplotlib labels the minor ticks of a short span (2, 3, 4, 6 x 10^k), and those run into
    each other.  A span under half a decade keeps matplotlib's labels (it may hold none of
    these)."""
    for ax in fig.axes:
        for axis, scale, limits in (
            (ax.xaxis, ax.get_xscale(), ax.get_xlim()),
            (ax.yaxis, ax.get_yscale(), ax.get_ylim()),
        ):
            low, high = sorted(limits)
            if scale != "log" or low <= 0 or math.log10(high / low) < 0.5:
                continue
            decades = math.log10(high / low)
            subs = (1, 2, 3, 5) if decades < 1 else (1, 2, 5) if decades < 3 else (1,)
            axis.set_major_locator(LogLocator(subs=subs))
            axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            axis.set_minor_formatter(NullFormatter())


def figure_legend(fig, axes, extra=(), columns: int = 4) -> None:
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
            ncol=min(columns, len(found)),
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
    return textwrap.fill(task_label(task), 12)


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
    label = model_label(model) if model in MODELS else model
    return f"{label}, {task_label(task)}" if several_tasks and task in TASKS else label


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
    finish(fig)
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
    published: dict | None = None,
):
    """One panel per model; with `published` (read_published), a last slot per panel with the
    study's published means, each in its mode's colour (the study did not say how it computed
    its Jacobians, so they stand apart from both of our tasks)."""
    steps, wanted, condition = jacobian_data(summary, cells)
    study = study_rows("jacobians", published or {})
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
        ticks = jacobian_panel(ax, model, steps, wanted, pairs, found, confidence)
        study_slot(ax, study[study["model"] == model], pairs, ticks)
    figure_legend(fig, axes.flat, extra=study_key(axes.flat))
    device, threads = condition
    fig.suptitle(
        f"Output Jacobians: mean step time, {fmt.block(device, threads)}"
        f"{processes_text(wanted)}; n/a: not measured",
        fontsize=9,
    )
    finish(fig)
    return fig


def jacobian_panel(
    ax, model: str, steps: pd.DataFrame, wanted: pd.DataFrame, pairs, found, confidence
) -> list[str]:
    """A model's panel: per task a slot, per (framework, mode) a point; its tick labels."""
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
                    na_text(ax, x)
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
    ax.set_title(model_label(model), fontsize=9)
    ax.set_ylabel("step (ms)", fontsize=8)
    return [task_tick(t) for t in tasks]


def study_rows(figure: str, published: dict) -> pd.DataFrame:
    """The study's published rows of the tables a figure draws, their mean in ms."""
    frames = [
        published_ms(t, published[t.name])
        for t in tables.tables_drawn_in(figure)
        if t.name in published
    ]
    columns = ["model", "framework", "mode", "mean_ms"]
    return pd.concat(frames)[columns] if frames else pd.DataFrame(columns=columns)


def study_slot(ax, study: pd.DataFrame, pairs, ticks: list[str]) -> None:
    """A last slot of a Jacobian panel: the study's published mean of each mode drawn, an
    open diamond in the mode's colour."""
    drawn = [
        (i, p) for i, p in enumerate(pairs) if p in set(zip(study["framework"], study["mode"]))
    ]
    if not drawn:
        return
    slot = len(ticks)
    width = 0.8 / len(pairs)
    for i, (framework, mode) in drawn:
        mine = study[(study["framework"] == framework) & (study["mode"] == mode)]["mean_ms"]
        ax.plot(
            slot - 0.4 + width * (i + 0.5),
            mine.iloc[0],
            "D",
            mfc="none",
            ms=5,
            color=f"C{i}",
            label=STUDY,
        )
    ax.set_xticks(range(slot + 1))
    ax.set_xticklabels(ticks + [STUDY_TICK], fontsize=7)
    ax.set_xlim(-0.5, slot + 0.5)


STUDY_TICK = "study\n(published)"


def study_key(axes) -> list:
    """The legend's key of the study's markers, drawn in each mode's colour: a neutral one."""
    if not any(STUDY in ax.get_legend_handles_labels()[1] for ax in axes):
        return []
    return [(STUDY, Line2D([], [], marker="D", mfc="none", color="k", ls="none"))]


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
    fig, axes = panel_grid(len(models), len(pairs), row_inches=0.9, extra_inches=0.5,
                           sharey=True)
    for ax, model in zip(axes.flat, models):
        frameworks_panel(ax, model, steps, mine, pairs, found, confidence)
    figure_legend(fig, axes.flat)
    device, threads = condition
    fig.suptitle(
        "Every framework and mode: step and time to first step, "
        f"{fmt.block(device, threads)}{processes_text(mine)}; n/a: not measured",
        fontsize=9,
    )
    finish(fig)
    return fig


def panel_grid(n_panels: int, n_series: int, row_inches: float, extra_inches: float,
               **share):
    """A panel per model, two columns, each panel a row per series drawn (0.22 in each) plus
    `row_inches`; the unused panels hidden."""
    columns = min(2, n_panels)
    n_rows = -(-n_panels // columns)
    fig, axes = plt.subplots(
        n_rows, columns, squeeze=False, **share,
        figsize=(3.6 * columns, (0.22 * n_series + row_inches) * n_rows + extra_inches),
    )
    for ax in axes.flat[n_panels:]:
        ax.set_visible(False)
    return fig, axes


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
    ax.set_title(model_label(model), fontsize=9)


# ----------------------------------------------------------------------------- the study's MLPs
STUDY = "study (published)"


def published_ms(table, published: pd.DataFrame) -> pd.DataFrame:
    """The study's rows of a table with their mean in ms (they are in the table's unit)."""
    if published.empty:
        return published.assign(mean_ms=pd.Series(dtype=float))
    scale = MS / fmt.unit_scale(table.unit)
    return published.assign(mean_ms=pd.to_numeric(published["mean"], errors="coerce") * scale)


def table_rows(data: pd.DataFrame, table) -> pd.DataFrame:
    """A frame's rows of a table's models and tasks."""
    return data[data["model"].isin(table.models) & data["task"].isin(table.tasks)]


def plot_study_backward(
    summary: pd.DataFrame,
    cells: pd.DataFrame,
    published: dict,
    found: stats.Replicates = NO_INTERVALS,
    confidence: float = 0.95,
):
    """The study's MLP backward tables (tables.tables_drawn_in("mlp_backward")), a panel
    each: per model and (framework, mode) our mean with its interval and, beside it, the
    study's published mean (an open diamond)."""
    drawn = [t for t in tables.tables_drawn_in("mlp_backward") if len(table_rows(cells, t))]
    if not drawn:
        return notice("No cell of the study's MLP backward tables was measured in this run.")
    device, threads = selection.first_condition(pd.concat([table_rows(cells, t) for t in drawn]))
    block = lambda df: df[(df["device"] == device) & (df["threads"] == threads)]  # noqa: E731
    fig, axes = plt.subplots(1, len(drawn), figsize=(3.6 * len(drawn), 3.2), squeeze=False)
    colours = {pair: f"C{i}" for i, pair in enumerate(selection.pairs())}  # same in each panel
    for ax, table in zip(axes.flat, drawn):
        mine = block(table_rows(cells, table))
        steps = block(table_rows(summary[summary["quantity"] == table.quantity], table))
        study = published_ms(table, published.get(table.name, pd.DataFrame()))
        study_panel(ax, table, mine, steps, study, colours, found, confidence)
    figure_legend(fig, axes.flat)
    fig.suptitle(
        f"The study's MLP backward tables: ours (mean, {confidence:.0%} interval) beside "
        f"the study's published mean; {fmt.block(device, threads)}"
        f"{processes_text(block(pd.concat([table_rows(cells, t) for t in drawn])))}; "
        "n/a: not measured",
        fontsize=8,
    )
    finish(fig)
    return fig


def study_panel(ax, table, mine, steps, study, colours, found, confidence) -> None:
    """One study table: x the models, a slot per (framework, mode) with ours and the study's."""
    present = set(zip(mine["framework"], mine["mode"])) | set(
        zip(study["framework"], study["mode"])
    )
    pairs = [p for p in selection.table_modes(table) if p in present]
    models = [m for m in table.models if m in set(mine["model"]) | set(study["model"])]
    width = 0.8 / max(1, len(pairs))
    for i, (framework, mode) in enumerate(pairs):
        for j, model in enumerate(models):
            x = j - 0.4 + width * (i + 0.5)
            where = lambda df: df[  # noqa: E731
                (df["model"] == model) & (df["framework"] == framework) & (df["mode"] == mode)
            ]
            row = where(steps)
            if len(row):
                draw_point(
                    ax,
                    x - width / 6,
                    *interval_ms(found, row.iloc[0], confidence),
                    colour=colours[(framework, mode)],
                    label=tables.column_label(framework, mode),
                )
            elif len(where(mine)):  # in the grid, not completed
                na_text(ax, x)
            theirs = where(study)["mean_ms"].dropna()
            if len(theirs):
                ax.plot(
                    x + width / 6, theirs.iloc[0], "D", mfc="none", color="k", ms=5, label=STUDY
                )
    ax.set_xticks(range(len(models)))
    ax.set_xticklabels([textwrap.fill(model_label(m), 10) for m in models], fontsize=7)
    ax.set_xlim(-0.5, len(models) - 0.5)
    ax.set_yscale("log")
    ax.set_title(textwrap.fill(f"{spec_cited(table)}: {table.title}", 40), fontsize=8)
    ax.set_ylabel(f"{QUANTITY_AXIS[table.quantity]} (ms)", fontsize=8)


QUANTITY_AXIS = {"backward_s": "backward pass", "step_s": "whole step", "forward_s": "forward"}


def spec_cited(table) -> str:
    return cited(table.study_table) if table.study_table else table.name


def na_text(ax, x: float) -> None:
    """'n/a' at a slot of a panel whose cell is in the grid but did not complete."""
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


# ----------------------------------------------------------------------------- Hypothesis 0
EQUALITY = "equal cost (y = x)"


def hypothesis0_pairs(summary: pd.DataFrame, cells: pd.DataFrame):
    """Per (model, framework, mode) of the Hypothesis 0 table (first condition): its summary
    rows of the two tasks; and those with both tasks in the grid but not both measured."""
    table = next(iter(tables.tables_drawn_in("hypothesis0")), None)
    mine = table_rows(cells, table) if table is not None else cells.iloc[0:0]
    if mine.empty:
        return table, [], [], None
    device, threads = selection.first_condition(mine)
    mine = mine[(mine["device"] == device) & (mine["threads"] == threads)]
    steps = table_rows(summary[summary["quantity"] == table.quantity], table)
    steps = steps[(steps["device"] == device) & (steps["threads"] == threads)]
    first, second = tables.ratio_tasks(table)
    both, missing = [], []
    for model in (m for m in table.models if m in set(mine["model"])):
        for pair in pairs_present(mine[mine["model"] == model]):
            rows = steps[
                (steps["model"] == model)
                & (steps["framework"] == pair[0])
                & (steps["mode"] == pair[1])
            ]
            by_task = {t: rows[rows["task"] == t] for t in (first, second)}
            in_grid = mine.loc[
                (mine["model"] == model)
                & (mine["framework"] == pair[0])
                & (mine["mode"] == pair[1]),
                "task",
            ]
            if all(len(r) for r in by_task.values()):
                both.append((model, pair, by_task[first].iloc[0], by_task[second].iloc[0]))
            elif {first, second} <= set(in_grid):  # both asked for, one not completed
                missing.append((model, pair))
    return table, both, missing, (device, threads)


def plot_hypothesis0(
    summary: pd.DataFrame,
    cells: pd.DataFrame,
    found: stats.Replicates = NO_INTERVALS,
    confidence: float = 0.95,
):
    """The loss Jacobian against one backward pass, per model and (framework, mode), each
    with its intervals on both axes, log-log, with the line of equality."""
    table, both, missing, condition = hypothesis0_pairs(summary, cells)
    if not both:
        return notice("No condition of Hypothesis 0 measured both its tasks in this run.")
    first, second = tables.ratio_tasks(table)
    colours = {pair: f"C{i}" for i, pair in enumerate(selection.pairs())}
    n_series = len({pair for _, pair, _, _ in both}) + 1  # and the line of equality
    fig, ax = plt.subplots(figsize=(5.2, 4.0 + 0.2 * -(-n_series // 4)))
    by_model: dict[str, list] = {}
    for model, pair, x_row, y_row in both:
        x, x_low, x_high = interval_ms(found, x_row, confidence)
        y, y_low, y_high = interval_ms(found, y_row, confidence)
        ax.errorbar(
            x,
            y,
            fmt="o",
            ms=4,
            capsize=2,
            color=colours[pair],
            label=tables.column_label(*pair),
            xerr=None if pd.isna(x_low) else [[x - x_low], [x_high - x]],
            yerr=None if pd.isna(y_low) else [[y - y_low], [y_high - y]],
        )
        by_model.setdefault(model, []).append((x, y))
    ax.set_xscale("log")
    ax.set_yscale("log")
    name_models(ax, by_model)
    low, high = equality_span(ax)
    ax.plot([low, high], [low, high], color="0.5", lw=1, ls="--", label=EQUALITY)
    ax.set_xlim(low, high)
    ax.set_ylim(low, high)
    ax.set_xlabel(f"{task_label(first)}: mean step (ms)", fontsize=8)
    ax.set_ylabel(f"{task_label(second)}: mean step (ms)", fontsize=8)
    figure_legend(fig, [ax])
    device, threads = condition
    shown = cells[(cells["device"] == device) & (cells["threads"] == threads)]
    fig.suptitle(
        textwrap.fill(
            f"Hypothesis 0: the loss Jacobian against one backward pass, {confidence:.0%} "
            f"intervals, {fmt.block(device, threads)}{processes_text(table_rows(shown, table))}"
            + (
                f"; n/a: {len(missing)} (model, mode) in the grid without both tasks measured"
                if missing
                else ""
            ),
            80,
        ),
        fontsize=8,
    )
    finish(fig)
    return fig


def name_models(ax, by_model: dict) -> None:
    """Each model's name once, beside its points (at their geometric centre)."""
    for model, points in by_model.items():
        xs, ys = zip(*points)
        ax.annotate(
            model_label(model) if model in MODELS else model,
            (max(xs), min(ys)),
            xytext=(4, -8),
            textcoords="offset points",
            fontsize=6,
            color="0.3",
        )


def equality_span(ax) -> tuple[float, float]:
    """One range for both axes, covering every point drawn, so y = x is the diagonal."""
    (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
    return min(x0, y0), max(x1, y1)


# ----------------------------------------------------------------------------- memory
MB = 1 / 2**20  # bytes -> MiB
MEMORY_SERIES = {  # tables.memory_table column -> what it is, as the legend says it
    "peak_over_baseline_bytes": ("o", "peak added by the measured loop"),
    "held_after_step_bytes": ("s", "resident after the last step"),
    "device_peak_allocated_bytes": ("^", "device peak allocated"),
    "device_process_bytes": ("v", "held by the process on its GPU"),
}


def plot_memory(cells: pd.DataFrame):
    """Per model a panel, per (framework, mode) a row: the measured loop's peak resident
    memory over the process's before it, the memory still resident after its last step, and
    a CUDA cell's peak allocated device memory and the GPU memory its process holds
    (tables.memory_table), MiB, log scale."""
    memory = tables.memory_table(cells)
    if memory.empty:
        return notice("No cell of this run recorded its memory.")
    device, threads = selection.first_condition(memory)
    memory = memory[(memory["device"] == device) & (memory["threads"] == threads)]
    grid = cells[(cells["device"] == device) & (cells["threads"] == threads)]
    models = [m for m in MODELS if m in set(memory["model"])]
    pairs = pairs_present(grid[grid["model"].isin(models)])
    # two columns: the MiB axis needs its width
    fig, axes = panel_grid(len(models), len(pairs), row_inches=1.0, extra_inches=0.8,
                           sharex=True)
    for ax, model in zip(axes.flat, models):
        memory_panel(ax, model, memory[memory["model"] == model], grid, pairs)
    figure_legend(fig, axes.flat, columns=2)  # its labels are long
    fig.suptitle(
        f"Memory per cell, median over processes, {fmt.block(device, threads)}"
        f"{processes_text(grid)}; n/a: not measured",
        fontsize=9,
    )
    finish(fig)
    return fig


def memory_panel(ax, model: str, memory: pd.DataFrame, grid: pd.DataFrame, pairs) -> None:
    tasks = [t for t in TASKS if t in set(grid.loc[grid["model"] == model, "task"])]
    step = 0.7 / max(1, len(tasks))
    for y, pair in enumerate(pairs):
        for k, task in enumerate(tasks):
            at = y - 0.35 + step * (k + 0.5)
            row = memory[
                (memory["framework"] == pair[0])
                & (memory["mode"] == pair[1])
                & (memory["task"] == task)
            ]
            if row.empty:
                if (
                    (grid["model"] == model)
                    & (grid["framework"] == pair[0])
                    & (grid["mode"] == pair[1])
                    & (grid["task"] == task)
                ).any():
                    ax.text(
                        0.01,
                        at,
                        "n/a",
                        va="center",
                        fontsize=5,
                        transform=ax.get_yaxis_transform(),
                    )
                continue
            memory_points(ax, row.iloc[0], at, f"C{list(TASKS).index(task)}", task)
    ax.set_yticks(range(len(pairs)))
    ax.set_yticklabels([tables.column_label(*p) for p in pairs], fontsize=6)
    ax.set_ylim(len(pairs) - 0.5, -0.5)
    ax.set_xscale("log")
    ax.set_xlabel("MiB", fontsize=8)
    ax.set_title(model_label(model), fontsize=9)


def memory_points(ax, row, at: float, colour: str, task: str) -> None:
    """A condition's memory series as points; a peak of nothing over the baseline (0 or
    less) cannot sit on a log axis and is written '0' at the axis' left end."""
    for column, (marker, what) in MEMORY_SERIES.items():
        value = row[column] * MB if pd.notna(row[column]) else None
        if value is None:
            continue
        label = f"{task_label(task)}: {what}"
        if value <= 0:
            ax.text(
                0.01,
                at,
                "0",
                va="center",
                fontsize=5,
                color=colour,
                transform=ax.get_yaxis_transform(),
            )
            continue
        ax.plot(
            value,
            at,
            marker,
            color=colour,
            ms=4,
            linestyle="none",
            label=label,
            mfc=colour if marker == "o" else "none",
        )


# ----------------------------------------------------------------------------- CLI
def save(fig, paths: list[str]) -> None:
    for path in paths:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        fig.savefig(path, dpi=150, bbox_inches="tight")
    plt.close(fig)


def read_published(folder: str | None, figure: str = "mlp_backward") -> dict:
    """The study's published rows of the tables a figure draws, by table name."""
    found = {}
    for table in tables.tables_drawn_in(figure):
        path = os.path.join(folder, table.published) if folder and table.published else None
        if path and os.path.exists(path):
            found[table.name] = pd.read_csv(path, dtype={"mean": float}, keep_default_na=False)
    return found


# The figures besides the first iterations, by file name (figures/<name>.{pdf,png}; the
# option --<name>-out); those of the spec's tables are tables.FIGURES_OF_TABLES.
FIGURES = {
    "jacobians": "the Jacobian figure",
    "frameworks": "the every-framework figure",
    "mlp_backward": "the study's MLP backward tables (its Tables 1-2)",
    "hypothesis0": "Hypothesis 0: the loss Jacobian against one backward",
    "memory_per_cell": "the memory per cell",
}
# The figures drawn from the summary and the cells, by name: how each is drawn.
SUMMARY_FIGURES = {
    "jacobians": lambda summary, cells, found, a: plot_jacobians(
        summary, cells, found, a.confidence, read_published(a.published, "jacobians")
    ),
    "frameworks": lambda summary, cells, found, a: plot_frameworks(
        summary, cells, found, a.confidence
    ),
    "mlp_backward": lambda summary, cells, found, a: plot_study_backward(
        summary, cells, read_published(a.published), found, a.confidence
    ),
    "hypothesis0": lambda summary, cells, found, a: plot_hypothesis0(
        summary, cells, found, a.confidence
    ),
}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--iterations", required=True)
    p.add_argument("--first", type=int, default=30)
    p.add_argument("--out", action="append", required=True, help="repeat for each format")
    p.add_argument("--summary", help="summary.parquet: needed for the figures of the tables")
    p.add_argument(
        "--cells", help="cells.parquet: cells not completed, times to first step, " "memory"
    )
    p.add_argument("--bootstrap", help="bootstrap.parquet: the points' intervals (none without)")
    p.add_argument("--confidence", type=float, default=0.95, help="the intervals' level")
    p.add_argument("--published", help="report/published: the study's numbers (MLP figure)")
    for name, what in FIGURES.items():
        p.add_argument(
            f"--{name.replace('_', '-')}-out",
            action="append",
            default=[],
            help=f"{what}; repeat for each format",
        )
    args = p.parse_args(argv)
    wanted = [n for n in SUMMARY_FIGURES if getattr(args, f"{n}_out")]
    if wanted and not args.summary:
        p.error(f"--{wanted[0].replace('_', '-')}-out needs --summary")
    needs_cells = [n for n in FIGURES if getattr(args, f"{n}_out") and n != "jacobians"]
    if needs_cells and not args.cells:
        p.error(f"--{needs_cells[0].replace('_', '-')}-out needs --cells")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    save(plot(pd.read_parquet(args.iterations), args.first), args.out)
    found = (
        stats.replicates_by_condition(pd.read_parquet(args.bootstrap), "mean")
        if args.bootstrap
        else NO_INTERVALS
    )
    cells = pd.read_parquet(args.cells) if args.cells else None
    summary = pd.read_parquet(args.summary) if args.summary else None
    for name, draw in SUMMARY_FIGURES.items():
        if getattr(args, f"{name}_out"):
            save(draw(summary, cells, found, args), getattr(args, f"{name}_out"))
    if args.memory_per_cell_out:
        save(plot_memory(cells), args.memory_per_cell_out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
