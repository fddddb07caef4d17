"""The paper's tables: every table of report_spec.TABLES side by side with the study's, as template
context (render_paper.py).

Layout "columns" (the study's): per (device, threads) block and model, a "this work" row per
task (mean, median, std), the speed-ups of an improvement table, the ratio of two tasks, and
the study's published row, verbatim; a column group per (framework, mode).  Layout "rows": a
row per (framework, mode) under each model, a column group per task.  A cell that is not ok
reads n/a with a footnote that says why; a footnote also marks a flagged cell (noisy, warm-up
longer than configured) and one whose loop waited (paper_context.waiting_conditions).
Numbers are written by adbench.formatting; text arrives LaTeX-escaped.
"""

from __future__ import annotations

import dataclasses

import pandas as pd

from adbench import formatting as fmt
from adbench import tables as tbl
from adbench.formatting import latex
from adbench.selection import table_modes
from adbench.report_spec import MODEL_TEXT, TABLES, TableInfo, cited, model_label, task_label
from adbench.spec import FRAMEWORKS, MODELS, timed_quantities

QUANTITY_TEXT = {
    "backward_s": "the backward pass alone",
    "forward_s": "the forward pass alone",
    "step_s": "the whole step (forward and derivative)",
}
NOT_IN_GRID = "not in this run's grid (not measured)"
DASH = latex(fmt.NOTHING)  # a cell with no value of its kind (an eager mode's speed-up)
WAITING = (
    "the timed loop kept fewer cores busy than its threads in at least one process, a sign "
    "of waiting (Table~\\ref{tab:threads})"
)
# An improvement table's speed-ups, eager over compiled (tables.py): like for like first; the
# study's construction last, only where the study's table is reproduced (layout "columns").
SPEEDUPS = {
    "improvement": "speed-up, step / step",
    "improvement_backward": "speed-up, backward / backward",
    "improvement_study_style": "study's construction: eager bwd / compiled step",
}
LIKE_FOR_LIKE = ("improvement", "improvement_backward")
SPEEDUP_HEADS = {"improvement": "step/step", "improvement_backward": "bwd/bwd"}


def pair_label(framework: str, mode: str) -> str:
    return latex(tbl.column_label(framework, mode))


def tables_overview(data: dict) -> list[dict]:
    return [
        {
            "name": t.name,
            "title": latex(t.title),
            "study_table": latex(cited(t.study_table)),
            "measured": not data[t.name]["ours"].empty,
        }
        for t in TABLES
    ]


# ----------------------------------------------------------------------------- columns layout
class Notes:
    """Footnote marks (a, b, ...) for table cells, one per distinct note, with their notes."""

    def __init__(self):
        self.items: list[dict] = []

    def mark(self, text: str) -> str:
        for item in self.items:
            if item["text"] == text:
                return item["mark"]
        mark = chr(ord("a") + len(self.items) % 26) + "'" * (len(self.items) // 26)
        self.items.append({"mark": mark, "text": text})
        return mark


def superscript(mark: str) -> str:
    return f"$^{{\\mathrm{{{mark}}}}}$"


def condition_of(r: dict) -> tuple:
    """A tidy row's (framework, mode, model, task, device, threads)."""
    return (r["framework"], r["mode"], r["model"], r["task"], r["device"], int(r["threads"]))


def cell_marks(r: dict, where: str, notes: Notes, waiting: set) -> str:
    """The footnote marks on our mean: not ok (its status and why) or not in the grid, its
    flags (noisy, warm-up short), and a loop that waited; '' for a clean cell."""
    if not r:
        return superscript(notes.mark(NOT_IN_GRID))
    texts = []
    if r["status"] != "ok":
        note = "" if fmt.blank(r.get("note")) else str(r["note"])
        texts.append(f"{where}: {latex(r['status'])} --- {latex(note)}")
    if not fmt.blank(r.get("flags")):
        texts.append(f"{where}: {latex(r['flags'])}")
    if condition_of(r) in waiting:
        texts.append(WAITING)
    return superscript(",".join(notes.mark(t) for t in texts)) if texts else ""


# Up to this many (framework, mode) groups, the median is a column beside the mean; a wider
# table (the Jacobian tables' four modes) would overrun the page, so its median and IQR get a
# line of their own under each of our rows, in the mean's and the std's columns.
MEDIAN_COLUMN_GROUPS = 2


@dataclasses.dataclass(frozen=True)
class View:
    """What every line of a columns-layout table needs: its (framework, mode) columns, where
    the median goes, whether the study printed the std's sd, and the footnotes."""

    table: TableInfo
    columns: list
    std_sd: bool
    marks: dict  # {"notes": Notes, "waiting": set of conditions}

    @property
    def median_column(self) -> bool:
        return len(self.columns) <= MEDIAN_COLUMN_GROUPS

    @property
    def heads(self) -> list[str]:
        """Our statistics per (framework, mode); the speed-ups and ratios are lines."""
        return ["mean", "median", "std"] if self.median_column else ["mean", "std"]


def ratio_text(r: dict, name: str) -> str:
    """A ratio with its interval and the processes (seeds, paired) behind it: '<name>_n'."""
    text = fmt.ratio_of(r, name, tex=True)
    n = r.get(f"{name}_n")
    return text if text == fmt.NA or fmt.missing(n) else f"{text}\\,{{\\tiny n={int(n)}}}"


def speedup_text(r: dict, pair, task: str, name: str) -> str:
    """A speed-up of a compiled mode; a dash for an eager mode and for backward / backward
    where the compiled mode times its whole step as one call (no backward of its own)."""
    compiled = FRAMEWORKS[pair[0]].modes[pair[1]].compiled
    if not compiled or (
        name == "improvement_backward" and "backward_s" not in timed_quantities(*pair, task)
    ):
        return DASH
    return ratio_text(r, name)


def paper_columns(table: TableInfo, ours: pd.DataFrame, published: pd.DataFrame) -> list:
    """(framework, mode) columns: the table's modes present in our data or the study's."""
    present = set(zip(ours["framework"], ours["mode"])) | set(
        zip(published["framework"], published["mode"])
    )
    return [pair for pair in table_modes(table) if pair in present]


def first_row(found: pd.DataFrame) -> dict:
    return {} if found.empty else found.iloc[0].to_dict()


def our_cells(found: pd.DataFrame, pair, where: str, view: View) -> list:
    """Formatted cells of one (framework, mode) for one model and task: mean ± sd, median
    (where it has a column), std; n/a with a note.

    The std's own spread over seeds is printed only where the study printed one (its
    Tables 1-2): elsewhere it would widen the table for a number the study never gave.
    """
    r = first_row(found)
    cells = [
        fmt.pm(r.get("mean"), r.get("mean_sd"), tex=True),
        *([fmt.number(r.get("median"))] if view.median_column else []),
        fmt.pm(r.get("std"), r.get("std_sd") if view.std_sd else None, tex=True),
    ]
    cells[0] += cell_marks(r, f"{pair_label(*pair)}, {latex(where)}", **view.marks)
    return cells


def median_line(found: dict, view: View, task_label: str) -> list:
    """Under our row of a wide table: per (framework, mode) the median and the IQR."""
    if view.median_column:
        return []
    cells = []
    for rows in found.values():
        r = first_row(rows)
        cells += [fmt.number(r.get("median")), fmt.number(r.get("iqr"))]
    return [{"label": latex(f"median, IQR{task_label}"), "cells": cells}]


def study_cells(found: pd.DataFrame, view: View) -> list:
    """The study's cells, verbatim; '--' where it reported nothing (it gave no median)."""
    r = first_row(found)
    if not r:
        return [DASH] * len(view.heads)
    return [
        fmt.verbatim_pm(r.get("mean"), r.get("mean_sd"), tex=True),
        *([DASH] if view.median_column else []),
        fmt.verbatim_pm(r.get("std"), r.get("std_sd"), tex=True),
    ]


def spanning(texts, n_stats: int) -> list:
    """One text per (framework, mode) column group, centred across its statistics."""
    return [f"\\multicolumn{{{n_stats}}}{{c}}{{{text}}}" for text in texts]


def ratio_cells(found_by_pair: dict, n_stats: int) -> list:
    return spanning((task_ratio_text(found) for found in found_by_pair.values()), n_stats)


def task_ratio_text(found: pd.DataFrame) -> str:
    """The task ratio of a condition, with its interval (n/a when it has no row)."""
    if not len(found):
        return fmt.NA
    return ratio_text(first_row(found), "task_ratio")


def speedup_lines(found: dict, view: View, several: bool) -> list:
    """An improvement table's speed-ups, a line each per task: like for like (step / step,
    backward / backward) and the study's construction, for every compiled column."""
    if not view.table.improvement:
        return []
    return [
        {
            "label": latex(label + (f" ({task_label(task)})" if several else "")),
            "cells": spanning(
                (speedup_text(first_row(rows), pair, task, name) for pair, rows in mine.items()),
                len(view.heads),
            ),
        }
        for task, mine in found.items()
        for name, label in SPEEDUPS.items()
    ]


def model_heading(model: str) -> str:
    study = MODEL_TEXT[model].study_parameters
    label, n_parameters = MODEL_TEXT[model].label, MODELS[model].n_parameters
    return f"\\textbf{{{latex(label)}}}\\quad {n_parameters} parameters" + (
        f" (study: {study})" if study else ""
    )


def model_group(
    model: str,
    rows: pd.DataFrame,
    published: pd.DataFrame,
    tasks: list,
    heading: str,
    view: View,
) -> dict:
    """One model: a 'this work' row per task (and its median line in a wide table), the
    speed-ups, the ratio of two tasks, the study's row."""
    if model in set(rows["model"]):
        found = {
            task: cells_of(rows[(rows["model"] == model) & (rows["task"] == task)], view.columns)
            for task in tasks
        }
        several = len(tasks) > 1
        lines = (
            [
                line
                for task in tasks
                for line in our_lines(model, task, found[task], heading, view, several)
            ]
            + speedup_lines(found, view, several)
            + ratio_line(view, found)
        )
    else:  # one line, not a grid of n/a
        span_all = len(view.columns) * len(view.heads)
        lines = [
            {
                "label": "this work",
                "cells": [f"\\multicolumn{{{span_all}}}{{c}}{{\\emph{{{latex(NOT_IN_GRID)}}}}}"],
            }
        ]
    return {
        "heading": model_heading(model),
        "lines": lines + study_line(published[published["model"] == model], view),
    }


def cells_of(rows: pd.DataFrame, columns: list) -> dict:
    """Our rows of one model and task, per (framework, mode) column."""
    return {p: rows[(rows["framework"] == p[0]) & (rows["mode"] == p[1])] for p in columns}


def our_lines(
    model: str, task: str, found: dict, heading: str, view: View, several: bool
) -> list:
    """Our row of one model and task, and its median line where the median has no column."""
    where = f"{model_label(model)}, {task_label(task)}" + (f", {heading}" if heading else "")
    which = f": {task_label(task)}" if several else ""
    cells = [c for p, mine in found.items() for c in our_cells(mine, p, where, view)]
    return [{"label": latex(f"this work{which}"), "cells": cells}] + median_line(
        found, view, f" ({task_label(task)})" if several else ""
    )


def ratio_line(view: View, found: dict) -> list:
    pair = tbl.ratio_tasks(view.table)
    if not pair or not all(t in found for t in pair):
        return []
    return [
        {
            "label": r"\emph{ratio}",  # which ratio: the caption says
            "cells": ratio_cells(found[pair[1]], len(view.heads)),
        }
    ]


def study_line(pub: pd.DataFrame, view: View) -> list:
    """The study's row, verbatim, and its printed improvement column in an improvement table."""
    if pub.empty:
        return []
    found = cells_of(pub, view.columns)
    lines = [
        {
            "label": "study (published)",
            "cells": [c for rows in found.values() for c in study_cells(rows, view)],
        }
    ]
    if view.table.improvement and "improvement" in pub:
        printed = (
            fmt.verbatim_pm(first_row(rows).get("improvement"), None, tex=True)
            for rows in found.values()
        )
        lines.append(
            {
                "label": "study (published): improvement",
                "cells": spanning(printed, len(view.heads)),
            }
        )
    return lines


# Columns narrower than a "mean ± sd" (the width font_size counts as 1): a median is a bare
# number.  So a median beside each mean does not shrink the type of a table that fitted.
HEAD_WIDTH = {"median": 0.5}


# The widest table (in "mean ± sd" columns) that fits the portrait text width in \small type;
# a wider one goes on a landscape page (pdflscape) in the same type, never smaller.
PORTRAIT_WIDTH = 6


def font_size(width: float) -> str:
    """The tables' type: \small, columns a little tighter on a landscape page."""
    if width <= PORTRAIT_WIDTH:
        return r"\small\setlength{\tabcolsep}{4pt}"
    return r"\small\setlength{\tabcolsep}{3pt}"


def landscape(width: float) -> bool:
    """Whether a table this wide needs a landscape page to stay in \small type."""
    return width > PORTRAIT_WIDTH


def what_and_unit(table: TableInfo) -> str:
    """'Eager mode: backward pass: the backward pass alone, in \\si{\\micro\\second}'."""
    quantity = QUANTITY_TEXT.get(table.quantity, latex(table.quantity))
    return f"{latex(table.title)}: {quantity}, in {fmt.unit_text(table.unit, tex=True)}"


MEDIAN = "median over seeds of each seed's median, which slow iterations hardly move"
N_TEXT = (
    "``median'': median over seeds of each seed's median, which the slow iterations that pull "
    "a mean up hardly move"
)
N_TEXT = "n: the processes (seeds) behind a ratio, paired by seed"


def table_caption(view: View, published: pd.DataFrame, n_seeds: str) -> str:
    """What the table shows, in words generated from the spec."""
    table = view.table
    parts = [
        f"{what_and_unit(table)}. Ours: ``mean'': mean over seeds of each seed's mean "
        f"$\\pm$ its sd over seeds; ``std'': mean of each seed's std"
        + (
            " $\\pm$ its sd, as the study printed them"
            if view.std_sd
            else " (its sd over seeds is in the CSV)"
        )
        + f"; {n_seeds}, a value without $\\pm$ comes from one seed; "
        + (
            f"``median'': {MEDIAN} (its IQR is in the CSV)."
            if view.median_column
            else f"lines ``median, IQR'': under the mean, the {MEDIAN}; under the std, the "
            "median over seeds of each seed's interquartile range."
        )
    ]
    if table.improvement:
        parts.append(
            "Speed-ups, eager over compiled, same model and task, each with its interval: "
            "like for like, the whole step over the whole step and the backward pass over "
            "the backward pass (a dash where the compiled mode runs its whole step as one "
            "call); and the study's construction, our eager backward (bwd) over our compiled "
            "step, the quotient that reproduces the study's printed improvement from its own "
            f"means (the study's column is the last line). {N_TEXT}."
        )
    pair = tbl.ratio_tasks(table)
    if pair:
        parts.append(
            f"Ratio rows: our {latex(task_label(pair[1]))} mean over our "
            f"{latex(task_label(pair[0]))} mean, same model and mode; {N_TEXT}."
        )
    if len(published):
        unnamed = sorted(set(published["task"]) - set(table.tasks))
        parts.append(f"Study (published): {latex(cited(table.study_table))}, copied verbatim.")
        if unnamed:
            parts.append(
                "The study did not say how it computed its "
                f"{latex(', '.join(unnamed))}; its row follows ours for every task."
            )
    return " ".join(parts)


def table_context(
    table: TableInfo,
    ours: pd.DataFrame,
    published: pd.DataFrame,
    waiting: set | frozenset = frozenset(),
) -> dict:
    """A spec table side by side with the study's: per block and model, ours above theirs.
    `waiting`: the conditions whose loops waited (paper_context.waiting_conditions)."""
    base = {
        "name": table.name,
        "title": latex(table.title),
        "study_table": latex(cited(table.study_table or "none")),
        "measured": not ours.empty,
    }
    if ours.empty:
        source = (
            f"; the study's numbers are in report/published/{table.published}"
            if table.published
            else ""
        )
        return {
            **base,
            "not_measured": latex(
                f"Not measured in this run: the config's grid "
                f"has no cell of this table{source}."
            ),
        }
    notes = Notes()
    marks = {"notes": notes, "waiting": waiting}
    if table.layout == "rows":
        return rows_table_context(table, ours, base, marks)
    view = View(table, paper_columns(table, ours, published), "std_sd" in published, marks)
    tasks = [t for t in table.tasks if t in set(ours["task"])]
    models = [m for m in table.models if m in set(ours["model"]) | set(published["model"])]
    blocks = [
        {
            "heading": latex(heading),
            "groups": [
                model_group(m, rows, published, tasks, heading, view) for m in models
            ],
        }
        for heading, rows in condition_blocks(ours)
    ]
    return {
        **base,
        "blocks": blocks,
        "notes": notes.items,
        **header_context([(pair_label(*p), view.heads) for p in view.columns]),
        "caption": table_caption(view, published, seeds_text(ours)),
    }


def condition_blocks(ours: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """Our rows per (device, threads) block, each headed by its block when there are several."""
    conditions = sorted(set(zip(ours["device"], ours["threads"])))
    return [
        (
            fmt.block(device, threads) if len(conditions) > 1 else "",
            ours[(ours["device"] == device) & (ours["threads"] == threads)],
        )
        for device, threads in conditions
    ]


def seeds_text(ours: pd.DataFrame) -> str:
    """How many seeds the table's conditions have: '1 seed', '2 seeds', or '1 or 2 seeds'
    when some lost one."""
    counts = [str(n) for n in sorted({int(n) for n in ours["n_seeds"].dropna()})]
    if not counts:
        return fmt.NA
    if len(counts) == 1:
        return fmt.counted(counts[0], "seed")
    return f"{', '.join(counts[:-1])} or {counts[-1]} seeds"


def header_context(groups: list[tuple[str, list[str]]]) -> dict:
    """A two-line header: each group's label over its heads; column spec, rules, type size."""
    n_stat_columns = sum(len(heads) for _, heads in groups)
    width = sum(HEAD_WIDTH.get(h, 1) for _, heads in groups for h in heads)
    rules, start = [], 2
    for _, heads in groups:
        rules.append(f"\\cmidrule(lr){{{start}-{start + len(heads) - 1}}}")
        start += len(heads)
    return {
        "columns": [{"label": label, "heads": heads, "n": len(heads)} for label, heads in groups],
        "n_cols": 1 + n_stat_columns,
        "colspec": "c" * n_stat_columns,
        "cmidrules": "".join(rules),
        "fontsize": font_size(width),
        "landscape": landscape(width),
    }


# ----------------------------------------------------------------------------- rows layout
def rows_heads(table: TableInfo, task: str) -> list[str]:
    """A task's columns in a rows-layout table: the like-for-like speed-ups only (no study's
    table is reproduced here, so not the study's construction)."""
    pair = tbl.ratio_tasks(table)
    return (
        ["mean", "median"]
        + (["time to first step"] if table.first_step else [])
        + ([SPEEDUP_HEADS[name] for name in LIKE_FOR_LIKE] if table.improvement else [])
        + ([f"/{task_label(pair[0])}"] if pair and task == pair[1] else [])
    )


def rows_line(table: TableInfo, pair, found: dict, where: str, marks: dict) -> dict:
    """One (framework, mode) under a model: per task its mean, median, first step, speed-ups
    and task ratio."""
    ratio_pair = tbl.ratio_tasks(table)
    cells = []
    for task, rows in found.items():
        r = first_row(rows)
        mine = [fmt.pm(r.get("mean"), r.get("mean_sd"), tex=True), fmt.number(r.get("median"))]
        if table.first_step:
            mine.append(fmt.pm(r.get("first_step"), r.get("first_step_sd"), tex=True))
        if table.improvement:
            mine += [speedup_text(r, pair, task, name) for name in LIKE_FOR_LIKE]
        if ratio_pair and task == ratio_pair[1]:
            mine.append(ratio_text(r, "task_ratio"))
        here = f"{pair_label(*pair)}, {latex(where)}, {latex(task_label(task))}"
        mine[0] += cell_marks(r, here, **marks)
        cells += mine
    return {"label": pair_label(*pair), "cells": cells}


def rows_table_context(table: TableInfo, ours: pd.DataFrame, base: dict, marks: dict) -> dict:
    """A row per (framework, mode) measured for a model, a column group per task."""
    tasks = [t for t in table.tasks if t in set(ours["task"])]
    blocks = [
        {
            "heading": latex(heading),
            "groups": [
                rows_group(table, model, rows[rows["model"] == model], tasks, heading, marks)
                for model in table.models
                if model in set(rows["model"])
            ],
        }
        for heading, rows in condition_blocks(ours)
    ]
    return {
        **base,
        "blocks": blocks,
        "notes": marks["notes"].items,
        **header_context([(latex(task_label(t)), rows_heads(table, t)) for t in tasks]),
        "caption": rows_caption(table, seeds_text(ours)),
    }


def rows_group(
    table: TableInfo, model: str, mine: pd.DataFrame, tasks: list, heading: str, marks: dict
) -> dict:
    """One model: a line per (framework, mode) measured, its tasks side by side."""
    pairs = [p for p in table_modes(table) if p in set(zip(mine["framework"], mine["mode"]))]
    where = model_label(model) + (f", {heading}" if heading else "")
    lines = [
        rows_line(
            table, p, {t: cells_of(mine[mine["task"] == t], [p])[p] for t in tasks}, where, marks
        )
        for p in pairs
    ]
    return {"heading": model_heading(model), "lines": lines}


def rows_caption(table: TableInfo, n_seeds: str) -> str:
    parts = [
        f"{what_and_unit(table)}, every framework and mode measured. ``mean'': mean over "
        f"seeds of each seed's mean $\\pm$ its sd over seeds; ``median'': {MEDIAN}; {n_seeds}."
    ]
    if table.first_step:
        parts.append(
            "``time to first step'': the ahead-of-time compilation "
            "or tracing (if the mode has one) plus the first call, which pays any "
            "lazy compilation; mean $\\pm$ sd over seeds."
        )
    if table.improvement:
        parts.append(
            "Speed-ups of a compiled mode, like for like: ``step/step'', the framework's "
            "eager step over this mode's step; ``bwd/bwd'', its eager backward pass over this "
            "mode's (a dash where the mode runs its whole step as one call); each with its "
            f"interval; {N_TEXT}."
        )
    pair = tbl.ratio_tasks(table)
    if pair:
        parts.append(
            f"Last column: our {latex(task_label(pair[1]))} mean over our "
            f"{latex(task_label(pair[0]))} mean, same model and mode; {N_TEXT}."
        )
    return " ".join(parts)
