"""The sections' context functions (adbench/sections/paper.py names each) and what they
read: PaperInputs, every declared input loaded once, on first use.  build() runs the
declared sections in order into the rendering context."""

from __future__ import annotations

import functools
import importlib
import json
import math
from pathlib import Path

import pandas as pd

from adbench import disagreements as disagreements_section
from adbench import findings, graphs as graphs_section, hypotheses, machines_section
from adbench import paper_context, paper_framing, paper_tables, report_stats
from adbench import scaling_section
from adbench.scaling import read_peaks
from adbench import variants as variants_section, varlen as varlen_section
from adbench import tables as tbl
from adbench.report_spec import TABLES, TableInfo
from adbench.sections import figures as declared_figures
from adbench.sections import paper as declared
from adbench.sections import results as results_section


def read_csv(path) -> pd.DataFrame:
    # Only empty cells and 'nan' are missing: a status of "n/a" must stay a string.
    return pd.read_csv(path, keep_default_na=False, na_values=["", "nan", "NaN"])


class PaperInputs:
    """Everything the sections read, each loaded once, on first use: `args` holds the
    declared inputs' paths by name, `figures` the figures given, by name."""

    def __init__(self, args, figures: dict[str, str]):
        self.args, self.figures = args, figures

    def path(self, name: str):
        return getattr(self.args, name, None)

    @functools.cached_property
    def env(self) -> dict:
        return json.loads(Path(self.path("environment")).read_text())

    @functools.cached_property
    def data(self) -> dict:
        """table name -> {"ours": our tidy table, "published": the study's rows}."""
        return {t.name: {"ours": read_tidy(Path(self.path("tables")), t),
                         "published": read_published(Path(self.path("published")), t)}
                for t in TABLES}

    @functools.cached_property
    def study(self) -> dict:
        """Numbers and statements of the study's text; '_'-keys are their sources."""
        found = json.loads((Path(self.path("published")) / "claims.json").read_text())
        return {k: v for k, v in found.items() if not k.startswith("_")}

    @functools.cached_property
    def first(self) -> pd.DataFrame:
        return read_csv(self.path("first_iterations"))

    @functools.cached_property
    def cells(self) -> pd.DataFrame | None:
        return pd.read_parquet(self.path("cells")) if self.path("cells") else None

    @functools.cached_property
    def conditions(self) -> pd.DataFrame | None:
        return pd.read_parquet(self.path("conditions")) if self.path("conditions") else None

    @functools.cached_property
    def made(self) -> pd.DataFrame | None:
        return pd.read_parquet(self.path("made")) if self.path("made") else None

    @functools.cached_property
    def memory(self) -> pd.DataFrame | None:
        """tables/memory.csv (make_tables.MEMORY_FILE); None where the tables predate it."""
        path = Path(self.path("tables")) / "memory.csv"
        return read_csv(path) if path.exists() and path.stat().st_size else None

    @functools.cached_property
    def verdicts(self) -> pd.DataFrame:
        return read_csv(self.path("claims"))

    @functools.cached_property
    def groups(self) -> pd.DataFrame:
        return read_csv(self.path("groups"))

    @functools.cached_property
    def comparisons(self) -> pd.DataFrame:
        return read_csv(self.path("comparisons"))

    @functools.cached_property
    def validation(self) -> dict | None:
        return report_stats.validation_context(self.path("validation"))

    @functools.cached_property
    def waiting(self):
        return paper_context.waiting_conditions(self.cells)

    @property
    def confidence(self) -> float:
        return self.env.get("statistics", {}).get("confidence", math.nan)

    @functools.cached_property
    def scaling(self) -> dict | None:
        if not self.path("scaling_table"):
            return None
        figures = dict(item.split("=", 1) for item in self.path("scaling_figure") or [])
        return scaling_section.scaling_context(self.path("scaling_table"),
                                               self.path("peak") or [], figures)


def read_tidy(folder: Path, table: TableInfo) -> pd.DataFrame:
    """Our tidy table; an absent or empty file is a table this run measured nothing of."""
    path = folder / f"{table.name}.csv"
    if not path.exists() or path.stat().st_size == 0:
        return pd.DataFrame(columns=tbl.TIDY_COLUMNS)
    return read_csv(path)


def read_published(folder: Path, table: TableInfo) -> pd.DataFrame:
    """The study's rows, as text: they are printed verbatim, never reformatted."""
    if not table.published or not (folder / table.published).exists():
        columns = ["model", "task", "framework", "mode", "study_label", "mean", "std"]
        return pd.DataFrame(columns=columns)
    return pd.read_csv(folder / table.published, dtype=str, keep_default_na=False)


# ----------------------------------------------------------------------------- contexts
def setup(i: PaperInputs) -> dict:
    """What the paper is; the machine, the protocol, the spec's models, modes and tasks, the
    analysis settings (the abstract and every section read them)."""
    measured = set().union(*(set(d["ours"]["model"]) for d in i.data.values()))
    axes = [f["axis_text"] for f in (i.scaling or {}).get("figures", [])]
    return {
        "paper": paper_framing.identity(i.cells, i.data, axes),
        "setup": paper_context.setup_context(i.env),
        "protocol": paper_context.protocol_context(i.cells, i.env.get("workload")),
        "models": paper_context.models_context(measured, i.cells),
        "modes": paper_context.modes_context(i.cells),
        "tasks": paper_context.tasks_context(i.cells),
        "choices": paper_context.choices_context(i.cells),
        "has_cells": i.cells is not None,
        "study": paper_context.study_context(i.study),
        "statistics": report_stats.statistics_context(i.env),
    }


def method(i: PaperInputs) -> dict:
    """The gradient cross-check, the first iterations, the threads and the harness."""
    return {
        "gradients": paper_context.gradient_summary(read_csv(i.path("gradients")),
                                                    i.env.get("gradient_tolerance")),
        "first_iterations": paper_context.first_iteration_summary(i.first),
        "first_iteration_max": paper_context.first_max(i.first),
        "figure_focus": paper_context.figure_focus(i.first) if len(i.first) else "none",
        "threads_check": paper_context.threads_check(i.cells),
        "busy": paper_context.busy_context(i.env),
        "validation": i.validation,
    }


def results(i: PaperInputs) -> dict:
    """The study's tables beside ours (at their fewest threads: results_section.main_table),
    their figures, what they show."""
    tables = [results_section.main_table(t, i.data[t.name], i.waiting) for t in TABLES]
    main = [t for t, info in zip(tables, TABLES) if info.published]
    appendix = [t for t, info in zip(tables, TABLES) if not info.published]
    return {
        "overview": paper_tables.tables_overview(i.data),
        "main_tables": main,
        "main_runs": results_section.landscape_runs(main),
        "appendix_tables": appendix,
        "appendix_runs": results_section.landscape_runs(appendix),
        "appendix_refs": results_section.table_refs(
            [t["name"] for t in appendix if t["measured"]]),
        "how_to_read": paper_tables.HOW_TO_READ,
        "headline": findings.headline(i.data, i.made),
        "example": findings.study_example(i.data),
        "findings": [{**f, "main": f["table"] in {t["name"] for t in main}}
                     for f in hypotheses.table_findings(i.data, i.study)],
        "scaled": findings.scaled_models(i.study, i.data, i.cells),
        "table_figures": results_section.table_figures(i.data, i.figures),
    }


def claims(i: PaperInputs) -> dict:
    """The hypotheses and the verdicts on the study's claims."""
    return {
        "hypotheses": hypotheses.hypotheses(i.data, i.study, i.verdicts, i.groups,
                                            i.comparisons, i.waiting),
        "verdicts": report_stats.verdicts_context(i.verdicts, i.groups, i.comparisons, i.study,
                                                  i.confidence, i.waiting),
    }


def disagreements(i: PaperInputs) -> dict:
    return {"disagreements": disagreements_section.disagreements_context(
        i.data, i.study, i.cells, peak=read_peaks(i.path("peak") or []),
        conditions=i.conditions)}


def other_threads(i: PaperInputs) -> dict:
    """The study's tables' rows at other thread counts than the results section's, a table
    each (the disagreements' thread-count test reads them); None where there are none."""
    tables = [found for t in TABLES
              if (found := results_section.other_threads_table(t, i.data[t.name], i.waiting))]
    if not tables:
        return {"other_threads": None}
    return {"other_threads": {"runs": results_section.landscape_runs(tables),
                              "label": results_section.OTHER_THREADS_APPENDIX}}


def machines(i: PaperInputs) -> dict:
    return {"machines": machines_section.machines_context(i.made, i.env, i.cells)}


def limitations(i: PaperInputs) -> dict:
    return {"limitations": paper_framing.limitations(i.cells, i.env, i.verdicts, i.data,
                                                     i.study, i.validation is not None)}


def memory(i: PaperInputs) -> dict:
    return {"memory": paper_context.memory_context(i.memory, i.cells)}


def variants(i: PaperInputs) -> dict:
    return {"variants": variants_section.variants_context(i.cells, i.verdicts, i.comparisons,
                                                          i.study)}


def varlen(i: PaperInputs) -> dict:
    return {"varlen": varlen_section.varlen_context(i.cells, i.verdicts, i.comparisons,
                                                    i.study)}


def scaling(i: PaperInputs) -> dict:
    return {"scaling": i.scaling}


def scaling_files(i: PaperInputs) -> list[str]:
    return [item.split("=", 1)[1] for item in i.path("scaling_figure") or []]


def graphs(i: PaperInputs) -> dict:
    return {"graphs": graphs_section.graphs_context(i.path("graphs"))
            if i.path("graphs") else None}


def graphs_files(i: PaperInputs) -> list[str]:
    return [str(p) for p in graphs_section.figure_files(i.path("graphs"))] \
        if i.path("graphs") else []


def reproduce(i: PaperInputs) -> dict:
    return {"reproduce": paper_framing.reproduce(i.path("configfile"), i.path("results"))}


# ----------------------------------------------------------------------------- the run
def function(dotted: str):
    """A declared function by its dotted name (module.function)."""
    module, name = dotted.rsplit(".", 1)
    return getattr(importlib.import_module(module), name)


def section_files(i: PaperInputs) -> list[str]:
    """The files the sections' templates include besides the declared figures (the graphs,
    the scaling figures), to copy beside paper.tex."""
    return [f for s in declared.SECTIONS if s.files for f in function(s.files)(i)]


def build(i: PaperInputs) -> dict:
    """The rendering context: every section's keys, the figures a section reads by key, and
    the sections to include (those whose own key is not None), each {name, template, part}."""
    context: dict = {}
    for section in declared.SECTIONS:
        added = function(section.context)(i) if section.context else {}
        clash = set(added) & set(context)
        if clash:
            raise ValueError(f"section {section.name!r} sets {sorted(clash)}, set before")
        context.update(added)
    for figure in declared_figures.in_paper():
        if figure.context_key:
            context[figure.context_key] = results_section.included(i.figures.get(figure.name))
    context["sections"] = [
        {"name": s.name, "template": s.template, "part": s.part} for s in declared.SECTIONS
        if s.template and context.get(s.name, True) is not None]
    return context
