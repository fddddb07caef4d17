"""The results section's context: the study's tables beside ours, in runs of one page
orientation, each figure of tables after the tables it draws and cited in their captions."""

from __future__ import annotations

from pathlib import Path

from adbench import plotting
from adbench.sections import figures as declared


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
    return f"Tables~{', '.join(refs[:-1])} and~{refs[-1]}"
