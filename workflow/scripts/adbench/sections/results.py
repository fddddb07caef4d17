"""The results section's context: the study's tables beside ours, in runs of one page
orientation, each figure of tables after the tables it draws and cited in their captions; a
study's table at its fewest threads (tables.at_fewest_threads), its rows at other thread
counts in an appendix's table of their own (the other_threads section), each caption naming
the other."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd

from adbench import formatting as fmt
from adbench import paper_tables, plotting
from adbench import tables as tbl
from adbench.report_spec import TableInfo
from adbench.sections import figures as declared

OTHER_THREADS_APPENDIX = "app:other-threads"  # the other_threads section's label


def included(path) -> dict | None:
    """A figure as the template includes it: its file name and its printed width (its own,
    never wider than the text: adbench.plotting)."""
    if not path:
        return None
    return {"file": Path(path).name, "width": plotting.width_option(path)}


def landscape_runs(tables: list[dict]) -> list[dict]:
    """Tables in runs of the same page orientation: consecutive wide ones share landscape
    pages instead of each taking a page of its own.  A figure follows the run of the tables
    it draws, so a run ends before a table its figures do not draw."""
    runs: list[dict] = []
    for t in tables:
        wide = bool(t.get("measured") and t.get("landscape"))
        if runs and runs[-1]["landscape"] == wide and drawn_with(runs[-1]["tables"], t):
            runs[-1]["tables"].append(t)
        else:
            runs.append({"landscape": wide, "tables": [t]})
    return runs


def drawn_with(run: list[dict], table: dict) -> bool:
    """Whether every figure of a run's tables draws `table` too (or they have none)."""
    for figure in declared.of_tables():
        names = [t.name for t in plotting.figure_tables(figure.name)]
        if any(t["name"] in names for t in run) and table["name"] not in names:
            return False
    return True


def table_figures(data: dict, files: dict) -> list[dict]:
    """Each declared figure of tables that was given (`files`: path by name) and draws a
    table this run measured: its file, label and caption, the measured tables it draws (their
    captions cite it) and the table it follows in the paper (the first of them)."""
    out = []
    for figure in declared.of_tables():
        measured = [t.name for t in plotting.figure_tables(figure.name)
                    if files.get(figure.name) and not data[t.name]["ours"].empty]
        if measured:
            out.append({
                "name": figure.name,
                **included(files[figure.name]),
                "label": f"fig:{figure.name}",
                "caption": figure.caption_tex,
                "tables": measured,
                "after": measured[0],
                "refs": table_refs(measured),
                "others": {name: table_refs([t for t in measured if t != name])
                           for name in measured},
            })
    return out


def table_refs(names: list[str]) -> str:
    """'Table~\\ref{tab:a}', 'Tables~\\ref{tab:a} and~\\ref{tab:b}', 'Tables~..., ... and~...'."""
    refs = [f"\\ref{{tab:{name}}}" for name in names]
    if len(refs) <= 1:
        return f"Table~{refs[0]}" if refs else ""
    return f"Tables~{fmt.joined(refs, ' and~')}"


# ----------------------------------------------------------------------------- thread counts
def main_text_rows(table: TableInfo, ours: pd.DataFrame) -> pd.DataFrame:
    """Our rows of a table as the main text shows them: a study's table at its fewest
    threads; any other table whole (it is an appendix's)."""
    return ours[tbl.at_fewest_threads(ours)] if table.published else ours


def other_thread_rows(table: TableInfo, ours: pd.DataFrame) -> pd.DataFrame:
    """Our rows of a study's table at other thread counts than the main text's (none of
    another table)."""
    return ours[~tbl.at_fewest_threads(ours)] if table.published else ours.iloc[0:0]


def other_threads_name(name: str) -> str:
    """The label of a study's table's rows at other thread counts (tab:<name>-threads)."""
    return f"{name}-threads"


def threads_listed(rows: pd.DataFrame) -> str:
    """'1 thread', '2 and 4 threads': the thread counts of some rows."""
    counts = [str(int(n)) for n in sorted(set(pd.to_numeric(rows["threads"])))]
    return fmt.counted(fmt.joined(counts), "thread")


def with_caption(context: dict, words: str) -> dict:
    """A table's context with `words` after its caption (each part's, where it is split)."""
    parts = [{**p, "caption": f"{p['caption']} {words}"} for p in context.get("parts") or []]
    return {**context, "caption": f"{context['caption']} {words}", "parts": parts or None}


def main_table(table: TableInfo, data: dict, waiting) -> dict:
    """A table of the results section (paper_tables.table_context) over main_text_rows; a
    study's table measured at other thread counts too names the appendix's table of them."""
    ours = data["ours"]
    context = paper_tables.table_context(table, main_text_rows(table, ours),
                                         data["published"], waiting=waiting)
    others = other_thread_rows(table, ours)
    if others.empty:
        return context
    return with_caption(context, (
        f"Ours on {threads_listed(main_text_rows(table, ours))}; on {threads_listed(others)}, "
        f"Table~\\ref{{tab:{other_threads_name(table.name)}}} "
        f"(Appendix~\\ref{{{OTHER_THREADS_APPENDIX}}})."))


def other_threads_table(table: TableInfo, data: dict, waiting) -> dict | None:
    """A study's table over its rows at other thread counts (other_thread_rows), labelled
    other_threads_name, beside the study's; None where it has none."""
    ours = data["ours"]
    others = other_thread_rows(table, ours)
    if others.empty:
        return None
    renamed = dataclasses.replace(table, name=other_threads_name(table.name))
    context = paper_tables.table_context(renamed, others, data["published"], waiting=waiting)
    return with_caption(context, (
        f"Ours on {threads_listed(others)}; on {threads_listed(main_text_rows(table, ours))}, "
        f"Table~\\ref{{tab:{table.name}}} (Section~\\ref{{sec:results}})."))
