"""The study's Figure 3, first iterations: a panel per model and task of the first spec table
with data (the study's MLP backward passes when present), a line per (framework, mode): each
iteration's step over the cell's median measured step, first seed, log scale, the warm-up
shaded.  Single iterations, not estimates: no intervals."""

from __future__ import annotations

import pandas as pd
from matplotlib.ticker import MaxNLocator

from adbench import selection, tables
from adbench.plotting import MAX_PANELS
from adbench.sections.drawing import (
    FigureData, block_text, figure_legend, finish, grid, line_label, lines_of, mode_colours,
    notice, pairs_present, title,
)
from adbench.spec import FRAMEWORKS


def draw(data: FigureData):
    return plot(data.iterations, data.first)


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
