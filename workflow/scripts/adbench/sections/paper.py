"""The paper's sections, declared once (adbench.sections.Section), in the order they are
printed within each part: render_paper.py builds its options from their inputs and its
context from their context functions, paper.tex.j2 includes their templates, and the paper
rule gives each input.  A new section is a declaration here, its template under
report/sections/ and its context function; a new input is an Input in its declaration.

Every context function has one signature, context(inputs: PaperInputs) -> dict: what the
inputs hold, read once (adbench/sections/contexts.py's PaperInputs), and the keys the section
adds.  A section is included where its own key (its name) is not None; one whose context
returns no such key always is.  The functions are named, not imported: the rules read this
module while planning, without the analysis packages the contexts need.
"""

from __future__ import annotations

import shlex

from adbench.sections import Input, Section
from adbench.sections import figures as declared_figures

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
CONDITIONS = Input("conditions", "aggregate's conditions.parquet: each condition's estimates, "
                   "for the disagreements' tests (optional)", tree="aggregate/conditions.parquet")
CONFIGFILE = Input("configfile", "the config the run was made with, as the command line "
                   "names it (the last appendix's commands; none: the default config)")
RESULTS = Input("results", "the run's results tree (the last appendix's files)")


CORE = (ENVIRONMENT, TABLES_DIR, PUBLISHED, CELLS)
VERDICT_FILES = (CLAIMS, GROUPS, COMPARISONS)
HERE = "adbench.sections.contexts."  # where this project's context functions are
SECTIONS = (
    Section("setup", HERE + "setup", inputs=(*CORE, SCALING_TABLE, PEAK, SCALING_FIGURE)),
    Section("method", HERE + "method", "sections/method.tex.j2",
            inputs=(ENVIRONMENT, GRADIENTS, FIRST_ITERATIONS, CELLS, VALIDATION)),
    Section("results", HERE + "results", "sections/results.tex.j2", inputs=(*CORE, MADE)),
    Section("claims", HERE + "claims", "sections/claims.tex.j2",
            inputs=(*CORE, *VERDICT_FILES)),
    Section("disagreements", HERE + "disagreements", "sections/disagreements.tex.j2",
            inputs=(*CORE, PEAK, CONDITIONS)),
    Section("machines", HERE + "machines", "sections/machines.tex.j2", inputs=(*CORE, MADE)),
    Section("limitations", HERE + "limitations", "sections/limitations.tex.j2",
            inputs=(*CORE, CLAIMS, VALIDATION)),
    Section("appendix_every", None, "sections/appendix_every.tex.j2", "appendix"),
    Section("appendix_first", None, "sections/appendix_first.tex.j2", "appendix"),
    Section("memory", HERE + "memory", "sections/appendix_memory.tex.j2", "appendix",
            inputs=(TABLES_DIR, CELLS)),
    Section("variants", HERE + "variants", "sections/variants.tex.j2", "appendix",
            inputs=(*CORE, *VERDICT_FILES)),
    Section("varlen", HERE + "varlen", "sections/varlen.tex.j2", "appendix",
            inputs=(*CORE, *VERDICT_FILES)),
    Section("scaling", HERE + "scaling", "sections/scaling.tex.j2", "appendix",
            inputs=(SCALING_TABLE, PEAK, SCALING_FIGURE), files=HERE + "scaling_files"),
    Section("graphs", HERE + "graphs", "sections/graphs.tex.j2", "appendix",
            inputs=(GRAPHS,), files=HERE + "graphs_files"),
    Section("appendix_verdicts", None, "sections/appendix_verdicts.tex.j2", "appendix"),
    # The disagreements section's tests (its context's), with what an untestable one needs.
    Section("disagreement_tests", None, "sections/appendix_disagreement_tests.tex.j2",
            "appendix"),
    # The study's tables' rows at other thread counts than the results section's, which the
    # disagreements' thread-count test reads.
    Section("other_threads", HERE + "other_threads", "sections/appendix_other_threads.tex.j2",
            "appendix", inputs=CORE),
    Section("appendix_setup", None, "sections/appendix_setup.tex.j2", "appendix"),
    Section("reproduce", HERE + "reproduce", "sections/appendix_reproduce.tex.j2", "appendix",
            inputs=(CONFIGFILE, RESULTS)),
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


def context_modules() -> list[str]:
    """The modules of the declared context functions (render_paper loads them by name: the
    paper rule's code inputs)."""
    named = [s.context for s in SECTIONS if s.context] + [s.files for s in SECTIONS if s.files]
    return sorted({name.rsplit(".", 1)[0] for name in named})


# ----------------------------------------------------------------------------- the paper rule
def rule_inputs(in_results, given: dict, figure_pdfs: dict) -> dict:
    """The paper rule's inputs: each declared input's files by name (its tree path through
    `in_results`, else `given`, what other rule files make) and the PDF of each figure the
    paper includes, by '<name>_figure'.  An input no one gives is an error naming it."""
    found = {}
    for item in declared_inputs():
        if item.tree:
            found[item.name] = in_results(item.tree)
        elif item.name in given:
            found[item.name] = given[item.name]
        else:
            raise ValueError(f"paper input {item.name!r} (adbench/sections/paper.py): declare "
                             "its tree path, or give its files in workflow/rules/paper.smk")
    for figure in declared_figures.in_paper():
        found[f"{figure.name}_figure"] = figure_pdfs[figure.name]
    return found


def command_line(input, output, values: dict) -> str:
    """render_paper.py's options for the rule's inputs: each declared input's files (or what
    `values` makes of them, by name: a folder, AXIS=PATH), each figure's PDF."""
    words = []
    for item in declared_inputs():
        given = input[item.name]
        files = [given] if isinstance(given, str) else list(given)
        for value in values.get(item.name, lambda files, output: files)(files, output):
            words += [f"--{item.name.replace('_', '-')}", shlex.quote(str(value))]
    for figure in declared_figures.in_paper():
        words += [f"--{declared_figures.paper_option(figure)}",
                  shlex.quote(input[f"{figure.name}_figure"])]
    return " ".join(words)
