"""The study's MLP backward tables (its Tables 1-2), a panel each: per model and (framework,
mode) our mean with its interval and the study's published mean beside it, in the mode's
colour."""

from __future__ import annotations

import textwrap

import pandas as pd

from adbench import plotting, selection, tables
from adbench.report_spec import cited, model_label
from adbench.sections.drawing import (
    NO_INTERVALS, STUDY, FigureData, block_text, draw_point, figure_legend, finish, grid,
    interval_ms, mode_colours, na_text, notice, processes_text, published_ms, read_published,
    study_key, table_rows, title,
)


def draw(data: FigureData):
    return plot_study_backward(data.summary, data.cells, read_published(data.published),
                               data.found, data.confidence)


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
