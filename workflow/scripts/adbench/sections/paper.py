"""The paper's sections, declared once (adbench.sections.Section), in the order they are
printed within each part: render_paper.py builds its options from their inputs and its
context from their context functions, paper.tex.j2 includes their templates, and the paper
rule gives each input.  A new section is a declaration here, its template under
report/sections/ and its context function; a new input is an Input in its declaration.

Every context function has one signature, context(inputs: PaperInputs) -> dict: what the
inputs hold, read once (PaperInputs' properties), and the keys the section adds.  A section
is included where its own key (its name) is not None; one that returns no such key always is.
"""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path

import pandas as pd

from adbench import disagreements, findings, graphs, hypotheses, machines_section
from adbench import paper_context, paper_framing, paper_tables, report_stats
from adbench import scaling_section, variants, varlen
from adbench import tables as tbl
from adbench.report_spec import TABLES, TableInfo
from adbench.sections import Input, Section
from adbench.sections import figures as declared_figures
from adbench.sections import results as results_section

# ----------------------------------------------------------------------------- inputs
ENVIRONMENT = Input("environment", "aggregate's environment.json", required=True,
                    tree="aggregate/environment.json")
TABLES_DIR = Input("tables", "folder with <table>.csv for each report_spec.TABLES entry (a "
                   "missing one reads as not measured) and memory.csv", required=True)
PUBLISHED = Input("published", "folder of the study's tables (report/published)",
                  required=True)
GRADIENTS = Input("gradients", "gradients.csv", required=True, tree="checks/gradients.csv")
FIRST_ITERATIONS = Input("first_iterations", "first_iterations.csv", required=True,
                         tree="aggregate/first_iterations.csv")
CELLS = Input("cells", "cells.parquet, for the implementation choices (optional)",
              tree="aggregate/cells.parquet")
MADE = Input("made", "compare.py's comparisons.parquet: the pooled ratios in the text (n/a "
             "without)", tree="aggregate/comparisons.parquet")
CLAIMS = Input("claims", "make_verdicts.py's claims.csv", required=True,
               tree="verdicts/claims.csv")
GROUPS = Input("groups", "make_verdicts.py's groups.csv", required=True,
               tree="verdicts/groups.csv")
COMPARISONS = Input("comparisons", "make_verdicts.py's comparisons.csv", required=True,
                    tree="verdicts/comparisons.csv")
VALIDATION = Input("validation", "benchmarks/validate_harness.py's JSON, when it was run "
                   "(optional: the paper says it was not)")
GRAPHS = Input("graphs", "the graphs rule's folder: the computation graphs' section "
               "(optional)")
SCALING_TABLE = Input("scaling_table", "tables/scaling.csv: the scaling section (optional)")
PEAK = Input("peak", "scaling/peak.json or peak_cuda.json, a measured matmul rate (optional, "
             "repeatable)", many=True)
SCALING_FIGURE = Input("scaling_figure", "a scaling figure by the axis it sweeps, AXIS=PATH "
                       "(repeatable)", many=True)
CONFIGFILE = Input("configfile", "the config the run was made with, as the command line "
                   "names it (the last appendix's commands; none: the default config)")
RESULTS = Input("results", "the run's results tree (the last appendix's files)")


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
        "protocol": paper_context.protocol_context(i.cells),
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
        "validation": i.validation,
    }


def results(i: PaperInputs) -> dict:
    """The study's tables beside ours, their figures, what they show."""
    tables = [paper_tables.table_context(t, **i.data[t.name], waiting=i.waiting)
              for t in TABLES]
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


CORE = (ENVIRONMENT, TABLES_DIR, PUBLISHED, CELLS)
VERDICT_FILES = (CLAIMS, GROUPS, COMPARISONS)
SECTIONS = (
    Section("setup", setup, inputs=(*CORE, SCALING_TABLE, PEAK, SCALING_FIGURE)),
    Section("method", method, "sections/method.tex.j2",
            inputs=(ENVIRONMENT, GRADIENTS, FIRST_ITERATIONS, CELLS, VALIDATION)),
    Section("results", results, "sections/results.tex.j2", inputs=(*CORE, MADE)),
    Section("claims", claims, "sections/claims.tex.j2", inputs=(*CORE, *VERDICT_FILES)),
    Section("disagreements", lambda i: {"disagreements": disagreements.disagreements_context(
        i.data, i.study, i.cells)}, "sections/disagreements.tex.j2", inputs=CORE),
    Section("machines", lambda i: {"machines": machines_section.machines_context(
        i.made, i.env, i.cells)}, "sections/machines.tex.j2", inputs=(*CORE, MADE)),
    Section("limitations", lambda i: {"limitations": paper_framing.limitations(
        i.cells, i.env, i.verdicts, i.data, i.study, i.validation is not None)},
        "sections/limitations.tex.j2", inputs=(*CORE, CLAIMS, VALIDATION)),
    Section("appendix_every", lambda i: {}, "sections/appendix_every.tex.j2", "appendix"),
    Section("appendix_first", lambda i: {}, "sections/appendix_first.tex.j2", "appendix"),
    Section("memory", lambda i: {"memory": paper_context.memory_context(i.memory, i.cells)},
            "sections/appendix_memory.tex.j2", "appendix", inputs=(TABLES_DIR, CELLS)),
    Section("variants", lambda i: {"variants": variants.variants_context(
        i.cells, i.verdicts, i.comparisons, i.study)}, "sections/variants.tex.j2", "appendix",
        inputs=(*CORE, *VERDICT_FILES)),
    Section("varlen", lambda i: {"varlen": varlen.varlen_context(
        i.cells, i.verdicts, i.comparisons, i.study)}, "sections/varlen.tex.j2", "appendix",
        inputs=(*CORE, *VERDICT_FILES)),
    Section("scaling", lambda i: {"scaling": i.scaling}, "sections/scaling.tex.j2", "appendix",
            inputs=(SCALING_TABLE, PEAK, SCALING_FIGURE)),
    Section("graphs", lambda i: {"graphs": graphs.graphs_context(i.path("graphs"))
                                 if i.path("graphs") else None},
            "sections/graphs.tex.j2", "appendix", inputs=(GRAPHS,)),
    Section("appendix_verdicts", lambda i: {}, "sections/appendix_verdicts.tex.j2", "appendix"),
    Section("appendix_setup", lambda i: {}, "sections/appendix_setup.tex.j2", "appendix"),
    Section("reproduce", lambda i: {"reproduce": paper_framing.reproduce(
        i.path("configfile"), i.path("results"))}, "sections/appendix_reproduce.tex.j2",
        "appendix", inputs=(CONFIGFILE, RESULTS)),
)


def declared_inputs() -> list[Input]:
    """Every input the sections read, once each, in declaration order."""
    found: dict[str, Input] = {}
    for section in SECTIONS:
        for item in section.inputs:
            if found.setdefault(item.name, item) != item:
                raise ValueError(f"input {item.name!r} declared twice, differently "
                                 f"(adbench/sections/paper.py, section {section.name!r})")
    return list(found.values())


def section_files(i: PaperInputs) -> list[str]:
    """The files the sections' templates include besides the declared figures, to copy
    beside paper.tex: the graphs and the scaling figures."""
    return [*(map(str, graphs.figure_files(i.path("graphs"))) if i.path("graphs") else []),
            *(item.split("=", 1)[1] for item in i.path("scaling_figure") or [])]


def build(i: PaperInputs) -> dict:
    """The rendering context: every section's keys, and the sections to include (those whose
    own key is not None), each as {name, template, part}."""
    context: dict = {}
    for section in SECTIONS:
        added = section.context(i)
        clash = set(added) & set(context)
        if clash:
            raise ValueError(f"section {section.name!r} sets {sorted(clash)}, set before")
        context.update(added)
    for figure in declared_figures.in_paper():  # those a section's template reads by key
        if figure.context_key:
            context[figure.context_key] = results_section.included(i.figures.get(figure.name))
    context["sections"] = [
        {"name": s.name, "template": s.template, "part": s.part} for s in SECTIONS
        if s.template and context.get(s.name, True) is not None]
    return context
