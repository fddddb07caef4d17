#!/usr/bin/env python
"""The study's Figure 3 (first iterations) and, optionally, the figures of the tables and of
the memory per cell.

    python workflow/scripts/figures.py --iterations results/aggregate/iterations.parquet \
        --first 30 --out results/figures/first_iterations.pdf --out ....png \
        [--summary results/aggregate/summary.parquet --cells results/aggregate/cells.parquet \
         --conditions results/aggregate/conditions.parquet --published report/published \
         --jacobians-out results/figures/jacobians.pdf --jacobians-out ....png \
         --frameworks-out ... --mlp-backward-out ... --hypothesis0-out ... \
         --memory-per-cell-out ...]

Every figure is drawn at the size the paper prints it (adbench.plotting: the text's width,
no text below 7 pt, at most six panels) and saved uncropped.  Every estimate carries its
interval from the conditions product (--conditions), filled where it resamples processes,
open where it resamples the iterations of one process; one legend below the panels names
every series (a colour per framework and mode, the same in all of a run's figures) and every
marker; the title says the device, threads and processes.  Times on log axes are points,
never bars (a bar's length on a log axis depends on where the axis starts).

First iterations (the study's Figure 3): a panel per model and task of the first spec table
with data (the study's MLP backward passes when present), a line per (framework, mode): each
iteration's step over the cell's median measured step, first seed, log scale, the warm-up
shaded.  Single iterations, not estimates: no intervals.

Jacobians: the study's Jacobian tables (its Tables 3-5), a panel per model: per task and
(framework, mode) the mean step, and the study's published means in a slot of their own.

Frameworks: the first table with a time-to-first-step column (every framework and mode on
the MLPs and the RNN cell), a panel per model: per (framework, mode) the mean step and the
time to first step with its range over processes.

MLP backward: the study's Tables 1-2, a panel each: per model and (framework, mode) our mean
and the study's published mean beside it, in the mode's colour.

Hypothesis 0: per model and (framework, mode) the loss Jacobian's mean step against one
backward pass's, intervals on both axes, log-log, with the line of equality.

Memory: the backward step's memory (tables.memory_table: medians over a condition's cells,
with their range), a panel per quantity recorded, a row per model, MiB, log scale.
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
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from adbench import formatting as fmt  # noqa: E402
from adbench import comparisons, plotting, selection, stats, tables  # noqa: E402
from adbench.machines_section import machine_names  # noqa: E402
from adbench.plotting import MAX_PANELS, SMALL_PT, TEXT_WIDTH_IN, legend_rows  # noqa: E402
from adbench.report_spec import (  # noqa: E402
    TABLES,
    cited,
    model_label,
    task_label,
)
from adbench import spec  # noqa: E402
from adbench.spec import FRAMEWORKS, MODELS, TASKS  # noqa: E402

plt.rcParams.update(plotting.RC)  # every size as printed: the paper includes a figure at its own
MS = fmt.unit_scale("ms")  # the figures draw milliseconds
NO_INTERVALS: dict = {}  # no conditions product: points without intervals
# The marker of an estimate by what its interval resamples (comparisons.basis): filled over
# processes, open over the iterations of one process (no conclusion drawn from it).
ONE_PROCESS = comparisons.ITERATIONS
BASIS_KEYS = {comparisons.PROCESSES: "interval over processes",
              ONE_PROCESS: "interval over one process's iterations"}


# ----------------------------------------------------------------------------- shared drawing
def interval_ms(found: dict, r, confidence: float) -> tuple[float, float, float, str]:
    """A summary row's mean (of its quantity, the step unless it says) in ms, its interval
    from the conditions product (comparisons.estimates) and the interval's basis; NaN and no
    basis where it has none."""
    key = (*(r[k] for k in stats.CONDITION_FIELDS), r["quantity"] if "quantity" in r else "step_s")
    if key not in found:
        return r["mean_s"] * MS, float("nan"), float("nan"), ""
    point, low, high, basis = found[key]
    return point * MS, low * MS, high * MS, basis


def draw_point(ax, at: float, value: float, low: float, high: float, basis: str, colour, label,
               across=False):
    """A point with its interval as error bars, filled over processes and open over one
    process's iterations (no interval: the point alone)."""
    error = None if pd.isna(low) else [[value - low], [high - value]]
    kwargs = {"xerr": error} if across else {"yerr": error}
    x, y = (value, at) if across else (at, value)
    ax.errorbar(x, y, fmt="o", ms=4, capsize=2, color=colour, label=label,
                mfc="white" if basis == ONE_PROCESS else colour, **kwargs)
    ax._adbench_bases = getattr(ax, "_adbench_bases", set()) | {basis or "none"}


def basis_keys(axes) -> list:
    """The legend's keys of the markers' fill: one per basis drawn (neutral, black)."""
    drawn = set().union(*(getattr(ax, "_adbench_bases", set()) for ax in axes))
    return [(words, Line2D([], [], marker="o", ms=4, color="k", ls="none",
                           mfc="white" if basis == ONE_PROCESS else "k"))
            for basis, words in BASIS_KEYS.items() if basis in drawn]


def finish(fig) -> None:
    """Every figure's last touch: plain log-axis labels, and the panels laid out above the
    figure's legend, inside the figure's own size (it is printed at that size)."""
    tidy_log_ticks(fig)
    fig.tight_layout(rect=(0, legend_rows(fig), 1, 1), pad=0.3)


def tidy_log_ticks(fig) -> None:
    """Log axes labelled at 1, 2, 3 and 5 times each power of ten as plain numbers (1, 2 and 5
    over a decade or more, the powers alone over three or more), minor ticks unlabelled:
    matplotlib labels the minor ticks of a short span (2, 3, 4, 6 x 10^k), and those run into
    each other.  A span under half a decade gets three plain numbers."""
    for ax in fig.axes:
        for axis, scale, limits in (
            (ax.xaxis, ax.get_xscale(), ax.get_xlim()),
            (ax.yaxis, ax.get_yscale(), ax.get_ylim()),
        ):
            low, high = sorted(limits)
            if scale != "log" or low <= 0:
                continue
            decades = math.log10(high / low)
            if decades < 0.5:  # a short span: a few plain numbers, no power-of-ten labels
                axis.set_major_locator(MaxNLocator(nbins=3))
                axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.4g}"))
                axis.set_minor_formatter(NullFormatter())
                continue
            subs = (1, 2, 3, 5) if decades < 1 else (1, 2, 5) if decades < 3 else (1,)
            axis.set_major_locator(LogLocator(subs=subs))
            axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            axis.set_minor_formatter(NullFormatter())


def figure_legend(fig, axes, extra=(), columns: int = 4) -> None:
    """One legend for the figure, below its panels: every series drawn in any panel, once,
    then the keys of its markers (`extra`, and the fill of the estimates drawn)."""
    axes = list(axes)
    found = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            if label != STUDY:  # its key is neutral (study_key), after the modes
                found.setdefault(label, handle)
    for label, handle in [*extra, *basis_keys(axes)]:
        found.setdefault(label, handle)
    if found:
        fig.legend(
            list(found.values()),
            list(found),
            loc="lower center",
            ncol=legend_columns(fig, list(found), columns),
            fontsize=SMALL_PT,
            bbox_to_anchor=(0.5, 0),
            frameon=False,
        )


def legend_columns(fig, labels: list[str], most: int) -> int:
    """As many columns (up to `most`) as the widest entry leaves room for in the figure's
    width: a legend wider than its figure would be cut off at the page's edge."""
    entry_pt = max(len(label) for label in labels) * 0.55 * SMALL_PT + 30
    fits = int(fig.get_figwidth() * 72 // entry_pt)
    return max(1, min(most, fits, len(labels)))


def block_text(block: dict) -> str:
    """The block a figure draws: 'cpu, 1 thread', with its machine (named as people say it:
    its GPU, or its CPU) where known."""
    machine = block.get("machine")
    return fmt.block(block["device"], block["threads"],
                     machine_names([machine])[machine] if machine else None)


def processes_text(cells: pd.DataFrame | None) -> str:
    """'1 process per condition', '1-2 processes per condition': the seeds behind the
    figure's conditions."""
    if cells is None or cells.empty:
        return ""
    ok = cells[cells["status"] == "ok"] if "status" in cells else cells
    counts = ok.groupby(list(stats.CONDITION_FIELDS), observed=True)["seed"].nunique()
    if counts.empty:
        return ""
    low, high = int(counts.min()), int(counts.max())
    span = str(low) if low == high else f"{low}-{high}"
    return f", {span} process{'' if span == '1' else 'es'} per condition"


def task_tick(task: str) -> str:
    """A task's label wrapped to fit beside its neighbours under a narrow panel."""
    return textwrap.fill(task_label(task), 10)


def title(fig, text: str) -> None:
    """The figure's title, wrapped to its width at the title's size."""
    chars = int(0.9 * fig.get_figwidth() * 72 / (0.5 * plotting.FONT_PT))
    fig.suptitle(textwrap.fill(text, chars), fontsize=plotting.FONT_PT)


def mode_colours(cells: pd.DataFrame | None) -> dict:
    """A colour per (framework, mode) the run measured, in spec order, the same in every
    figure of the run (tab10's up to ten modes, tab20's beyond)."""
    present = set(zip(cells["framework"], cells["mode"])) if cells is not None and len(cells) \
        else set(spec.pairs())
    pairs = [p for p in spec.pairs() if p in present]
    palette = plt.get_cmap("tab10" if len(pairs) <= 10 else "tab20").colors
    return {pair: palette[i % len(palette)] for i, pair in enumerate(pairs)}


# ----------------------------------------------------------------------------- selection rules
def pairs_present(data: pd.DataFrame) -> list[tuple[str, str]]:
    """(framework, mode) pairs present, in spec order."""
    present = set(zip(data["framework"], data["mode"]))
    return [pair for pair in spec.pairs() if pair in present]


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
    fig, ax = plt.subplots(figsize=(4.5, 1.2))
    ax.axis("off")
    ax.text(0.5, 0.5, textwrap.fill(text, 60), ha="center", va="center")
    return fig


def grid(n_panels: int, columns: int, panel_in: float, extra_in: float, **share):
    """Panels at the text's width, `columns` to a row, each `panel_in` high, plus `extra_in`
    (the title and the legend); the unused ones hidden.  Never over MAX_PANELS."""
    assert n_panels <= MAX_PANELS, f"{n_panels} panels: a figure has at most {MAX_PANELS}"
    columns = max(1, min(columns, n_panels))
    n_rows = -(-n_panels // columns)
    height = min(plotting.MAX_FIGURE_HEIGHT_IN, panel_in * n_rows + extra_in)
    fig, axes = plt.subplots(n_rows, columns, figsize=(TEXT_WIDTH_IN, height), squeeze=False,
                             **share)
    for ax in axes.flat[n_panels:]:
        ax.set_visible(False)
    return fig, axes


def first_panels(data: pd.DataFrame) -> list[tuple[str, str]]:
    """(model, task) of the first-iterations figure's panels: the focus table's, in spec
    order, at most MAX_PANELS."""
    return lines_of(data)[:MAX_PANELS]


def over_median(rows: pd.DataFrame) -> pd.Series:
    """A cell's step times over the median of its measured steps: where the first calls
    stand, whatever the model's size."""
    median = rows.loc[rows["phase"] == "measured", "step_s"].median()
    return rows["step_s"] / median


def plot(iterations: pd.DataFrame, first: int):
    """The study's Figure 3: per model (and task) a panel, per (framework, mode) a line of its
    first iterations' steps over its median measured step, first seed, log scale, the
    warm-up shaded."""
    if iterations.empty:  # every cell failed, was unsupported or timed out
        return notice("No cell of this run completed an iteration.")
    seed = iterations["seed"].min()
    data = iterations[(iterations["seed"] == seed)]
    data = selection.focus_rows(selection.first_block(data))
    block = selection.first_block_key(data)
    colours = mode_colours(iterations)
    shown = first_panels(data)
    fig, axes = grid(len(shown), 3, 2.1, 0.9, sharey=True)
    for ax, (model, task) in zip(axes.flat, shown):
        mine = data[(data["model"] == model) & (data["task"] == task)]
        warm = mine.loc[(mine["phase"] == "warmup") & (mine["iteration"] < first), "iteration"]
        if len(warm):
            ax.axvspan(-0.5, warm.max() + 0.5, color="0.9", label="warm-up")
        for pair in pairs_present(mine):
            rows = mine[(mine["framework"] == pair[0]) & (mine["mode"] == pair[1])]
            rows = rows.sort_values("iteration")
            ratio = over_median(rows)
            keep = rows["iteration"] < first
            compiled = FRAMEWORKS[pair[0]].modes[pair[1]].compiled
            ax.plot(rows.loc[keep, "iteration"], ratio[keep], marker=".", ms=3, lw=1,
                    ls="-" if compiled else "--", color=colours[pair],
                    label=tables.column_label(*pair))
        ax.set_title(line_label(model, task, len({t for _, t in shown}) > 1))
        ax.set_yscale("log")
        ax.set_xlabel("iteration")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    for row in axes:
        row[0].set_ylabel("step / median step")
    figure_legend(fig, axes.flat, columns=3)
    title(fig, f"First {first} iterations over the median measured step, seed {seed}, "
               f"{block_text(block)} (solid: compiled modes, dashed: eager)")
    finish(fig)
    return fig


# ----------------------------------------------------------------------------- Jacobians
def jacobian_tasks() -> list[str]:
    return [t for t, info in TASKS.items() if info.derivative == "jacobian"]


def jacobian_data(summary: pd.DataFrame, cells: pd.DataFrame | None):
    """Mean step times of the Jacobian cells of the figure's tables (first block), and the
    cells not completed."""
    models = {m for t in plotting.figure_tables("jacobians") for m in t.models}
    steps = summary[(summary["quantity"] == "step_s") & summary["task"].isin(jacobian_tasks())
                    & summary["model"].isin(models)]
    wanted = (
        cells[cells["task"].isin(jacobian_tasks()) & cells["model"].isin(models)]
        if cells is not None
        else steps.drop(columns=[c for c in steps.columns if c.endswith("_s")])
    )
    if wanted.empty:
        return steps, wanted, None
    block = dict(zip(selection.block_columns(wanted), selection.first_condition(wanted)))
    keep = lambda df: df[(df[list(block)] == pd.Series(block)).all(axis=1)]  # noqa: E731
    return keep(steps), keep(wanted), block


def plot_jacobians(
    summary: pd.DataFrame,
    cells: pd.DataFrame | None,
    found: dict = NO_INTERVALS,
    confidence: float = 0.95,
    published: dict | None = None,
):
    """The study's Jacobian tables (plotting.figure_tables), a panel per model; with
    `published` (read_published), a last slot per panel with the study's published means,
    each in its mode's colour (the study did not say how it computed its Jacobians, so they
    stand apart from both of our tasks)."""
    steps, wanted, condition = jacobian_data(summary, cells)
    study = study_rows("jacobians", published or {})
    models = [m for m in MODELS if m in set(wanted["model"])]
    if not models:
        return notice("No output-Jacobian condition of the study's tables was measured in "
                      "this run.")
    pairs = pairs_present(wanted)
    colours = mode_colours(cells if cells is not None else wanted)
    fig, axes = grid(len(models), 3, 2.2, 1.3)
    for ax, model in zip(axes.flat, models):
        ticks = jacobian_panel(ax, model, steps, wanted, pairs, found, confidence, colours)
        study_slot(ax, study[study["model"] == model], pairs, ticks, colours)
    figure_legend(fig, axes.flat, extra=study_key(axes.flat))
    title(fig, f"The Jacobians of the study's tables: mean step, {confidence:.0%} intervals, "
               f"{block_text(condition)}{processes_text(wanted)}; n/a: not measured")
    finish(fig)
    return fig


def jacobian_panel(
    ax, model: str, steps: pd.DataFrame, wanted: pd.DataFrame, pairs, found, confidence, colours
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
            draw_point(ax, x, *interval_ms(found, row.iloc[0], confidence),
                       colour=colours[(framework, mode)],
                       label=tables.column_label(framework, mode))
    ax.set_xticks(range(len(tasks)))
    ax.set_xticklabels([task_tick(t) for t in tasks])
    ax.set_xlim(-0.5, len(tasks) - 0.5)
    ax.set_yscale("log")
    ax.set_title(model_label(model))
    if ax.get_subplotspec().is_first_col():
        ax.set_ylabel("step (ms)")
    return [task_tick(t) for t in tasks]


def study_rows(figure: str, published: dict) -> pd.DataFrame:
    """The study's published rows of the tables a figure draws, their mean in ms."""
    frames = [
        published_ms(t, published[t.name])
        for t in plotting.figure_tables(figure)
        if t.name in published
    ]
    columns = ["model", "framework", "mode", "mean_ms"]
    return pd.concat(frames)[columns] if frames else pd.DataFrame(columns=columns)


def study_slot(ax, study: pd.DataFrame, pairs, ticks: list[str], colours) -> None:
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
        ax.plot(slot - 0.4 + width * (i + 0.5), mine.iloc[0], "D", mfc="none", ms=5,
                color=colours[(framework, mode)], label=STUDY)
    ax.set_xticks(range(slot + 1))
    ax.set_xticklabels(ticks + [STUDY_TICK])
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
    block = selection.first_block_key(mine)
    mine = selection.in_block(mine, block)
    steps = selection.in_block(summary[
        (summary["quantity"] == table.quantity)
        & summary["model"].isin(table.models)
        & summary["task"].isin(table.tasks)
    ], block)
    return steps, mine, block


FIRST_STEP = "time to first step (range over processes)"


def plot_frameworks(
    summary: pd.DataFrame,
    cells: pd.DataFrame,
    found: dict = NO_INTERVALS,
    confidence: float = 0.95,
):
    steps, mine, condition = frameworks_data(summary, cells)
    models = [m for m in frameworks_table().models if m in set(mine["model"])][:MAX_PANELS]
    if not models:
        return notice("No condition of the frameworks table was measured in this run.")
    pairs = pairs_present(mine)
    colours = mode_colours(cells)
    fig, axes = grid(len(models), 2, 0.16 * len(pairs) + 0.7, 1.2, sharey=True)
    for ax, model in zip(axes.flat, models):
        frameworks_panel(ax, model, steps, mine, pairs, found, confidence, colours)
    figure_legend(fig, axes.flat, columns=3)
    title(fig, f"Every framework and mode: mean step and time to first step, "
               f"{block_text(condition)}{processes_text(mine)}; n/a: not measured")
    finish(fig)
    return fig


def frameworks_panel(ax, model: str, steps, mine, pairs, found, confidence, colours) -> None:
    ok = mine[(mine["model"] == model) & (mine["status"] == "ok")]
    for y, (framework, mode) in enumerate(pairs):
        row = steps[
            (steps["model"] == model) & (steps["framework"] == framework) & (steps["mode"] == mode)
        ]
        first = ok[(ok["framework"] == framework) & (ok["mode"] == mode)]
        if row.empty:  # in the grid but not completed, or not in the grid
            ax.text(0.01, y, "n/a", va="center", fontsize=SMALL_PT,
                    transform=ax.get_yaxis_transform())
            continue
        draw_point(ax, y, *interval_ms(found, row.iloc[0], confidence),
                   colour=colours[(framework, mode)],
                   label=tables.column_label(framework, mode), across=True)
        times = first["time_to_first_step_s"].dropna() * MS if "time_to_first_step_s" in first \
            else pd.Series(dtype=float)
        if len(times):
            mean = times.mean()
            ax.errorbar(mean, y, xerr=[[mean - times.min()], [times.max() - mean]], fmt="|",
                        ms=9, capsize=0, color="k", label=FIRST_STEP)
    ax.set_yticks(range(len(pairs)))
    ax.set_yticklabels([tables.column_label(f, m) for f, m in pairs])
    ax.set_ylim(len(pairs) - 0.5, -0.5)
    ax.set_xscale("log")
    ax.set_xlabel("ms")
    ax.set_title(model_label(model))


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
    found: dict = NO_INTERVALS,
    confidence: float = 0.95,
):
    """The study's MLP backward tables (plotting.figure_tables("mlp_backward")), a panel
    each: per model and (framework, mode) our mean with its interval and, beside it, the
    study's published mean (an open diamond in the mode's colour)."""
    drawn = [t for t in plotting.figure_tables("mlp_backward") if len(table_rows(cells, t))]
    if not drawn:
        return notice("No condition of the study's MLP backward tables was measured in this "
                      "run.")
    block = selection.first_block_key(pd.concat([table_rows(cells, t) for t in drawn]))
    in_block = lambda df: selection.in_block(df, block)  # noqa: E731
    fig, axes = grid(len(drawn), 2, 2.4, 1.2)
    colours = mode_colours(cells)
    for ax, table in zip(axes.flat, drawn):
        mine = in_block(table_rows(cells, table))
        steps = in_block(table_rows(summary[summary["quantity"] == table.quantity], table))
        study = published_ms(table, published.get(table.name, pd.DataFrame()))
        study_panel(ax, table, mine, steps, study, colours, found, confidence)
    figure_legend(fig, axes.flat, extra=study_key(axes.flat), columns=3)
    title(fig, f"The study's MLP backward tables: our mean with its {confidence:.0%} interval "
               f"beside the study's published mean; {block_text(block)}"
               f"{processes_text(in_block(pd.concat([table_rows(cells, t) for t in drawn])))}"
               "; n/a: not measured")
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
                draw_point(ax, x - width / 6, *interval_ms(found, row.iloc[0], confidence),
                           colour=colours.get((framework, mode), "k"),
                           label=tables.column_label(framework, mode))
            elif len(where(mine)):  # in the grid, not completed
                na_text(ax, x)
            theirs = where(study)["mean_ms"].dropna()
            if len(theirs):
                ax.plot(x + width / 6, theirs.iloc[0], "D", mfc="none", ms=5,
                        color=colours.get((framework, mode), "k"), label=STUDY)
    ax.set_xticks(range(len(models)))
    ax.set_xticklabels([textwrap.fill(model_label(m), 10) for m in models])
    ax.set_xlim(-0.5, len(models) - 0.5)
    ax.set_yscale("log")
    ax.set_title(textwrap.fill(f"{spec_cited(table)}: {table.title}", 48))
    ax.set_ylabel(f"{QUANTITY_AXIS[table.quantity]} (ms)")


QUANTITY_AXIS = {"backward_s": "backward pass", "step_s": "whole step", "forward_s": "forward"}


def spec_cited(table) -> str:
    return cited(table.study_table) if table.study_table else table.name


def na_text(ax, x: float) -> None:
    """'n/a' at a slot of a panel whose condition is in the grid but did not complete."""
    ax.text(x, 0.02, "n/a", rotation=90, ha="center", va="bottom", fontsize=SMALL_PT,
            transform=ax.get_xaxis_transform())


# ----------------------------------------------------------------------------- Hypothesis 0
EQUALITY = "equal cost (y = x)"


def hypothesis0_pairs(summary: pd.DataFrame, cells: pd.DataFrame):
    """Per (model, framework, mode) of the Hypothesis 0 table (first condition): its summary
    rows of the two tasks; and those with both tasks in the grid but not both measured."""
    table = next(iter(tables.tables_drawn_in("hypothesis0")), None)
    mine = table_rows(cells, table) if table is not None else cells.iloc[0:0]
    if mine.empty:
        return table, [], [], None
    block = selection.first_block_key(mine)
    mine = selection.in_block(mine, block)
    steps = table_rows(summary[summary["quantity"] == table.quantity], table)
    steps = selection.in_block(steps, block)
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
    return table, both, missing, block


def plot_hypothesis0(
    summary: pd.DataFrame,
    cells: pd.DataFrame,
    found: dict = NO_INTERVALS,
    confidence: float = 0.95,
):
    """The loss Jacobian against one backward pass, per model and (framework, mode), each
    with its intervals on both axes, log-log, with the line of equality."""
    table, both, missing, condition = hypothesis0_pairs(summary, cells)
    if not both:
        return notice("No condition of Hypothesis 0 measured both its tasks in this run.")
    first, second = tables.ratio_tasks(table)
    colours = mode_colours(cells)
    models = list(dict.fromkeys(model for model, *_ in both))
    markers = dict(zip(models, MODEL_MARKERS))
    fig, ax = plt.subplots(figsize=(5.2, 5.0))
    for model, pair, x_row, y_row in both:
        x, x_low, x_high, x_basis = interval_ms(found, x_row, confidence)
        y, y_low, y_high, y_basis = interval_ms(found, y_row, confidence)
        one = ONE_PROCESS in (x_basis, y_basis)
        ax.errorbar(
            x, y, fmt=markers[model], ms=5, capsize=2, color=colours[pair],
            mfc="white" if one else colours[pair],
            xerr=None if pd.isna(x_low) else [[x - x_low], [x_high - x]],
            yerr=None if pd.isna(y_low) else [[y - y_low], [y_high - y]],
        )
        ax._adbench_bases = getattr(ax, "_adbench_bases", set()) | {
            ONE_PROCESS if one else comparisons.PROCESSES}
    ax.set_xscale("log")
    ax.set_yscale("log")
    low, high = equality_span(ax)
    ax.plot([low, high], [low, high], color="0.5", lw=1, ls="--", label=EQUALITY)
    ax.set_xlim(low, high)
    ax.set_ylim(low, high)
    ax.set_xlabel(f"{task_label(first)}: mean step (ms)")
    ax.set_ylabel(f"{task_label(second)}: mean step (ms)")
    figure_legend(fig, [ax], extra=model_keys(markers) + mode_keys(
        [pair for _, pair, *_ in both], colours), columns=3)
    shown = selection.in_block(cells, condition)
    title(fig, f"Hypothesis 0: the loss Jacobian against one backward pass, {confidence:.0%} "
               f"intervals, {block_text(condition)}{processes_text(table_rows(shown, table))}"
               + (f"; n/a: {len(missing)} (model, mode) in the grid without both tasks "
                  "measured" if missing else ""))
    finish(fig)
    return fig


# A marker per model where a figure tells models apart by shape (its colours are the modes').
MODEL_MARKERS = ("o", "s", "^", "v", "D", "P", "X", "*", "<", ">", "h", "p", "8", "d")


def model_keys(markers: dict) -> list:
    """The legend's key of each model's marker, neutral grey."""
    return [(model_label(m) if m in MODELS else m,
             Line2D([], [], marker=marker, ms=5, color="0.4", ls="none"))
            for m, marker in markers.items()]


def mode_keys(pairs, colours: dict) -> list:
    """The legend's key of each mode's colour, once, in spec order."""
    drawn = set(pairs)
    return [(tables.column_label(*p), Line2D([], [], color=colours[p], lw=3))
            for p in spec.pairs() if p in drawn]


def equality_span(ax) -> tuple[float, float]:
    """One range for both axes, covering every point drawn, so y = x is the diagonal."""
    (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
    return min(x0, y0), max(x1, y1)


# ----------------------------------------------------------------------------- memory
MB = 1 / 2**20  # bytes -> MiB
MEMORY_TASK = "backward"  # the figure's task: a training step (the table gives every task)
# tables.memory_table column -> (what it is, as the panel's title says it, each cell's value
# from cells.parquet's fields: the range over a condition's cells).
MEMORY_SERIES = {
    "peak_over_baseline_bytes": ("peak added by the measured loop",
                                 lambda c: c["rss_peak_bytes"] - c["rss_baseline_bytes"]),
    "held_after_step_bytes": ("resident after the last step",
                              lambda c: c["rss_after_step_bytes"]),
    "device_peak_allocated_bytes": ("device peak allocated",
                                    lambda c: c.get("peak_device_memory_bytes")),
    "device_process_bytes": ("held by the process on its GPU",
                             lambda c: c.get("device_process_bytes")),
}


def memory_ranges(cells: pd.DataFrame, column: str) -> pd.DataFrame:
    """Per condition the smallest and largest of a memory quantity over its cells."""
    values = MEMORY_SERIES[column][1](cells)
    if values is None:
        return pd.DataFrame(columns=[*tables.MEMORY_KEYS, "low", "high"])
    ok = cells.assign(value=pd.to_numeric(values, errors="coerce"))
    ok = ok[(ok["status"] == "ok") & ok["value"].notna()]
    grouped = ok.groupby(tables.MEMORY_KEYS, observed=True)["value"]
    return grouped.agg(low="min", high="max").reset_index()


def plot_memory(cells: pd.DataFrame):
    """The backward step's memory per model: a panel per quantity recorded, a point per
    (framework, mode) at the median over its cells with their range, MiB, log scale."""
    memory = tables.memory_table(cells)
    if memory.empty:
        return notice("No cell of this run recorded its memory.")
    block = selection.first_block_key(memory)
    memory = selection.in_block(memory, block)
    task = MEMORY_TASK if (memory["task"] == MEMORY_TASK).any() else memory["task"].iloc[0]
    memory = memory[memory["task"] == task]
    grid_cells = selection.in_block(cells, block)
    grid_cells = grid_cells[grid_cells["task"] == task]
    models = [m for m in MODELS if m in set(grid_cells["model"])]
    pairs = pairs_present(grid_cells)
    columns = [c for c in MEMORY_SERIES if c in memory and memory[c].notna().any()]
    colours = mode_colours(cells)
    fig, axes = grid(len(columns), 2, 0.17 * len(models) + 0.8, 1.2, sharey=True)
    for ax, column in zip(axes.flat, columns):
        ranges = memory_ranges(grid_cells, column)
        memory_panel(ax, column, memory, ranges, grid_cells, models, pairs, colours)
    figure_legend(fig, axes.flat, columns=3)
    title(fig, f"Memory of the {task_label(task)} step, median over a condition's cells "
               f"with their range, {block_text(block)}{processes_text(grid_cells)}; "
               "n/a: not measured")
    finish(fig)
    return fig


def memory_panel(ax, column, memory, ranges, grid_cells, models, pairs, colours) -> None:
    step = 0.7 / max(1, len(pairs))
    for y, model in enumerate(models):
        for k, pair in enumerate(pairs):
            at = y - 0.35 + step * (k + 0.5)
            where = lambda df: df[(df["model"] == model) & (df["framework"] == pair[0])  # noqa
                                  & (df["mode"] == pair[1])]
            row = where(memory)
            if row.empty or pd.isna(row.iloc[0][column]):
                if len(where(grid_cells)):
                    ax.text(0.01, at, "n/a", va="center", fontsize=SMALL_PT,
                            transform=ax.get_yaxis_transform())
                continue
            memory_point(ax, float(row.iloc[0][column]) * MB, where(ranges), at,
                         colours[pair], tables.column_label(*pair))
    ax.set_yticks(range(len(models)))
    ax.set_yticklabels([model_label(m) for m in models])
    ax.set_ylim(len(models) - 0.5, -0.5)
    ax.set_xscale("log")
    ax.set_xlabel("MiB")
    ax.set_title(MEMORY_SERIES[column][0])


def memory_point(ax, value: float, spread: pd.DataFrame, at: float, colour, label) -> None:
    """A condition's median with its range over cells; a peak of nothing over the baseline
    (0 or less) cannot sit on a log axis and is written '0' at the axis' left end."""
    if value <= 0:
        ax.text(0.01, at, "0", va="center", fontsize=SMALL_PT, color=colour,
                transform=ax.get_yaxis_transform())
        return
    error = None
    if len(spread):
        low, high = (max(float(spread.iloc[0][k]) * MB, 1e-9) for k in ("low", "high"))
        error = [[max(value - low, 0)], [max(high - value, 0)]]
    ax.errorbar(value, at, xerr=error, fmt="o", ms=4, capsize=2, color=colour, label=label)


# ----------------------------------------------------------------------------- CLI
def save(fig, paths: list[str]) -> None:
    """At the figure's own size (no cropping): the paper prints it at that size."""
    for path in paths:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        fig.savefig(path, dpi=150)
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
    p.add_argument("--conditions", help="conditions.parquet (compare.py): the points' intervals "
                   "(none without)")
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
        comparisons.estimates(pd.read_parquet(args.conditions), "mean")
        if args.conditions
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
