"""Variable-length inputs (spec.SEQUENCE_TASKS; 004): the table of each condition's epoch
and what its compiler paid, and the paper's section (report/sections/varlen.tex.j2) with
the claim that judges it (claims.varying_lengths).  Text escaped for LaTeX."""

from __future__ import annotations

import pandas as pd

from adbench import formatting as fmt
from adbench import report_stats
from adbench.claims import CLAIMS
from adbench.formatting import latex
from adbench.report_spec import SEQUENCE_TEXT, model_label, reader_message
from adbench.spec import (
    MODELS,
    SEQUENCE_BUCKETS,
    SEQUENCE_LENGTHS,
    SEQUENCE_STRATEGIES,
    SEQUENCE_TASKS,
    TASKS,
)
from adbench.stats import EPOCH, SEQUENCE_COLUMNS
from adbench.machines_section import block_namer
from adbench.tables import column_label, spec_order
from adbench.variants import comparison_rows

# tables/varlen.csv: per condition, medians over its ok processes.
VARLEN_KEYS = ["machine", "device", "framework", "mode", "model", "task", "threads"]
VARLEN_COLUMNS = [*VARLEN_KEYS, "strategy", "n_processes", *SEQUENCE_COLUMNS]


def varlen_table(cells: pd.DataFrame) -> pd.DataFrame:
    """The tidy table (VARLEN_COLUMNS) of cells.parquet's ok variable-length cells; empty,
    with its header, where none ran."""
    if EPOCH not in cells:
        return pd.DataFrame(columns=VARLEN_COLUMNS)
    ok = cells[(cells["status"] == "ok") & cells["task"].isin(SEQUENCE_TASKS)
               & cells[EPOCH].notna()]
    if ok.empty:
        return pd.DataFrame(columns=VARLEN_COLUMNS)
    ok = ok if "machine" in ok else ok.assign(machine="")  # cells before machines were kept
    grouped = ok.groupby(VARLEN_KEYS, sort=False)
    table = grouped[SEQUENCE_COLUMNS].median().join(grouped.size().rename("n_processes"))
    table = table.reset_index()
    table["strategy"] = table["task"].map(lambda t: TASKS[t].sequence)
    # Per block and model, each (framework, mode) in spec order, its strategies together.
    table["pair"] = list(zip(table["framework"], table["mode"]))
    table = table.sort_values(["device", "threads", "model", "pair", "task"], key=spec_order,
                              kind="stable")
    return table[VARLEN_COLUMNS].reset_index(drop=True)


def seconds(value) -> str:
    return fmt.NA if pd.isna(value) else fmt.number(float(value))


def milliseconds(value) -> str:
    return fmt.NA if pd.isna(value) else fmt.number(float(value) * 1e3)


def traces(value) -> str:
    return "--" if pd.isna(value) else str(int(value))


def table_rows(table: pd.DataFrame) -> list[dict]:
    block = block_namer(table)
    return [{"model": latex(model_label(r.model)),
             "mode": latex(column_label(r.framework, r.mode)),
             "block": latex(block(r)) if block else "",
             "strategy": latex(r.strategy), "n": int(r.n_processes),
             "epoch": seconds(r.epoch_s), "steady": milliseconds(r.steady_step_s),
             "traces": traces(r.n_traces), "retrace": seconds(r.retrace_s)}
            for r in table.itertuples()]


def claims_of_sequences() -> list:
    """The claims whose comparisons read a variable-length task."""
    return [c for c in CLAIMS
            if any(s.task in SEQUENCE_TASKS for x in c.comparisons
                   for s in x.sides)]


def varlen_context(cells: pd.DataFrame | None, claims: pd.DataFrame,
                   comparisons: pd.DataFrame, published: dict) -> dict | None:
    """None where the run measured no variable-length task (the section is left out)."""
    if cells is None or cells.empty or not cells["task"].isin(SEQUENCE_TASKS).any():
        return None
    ran = cells[cells["task"].isin(SEQUENCE_TASKS)]
    judged = []
    for claim in claims_of_sequences():
        found = claims[claims["claim"] == claim.key]
        if not found.empty:
            judged.append({**report_stats.claim_context(claim, found.iloc[0], published),
                           "rows": comparison_rows(comparisons, claim.key)})
    not_ok = ran[ran["status"] != "ok"]
    return {
        "lengths": f"{SEQUENCE_LENGTHS[0]} to {SEQUENCE_LENGTHS[1]}",
        "buckets": ", ".join(map(str, SEQUENCE_BUCKETS)),
        "strategies": [{"name": latex(s), "task": latex(t), "words": latex(SEQUENCE_TEXT[s])}
                       for s, t in zip(SEQUENCE_STRATEGIES, SEQUENCE_TASKS)],
        "models": [latex(model_label(m)) for m in MODELS
                   if m in set(ran["model"]) and MODELS[m].sequence_features],
        "rows": table_rows(varlen_table(cells)),
        "not_ok": [{"model": latex(model_label(r.model)),
                    "mode": latex(column_label(r.framework, r.mode)),
                    "strategy": latex(TASKS[r.task].sequence), "status": latex(r.status),
                    "message": latex(reader_message(r.message)[:160])}
                   for r in not_ok.drop_duplicates(["framework", "mode", "model", "task"])
                   .itertuples()],
        "claims": judged,
    }
