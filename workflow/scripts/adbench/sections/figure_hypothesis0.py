"""Hypothesis 0: per model and (framework, mode) the loss Jacobian's mean step against one
backward pass's, intervals on both axes, log-log, with the line of equality."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.lines import Line2D

from adbench import comparisons, selection, spec, tables
from adbench.report_spec import model_label, task_label
from adbench.sections.drawing import (
    NO_INTERVALS, ONE_PROCESS, FigureData, block_text, figure_legend, finish, interval_ms,
    mode_colours, notice, pairs_present, processes_text, table_rows, title,
)
from adbench.spec import MODELS


def draw(data: FigureData):
    return plot_hypothesis0(data.summary, data.cells, data.found, data.confidence)


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
