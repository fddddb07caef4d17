"""The paper's tables: every table of spec.TABLES side by side with the study's, as template
context (render_paper.py).

Layout "columns" (the study's): per (device, threads) block and model, a "this work" row per
task, the ratio of two tasks, and the study's published row, verbatim; a column group per
(framework, mode).  Layout "rows": a row per (framework, mode) under each model, a column
group per task.  A cell that is not ok reads n/a with a footnote that says why.  Numbers are
written by adbench.formatting; text arrives LaTeX-escaped.
"""

from __future__ import annotations

import pandas as pd

from adbench import formatting as fmt
from adbench import tables as tbl
from adbench.formatting import latex
from adbench.selection import table_modes
from adbench.spec import FRAMEWORKS, MODELS, TABLES, TASKS, TableInfo

QUANTITY_TEXT = {
    "backward_s": "the backward pass alone",
    "forward_s": "the forward pass alone",
    "step_s": "the whole step (forward and derivative)",
}
NOT_IN_GRID = "not in this run's grid (not measured)"
DASH = latex(fmt.NOTHING)  # a cell with no value of its kind (an eager mode's speed-up)


def pair_label(framework: str, mode: str) -> str:
    return latex(tbl.column_label(framework, mode))


def tables_overview(data: dict) -> list[dict]:
    return [
        {
            "name": t.name,
            "title": latex(t.title),
            "study_table": latex(t.study_table),
            "measured": not data[t.name]["ours"].empty,
        }
        for t in TABLES
    ]


# ----------------------------------------------------------------------------- columns layout
class Notes:
    """Footnote marks (a, b, ...) for table cells that are not 'ok', with their notes."""

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


def stat_heads(table: TableInfo) -> list[str]:
    return ["mean", "std"] + (["step/step", "bwd/step"] if table.improvement else [])


def paper_columns(table: TableInfo, ours: pd.DataFrame, published: pd.DataFrame) -> list:
    """(framework, mode) columns: the table's modes present in our data or the study's."""
    present = set(zip(ours["framework"], ours["mode"])) | set(
        zip(published["framework"], published["mode"])
    )
    return [pair for pair in table_modes(table) if pair in present]


def our_cells(
    found: pd.DataFrame, table: TableInfo, pair, where: str, notes: Notes, std_sd: bool
) -> list:
    """Formatted cells of one (framework, mode) for one model and task; n/a with a note.

    The std's own spread over seeds is printed only where the study printed one (its
    Tables 1-2): elsewhere it would double the width for a number the study never gave.
    """
    compiled = FRAMEWORKS[pair[0]].modes[pair[1]].compiled
    r = {} if found.empty else found.iloc[0].to_dict()
    cells = [
        fmt.pm(r.get("mean"), r.get("mean_sd"), tex=True),
        fmt.pm(r.get("std"), r.get("std_sd") if std_sd else None, tex=True),
    ]
    if table.improvement:
        cells += (
            [
                fmt.ratio_of(r, "improvement", tex=True),
                fmt.ratio_of(r, "improvement_study_style", tex=True),
            ]
            if compiled
            else [DASH, DASH]
        )
    cells[0] += status_mark(r, f"{pair_label(*pair)}, {latex(where)}", notes)
    return cells


def status_mark(r: dict, where: str, notes: Notes) -> str:
    """The footnote mark of a cell that is not ok, '' for one that is: it goes on the mean,
    its note (not in the grid, or the cell's status and why) under the table."""
    if not r:
        return superscript(notes.mark(NOT_IN_GRID))
    if r["status"] == "ok":
        return ""
    note = "" if fmt.blank(r.get("note")) else str(r["note"])
    return superscript(notes.mark(f"{where}: {latex(r['status'])} --- {latex(note)}"))


def study_cells(found: pd.DataFrame, table: TableInfo) -> list:
    """The study's cells, verbatim; '--' where it reported nothing."""
    if found.empty:
        return [DASH] * len(stat_heads(table))
    r = found.iloc[0].to_dict()
    cells = [
        fmt.verbatim_pm(r.get("mean"), r.get("mean_sd"), tex=True),
        fmt.verbatim_pm(r.get("std"), r.get("std_sd"), tex=True),
    ]
    if table.improvement:
        cells += [DASH, fmt.verbatim_pm(r.get("improvement"), None, tex=True)]
    return cells


def ratio_cells(found_by_pair: dict, n_stats: int) -> list:
    return [
        f"\\multicolumn{{{n_stats}}}{{c}}{{{task_ratio_text(found)}}}"
        for found in found_by_pair.values()
    ]


def task_ratio_text(found: pd.DataFrame) -> str:
    """The task ratio of a condition, with its interval (n/a when it has no row)."""
    if not len(found):
        return fmt.NA
    return fmt.ratio_of(found.iloc[0].to_dict(), "task_ratio", tex=True)


def model_heading(model: str) -> str:
    spec = MODELS[model]
    study = spec.study_parameters
    return f"\\textbf{{{latex(spec.label)}}}\\quad {spec.n_parameters} parameters" + (
        f" (study: {study})" if study else ""
    )


def model_group(
    model: str,
    rows: pd.DataFrame,
    published: pd.DataFrame,
    table: TableInfo,
    columns: list,
    tasks: list,
    heading: str,
    notes: Notes,
) -> dict:
    """One model: a 'this work' row per task, the ratio of two tasks, the study's row."""
    if model in set(rows["model"]):
        found = {
            task: cells_of(rows[(rows["model"] == model) & (rows["task"] == task)], columns)
            for task in tasks
        }
        lines = [
            our_line(
                model,
                task,
                found[task],
                table,
                heading,
                notes,
                several=len(tasks) > 1,
                std_sd="std_sd" in published,
            )
            for task in tasks
        ] + ratio_line(table, found)
    else:  # one line, not a grid of n/a
        span_all = len(columns) * len(stat_heads(table))
        lines = [
            {
                "label": "this work",
                "cells": [f"\\multicolumn{{{span_all}}}{{c}}{{\\emph{{{latex(NOT_IN_GRID)}}}}}"],
            }
        ]
    return {
        "heading": model_heading(model),
        "lines": lines + study_line(published[published["model"] == model], table, columns),
    }


def cells_of(rows: pd.DataFrame, columns: list) -> dict:
    """Our rows of one model and task, per (framework, mode) column."""
    return {p: rows[(rows["framework"] == p[0]) & (rows["mode"] == p[1])] for p in columns}


def our_line(
    model: str,
    task: str,
    found: dict,
    table: TableInfo,
    heading: str,
    notes: Notes,
    several: bool,
    std_sd: bool,
) -> dict:
    where = f"{MODELS[model].label}, {TASKS[task].label}" + (f", {heading}" if heading else "")
    cells = [
        c for p, mine in found.items() for c in our_cells(mine, table, p, where, notes, std_sd)
    ]
    return {
        "label": latex("this work" + (f": {TASKS[task].label}" if several else "")),
        "cells": cells,
    }


def ratio_line(table: TableInfo, found: dict) -> list:
    pair = tbl.ratio_tasks(table)
    if not pair or not all(t in found for t in pair):
        return []
    return [
        {
            "label": r"\emph{ratio}",  # which ratio: the caption says
            "cells": ratio_cells(found[pair[1]], len(stat_heads(table))),
        }
    ]


def study_line(pub: pd.DataFrame, table: TableInfo, columns: list) -> list:
    if pub.empty:
        return []
    cells = [c for p, rows in cells_of(pub, columns).items() for c in study_cells(rows, table)]
    return [{"label": "study (published)", "cells": cells}]


def font_size(n_stat_columns: int) -> str:
    """Smaller type and tighter columns as a table widens, to stay within the text width."""
    if n_stat_columns <= 4:
        return r"\small\setlength{\tabcolsep}{4pt}"
    if n_stat_columns <= 6:
        return r"\footnotesize\setlength{\tabcolsep}{3pt}"
    return r"\scriptsize\setlength{\tabcolsep}{2pt}"


def what_and_unit(table: TableInfo) -> str:
    """'Eager mode: backward pass: the backward pass alone, in \\si{\\micro\\second}'."""
    quantity = QUANTITY_TEXT.get(table.quantity, latex(table.quantity))
    return f"{latex(table.title)}: {quantity}, in {fmt.unit_text(table.unit, tex=True)}"


def table_caption(table: TableInfo, published: pd.DataFrame, n_seeds: str) -> str:
    """What the table shows, in words generated from the spec."""
    parts = [
        f"{what_and_unit(table)}. Ours: mean over seeds of each seed's mean "
        f"$\\pm$ its sd over seeds, and mean of each seed's std"
        + (
            " $\\pm$ its sd, as the study printed them"
            if "std_sd" in published
            else " (its sd over seeds is in the CSV)"
        )
        + f"; {n_seeds} seeds, a value without $\\pm$ comes from one seed."
    ]
    if table.improvement:
        parts.append(
            "``step/step'': eager step / compiled step, like for like; ``bwd/step'': "
            "eager backward / compiled step, the ratio the study's improvement column "
            "computed (its column is printed there)."
        )
    pair = tbl.ratio_tasks(table)
    if pair:
        parts.append(
            f"Ratio rows: our {latex(TASKS[pair[1]].label)} mean over our "
            f"{latex(TASKS[pair[0]].label)} mean, same model and mode."
        )
    if len(published):
        unnamed = sorted(set(published["task"]) - set(table.tasks))
        parts.append(f"Study (published): {latex(table.study_table)}, copied verbatim.")
        if unnamed:
            parts.append(
                "The study did not say how it computed its "
                f"{latex(', '.join(unnamed))}; its row follows ours for every task."
            )
    return " ".join(parts)


def table_context(table: TableInfo, ours: pd.DataFrame, published: pd.DataFrame) -> dict:
    """A spec table side by side with the study's: per block and model, ours above theirs."""
    base = {
        "name": table.name,
        "title": latex(table.title),
        "study_table": latex(table.study_table or "none"),
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
    if table.layout == "rows":
        return rows_table_context(table, ours, base)
    notes = Notes()
    columns = paper_columns(table, ours, published)
    tasks = [t for t in table.tasks if t in set(ours["task"])]
    models = [m for m in table.models if m in set(ours["model"]) | set(published["model"])]
    blocks = [
        {
            "heading": latex(heading),
            "groups": [
                model_group(m, rows, published, table, columns, tasks, heading, notes)
                for m in models
            ],
        }
        for heading, rows in condition_blocks(ours)
    ]
    return {
        **base,
        "blocks": blocks,
        "notes": notes.items,
        **header_context([(pair_label(*p), stat_heads(table)) for p in columns]),
        "caption": table_caption(table, published, seeds_text(ours)),
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
    """How many seeds the table's conditions have: '2', or '1, 2' when some lost one."""
    counts = sorted({int(n) for n in ours["n_seeds"].dropna()})
    return ", ".join(str(n) for n in counts) or fmt.NA


def header_context(groups: list[tuple[str, list[str]]]) -> dict:
    """A two-line header: each group's label over its heads; column spec, rules, type size."""
    n_stat_columns = sum(len(heads) for _, heads in groups)
    rules, start = [], 2
    for _, heads in groups:
        rules.append(f"\\cmidrule(lr){{{start}-{start + len(heads) - 1}}}")
        start += len(heads)
    return {
        "columns": [{"label": label, "heads": heads, "n": len(heads)} for label, heads in groups],
        "n_cols": 1 + n_stat_columns,
        "colspec": "c" * n_stat_columns,
        "cmidrules": "".join(rules),
        "fontsize": font_size(n_stat_columns),
    }


# ----------------------------------------------------------------------------- rows layout
def rows_heads(table: TableInfo, task: str) -> list[str]:
    """A task's columns in a rows-layout table."""
    pair = tbl.ratio_tasks(table)
    return (
        ["mean"]
        + (["first step"] if table.first_step else [])
        + (["step/step"] if table.improvement else [])
        + ([f"/{TASKS[pair[0]].label}"] if pair and task == pair[1] else [])
    )


def rows_line(table: TableInfo, pair, found: dict, where: str, notes: Notes) -> dict:
    """One (framework, mode) under a model: per task its mean, first step, improvement."""
    compiled = FRAMEWORKS[pair[0]].modes[pair[1]].compiled
    ratio_pair = tbl.ratio_tasks(table)
    cells = []
    for task, rows in found.items():
        r = rows.iloc[0].to_dict() if len(rows) else {}
        mine = [fmt.pm(r.get("mean"), r.get("mean_sd"), tex=True)]
        if table.first_step:
            mine.append(fmt.pm(r.get("first_step"), r.get("first_step_sd"), tex=True))
        if table.improvement:
            mine.append(fmt.ratio_of(r, "improvement", tex=True) if compiled else DASH)
        if ratio_pair and task == ratio_pair[1]:
            mine.append(fmt.ratio_of(r, "task_ratio", tex=True))
        here = f"{pair_label(*pair)}, {latex(where)}, {latex(TASKS[task].label)}"
        mine[0] += status_mark(r, here, notes)
        cells += mine
    return {"label": pair_label(*pair), "cells": cells}


def rows_table_context(table: TableInfo, ours: pd.DataFrame, base: dict) -> dict:
    """A row per (framework, mode) measured for a model, a column group per task."""
    notes = Notes()
    tasks = [t for t in table.tasks if t in set(ours["task"])]
    blocks = [
        {
            "heading": latex(heading),
            "groups": [
                rows_group(table, model, rows[rows["model"] == model], tasks, heading, notes)
                for model in table.models
                if model in set(rows["model"])
            ],
        }
        for heading, rows in condition_blocks(ours)
    ]
    return {
        **base,
        "blocks": blocks,
        "notes": notes.items,
        **header_context([(latex(TASKS[t].label), rows_heads(table, t)) for t in tasks]),
        "caption": rows_caption(table, seeds_text(ours)),
    }


def rows_group(
    table: TableInfo, model: str, mine: pd.DataFrame, tasks: list, heading: str, notes: Notes
) -> dict:
    """One model: a line per (framework, mode) measured, its tasks side by side."""
    pairs = [p for p in table_modes(table) if p in set(zip(mine["framework"], mine["mode"]))]
    where = MODELS[model].label + (f", {heading}" if heading else "")
    lines = [
        rows_line(
            table, p, {t: cells_of(mine[mine["task"] == t], [p])[p] for t in tasks}, where, notes
        )
        for p in pairs
    ]
    return {"heading": model_heading(model), "lines": lines}


def rows_caption(table: TableInfo, n_seeds: str) -> str:
    parts = [
        f"{what_and_unit(table)}, every framework and mode measured. Mean over seeds of each "
        f"seed's mean $\\pm$ its sd over seeds; {n_seeds} seeds."
    ]
    if table.first_step:
        parts.append(
            "``first step'': time to the first step, the ahead-of-time compilation "
            "or tracing (if the mode has one) plus the first call, which pays any "
            "lazy compilation; mean $\\pm$ sd over seeds."
        )
    if table.improvement:
        parts.append("``step/step'': the framework's eager step over this mode's step.")
    pair = tbl.ratio_tasks(table)
    if pair:
        parts.append(
            f"Last column: our {latex(TASKS[pair[1]].label)} mean over our "
            f"{latex(TASKS[pair[0]].label)} mean, same model and mode."
        )
    return " ".join(parts)
