"""Every framework and mode: the first table with a time-to-first-step column (every
framework and mode on the MLPs and the RNN cell), a panel per model: per (framework, mode)
the mean step and the time to first step with its range over processes."""

from __future__ import annotations

import pandas as pd

from adbench import selection, tables
from adbench.plotting import MAX_PANELS, SMALL_PT
from adbench.report_spec import TABLES, model_label
from adbench.sections.drawing import (
    MS, NO_INTERVALS, FigureData, block_text, draw_point, figure_legend, finish, grid,
    interval_ms, mode_colours, notice, pairs_present, processes_text, title,
)


def draw(data: FigureData):
    return plot_frameworks(data.summary, data.cells, data.found, data.confidence)


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
