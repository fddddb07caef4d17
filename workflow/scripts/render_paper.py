"""Render the paper (report/paper.tex.j2) from the pipeline's outputs and compile it to PDF.

Standalone (no snakemake object), so it runs and is tested outside the workflow.  Every number
the paper prints is put into the rendering context here, from the data; the template only lays
it out.  Frameworks, modes, models, tasks and tables all come from adbench.spec: nothing here
lists them.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
from collections import Counter
from pathlib import Path

import jinja2
import pandas as pd

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from adbench import formatting as fmt  # noqa: E402
from adbench import inference, report_stats, stats  # noqa: E402
from adbench import tables as tbl  # noqa: E402
from adbench.claims import EQUAL_MARGIN  # noqa: E402
from adbench.formatting import latex, missing  # noqa: E402
from adbench.selection import first_block, focus_rows, table_modes  # noqa: E402
from adbench.spec import (  # noqa: E402
    FRAMEWORKS, MODELS, TABLES, TASKS, TableInfo, timed_quantities)

LATEX_TOOLS = ("latexmk", "pdflatex", "bibtex")
INSTALL_HINT = (
    "render_paper.py needs latexmk, pdflatex and bibtex (TeX Live). Install them with\n"
    "  apt-get install --no-install-recommends texlive-latex-recommended texlive-latex-extra "
    "texlive-fonts-recommended texlive-science lmodern latexmk\n"
    "on Debian/Ubuntu, or run ./setup.sh (as root). Use --tex-only to render paper.tex alone."
)
QUANTITY_TEXT = {"backward_s": "the backward pass alone", "forward_s": "the forward pass alone",
                 "step_s": "the whole step (forward and derivative)"}
QUANTITY_SHORT = {"backward_s": "backward", "forward_s": "forward", "step_s": "step"}
# A ratio this close to 1 counts as "equal" when a hypothesis claims two costs are equal.
NOT_IN_GRID = "not in this run's grid (not measured)"
DASH = latex(fmt.NOTHING)  # a cell with no value of its kind (an eager mode's speed-up)
# What claims.json may say about a hypothesis (keyed by table name); only name and statement
# are required.
HYPOTHESIS_FIELDS = {"name": "", "premise": "", "statement": "", "source": ""}


def log(message: str) -> None:
    print(f"render_paper: {message}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- labels
def pair_label(framework: str, mode: str) -> str:
    return latex(tbl.column_label(framework, mode))


# ----------------------------------------------------------------------------- inputs
def read_csv(path) -> pd.DataFrame:
    # Only empty cells and 'nan' are missing: a status of "n/a" must stay a string.
    return pd.read_csv(path, keep_default_na=False, na_values=["", "nan", "NaN"])


def read_tidy(folder: Path, table: TableInfo) -> pd.DataFrame:
    """Our tidy table; an absent or empty file is a table this run measured nothing of."""
    path = folder / f"{table.name}.csv"
    if not path.exists() or path.stat().st_size == 0:
        return pd.DataFrame(columns=tbl.TIDY_COLUMNS)
    return read_csv(path)


def read_published(folder: Path, table: TableInfo) -> pd.DataFrame:
    """The study's rows, as text: they are printed verbatim, never reformatted."""
    if not table.published or not (folder / table.published).exists():
        return pd.DataFrame(columns=["model", "task", "framework", "mode", "study_label",
                                     "mean", "std"])
    return pd.read_csv(folder / table.published, dtype=str, keep_default_na=False)


def published_seconds(row, table: TableInfo) -> float:
    return float(row["mean"]) / fmt.unit_scale(table.unit)


def ok_rows(tidy: pd.DataFrame) -> pd.DataFrame:
    return tidy[tidy["mean"].notna()] if len(tidy) else tidy


# ----------------------------------------------------------------------------- side-by-side tables
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
    present = set(zip(ours["framework"], ours["mode"])) | set(zip(published["framework"],
                                                                  published["mode"]))
    return [pair for pair in table_modes(table) if pair in present]


def our_cells(found: pd.DataFrame, table: TableInfo, pair, where: str, notes: Notes,
              std_sd: bool) -> list:
    """Formatted cells of one (framework, mode) for one model and task; n/a with a note.

    The std's own spread over seeds is printed only where the study printed one (its
    Tables 1-2): elsewhere it would double the width for a number the study never gave.
    """
    compiled = FRAMEWORKS[pair[0]].modes[pair[1]].compiled
    if found.empty:
        r, status, note = {}, "n/a", ""
    else:
        r = found.iloc[0].to_dict()
        status, note = r["status"], "" if fmt.blank(r.get("note")) else str(r["note"])
    cells = [fmt.pm(r.get("mean"), r.get("mean_sd"), tex=True),
             fmt.pm(r.get("std"), r.get("std_sd") if std_sd else None, tex=True)]
    if table.improvement:
        cells += ([fmt.ratio_of(r, "improvement", tex=True),
                   fmt.ratio_of(r, "improvement_study_style", tex=True)]
                  if compiled else [DASH, DASH])
    if found.empty:
        cells[0] += superscript(notes.mark(NOT_IN_GRID))
    elif status != "ok":  # the mark goes on the mean, the note under the table
        text = f"{pair_label(*pair)}, {latex(where)}: {latex(status)} --- {latex(note)}"
        cells[0] += superscript(notes.mark(text))
    return cells


def study_cells(found: pd.DataFrame, table: TableInfo) -> list:
    """The study's cells, verbatim; '--' where it reported nothing."""
    if found.empty:
        return [DASH] * len(stat_heads(table))
    r = found.iloc[0].to_dict()
    cells = [fmt.verbatim_pm(r.get("mean"), r.get("mean_sd"), tex=True),
             fmt.verbatim_pm(r.get("std"), r.get("std_sd"), tex=True)]
    if table.improvement:
        cells += [DASH, fmt.verbatim_pm(r.get("improvement"), None, tex=True)]
    return cells


def ratio_cells(found_by_pair: dict, n_stats: int) -> list:
    return [f"\\multicolumn{{{n_stats}}}{{c}}{{{ratio_of(found)}}}"
            for found in found_by_pair.values()]


def ratio_of(found: pd.DataFrame) -> str:
    if not len(found):
        return fmt.NA
    return fmt.ratio_of(found.iloc[0].to_dict(), "task_ratio", tex=True)


def model_heading(model: str) -> str:
    spec = MODELS[model]
    study = spec.study_parameters
    return (f"\\textbf{{{latex(spec.label)}}}\\quad {spec.n_parameters} parameters"
            + (f" (study: {study})" if study else ""))


def model_group(model: str, rows: pd.DataFrame, published: pd.DataFrame, table: TableInfo,
                columns: list, tasks: list, heading: str, notes: Notes) -> dict:
    """One model: a 'this work' row per task, the ratio of two tasks, the study's row."""
    if model in set(rows["model"]):
        found = {task: cells_of(rows[(rows["model"] == model) & (rows["task"] == task)],
                                columns) for task in tasks}
        lines = [our_line(model, task, found[task], table, heading, notes,
                          several=len(tasks) > 1, std_sd="std_sd" in published)
                 for task in tasks] + ratio_line(table, found)
    else:  # one line, not a grid of n/a
        span_all = len(columns) * len(stat_heads(table))
        lines = [{"label": "this work", "cells": [
            f"\\multicolumn{{{span_all}}}{{c}}{{\\emph{{{latex(NOT_IN_GRID)}}}}}"]}]
    return {"heading": model_heading(model),
            "lines": lines + study_line(published[published["model"] == model], table,
                                        columns)}


def cells_of(rows: pd.DataFrame, columns: list) -> dict:
    """Our rows of one model and task, per (framework, mode) column."""
    return {p: rows[(rows["framework"] == p[0]) & (rows["mode"] == p[1])] for p in columns}


def our_line(model: str, task: str, found: dict, table: TableInfo, heading: str,
             notes: Notes, several: bool, std_sd: bool) -> dict:
    where = f"{MODELS[model].label}, {TASKS[task].label}" + (f", {heading}" if heading else "")
    cells = [c for p, mine in found.items()
             for c in our_cells(mine, table, p, where, notes, std_sd)]
    return {"label": latex("this work" + (f": {TASKS[task].label}" if several else "")),
            "cells": cells}


def ratio_line(table: TableInfo, found: dict) -> list:
    pair = tbl.ratio_tasks(table)
    if not pair or not all(t in found for t in pair):
        return []
    return [{"label": r"\emph{ratio}",  # which ratio: the caption says
             "cells": ratio_cells(found[pair[1]], len(stat_heads(table)))}]


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


def table_caption(table: TableInfo, published: pd.DataFrame, n_seeds: str) -> str:
    """What the table shows, in words generated from the spec."""
    parts = [f"{latex(table.title)}: {QUANTITY_TEXT.get(table.quantity, latex(table.quantity))}"
             f", in {fmt.unit_text(table.unit, tex=True)}. Ours: mean over seeds of each seed's mean "
             f"$\\pm$ its sd over seeds, and mean of each seed's std"
             + (" $\\pm$ its sd, as the study printed them" if "std_sd" in published else
                " (its sd over seeds is in the CSV)")
             + f"; {n_seeds} seeds, a value without $\\pm$ comes from one seed."]
    if table.improvement:
        parts.append("``step/step'': eager step / compiled step, like for like; ``bwd/step'': "
                     "eager backward / compiled step, the ratio the study's improvement column "
                     "computed (its column is printed there).")
    pair = tbl.ratio_tasks(table)
    if pair:
        parts.append(f"Ratio rows: our {latex(TASKS[pair[1]].label)} mean over our "
                     f"{latex(TASKS[pair[0]].label)} mean, same model and mode.")
    if len(published):
        unnamed = sorted(set(published["task"]) - set(table.tasks))
        parts.append(f"Study (published): {latex(table.study_table)}, copied verbatim.")
        if unnamed:
            parts.append("The study did not say how it computed its "
                         f"{latex(', '.join(unnamed))}; its row follows ours for every task.")
    return " ".join(parts)


def table_context(table: TableInfo, ours: pd.DataFrame, published: pd.DataFrame) -> dict:
    """A spec table side by side with the study's: per block and model, ours above theirs."""
    base = {"name": table.name, "title": latex(table.title),
            "study_table": latex(table.study_table or "none"), "measured": not ours.empty}
    if ours.empty:
        source = (f"; the study's numbers are in report/published/{table.published}"
                  if table.published else "")
        return {**base, "not_measured": latex(f"Not measured in this run: the config's grid "
                                              f"has no cell of this table{source}.")}
    if table.layout == "rows":
        return rows_table_context(table, ours, base)
    notes = Notes()
    columns = paper_columns(table, ours, published)
    tasks = [t for t in table.tasks if t in set(ours["task"])]
    models = [m for m in table.models if m in set(ours["model"]) | set(published["model"])]
    heads = stat_heads(table)
    conditions = sorted(set(zip(ours["device"], ours["threads"])))
    blocks = []
    for device, threads in conditions:
        rows = ours[(ours["device"] == device) & (ours["threads"] == threads)]
        heading = fmt.block(device, threads) if len(conditions) > 1 else ""
        groups = [model_group(m, rows, published, table, columns, tasks, heading, notes)
                  for m in models]
        blocks.append({"heading": latex(heading), "groups": groups})
    n_seeds = ", ".join(str(n) for n in sorted({int(n) for n in ours["n_seeds"].dropna()}))
    return {**base, "blocks": blocks, "notes": notes.items,
            **header_context([(pair_label(*p), heads) for p in columns]),
            "caption": table_caption(table, published, n_seeds or "n/a")}


def header_context(groups: list[tuple[str, list[str]]]) -> dict:
    """A two-line header: each group's label over its heads; column spec, rules, type size."""
    n_stat_columns = sum(len(heads) for _, heads in groups)
    rules, start = [], 2
    for _, heads in groups:
        rules.append(f"\\cmidrule(lr){{{start}-{start + len(heads) - 1}}}")
        start += len(heads)
    return {"columns": [{"label": label, "heads": heads, "n": len(heads)}
                        for label, heads in groups],
            "n_cols": 1 + n_stat_columns, "colspec": "c" * n_stat_columns,
            "cmidrules": "".join(rules), "fontsize": font_size(n_stat_columns)}


# ----------------------------------------------------------------------------- rows layout
def rows_heads(table: TableInfo, task: str) -> list[str]:
    """A task's columns in a rows-layout table."""
    pair = tbl.ratio_tasks(table)
    return (["mean"] + (["first step"] if table.first_step else [])
            + (["step/step"] if table.improvement else [])
            + ([f"/{TASKS[pair[0]].label}"] if pair and task == pair[1] else []))


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
        if not r:
            mine[0] += superscript(notes.mark(NOT_IN_GRID))
        elif r["status"] != "ok":
            note = "" if fmt.blank(r.get("note")) else str(r["note"])
            text = (f"{pair_label(*pair)}, {latex(where)}, {latex(TASKS[task].label)}: "
                    f"{latex(r['status'])} --- {latex(note)}")
            mine[0] += superscript(notes.mark(text))
        cells += mine
    return {"label": pair_label(*pair), "cells": cells}


def rows_table_context(table: TableInfo, ours: pd.DataFrame, base: dict) -> dict:
    """A row per (framework, mode) measured for a model, a column group per task."""
    notes = Notes()
    tasks = [t for t in table.tasks if t in set(ours["task"])]
    conditions = sorted(set(zip(ours["device"], ours["threads"])))
    blocks = []
    for device, threads in conditions:
        rows = ours[(ours["device"] == device) & (ours["threads"] == threads)]
        heading = fmt.block(device, threads) if len(conditions) > 1 else ""
        groups = []
        for model in [m for m in table.models if m in set(rows["model"])]:
            mine = rows[rows["model"] == model]
            pairs = [p for p in table_modes(table)
                     if p in set(zip(mine["framework"], mine["mode"]))]
            where = MODELS[model].label + (f", {heading}" if heading else "")
            lines = [rows_line(table, p, {t: mine[(mine["task"] == t)
                                                  & (mine["framework"] == p[0])
                                                  & (mine["mode"] == p[1])] for t in tasks},
                               where, notes) for p in pairs]
            groups.append({"heading": model_heading(model), "lines": lines})
        blocks.append({"heading": latex(heading), "groups": groups})
    n_seeds = ", ".join(str(n) for n in sorted({int(n) for n in ours["n_seeds"].dropna()}))
    return {**base, "blocks": blocks, "notes": notes.items,
            **header_context([(latex(TASKS[t].label), rows_heads(table, t)) for t in tasks]),
            "caption": rows_caption(table, n_seeds or "n/a")}


def rows_caption(table: TableInfo, n_seeds: str) -> str:
    parts = [f"{latex(table.title)}: {QUANTITY_TEXT.get(table.quantity, latex(table.quantity))}"
             f", in {fmt.unit_text(table.unit, tex=True)}, every framework and mode measured. Mean over "
             f"seeds of each seed's mean $\\pm$ its sd over seeds; {n_seeds} seeds."]
    if table.first_step:
        parts.append("``first step'': time to the first step, the ahead-of-time compilation "
                     "or tracing (if the mode has one) plus the first call, which pays any "
                     "lazy compilation; mean $\\pm$ sd over seeds.")
    if table.improvement:
        parts.append("``step/step'': the framework's eager step over this mode's step.")
    pair = tbl.ratio_tasks(table)
    if pair:
        parts.append(f"Last column: our {latex(TASKS[pair[1]].label)} mean over our "
                     f"{latex(TASKS[pair[0]].label)} mean, same model and mode.")
    return " ".join(parts)


# ----------------------------------------------------------------------------- headline numbers
def per_model(tidy: pd.DataFrame, pair, value: str) -> pd.Series:
    rows = tidy[(tidy["framework"] == pair[0]) & (tidy["mode"] == pair[1])]
    return pd.to_numeric(rows.set_index(["model", "task"])[value], errors="coerce")


def condition_key(r, quantity: str, **changes) -> tuple:
    """A tidy row's key in stats.replicates_by_condition (with some fields changed)."""
    fields = {**{k: r[k] for k in stats.CONDITION_FIELDS}, **changes}
    return (*(fields[k] for k in stats.CONDITION_FIELDS), quantity)


def column_ratios(table: TableInfo, ours: pd.DataFrame, published: pd.DataFrame,
                  found: dict, confidence: float) -> list:
    """Every column over the table's first one, over models: ours (first block; their span and
    geometric mean with its interval) and the study's."""
    mine = ok_rows(first_block(ours))
    pairs = [p for p in table_modes(table) if p in set(zip(mine["framework"], mine["mode"]))]
    out = []
    for pair in pairs[1:]:
        study = published.assign(mean=pd.to_numeric(published["mean"], errors="coerce"))
        rows = mine[(mine["framework"] == pair[0]) & (mine["mode"] == pair[1])]
        sides = [(condition_key(r, table.quantity),
                  condition_key(r, table.quantity, framework=pairs[0][0], mode=pairs[0][1]))
                 for _, r in rows.iterrows()]
        out.append({
            "column": pair_label(*pair), "baseline": pair_label(*pairs[0]),
            "ours": fmt.span(per_model(mine, pair, "mean") / per_model(mine, pairs[0], "mean"), tex=True),
            "geomean": report_stats.geometric_mean_text(found, sides, confidence),
            "study": fmt.span(per_model(study, pair, "mean") / per_model(study, pairs[0], "mean"), tex=True),
        })
    return out


def improvement_headline(table: TableInfo, ours: pd.DataFrame, published: pd.DataFrame,
                         found: dict, confidence: float) -> list:
    """Per compiled column: our two speed-ups over models (first block; like for like also as
    a geometric mean with its interval), and the study's."""
    mine = ok_rows(first_block(ours))
    study = (published.assign(improvement=pd.to_numeric(published["improvement"],
                                                        errors="coerce"))
             if "improvement" in published else None)

    def like_for_like(pair) -> list:
        rows = mine[(mine["framework"] == pair[0]) & (mine["mode"] == pair[1])]
        eager = tbl.eager_mode_of(pair[0])
        return [(condition_key(r, "step_s", mode=eager), condition_key(r, "step_s"))
                for _, r in rows.iterrows()]
    return [{"column": pair_label(*pair),
             "ours": fmt.span(per_model(mine, pair, "improvement"), tex=True),
             "geomean": report_stats.geometric_mean_text(found, like_for_like(pair),
                                                         confidence),
             "ours_study_style": fmt.span(per_model(mine, pair, "improvement_study_style"), tex=True),
             "study": fmt.span(per_model(study, pair, "improvement"), tex=True) if study is not None
             else "n/a"}
            for pair in table_modes(table)
            if FRAMEWORKS[pair[0]].modes[pair[1]].compiled
            and pair in set(zip(mine["framework"], mine["mode"]))]


def headline(data: dict, found: dict, confidence: float) -> dict:
    """The abstract's numbers: the first measured table of eager columns, of improvements;
    `found`: stats.replicates_by_condition, for their intervals."""
    eager = next((t for t in TABLES if t.compiled is False and not data[t.name]["ours"].empty),
                 None)
    gains = next((t for t in TABLES if t.improvement and not data[t.name]["ours"].empty), None)
    return {
        "eager_table": latex(eager.study_table) if eager else "",
        "eager_block": first_block_heading(data[eager.name]["ours"]) if eager else "",
        "eager_ratios": (column_ratios(eager, **data[eager.name], found=found,
                                       confidence=confidence) if eager else []),
        "improvement_block": first_block_heading(data[gains.name]["ours"]) if gains else "",
        "improvements": (improvement_headline(gains, **data[gains.name], found=found,
                                              confidence=confidence) if gains else []),
    }


def first_block_heading(tidy: pd.DataFrame) -> str:
    rows = first_block(tidy)
    return latex(fmt.block(rows["device"].iloc[0], rows["threads"].iloc[0])) if len(rows) \
        else ""


def study_example(data: dict) -> dict | None:
    """The study's improvement column re-derived: its eager backward mean over its compiled
    step mean, from the first published row with an improvement and its eager baseline."""
    for table in TABLES:
        published = data[table.name]["published"]
        if "improvement" not in published:
            continue
        for _, r in published.iterrows():
            base = baseline_row(data, r)
            if base is not None:
                eager, compiled = float(base["mean"]), float(r["mean"])
                return {"eager": latex(base["mean"]), "compiled": latex(r["mean"]),
                        "ratio": fmt.number(eager / compiled, 3), "printed": latex(r["improvement"]),
                        "column": pair_label(r["framework"], r["mode"]),
                        "model": latex(MODELS[r["model"]].label)}
    return None


def baseline_row(data: dict, compiled_row):
    """The study's eager row for the same model, task and framework, in any published table."""
    eager = tbl.eager_mode_of(compiled_row["framework"])
    for table in TABLES:
        published = data[table.name]["published"]
        match = published[(published["model"] == compiled_row["model"])
                          & (published["task"] == compiled_row["task"])
                          & (published["framework"] == compiled_row["framework"])
                          & (published["mode"] == eager)]
        if len(match):
            return match.iloc[0]
    return None


# ----------------------------------------------------------------------------- ratios, hypotheses
def ratio_finding(table: TableInfo, ours: pd.DataFrame, claims: dict) -> dict | None:
    """A two-task table's ratios per model and mode, and a sentence generated from them."""
    pair = tbl.ratio_tasks(table)
    if pair is None or ours.empty:
        return None
    rows = ours[(ours["task"] == pair[1]) & ours["task_ratio"].notna()]
    # TODO(spec): a TableInfo.hypothesis field (name, statement, source) would replace
    # claims.json's "hypotheses", keyed by table name until then.
    hypothesis = claims.get("hypotheses", {}).get(table.name)
    if rows.empty:
        return None
    several = rows[["device", "threads"]].drop_duplicates().shape[0] > 1
    conditions = [{"where": latex(condition_label(r, several)), "ratio": float(r.task_ratio),
                   "judged": judge_equal(r), "differs": interval_of(r).excludes_one}
                  for r in rows.itertuples()]
    ratios = [c["ratio"] for c in conditions]
    within = [c for c in conditions if c["judged"] == inference.SUPPORTED]
    n_outside = sum(c["judged"] == inference.CONTRADICTED for c in conditions)
    worst = max(conditions, key=lambda c: abs(math.log(c["ratio"])))
    return {
        "table": table.name, "title": latex(table.title),
        "numerator": latex(TASKS[pair[1]].label), "denominator": latex(TASKS[pair[0]].label),
        "n": len(conditions), "n_within": len(within), "n_outside": n_outside,
        "n_noise": len(conditions) - len(within) - n_outside,
        # the tasks' costs told apart at all: the ratio's interval excludes 1
        "n_differs": sum(c["differs"] for c in conditions),
        "within_pct": fmt.percent(EQUAL_MARGIN, tex=True), "span": fmt.span(ratios, tex=True),
        "low": fmt.ratio(min(ratios)), "high": fmt.ratio(max(ratios)),
        "median": fmt.ratio(statistics.median(ratios)),
        "worst": worst["where"], "worst_ratio": fmt.ratio(worst["ratio"]),
        "within": [c["where"] for c in within],
        "verdict": verdict(len(within), n_outside, len(conditions)),
        "hypothesis": {k: latex(v) for k, v in {**HYPOTHESIS_FIELDS, **hypothesis}.items()}
        if hypothesis else None,
    }


def condition_label(r, with_block: bool) -> str:
    label = f"{MODELS[r.model].label}, {tbl.column_label(r.framework, r.mode)}"
    return label + (f", {fmt.block(r.device, r.threads)}" if with_block else "")


def interval_of(r) -> inference.Interval:
    """A tidy row's task ratio and its bootstrap interval (the ratio alone, as a point, in
    tables written without intervals)."""
    low, high = (getattr(r, "task_ratio_low", math.nan), getattr(r, "task_ratio_high", math.nan))
    if missing(low) or missing(high):
        low = high = r.task_ratio
    return inference.Interval(r.task_ratio, low, high, None)


def judge_equal(r) -> str:
    """Whether a condition's task ratio is 1 within the margin, by its interval."""
    return inference.verdict_equal(interval_of(r), EQUAL_MARGIN)


def verdict(n_within: int, n_outside: int, n: int) -> str:
    """In words, from the conditions' intervals: inside the margin, wholly outside, or not
    distinguishable from its edge (within noise)."""
    if n_within == n:
        return "holds in every measured condition"
    if n_outside == n:
        return "is contradicted in every measured condition"
    undecided = n - n_within - n_outside
    return (f"holds in {n_within} of {n} measured conditions, is contradicted in "
            f"{n_outside}" + (f" and undecided within noise in {undecided}" if undecided
                              else ""))


# ----------------------------------------------------------------------------- scaled-down models
# TODO(spec): the study's (presumed) input shape could be a ModelSpec field; it is in
# claims.json's "study_input_shape" (an assumption, labelled there) until then.
def jacobian_rows_used(cells, model: str) -> int:
    """The Jacobian rows this run computed for a model (the spec's unless the config says)."""
    default = MODELS[model].n_jacobian_rows
    if cells is None or "jacobian_rows" not in cells:
        return default
    mine = cells[(cells["model"] == model)
                 & cells["task"].map(lambda t: TASKS[t].derivative == "jacobian")]
    used = set(mine["jacobian_rows"].dropna().astype(int))
    return used.pop() if len(used) == 1 else default


def scaled_down(model: str, study_shape, data: dict, cells=None) -> list[dict]:
    """Per table with the model and published numbers: what was scaled down, by how much, the
    closest of our cells to each published number, and a labelled full-size extrapolation."""
    spec = MODELS[model]
    rows_factor = spec.n_outputs / jacobian_rows_used(cells, model)
    input_factor = math.prod(study_shape) / math.prod(spec.input_shape)
    out = []
    for table in TABLES:
        ours, published = data[table.name]["ours"], data[table.name]["published"]
        published = published[published["model"] == model]
        if model not in table.models or published.empty:
            continue
        study = [{"label": latex(r["study_label"]), "s": published_seconds(r, table),
                  "text": latex(r["mean"]) if table.unit == "s"
                  else fmt.number(published_seconds(r, table))}
                 for _, r in published.iterrows()]
        mine = [{"label": latex(f"{tbl.column_label(r.framework, r.mode)}, "
                                f"{TASKS[r.task].label}"),
                 "s": r.mean / fmt.unit_scale(table.unit),
                 "jacobian": TASKS[r.task].derivative == "jacobian"}
                for r in ok_rows(first_block(ours[ours["model"] == model])).itertuples()]
        extrapolated = [{**c, "s": c["s"] * rows_factor * input_factor}
                        for c in mine if c["jacobian"]]
        slow, fast = max(study, key=lambda s: s["s"]), min(study, key=lambda s: s["s"])
        out.append({
            "model": latex(spec.label), "table": table.name,
            "study_table": latex(table.study_table),
            "slowest": {**slow, "s": slow["text"]},
            "fastest": {**fast, "s": fast["text"]},
            "slow_over_fast": fmt.factor(slow["s"] / fast["s"]),
            "our_input": latex(fmt.shape_text(spec.input_shape)),
            "study_input": latex(fmt.shape_text(study_shape)),
            "input_factor": fmt.factor(input_factor),
            "our_rows": jacobian_rows_used(cells, model), "study_rows": spec.n_outputs,
            "rows_factor": fmt.factor(rows_factor), "both_factor": fmt.factor(rows_factor * input_factor),
            "closest": [closest(s, mine, extrapolated) for s in study],
            "extrapolated": [{"label": c["label"], "s": fmt.number(c["s"])} for c in extrapolated],
            "block": first_block_heading(ours[ours["model"] == model]),
            "measured": bool(mine),
        })
    return out


def closest(published: dict, mine: list, extrapolated: list) -> dict:
    """Our measured cell and our extrapolated cell nearest a published time, in ratio terms."""
    def nearest(cells):
        if not cells:
            return {"label": "n/a", "s": "n/a", "ratio": "n/a"}
        best = min(cells, key=lambda c: abs(math.log(c["s"] / published["s"])))
        return {"label": best["label"], "s": fmt.number(best["s"]),
                "ratio": fmt.ratio(best["s"] / published["s"])}
    return {"study": published["label"], "study_s": published["text"],
            "measured": nearest(mine), "extrapolated": nearest(extrapolated)}


# ----------------------------------------------------------------------------- spec facts
def run_sizes(cells, model: str, column: str, default: int) -> str:
    """The sizes this run used for a model (a config may override the spec's default)."""
    if cells is None or column not in cells or model not in set(cells["model"]):
        return str(default)
    used = sorted({int(v) for v in cells.loc[cells["model"] == model, column].dropna()})
    return ", ".join(map(str, used)) or str(default)


def models_context(measured: set, cells=None) -> list[dict]:
    """Every model of the spec: where the seeds name it, what we chose, the sizes used."""
    rows = []
    for name, spec in MODELS.items():
        jacobian_cells = None if cells is None else cells[cells["task"].map(
            lambda t: TASKS[t].derivative == "jacobian")]
        rows_used = run_sizes(jacobian_cells, name, "jacobian_rows", spec.n_jacobian_rows)
        jacobian = f"{rows_used} × {fmt.shape_text(spec.input_shape)}"
        if rows_used != str(spec.n_outputs):
            jacobian += f" (of {spec.n_outputs} rows)"
        loss_cells = None if cells is None else cells[cells["task"].map(
            lambda t: TASKS[t].derivative == "gradients")]
        rows.append({
            "label": latex(spec.label), "name": latex(name), "source": latex(spec.source),
            "choices": latex(spec.choices), "n_parameters": spec.n_parameters,
            "jacobian": latex(jacobian),
            "batch_size": run_sizes(loss_cells, name, "batch_size", spec.batch_size),
            "loss": latex(spec.loss), "measured": name in measured,
        })
    return rows


def modes_context() -> list[dict]:
    return [{"label": pair_label(f, m), "compiled": info.compiled, "whole_step": info.whole_step,
             "description": latex(info.description)}
            for f, fw in FRAMEWORKS.items() for m, info in fw.modes.items()]


def tasks_context() -> dict:
    """The tasks, what each computes, and which quantities every mode records for each (a
    row per mode: any number of frameworks fits)."""
    rows = [{"label": latex(info.label), "description": latex(info.description),
             "derivative": latex(info.derivative)} for info in TASKS.values()]
    modes = [{"label": pair_label(f, m),
              "quantities": [latex(", ".join(QUANTITY_SHORT.get(q, q)
                                             for q in timed_quantities(f, m, task)))
                             for task in TASKS]}
             for f, fw in FRAMEWORKS.items() for m in fw.modes]
    return {"rows": rows, "modes": modes, "labels": [latex(t.label) for t in TASKS.values()],
            "colspec": "c" * len(TASKS)}


def tables_overview(data: dict) -> list[dict]:
    return [{"name": t.name, "title": latex(t.title), "study_table": latex(t.study_table),
             "measured": not data[t.name]["ours"].empty} for t in TABLES]


# ----------------------------------------------------------------------------- other inputs
def choices_context(cells: pd.DataFrame | None) -> list[dict]:
    """Per (framework, mode): each recorded implementation choice and its values, with the
    tasks (and number of cells) each value applies to."""
    if cells is None or "choices" not in cells:
        return []
    out = []
    for f, fw in FRAMEWORKS.items():
        for m in fw.modes:
            mine = cells[(cells["framework"] == f) & (cells["mode"] == m)]
            values: dict[str, Counter] = {}
            tasks: dict[tuple, set] = {}
            for blob, task in zip(mine["choices"], mine["task"]):
                for key, value in parse_choices(blob).items():
                    text = value if isinstance(value, str) else json.dumps(value)
                    values.setdefault(key, Counter())[text] += 1
                    tasks.setdefault((key, text), set()).add(task)
            for key, counter in values.items():
                shown = [f"{latex(v)} ({choice_scope(tasks[(key, v)], n, len(mine))})"
                         for v, n in counter.most_common()]
                first_of_mode = not out or out[-1]["pair"] != (f, m)
                out.append({"pair": (f, m), "mode": pair_label(f, m) if first_of_mode else "",
                            "key": latex(key), "shown": shown})
    return out


def parse_choices(blob) -> dict:
    if fmt.blank(blob):
        return {}
    try:
        parsed = json.loads(blob)
    except (TypeError, ValueError):
        return {"choices": str(blob)}
    return parsed if isinstance(parsed, dict) else {"choices": parsed}


def choice_scope(tasks: set, n: int, n_cells: int) -> str:
    if n == n_cells:
        return "every cell"
    labels = [TASKS[t].label if t in TASKS else t for t in TASKS if t in tasks]
    labels += sorted(t for t in tasks if t not in TASKS)
    return f"{n} cells: {', '.join(labels)}"


def gradient_summary(gradients: pd.DataFrame, default_tolerance) -> dict:
    """Pass counts, per model the largest errors, and the comparisons that did not pass."""
    passed = gradients["passed"].astype(str).str.lower().isin(["true", "1"])
    ok = gradients[gradients["status"] == "ok"] if len(gradients) else gradients
    has_ref = "ref_rel_error" in gradients
    has_tol = "tolerance" in gradients
    per_model = []
    for model, g in gradients.groupby("model", sort=False):
        g_ok = g[g["status"] == "ok"]
        per_model.append({
            "model": latex(MODELS[model].label if model in MODELS else model),
            "n": len(g), "n_passed": int(passed[g.index].sum()),
            "max_rel_error": fmt.scientific(g_ok["max_rel_error"].max(), tex=True) if len(g_ok) else "n/a",
            "ref_rel_error": fmt.scientific(g_ok["ref_rel_error"].max(), tex=True) if has_ref and len(g_ok)
            else "n/a",
            "tolerance": fmt.scientific(g["tolerance"].max(), tex=True) if has_tol else fmt.scientific(default_tolerance, tex=True),
        })
    order = {m: i for i, m in enumerate(MODELS)}
    per_model.sort(key=lambda r: order.get(r["model"], len(order)))
    failed = gradients[~passed]
    listed = [
        latex(f"{r.framework}/{r.mode} vs "
              f"{'nothing' if fmt.blank(r.reference) else r.reference}, {r.model}, {r.task}, "
              f"{r.device}, {fmt.threads_text(r.threads)}, seed {r.seed}: {r.status}")
        + ("" if missing(r.max_rel_error) else f" ({fmt.scientific(r.max_rel_error, tex=True)})")
        for r in failed.head(10).itertuples()
    ]
    errors = ok["max_rel_error"].dropna() if len(ok) else pd.Series(dtype=float)
    worst = gradients.loc[errors.idxmax()] if len(errors) else None
    return {
        "tolerance": "per model (see the table)" if has_tol else fmt.scientific(default_tolerance, tex=True),
        "has_reference": has_ref, "per_model": per_model,
        "n_compared": len(gradients), "n_passed": int(passed.sum()), "n_failed": len(failed),
        "all_passed": bool(len(gradients)) and bool(passed.all()),
        "max_rel_error": fmt.scientific(errors.max() if len(errors) else math.nan, tex=True),
        "max_ref_error": fmt.scientific(ok["ref_rel_error"].max(), tex=True) if has_ref and len(ok) else "n/a",
        "worst": latex(f"{worst['framework']}/{worst['mode']} vs {worst['reference']}, "
                       f"{worst['model']}, {worst['task']}") if worst is not None else "n/a",
        "references": latex(", ".join(sorted(str(r) for r in gradients["reference"].dropna()
                                              .unique() if str(r)))) or "none",
        "failed": "; ".join(listed) + (f"; and {len(failed) - len(listed)} more"
                                        if len(failed) > len(listed) else ""),
    }


def first_iteration_summary(first: pd.DataFrame) -> list[dict]:
    """Per framework, mode and task, over models, devices, threads and seeds."""
    rows = []
    for (f, m, task), g in first.groupby(["framework", "mode", "task"], sort=False):
        known = f in FRAMEWORKS and m in FRAMEWORKS[f].modes
        r = g["first_over_median"].dropna()
        rows.append({
            "mode": pair_label(f, m) if known else latex(f"{f} {m}"),
            "task": latex(TASKS[task].label if task in TASKS else task),
            "compiled": known and FRAMEWORKS[f].modes[m].compiled,
            "order": (not (known and FRAMEWORKS[f].modes[m].compiled),
                      list(FRAMEWORKS).index(f) if f in FRAMEWORKS else 99,
                      list(TASKS).index(task) if task in TASKS else 99),
            "n_cells": len(g),
            "first_ms": fmt.milliseconds(g["first_step_s"].median()),
            "median_ms": fmt.milliseconds(g["median_step_s"].median()),
            "ratio_median": fmt.factor(r.median() if len(r) else math.nan),
            "ratio_max": fmt.factor(r.max() if len(r) else math.nan),
        })
    return sorted(rows, key=lambda row: row["order"])


# A loop that kept more cores busy than this over its thread count ignored the setting.
CORES_OVER_THREADS = 0.5


def threads_check(cells: pd.DataFrame | None) -> dict | None:
    """Per (framework, mode, threads): the cores the timed loops kept busy (CPU-seconds per
    second, measure.py), and the modes whose loops used more than their threads."""
    if cells is None or "cpu_utilisation" not in cells:
        return None
    ok = cells[(cells["status"] == "ok") & cells["cpu_utilisation"].notna()]
    rows, over = [], []
    for f, fw in FRAMEWORKS.items():
        for m in fw.modes:
            mine = ok[(ok["framework"] == f) & (ok["mode"] == m)]
            for threads, g in mine.groupby("threads"):
                busy = g["cpu_utilisation"]
                rows.append({"mode": pair_label(f, m), "threads": int(threads), "n": len(g),
                             "median": fmt.number(busy.median(), 2), "max": fmt.number(busy.max(), 2)})
                if busy.max() > threads + CORES_OVER_THREADS:
                    over.append(f"{pair_label(f, m)} ({fmt.threads_text(threads)}: up to "
                                f"{fmt.number(busy.max(), 2)} cores)")
    return {"rows": rows, "over": over, "margin": f"{CORES_OVER_THREADS:g}"} if rows else None


def figure_focus(first: pd.DataFrame) -> str:
    """The models and tasks the first-iterations figure draws (the same rule as figures.py)."""
    rows = focus_rows(first)
    models = [MODELS[m].label for m in MODELS if m in set(rows["model"])]
    tasks = [TASKS[t].label for t in TASKS if t in set(rows["task"])]
    return latex(f"{', '.join(models)}; task{'s' if len(tasks) > 1 else ''} {', '.join(tasks)}")


def compiled_first_max(first: pd.DataFrame) -> str:
    compiled = [FRAMEWORKS.get(f) is not None and m in FRAMEWORKS[f].modes
                and FRAMEWORKS[f].modes[m].compiled for f, m in zip(first["framework"],
                                                                    first["mode"])]
    values = first.loc[compiled, "first_over_median"].dropna()
    return fmt.factor(values.max() if len(values) else math.nan)


def setup_context(env: dict) -> dict:
    workload = env.get("workload", {})
    devices = env.get("devices", [])
    names = [n for n in env.get("device_names", []) if n not in devices]  # e.g. a GPU's name
    commit = env.get("git_commit")
    return {
        "cpu_model": latex(env.get("cpu_model", "n/a")),
        "cpu_count": env.get("cpu_count", "n/a"),
        "hostname": latex(env.get("hostname", "n/a")),
        "platform": latex(env.get("platform", "n/a")),
        "python": latex(env.get("python", "n/a")),
        "versions": [{"name": latex(k), "version": latex(v)}
                     for k, v in sorted(env.get("versions", {}).items())],
        "devices": latex(", ".join(devices) + (f" ({', '.join(names)})" if names else "")
                         or "n/a"),
        "seeds": ", ".join(str(s) for s in env.get("seeds", [])) or "n/a",
        "n_seeds": len(env.get("seeds", [])),
        "threads": ", ".join(str(t) for t in env.get("threads", [])) or "n/a",
        "git": latex((commit[:12] if commit else "unknown")
                     + (" (with uncommitted changes)" if env.get("git_dirty") else "")),
        "warmup": workload.get("warmup", "n/a"),
        "iterations": workload.get("iterations", "n/a"),
        "n_cells": env.get("n_cells", "n/a"), "n_ok": env.get("n_ok", "n/a"),
        "date": latex(str(env.get("ended_at", ""))[:10] or "n/a"),
        "started_at": latex(env.get("started_at", "n/a")),
        "ended_at": latex(env.get("ended_at", "n/a")),
    }


def read_claims(published: Path) -> dict:
    """Numbers and statements of the study's text; '_'-keys are their sources."""
    return {k: v for k, v in json.loads((published / "claims.json").read_text()).items()
            if not k.startswith("_")}


def study_context(claims: dict) -> dict:
    return {"n_trials": claims.get("n_trials", "n/a"),
            "first_iteration_factor": claims.get("first_iteration_factor", "n/a"),
            "n_batches": claims.get("n_batches", "n/a"),
            "gradient_agreement": fmt.scientific(claims.get("gradient_agreement"), tex=True)}


def build_context(args) -> dict:
    env = json.loads(Path(args.environment).read_text())
    folder, published = Path(args.tables), Path(args.published)
    data = {t.name: {"ours": read_tidy(folder, t), "published": read_published(published, t)}
            for t in TABLES}
    claims = read_claims(published)
    first = read_csv(args.first_iterations)
    cells = pd.read_parquet(args.cells) if args.cells else None
    measured = set().union(*(set(d["ours"]["model"]) for d in data.values()))
    confidence = env.get("statistics", {}).get("confidence", math.nan)
    found = (stats.replicates_by_condition(pd.read_parquet(args.bootstrap)) if args.bootstrap
             else {})
    findings = [f for t in TABLES
                if (f := ratio_finding(t, data[t.name]["ours"], claims)) is not None]
    return {
        "setup": setup_context(env),
        "overview": tables_overview(data),
        "models": models_context(measured, cells),
        "modes": modes_context(),
        "tasks": tasks_context(),
        "tables": [table_context(t, **data[t.name]) for t in TABLES],
        "headline": headline(data, found, confidence),
        "example": study_example(data),
        "findings": findings,
        "hypotheses": [f for f in findings if f["hypothesis"]],
        "scaled": [s for model, shape in claims.get("study_input_shape", {}).items()
                   if model in MODELS for s in scaled_down(model, shape, data, cells)],
        "choices": choices_context(cells),
        "threads_check": threads_check(cells),
        "has_cells": cells is not None,
        "gradients": gradient_summary(read_csv(args.gradients), env.get("gradient_tolerance")),
        "first_iterations": first_iteration_summary(first),
        "first_iteration_max": compiled_first_max(first),
        "figure_focus": figure_focus(first) if len(first) else "none",
        "study": study_context(claims),
        "figure": Path(args.figure).name,
        "jacobians_figure": Path(args.jacobians_figure).name if args.jacobians_figure else None,
        "frameworks_figure": (Path(args.frameworks_figure).name if args.frameworks_figure
                              else None),
        "frameworks_table": next((t.name for t in TABLES if t.first_step
                                  and not data[t.name]["ours"].empty), None),
        "bibliography": Path(args.bib).stem,
        "statistics": report_stats.statistics_context(env),
        "verdicts": report_stats.verdicts_context(
            read_csv(args.claims), read_csv(args.comparisons), claims, confidence),
        "validation": report_stats.validation_context(args.validation),
    }


# ----------------------------------------------------------------------------- render, compile
def make_environment(template_dir: Path) -> jinja2.Environment:
    # LaTeX-friendly delimiters: \BLOCK{}, \VAR{}, \#{}, and '%%' line statements.
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(template_dir)),
        block_start_string=r"\BLOCK{", block_end_string="}",
        variable_start_string=r"\VAR{", variable_end_string="}",
        comment_start_string=r"\#{", comment_end_string="}",
        line_statement_prefix="%%", line_comment_prefix="%#",
        trim_blocks=True, lstrip_blocks=True, autoescape=False,
        undefined=jinja2.StrictUndefined,  # a missing number fails loudly, never prints blank
    )
    env.filters["latex"] = latex
    return env


def compile_pdf(folder: Path, tex: Path) -> Path:
    command = ["latexmk", "-pdf", "-interaction=nonstopmode", "-halt-on-error",
               f"-output-directory={folder}", tex.name]
    log(f"running {' '.join(command)} in {folder}")
    # TeX writes its log in bytes, and may cut a UTF-8 character in two at a line break.
    done = subprocess.run(command, cwd=folder, capture_output=True, text=True,
                          errors="replace")
    pdf = folder / (tex.stem + ".pdf")
    if done.returncode != 0 or not pdf.exists():
        log_file = folder / (tex.stem + ".log")
        lines = (log_file.read_text(errors="replace") if log_file.exists()
                 else done.stdout + done.stderr).splitlines()
        # From the first TeX error ('! ...') if there is one, else the end of the log.
        first_error = next((i for i, line in enumerate(lines) if line.startswith("! ")), None)
        tail = lines[-40:] if first_error is None else lines[first_error:first_error + 40]
        print("\n".join(tail), file=sys.stderr)
        raise SystemExit(f"render_paper: latexmk failed (exit {done.returncode}); "
                         f"see {log_file}")
    return pdf


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--template", required=True, help="report/paper.tex.j2")
    p.add_argument("--bib", required=True, help="report/references.bib")
    p.add_argument("--published", required=True, help="folder of the study's tables")
    p.add_argument("--tables", required=True, help="folder with <table>.csv for every table "
                   "of spec.TABLES (a missing one reads as not measured)")
    p.add_argument("--figure", required=True, help="first_iterations.pdf")
    p.add_argument("--jacobians-figure", help="jacobians.pdf (optional)")
    p.add_argument("--frameworks-figure", help="frameworks.pdf (optional)")
    p.add_argument("--gradients", required=True, help="gradients.csv")
    p.add_argument("--environment", required=True, help="environment.json")
    p.add_argument("--first-iterations", required=True, help="first_iterations.csv")
    p.add_argument("--cells", help="cells.parquet, for the implementation choices (optional)")
    p.add_argument("--bootstrap", help="aggregate's bootstrap.parquet: intervals of the "
                   "summary ratios in the text (n/a without)")
    p.add_argument("--claims", required=True, help="make_verdicts.py's claims.csv")
    p.add_argument("--comparisons", required=True, help="make_verdicts.py's comparisons.csv")
    p.add_argument("--validation", help="benchmarks/validate_harness.py's JSON, when it was "
                   "run (optional: the paper says it was not)")
    p.add_argument("--out", required=True, help="the PDF to write; paper.tex goes beside it")
    p.add_argument("--tex-only", action="store_true", help="render paper.tex, skip latexmk")
    return p.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    if not args.tex_only:  # fail before touching anything when the PDF cannot be built
        absent = [tool for tool in LATEX_TOOLS if shutil.which(tool) is None]
        if absent:
            raise SystemExit(f"render_paper: {', '.join(absent)} not found on PATH.\n"
                             + INSTALL_HINT)
    out = Path(args.out)
    folder = out.parent.resolve()
    folder.mkdir(parents=True, exist_ok=True)
    log("reading inputs")
    context = build_context(args)
    template = Path(args.template)
    tex = folder / "paper.tex"
    tex.write_text(make_environment(template.parent).get_template(template.name)
                   .render(**context))
    log(f"wrote {tex}")
    for figure in filter(None, (args.figure, args.jacobians_figure, args.frameworks_figure)):
        shutil.copyfile(figure, folder / Path(figure).name)
    shutil.copyfile(args.bib, folder / Path(args.bib).name)
    if args.tex_only:
        return
    pdf = compile_pdf(folder, tex)
    if pdf.resolve() != out.resolve():
        shutil.copyfile(pdf, out)
    log(f"wrote {out}")


if __name__ == "__main__":
    main()
