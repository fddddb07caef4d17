"""What the paper's text says the results show: the abstract's headline numbers, the study's
improvement column re-derived, and the study's scaled-down models (ResNet50) against our
closest cells (the ratio tables and the hypotheses: adbench.hypotheses).

Built from the tidy tables (make_tables.py), the study's published rows and the comparisons
product (adbench.comparisons: every pooled ratio is its); text arrives LaTeX-escaped.
"""

from __future__ import annotations

import dataclasses
import math

import pandas as pd

from adbench import formatting as fmt
from adbench import tables as tbl
from adbench.formatting import latex
from adbench.paper_tables import pair_label
from adbench.report_spec import TABLES, TableInfo, cited, model_label, task_label
from adbench.selection import first_block, table_modes
from adbench.spec import FRAMEWORKS, MODELS, TASKS, eager_mode_of, timed_quantities


def ok_rows(tidy: pd.DataFrame) -> pd.DataFrame:
    return tidy[tidy["mean"].notna()] if len(tidy) else tidy


def published_seconds(row, table: TableInfo) -> float:
    return float(row["mean"]) / fmt.unit_scale(table.unit)


# ----------------------------------------------------------------------------- headline numbers
def per_model(tidy: pd.DataFrame, pair, value: str) -> pd.Series:
    rows = tidy[(tidy["framework"] == pair[0]) & (tidy["mode"] == pair[1])]
    return pd.to_numeric(rows.set_index(["model", "task"])[value], errors="coerce")


def pooled_over(made: pd.DataFrame | None, rows: pd.DataFrame, kind: str, name: str,
                numerator: tuple, denominator: tuple, quantities: tuple) -> str:
    """'1.23 [1.10, 1.35]': the comparisons product's geometric mean over the models of
    `rows` (one block), of the comparison `kind`/`name` between the (framework, mode) pairs
    `numerator` and `denominator` on `quantities` (numerator's, denominator's); then what its
    interval rests on, never a conclusion from one process (comparisons.ITERATIONS)."""
    if made is None or made.empty or rows.empty:
        return fmt.NA
    r = rows.iloc[0]
    want = {"kind": kind, "name": name, "level": "models",
            "machine": r["machine"], "device": r["device"], "threads": r["threads"],
            "numerator_framework": numerator[0], "numerator_mode": numerator[1],
            "denominator_framework": denominator[0], "denominator_mode": denominator[1],
            "numerator_quantity": quantities[0], "denominator_quantity": quantities[1]}
    found = made[(made[list(want)] == pd.Series(want)).all(axis=1)]
    # the pooled row over the most of the rows' models (those with both sides measured)
    found = found[[set(m.split(",")) <= set(rows["model"]) for m in found["models"]]]
    if found.empty:
        return fmt.NA
    f = found.loc[found["n_pooled"].idxmax()]
    text = fmt.ratio(f["ratio"], f["low"], f["high"])
    if int(f["n_processes"]) < 2:
        return text + ", one of its ratios from the iterations of one process"
    return text + ("" if f["low"] > 1 or f["high"] < 1 else ", interval contains 1")


def column_ratios(
    table: TableInfo, ours: pd.DataFrame, published: pd.DataFrame, made: pd.DataFrame | None
) -> list:
    """Every column over the table's first one, over models: ours (first block; their span and
    geometric mean with its interval) and the study's."""
    mine = ok_rows(first_block(ours))
    pairs = [p for p in study_columns(table, published)
             if p in set(zip(mine["framework"], mine["mode"]))]
    out = []
    for pair in pairs[1:]:
        study = published.assign(mean=pd.to_numeric(published["mean"], errors="coerce"))
        rows = mine[(mine["framework"] == pair[0]) & (mine["mode"] == pair[1])]
        out.append(
            {
                "column": pair_label(*pair),
                "baseline": pair_label(*pairs[0]),
                "ours": fmt.span(
                    per_model(mine, pair, "mean") / per_model(mine, pairs[0], "mean"), tex=True
                ),
                "geomean": pooled_over(made, rows, "frameworks", f"{pair[0]}/{pairs[0][0]}",
                                       pair, pairs[0], (table.quantity, table.quantity)),
                "study": fmt.span(
                    per_model(study, pair, "mean") / per_model(study, pairs[0], "mean"), tex=True
                ),
            }
        )
    return out


def study_columns(table: TableInfo, published: pd.DataFrame) -> list[tuple[str, str]]:
    """The (framework, mode) columns of a study's table as it printed them (the table's
    modes where it printed none): what the paper's table beside it shows."""
    printed = set(zip(published["framework"], published["mode"]))
    return [p for p in table_modes(table) if p in printed or not printed]


# Like for like: (tidy column, quantity timed on both sides).  The study's construction,
# eager backward / compiled step, is kept apart (ours_study_style): never a headline.
LIKE_FOR_LIKE = {
    "step": ("improvement", "step_s"),
    "backward": ("improvement_backward", "backward_s"),
}


def records_backward(pair, tasks) -> bool:
    """Whether a compiled mode times its backward pass apart on every task of a table."""
    return all("backward_s" in timed_quantities(*pair, task) for task in tasks)


def speedup_summary(mine: pd.DataFrame, pair, kind: str, made: pd.DataFrame | None) -> dict:
    """One like-for-like speed-up of a compiled column over models: its span and its geometric
    mean with an interval (eager over compiled, the same quantity on both sides)."""
    column, quantity = LIKE_FOR_LIKE[kind]
    rows = mine[(mine["framework"] == pair[0]) & (mine["mode"] == pair[1])]
    eager = (pair[0], eager_mode_of(pair[0]))
    values = per_model(mine, pair, column) if column in mine else []
    return {
        "span": fmt.span(values, tex=True),
        "geomean": pooled_over(made, rows, "improvement", column, eager, pair,
                               (quantity, quantity)),
    }


def improvement_headline(
    table: TableInfo, ours: pd.DataFrame, published: pd.DataFrame, made: pd.DataFrame | None
) -> list:
    """Per compiled column (first block): the like-for-like speed-ups over models, the whole
    step's and, where the mode times it apart, the backward pass's; apart from them, the
    study's construction on our numbers and the study's printed column (never headlines)."""
    mine = ok_rows(first_block(ours))
    study = (
        published.assign(improvement=pd.to_numeric(published["improvement"], errors="coerce"))
        if "improvement" in published
        else None
    )
    return [
        {
            "column": pair_label(*pair),
            "step": speedup_summary(mine, pair, "step", made),
            "backward": (
                speedup_summary(mine, pair, "backward", made)
                if records_backward(pair, table.tasks)
                else None
            ),
            "ours_study_style": fmt.span(
                per_model(mine, pair, "improvement_study_style"), tex=True
            ),
            "study": (
                fmt.span(per_model(study, pair, "improvement"), tex=True)
                if study is not None
                else fmt.NA
            ),
        }
        for pair in study_columns(table, published)
        if FRAMEWORKS[pair[0]].modes[pair[1]].compiled
        and pair in set(zip(mine["framework"], mine["mode"]))
    ]


def headline(data: dict, made: pd.DataFrame | None) -> dict:
    """The abstract's numbers: the first measured table of eager columns, of improvements;
    `made`: the comparisons product, for their pooled ratios."""
    eager = next(
        (t for t in TABLES if t.compiled is False and not data[t.name]["ours"].empty), None
    )
    gains = next((t for t in TABLES if t.improvement and not data[t.name]["ours"].empty), None)
    return {
        "eager_table": latex(cited(eager.study_table)) if eager else "",
        "eager_block": first_block_heading(data[eager.name]["ours"]) if eager else "",
        "eager_ratios": (
            column_ratios(eager, **data[eager.name], made=made)
            if eager
            else []
        ),
        "improvement_block": first_block_heading(data[gains.name]["ours"]) if gains else "",
        "improvements": (
            improvement_headline(gains, **data[gains.name], made=made)
            if gains
            else []
        ),
    }


def first_block_heading(tidy: pd.DataFrame) -> str:
    rows = first_block(tidy)
    return latex(fmt.block(rows["device"].iloc[0], rows["threads"].iloc[0])) if len(rows) else ""


def study_example(data: dict) -> dict | None:
    """The study's improvement column re-derived from its own published means: its eager
    backward mean over its compiled mean, shown for the first published row with an improvement
    and its eager baseline, and counted over every such row (n_reproduced of n_printed).  That
    quotient is known; what the compiled column timed is not (the study says it ran "the exact
    same experiment"), and the paper says so."""
    pairs = printed_improvements(data)
    if not pairs:
        return None
    r, base = pairs[0]
    eager, compiled = float(base["mean"]), float(r["mean"])
    return {
        "eager": latex(base["mean"]),
        "compiled": latex(r["mean"]),
        "ratio": fmt.number(eager / compiled, 3),
        "printed": latex(r["improvement"]),
        "column": pair_label(r["framework"], r["mode"]),
        "model": latex(model_label(r["model"])),
        "n_printed": len(pairs),
        "n_reproduced": sum(
            reproduces(float(b["mean"]) / float(c["mean"]), c["improvement"]) for c, b in pairs
        ),
    }


def printed_improvements(data: dict) -> list[tuple]:
    """(published compiled row, its eager baseline row) for every printed improvement."""
    found = []
    for table in TABLES:
        published = data[table.name]["published"]
        if "improvement" not in published:
            continue
        for _, r in published.iterrows():
            base = baseline_row(data, r)
            if base is not None and not fmt.missing(r["improvement"]):
                found.append((r, base))
    return found


def reproduces(quotient: float, printed) -> bool:
    """Whether a quotient gives a number printed with its own decimals ('5.36'), rounded or
    cut (the study's 2889/538 = 5.370 is printed 5.36)."""
    text = str(printed).strip()
    places = len(text.split(".")[1]) if "." in text else 0
    try:
        return abs(quotient - float(text)) < 10**-places
    except ValueError:
        return False


def baseline_row(data: dict, compiled_row):
    """The study's eager row for the same model, task and framework, in any published table."""
    eager = eager_mode_of(compiled_row["framework"])
    for table in TABLES:
        published = data[table.name]["published"]
        match = published[
            (published["model"] == compiled_row["model"])
            & (published["task"] == compiled_row["task"])
            & (published["framework"] == compiled_row["framework"])
            & (published["mode"] == eager)
        ]
        if len(match):
            return match.iloc[0]
    return None


# ----------------------------------------------------------------------------- scaled-down models
# TODO(spec): the study's (presumed) input shape could be a ModelSpec field; it is in
# claims.json's "study_input_shape" (an assumption, labelled there) until then.
def jacobian_rows_used(cells, model: str) -> int:
    """The Jacobian rows this run computed for a model (the spec's unless the config says)."""
    default = MODELS[model].n_jacobian_rows
    if cells is None or "jacobian_rows" not in cells:
        return default
    mine = cells[
        (cells["model"] == model) & cells["task"].map(lambda t: TASKS[t].derivative == "jacobian")
    ]
    used = set(mine["jacobian_rows"].dropna().astype(int))
    return used.pop() if len(used) == 1 else default


@dataclasses.dataclass(frozen=True)
class Scaling:
    """One way to scale our Jacobian of a model up to the study's size: what it scales
    ("rows", "rows and input"), the sizes (the study's against ours), and by how much."""

    what: str
    sizes: str
    factor: float

    @property
    def words(self) -> str:
        return f"{self.what} ({self.sizes})"

    def of(self, seconds: float) -> float:
        """A task's own time at the study's size (linear in what it scales): an estimate."""
        return seconds * self.factor


def jacobian_scalings(model: str, study_shape, cells=None) -> list[Scaling]:
    """Our Jacobian scaled to the study's: by its rows alone, then by rows and input size where
    the study's input (`study_shape`, presumed) is larger; none where ours is the study's
    size. A scaling multiplies one task's own time, never another task's."""
    spec = MODELS[model]
    rows = jacobian_rows_used(cells, model)
    by_rows = spec.n_outputs / rows if rows < spec.n_outputs else 1.0
    found = [Scaling("rows", f"{rows} of {spec.n_outputs}", by_rows)] if by_rows > 1 else []
    if study_shape and math.prod(study_shape) != math.prod(spec.input_shape):
        both = by_rows * math.prod(study_shape) / math.prod(spec.input_shape)
        found.append(Scaling("rows and input" if by_rows > 1 else "input",
                             f"{fmt.shape_text(study_shape)} for "
                             f"{fmt.shape_text(spec.input_shape)}", both))
    return found


def scaled_down(model: str, study_shape, data: dict, cells=None) -> list[dict]:
    """Per table with the model and published numbers: what was scaled down, by how much, the
    closest of our cells to each published number with that same cell scaled up (each
    scaling of jacobian_scalings), and every Jacobian of ours scaled up, labelled."""
    spec = MODELS[model]
    rows_factor = spec.n_outputs / jacobian_rows_used(cells, model)
    input_factor = math.prod(study_shape) / math.prod(spec.input_shape)
    scalings = jacobian_scalings(model, study_shape, cells)
    out = []
    for table in TABLES:
        ours, published = data[table.name]["ours"], data[table.name]["published"]
        published = published[published["model"] == model]
        if model not in table.models or published.empty:
            continue
        study = published_times(published, table)
        mine = our_times(ours[ours["model"] == model], table)
        slow, fast = max(study, key=lambda s: s["s"]), min(study, key=lambda s: s["s"])
        out.append(
            {
                "model": latex(model_label(model)),
                "table": table.name,
                "study_table": latex(cited(table.study_table)),
                "slowest": {**slow, "s": slow["text"]},
                "fastest": {**fast, "s": fast["text"]},
                "slow_over_fast": fmt.factor(slow["s"] / fast["s"]),
                "our_input": latex(fmt.shape_text(spec.input_shape)),
                "study_input": latex(fmt.shape_text(study_shape)),
                "input_factor": fmt.factor(input_factor),
                "our_rows": jacobian_rows_used(cells, model),
                "study_rows": spec.n_outputs,
                "rows_factor": fmt.factor(rows_factor),
                "both_factor": fmt.factor(rows_factor * input_factor),
                "scalings": [scaling_text(k) for k in scalings],
                "closest": [closest(s, mine, scalings) for s in study],
                "extrapolated": [
                    {**scaling_text(k),
                     "cells": [{"label": c["label"], "s": fmt.number(k.of(c["s"]))}
                               for c in mine if c["jacobian"]]}
                    for k in scalings
                ],
                "block": first_block_heading(ours[ours["model"] == model]),
                "measured": bool(mine),
            }
        )
    return out


def scaling_text(scaling: Scaling) -> dict:
    return {"what": latex(scaling.what), "sizes": latex(scaling.sizes),
            "words": latex(scaling.words), "factor": fmt.factor(scaling.factor)}


def published_times(published: pd.DataFrame, table: TableInfo) -> list[dict]:
    """The study's rows of a model in seconds, and as printed (verbatim when in seconds)."""
    return [
        {
            "label": latex(r["study_label"]),
            "pair": (r["framework"], r["mode"]),
            "s": published_seconds(r, table),
            "text": (
                latex(r["mean"]) if table.unit == "s" else fmt.number(published_seconds(r, table))
            ),
        }
        for _, r in published.iterrows()
    ]


def our_times(ours: pd.DataFrame, table: TableInfo) -> list[dict]:
    """Our completed cells of a model (first block) in seconds, labelled by mode and task."""
    return [
        {
            "label": latex(f"{tbl.column_label(r.framework, r.mode)}, {task_label(r.task)}"),
            "pair": (r.framework, r.mode),
            "task": r.task,
            "s": r.mean / fmt.unit_scale(table.unit),
            "jacobian": TASKS[r.task].derivative == "jacobian",
        }
        for r in ok_rows(first_block(ours)).itertuples()
    ]


def closest(published: dict, mine: list, scalings: list[Scaling]) -> dict:
    """Our measured condition nearest a published time, in ratio terms, of the published
    row's own framework and mode only (never another's); and that same condition scaled up
    by each scaling, a Jacobian task scaled by its own time only."""
    na = {"label": fmt.NA, "s": fmt.NA, "ratio": fmt.NA}
    cells = [c for c in mine if c["pair"] == published["pair"]]
    best = min(cells, key=lambda c: abs(math.log(c["s"] / published["s"])), default=None)

    def seconds(value: float) -> dict:
        return {"s": fmt.number(value), "ratio": fmt.ratio(value / published["s"])}

    return {
        "study": published["label"],
        "study_s": published["text"],
        "measured": {"label": best["label"], **seconds(best["s"])} if best else na,
        "scaled": [seconds(k.of(best["s"])) if best and best["jacobian"] else na
                   for k in scalings],
    }


def scaled_models(study: dict, data: dict, cells=None) -> list[dict]:
    """scaled_down for every model whose full-size input the study's text gives."""
    return [
        s
        for model, shape in study.get("study_input_shape", {}).items()
        if model in MODELS
        for s in scaled_down(model, shape, data, cells)
    ]
