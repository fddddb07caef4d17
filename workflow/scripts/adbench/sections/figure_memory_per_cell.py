"""Memory: the backward step's memory (tables.memory_table: medians over a condition's cells,
with their range), a panel per quantity recorded, a row per model, MiB, log scale."""

from __future__ import annotations

import pandas as pd

from adbench import selection, tables
from adbench.plotting import SMALL_PT
from adbench.report_spec import model_label, task_label
from adbench.sections.drawing import (
    FigureData, block_text, figure_legend, finish, grid, mode_colours, notice, pairs_present,
    processes_text, title,
)
from adbench.spec import MODELS


def draw(data: FigureData):
    return plot_memory(data.cells)


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
