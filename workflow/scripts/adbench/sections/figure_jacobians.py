"""The Jacobians of the study's tables (its Tables 3-5), a panel per model: per task and
(framework, mode) the mean step, and the study's published means in a slot of their own."""

from __future__ import annotations

import pandas as pd

from adbench import plotting, selection, tables
from adbench.report_spec import model_label
from adbench.sections.drawing import (
    NO_INTERVALS, STUDY, FigureData, block_text, draw_point, figure_legend, finish, grid,
    interval_ms, mode_colours, na_text, notice, pairs_present, processes_text, published_ms,
    read_published, study_key, task_tick, title,
)
from adbench.spec import MODELS, TASKS

STUDY_TICK = "study\n(published)"


def draw(data: FigureData):
    return plot_jacobians(data.summary, data.cells, data.found, data.confidence,
                          read_published(data.published, "jacobians"))


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
