"""The paper's tables: every table of report_spec.TABLES side by side with the study's, as template
context (render_paper.py).

Layout "columns" (the study's): per (device, threads) block and model, a "this work" row per
task (mean, median, std), the speed-ups of an improvement table, the ratio of two tasks, and
the study's published row, verbatim; a column group per (framework, mode).  Layout "rows": a
row per (framework, mode) under each model, a column group per task.  A cell that is not ok
reads n/a with a footnote that says why; a footnote also marks a flagged cell (noisy, warm-up
longer than configured), one whose loop waited (paper_context.waiting_conditions) and one
measured while the machine was busy (the tidy table's n_busy).
Numbers are written by adbench.formatting; text arrives LaTeX-escaped.
"""

from __future__ import annotations

import dataclasses
import re

import pandas as pd

from adbench import activation_memory
from adbench import formatting as fmt
from adbench import stats
from adbench import tables as tbl
from adbench.formatting import latex
from adbench.machines_section import block_namer
from adbench.selection import table_modes
from adbench.report_spec import (MODEL_TEXT, TABLES, TableInfo, cited, model_label,
                                 reader_message, task_label)
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
BUSY = (
    "other processes kept the machine busy while at least one of its processes was measured "
    "(Section~\\ref{sec:limitations} says how busy)"
)
# An improvement table's speed-ups, eager over compiled (tables.py): like for like first; the
# study's construction last, only where the study's table is reproduced (layout "columns").
SPEEDUPS = {
    "improvement": "speed-up, step / step",
    "improvement_backward": "speed-up, bwd / bwd",
    "improvement_study_style": "study's construction",
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
            "published": bool(t.published),
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
    flags (noisy, warm-up short), a loop that waited and a busy machine; '' for a clean
    cell."""
    if not r:
        return superscript(notes.mark(NOT_IN_GRID))
    texts = []
    if r["status"] != "ok":
        note = "" if fmt.blank(r.get("note")) else str(r["note"])
        texts.append(f"{where}: {latex(r['status'])} --- {latex(reader_message(note))}")
    if not fmt.blank(r.get("flags")):
        texts.append(f"{where}: {latex(reader_message(r['flags']))}")
    if condition_of(r) in waiting:
        texts.append(WAITING)
    if not fmt.missing(r.get("n_busy")) and r["n_busy"] > 0:
        texts.append(BUSY)
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


def ratio_text(r: dict, name: str, beside: tuple = (None, None)) -> str:
    """A ratio with its interval and the processes (seeds, paired) behind it: '<name>_n';
    where the means printed `beside` it (numerator's, denominator's; None: not printed) are
    not the operands it was computed from (other seeds), those operands too."""
    text = fmt.ratio_of(r, name, tex=True)
    n = r.get(f"{name}_n")
    if text == fmt.NA or fmt.missing(n):
        return text
    return f"{text}\\,{{{fmt.ANNOTATION} n={int(n)}}}" + paired_operands(r, name, beside)


def paired_operands(r: dict, name: str, beside: tuple) -> str:
    """'(=a/b)' in the table's unit, where a printed mean beside the ratio differs from the
    operand of the same side (a mean over other seeds than the pair's); '' where all agree."""
    # the tidy tables carry the operands in the table's unit, as its means
    operands = [r.get(f"{name}_numerator_s"), r.get(f"{name}_denominator_s")]
    if any(fmt.missing(o) for o in operands):
        return ""
    operands = [float(o) for o in operands]
    differs = any(printed is not None and not fmt.missing(printed)
                  and abs(float(printed) - o) > 1e-6 * abs(o)
                  for printed, o in zip(beside, operands))
    if not differs:
        return ""
    return f"\\,{{{fmt.ANNOTATION}(={fmt.number(operands[0])}/{fmt.number(operands[1])})}}"


def speedup_text(r: dict, pair, task: str, name: str, table: TableInfo | None = None) -> str:
    """A speed-up of a compiled mode; a dash for an eager mode and for backward / backward
    where the compiled mode times its whole step as one call (no backward of its own).  The
    compiled mode's mean is printed beside it where the table's quantity is the speed-up's
    denominator."""
    compiled = FRAMEWORKS[pair[0]].modes[pair[1]].compiled
    if not compiled or (
        name == "improvement_backward" and "backward_s" not in timed_quantities(*pair, task)
    ):
        return DASH
    denominator = stats.IMPROVEMENTS[name][1]
    printed = r.get("mean") if table is not None and table.quantity == denominator else None
    return ratio_text(r, name, (None, printed))


def group_label(pair, wide: bool) -> str:
    """A (framework, mode) column group's head: on one line over a wide group, its mode
    under its framework over a narrow one (no wider than its two numbers)."""
    label = pair_label(*pair)
    framework, _, mode = label.partition(" (")
    if wide or not mode:
        return label
    return f"{STACK}{framework}\\\\({mode}{STACK_END}"


def paper_columns(table: TableInfo, ours: pd.DataFrame, published: pd.DataFrame) -> list:
    """(framework, mode) columns: a study's table shows the study's own columns (our other
    modes are in the appendix's tables of every framework and mode); another table, its
    modes present in our data."""
    present = (set(zip(published["framework"], published["mode"])) if len(published)
               else set(zip(ours["framework"], ours["mode"])))
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
    mark = cell_marks(r, f"{pair_label(*pair)}, {latex(where)}", **view.marks)
    mean = (fmt.pm(r.get("mean"), r.get("mean_sd"), tex=True) + mark if view.median_column
            else fmt.pm_stacked(r.get("mean"), r.get("mean_sd"), mark))
    return [
        mean,
        *([fmt.number(r.get("median"))] if view.median_column else []),
        fmt.pm(r.get("std"), r.get("std_sd") if view.std_sd else None, tex=True),
    ]


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
    """One text per (framework, mode) column group, centred across its statistics; in a
    narrow group (no median column) a ratio over its interval, one above the other."""
    narrow = n_stats < 3
    return [f"\\multicolumn{{{n_stats}}}{{c}}{{{stacked_ratio(t) if narrow else t}}}"
            for t in texts]


def stacked_ratio(text: str) -> str:
    """A ratio as ratio_text writes it, its interval and processes on a line of their own."""
    value, sep, rest = text.partition("\\,")
    if not sep:
        return text
    return f"{STACK}{value}\\\\{rest}{STACK_END}"


def ratio_cells(numerators: dict, denominators: dict, n_stats: int) -> list:
    return spanning((task_ratio_text(found, denominators[pair])
                     for pair, found in numerators.items()), n_stats)


def task_ratio_text(found: pd.DataFrame, denominator: pd.DataFrame) -> str:
    """The task ratio of a condition, with its interval (n/a when it has no row); the means
    printed above it are its operands, or its own operands are printed too."""
    if not len(found):
        return fmt.NA
    r = first_row(found)
    return ratio_text(r, "task_ratio", (r.get("mean"), first_row(denominator).get("mean")))


def speedup_lines(found: dict, view: View, several: bool) -> list:
    """An improvement table's speed-ups, a line each per task: like for like (step / step,
    backward / backward) and the study's construction, for every compiled column."""
    if not view.table.improvement:
        return []
    return [
        {
            "label": latex(label + (f" ({task_label(task)})" if several else "")),
            "cells": spanning(
                (speedup_text(first_row(rows), pair, task, name, view.table)
                 for pair, rows in mine.items()),
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
    label = task_label(task) if several else "this work"  # the spec's label, or the study's
    cells = [c for p, mine in found.items() for c in our_cells(mine, p, where, view)]
    return [{"label": latex(label), "cells": cells}] + median_line(found, view, "")


def ratio_line(view: View, found: dict) -> list:
    pair = tbl.ratio_tasks(view.table)
    if not pair or not all(t in found for t in pair):
        return []
    return [
        {
            "label": r"\emph{ratio}",  # which ratio: the caption says
            "cells": ratio_cells(found[pair[1]], found[pair[0]], len(view.heads)),
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


# ----------------------------------------------------------------------------- fitting the page
# A table keeps \small type; too wide for the portrait text (TEXT_PT, in \small type's
# points, its columns' gaps included) it goes on a landscape page (pdflscape), never smaller.
# Its width is estimated from what it prints: a character of \small type about SMALL_CHAR_PT
# wide (a digit is half an em), an annotation's type (formatting.ANNOTATION) TINY_SHARE of it.
TEXT_PT = 487.0
LANDSCAPE_PT = 667.0
SMALL_CHAR_PT = 4.6
TINY_SHARE = 0.78  # \scriptsize (7 pt) of \small (9 pt)
COLUMN_GAP_PT = 8.0  # the column separation, 4pt on each side
STACK, STACK_END = r"\begin{tabular}[t]{@{}c@{}}", r"\end{tabular}"  # fmt.pm_stacked's
_TINY = re.compile(r"\{" + re.escape(fmt.ANNOTATION) + r"\s*([^{}]*)\}")
_MARK = re.compile(r"\$\^\{[^$]*\}\$")
_SPAN = re.compile(r"\\multicolumn\{(\d+)\}\{[^}]*\}\{(.*)\}$")
_COMMAND = re.compile(r"\\[A-Za-z]+\*?|[{}$]")


def text_pt(cell: str) -> float:
    """About how wide a cell's text prints in small type, in points (a cell of stacked lines,
    formatting.pm_stacked's: its widest)."""
    if cell.startswith(STACK):
        lines = cell.removeprefix(STACK).removesuffix(STACK_END).split("\\\\")
        return max(text_pt(line) for line in lines)
    tiny = sum(len(t) for t in _TINY.findall(cell))
    rest = _COMMAND.sub("", _TINY.sub("", _MARK.sub("ab", cell))).replace("\\,", " ")
    return SMALL_CHAR_PT * (len(rest.replace("\\", "")) + TINY_SHARE * tiny)


def column_widths(lines: list[dict], n_columns: int) -> list[float]:
    """Each column's widest cell (a spanning cell shared by the columns it spans)."""
    widths = [0.0] * n_columns
    for line in lines:
        column = 0
        for cell in [line["label"], *line["cells"]]:
            span = _SPAN.match(cell)
            n = int(span[1]) if span else 1
            width = text_pt(span[2] if span else cell) / n
            for i in range(column, min(column + n, n_columns)):
                widths[i] = max(widths[i], width)
            column += n
    return widths


def table_pt(blocks: list[dict], header: dict) -> float:
    """The table's estimated width, in points: its widest cells, its headers, its gaps."""
    lines = [line for block in blocks for group in block["groups"] for line in group["lines"]]
    widths = column_widths(lines, header["n_cols"])
    heads = [h for col in header["columns"] for h in col["heads"]]
    widths[1:] = [max(w, text_pt(h)) for w, h in zip(widths[1:], heads)]
    at = 1
    for col in header["columns"]:  # a group's label spans its columns
        share = (text_pt(col["label"]) - COLUMN_GAP_PT * (col["n"] - 1)) / col["n"]
        widths[at:at + col["n"]] = [max(w, share) for w in widths[at:at + col["n"]]]
        at += col["n"]
    return sum(widths) + COLUMN_GAP_PT * header["n_cols"]


def fitted(blocks: list[dict], header: dict) -> dict:
    """The type and page of a table: small type, on a landscape page where it is wider than the
    portrait text."""
    wide = table_pt(blocks, header) > TEXT_PT
    return {"fontsize": r"\small\setlength{\tabcolsep}{4pt}", "landscape": wide}


def what_and_unit(table: TableInfo) -> str:
    """'Eager mode: backward pass: the backward pass alone, in \\si{\\micro\\second}'."""
    quantity = QUANTITY_TEXT.get(table.quantity, latex(table.quantity))
    return f"{latex(table.title)}: {quantity}, in {fmt.unit_text(table.unit, tex=True)}"


MEDIAN = "median over cells of each cell's median, which slow iterations hardly move"

# How to read every table of ours: said once, above the tables (HOW_TO_READ), not in each
# caption.
HOW_TO_READ = (
    "Our ``mean'' is the mean over a condition's cells of each cell's mean $\\pm$ its standard "
    "deviation over cells, one process each (a value without $\\pm$ comes from one cell); "
    "``std'' the mean of each cell's standard deviation ($\\pm$ its own where the study "
    f"printed one); ``median'' the {MEDIAN}, and ``IQR'' the median of each cell's "
    "interquartile range (a line of their own under our row in a wide table). A ratio carries "
    "its interval in brackets and ``n'', the processes per side paired by seed; at n=1 its "
    "interval resamples the iterations of one process and concludes nothing; ``(=a/b)'' gives "
    "a ratio's own operands where the means printed beside it are over other seeds."
)


def table_caption(view: View, published: pd.DataFrame, n_seeds: str) -> str:
    """What the table shows, in words generated from the spec (how to read its numbers is
    said once, above the tables: HOW_TO_READ)."""
    table = view.table
    parts = [f"{what_and_unit(table)}; {n_seeds}; "
             + ("mean, median and std per mode." if view.median_column
                else "mean and std per mode, their median and IQR under each of our rows.")]
    if table.improvement:
        parts.append(
            "Speed-ups, eager over compiled, same model and task, with their intervals: like "
            "for like (step over step, backward over backward; a dash where the compiled mode "
            "times no backward of its own) and the study's construction, our eager backward "
            "over our compiled step, the quotient that reproduces the study's printed "
            "improvement from its own means (its column is the last line)."
        )
    pair = tbl.ratio_tasks(table)
    if pair:
        parts.append(
            f"Ratio: our {latex(task_label(pair[1]))} mean over our "
            f"{latex(task_label(pair[0]))} mean, same model and mode."
        )
    if len(published):
        unnamed = sorted(set(published["task"]) - set(table.tasks))
        parts.append(f"Study (published): {latex(cited(table.study_table))}, verbatim"
                     + (f"; it did not say how it computed its {latex(', '.join(unnamed))}, "
                        "so its row follows ours for every task." if unnamed else "."))
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
        return {**base, "not_measured": latex(
            "Not measured in this run: its grid has no condition of this table.")}
    return in_parts(table, ours, published, base, waiting)


def groups_of(table: TableInfo, ours: pd.DataFrame, published: pd.DataFrame) -> list:
    """A table's column groups: its (framework, mode) columns, or in the rows layout its
    tasks."""
    if table.layout == "rows":
        return [t for t in table.tasks if t in set(ours["task"])]
    return paper_columns(table, ours, published)


def part_context(table: TableInfo, ours: pd.DataFrame, published: pd.DataFrame, base: dict,
                 waiting, groups: list) -> dict:
    """The table over some of its column groups (all of them: the whole table)."""
    marks = {"notes": Notes(), "waiting": waiting}
    if table.layout == "rows":
        return rows_table_context(table, ours, base, marks, groups)
    return columns_table_context(table, ours, published, base, marks, groups)


def in_parts(table: TableInfo, ours: pd.DataFrame, published: pd.DataFrame, base: dict,
             waiting) -> dict:
    """The table whole, or, where it is wider than a landscape page, its column groups in
    as few parts as fit one (each a table of its own, the first naming the others)."""
    groups = groups_of(table, ours, published)
    whole = part_context(table, ours, published, base, waiting, groups)
    if width_of(whole) <= LANDSCAPE_PT or len(groups) < 2:
        return {**whole, "parts": None}
    for n in range(2, len(groups) + 1):
        size = -(-len(groups) // n)
        chunks = [groups[i:i + size] for i in range(0, len(groups), size)]
        parts = [part_context(table, ours, published,
                              {**base, "name": table.name if i == 0 else
                               f"{table.name}-part{i + 1}"}, waiting, chunk)
                 for i, chunk in enumerate(chunks)]
        if all(width_of(p) <= LANDSCAPE_PT for p in parts) or size == 1:
            break
    names = [p["name"] for p in parts]
    for i, part in enumerate(parts):
        part["landscape"] = True
        part["caption"] = (part["caption"] + f" Part {i + 1} of {len(parts)}: "
                           + ("its other modes are in " + refs(names[1:]) if i == 0 else
                              f"continued from Table~\\ref{{tab:{names[0]}}}") + ".")
    return {**parts[0], "parts": parts, "landscape": True}


def refs(names: list[str]) -> str:
    found = [f"\\ref{{tab:{n}}}" for n in names]
    return ("Table~" if len(found) == 1 else "Tables~") + " and~".join(found)


def width_of(context: dict) -> float:
    return table_pt(context["blocks"], context)


def columns_table_context(table: TableInfo, ours: pd.DataFrame, published: pd.DataFrame,
                          base: dict, marks: dict, columns: list) -> dict:
    """The study's layout: per block and model our rows above the study's, a column group
    per (framework, mode) of `columns`."""
    view = View(table, columns, "std_sd" in published, marks)
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
    header = header_context([(group_label(p, view.median_column), view.heads)
                             for p in view.columns])
    others = [p for p in table_modes(table) if p not in columns
              and p in set(zip(ours["framework"], ours["mode"]))]
    return {
        **base,
        "blocks": blocks,
        "notes": marks["notes"].items,
        **header,
        **fitted(blocks, header),
        "caption": table_caption(view, published, seeds_text(ours)) + (
            f" Our other modes ({', '.join(pair_label(*p) for p in others)}) are in the "
            "appendix's tables of every framework and mode." if others else ""),
    }


def condition_blocks(ours: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """Our rows per (machine, device, threads) block, each headed by its block when there are
    several (with its machine where there are several machines)."""
    if ours.empty:
        return []
    columns = ["machine", "device", "threads"]
    conditions = sorted(set(zip(*(ours[c] for c in columns))))
    name = block_namer(ours)
    return [
        (
            name({"machine": machine, "device": device, "threads": threads}) if name else "",
            ours[(ours["machine"] == machine) & (ours["device"] == device)
                 & (ours["threads"] == threads)],
        )
        for machine, device, threads in conditions
    ]


def seeds_text(ours: pd.DataFrame) -> str:
    """How many seeds the table's conditions have: '1 seed', '2 seeds', or '1 or 2 seeds'
    when some lost one."""
    counts = [str(n) for n in sorted({int(n) for n in ours["n_seeds"].dropna()})]
    if not counts:
        return fmt.NA
    return fmt.counted(fmt.joined(counts, " or "), "seed")


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
            mine += [speedup_text(r, pair, task, name, table) for name in LIKE_FOR_LIKE]
        if ratio_pair and task == ratio_pair[1]:
            denominator = first_row(found.get(ratio_pair[0], pd.DataFrame()))
            mine.append(ratio_text(r, "task_ratio", (r.get("mean"), denominator.get("mean"))))
        here = f"{pair_label(*pair)}, {latex(where)}, {latex(task_label(task))}"
        mine[0] += cell_marks(r, here, **marks)
        cells += mine
    return {"label": pair_label(*pair), "cells": cells}


def rows_table_context(table: TableInfo, ours: pd.DataFrame, base: dict, marks: dict,
                       tasks: list) -> dict:
    """A row per (framework, mode) measured for a model, a column group per task (of
    `tasks`)."""
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
    header = header_context([(latex(task_label(t)), rows_heads(table, t)) for t in tasks])
    return {
        **base,
        **fitted(blocks, header),
        "blocks": blocks,
        "notes": marks["notes"].items,
        **header,
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
    parts = [f"{what_and_unit(table)}, every framework and mode measured; {n_seeds}."]
    if table.first_step:
        parts.append(
            "``time to first step'': the ahead-of-time compilation "
            "or tracing (if the mode has one) plus the first call, which pays any "
            "lazy compilation; mean $\\pm$ sd over cells."
        )
    if table.improvement:
        parts.append(
            "Speed-ups of a compiled mode, like for like: ``step/step'', the framework's "
            "eager step over this mode's step; ``bwd/bwd'', its eager backward pass over this "
            "mode's (a dash where the mode runs its whole step as one call)."
        )
    pair = tbl.ratio_tasks(table)
    if pair:
        parts.append(
            f"Last column: our {latex(task_label(pair[1]))} mean over our "
            f"{latex(task_label(pair[0]))} mean, same model and mode."
        )
    return " ".join(parts)


# ----------------------------------------------------------------------------- memory
def memory_notes(memory: pd.DataFrame) -> dict:
    """What the memory appendix states beside its table (tables.memory_table's rows): the
    floor below which no kept/saved ratio is given, the bound above which a kept figure is
    more than its step's graph, and each condition past it with what such a step keeps
    (activation_memory.far_above, beyond_one_graph), LaTeX-escaped."""
    far = [r for r in memory.itertuples()
           if activation_memory.far_above(getattr(r, "kept_over_saved", None))]
    return {
        "floor_kib": activation_memory.MIN_SAVED_BYTES // 1024,
        "far_above": fmt.number(activation_memory.FAR_ABOVE),
        "flagged": [{"model": latex(model_label(r.model) if r.model in MODELS else r.model),
                     "task": latex(task_label(r.task)),
                     "mode": pair_label(r.framework, r.mode),
                     "ratio": fmt.number(r.kept_over_saved),
                     "why": latex(activation_memory.beyond_one_graph(r.task))}
                    for r in far],
    }


def far_above(row) -> bool:
    """A memory table row whose kept figure is more than its step's graph (memory_notes)."""
    return activation_memory.far_above(getattr(row, "kept_over_saved", None))
