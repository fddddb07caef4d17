"""Render the paper (report/paper.tex.j2) from the pipeline's outputs and compile it to PDF.

Standalone (no snakemake object), so it runs and is tested outside the workflow.  This is the
command: load the inputs, build the rendering context, render, compile.  The context's parts
are built in adbench: the paper's tables in paper_tables, what the results show in findings,
the setup and the checks in paper_context, the statistics, the verdicts and the harness
validation in report_stats, the disagreements with the study in disagreements, the machines
compared in machines_section, what the paper is, its limitations and its commands in
paper_framing, the figures' printed widths in plotting; every number is written by
adbench.formatting.  The template only lays it out: a main text of at most twelve pages,
per-condition detail in appendices after the references (tests/test_paper_print.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import jinja2
import pandas as pd

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from adbench import findings, hypotheses, paper_context, paper_tables, report_stats  # noqa: E402
from adbench import disagreements, machines_section, paper_framing, plotting  # noqa: E402
from adbench import graphs, scaling_section, variants, varlen  # noqa: E402
from adbench import tables as tbl  # noqa: E402
from adbench.formatting import latex  # noqa: E402
from adbench.report_spec import TABLES, TableInfo  # noqa: E402

LATEX_TOOLS = ("latexmk", "pdflatex", "bibtex")
INSTALL_HINT = (
    "render_paper.py needs latexmk, pdflatex and bibtex (TeX Live). Install them with\n"
    "  apt-get install --no-install-recommends texlive-latex-recommended texlive-latex-extra "
    "texlive-fonts-recommended texlive-science lmodern latexmk\n"
    "on Debian/Ubuntu, or run ./setup.sh (as root). Use --tex-only to render paper.tex alone."
)


def log(message: str) -> None:
    print(f"render_paper: {message}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- inputs
@dataclasses.dataclass(frozen=True)
class Inputs:
    """Everything the paper reads, loaded once."""

    env: dict  # aggregate's environment.json
    data: dict  # table name -> {"ours": our tidy table, "published": the study's rows}
    study: dict  # the numbers and statements of the study's text (claims.json)
    first: pd.DataFrame  # first iterations per cell
    cells: pd.DataFrame | None
    gradients: pd.DataFrame
    made: pd.DataFrame | None  # compare.py's comparisons.parquet: every pooled ratio
    verdicts: pd.DataFrame  # make_verdicts.py's claims.csv: the one judgment of each claim
    groups: pd.DataFrame  # make_verdicts.py's groups.csv: each claim per group of comparisons
    comparisons: pd.DataFrame  # make_verdicts.py's comparisons.csv
    validation: str | None  # benchmarks/validate_harness.py's JSON, when it was run
    memory: pd.DataFrame | None  # make_tables.py's memory.csv, where the tables folder has it

    @property
    def confidence(self) -> float:
        return self.env.get("statistics", {}).get("confidence", math.nan)


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
        columns = ["model", "task", "framework", "mode", "study_label", "mean", "std"]
        return pd.DataFrame(columns=columns)
    return pd.read_csv(folder / table.published, dtype=str, keep_default_na=False)


def read_study(published: Path) -> dict:
    """Numbers and statements of the study's text; '_'-keys are their sources."""
    found = json.loads((published / "claims.json").read_text())
    return {k: v for k, v in found.items() if not k.startswith("_")}


def load_inputs(args) -> Inputs:
    folder, published = Path(args.tables), Path(args.published)
    return Inputs(
        env=json.loads(Path(args.environment).read_text()),
        data={
            t.name: {"ours": read_tidy(folder, t), "published": read_published(published, t)}
            for t in TABLES
        },
        study=read_study(published),
        first=read_csv(args.first_iterations),
        cells=pd.read_parquet(args.cells) if args.cells else None,
        gradients=read_csv(args.gradients),
        made=pd.read_parquet(args.made) if args.made else None,
        verdicts=read_csv(args.claims),
        groups=read_csv(args.groups),
        comparisons=read_csv(args.comparisons),
        validation=args.validation,
        memory=read_memory(folder),
    )


def read_memory(folder: Path) -> pd.DataFrame | None:
    """tables/memory.csv (make_tables.MEMORY_FILE); None where the tables predate it."""
    path = folder / "memory.csv"
    if not path.exists() or path.stat().st_size == 0:
        return None
    return read_csv(path)


# ----------------------------------------------------------------------------- context
def build_context(inputs: Inputs, args) -> dict:
    context = {
        **setup_context(inputs),
        **results_context(inputs),
        **checks_context(inputs),
        **files_context(inputs, args),
        **extensions_context(inputs, args),
    }
    return {**context, **framing_context(inputs, args, context)}


def framing_context(inputs: Inputs, args, context: dict) -> dict:
    """What the paper says it is, what the run could not show, how to make it again."""
    axes = [f["axis_text"] for f in (context["scaling"] or {}).get("figures", [])]
    return {
        "paper": paper_framing.identity(inputs.cells, inputs.data, axes),
        "limitations": paper_framing.limitations(
            inputs.cells, inputs.env, inputs.verdicts, inputs.data, inputs.study,
            context["validation"] is not None),
        "reproduce": paper_framing.reproduce(args.configfile, args.results),
    }


def extensions_context(inputs: Inputs, args) -> dict:
    """The sections of report/sections/ whose inputs were given, or whose cells ran (None:
    not included)."""
    return {
        "variants": variants.variants_context(inputs.cells, inputs.verdicts, inputs.comparisons,
                                              inputs.study),
        "varlen": varlen.varlen_context(inputs.cells, inputs.verdicts, inputs.comparisons,
                                        inputs.study),
        "graphs": graphs.graphs_context(args.graphs) if args.graphs else None,
        "scaling": (scaling_section.scaling_context(args.scaling_table, args.peak,
                                            scaling_figures(args))
                    if args.scaling_table else None),
    }


def scaling_figures(args) -> dict[str, str]:
    """--scaling-figure AXIS=PATH, by axis."""
    return dict(item.split("=", 1) for item in args.scaling_figure)


def extension_figures(args) -> list:
    """The sections' figures, to copy beside paper.tex."""
    return [*(graphs.figure_files(args.graphs) if args.graphs else []),
            *scaling_figures(args).values()]


def setup_context(inputs: Inputs) -> dict:
    """The machine, the protocol, the spec's models, modes and tasks, the analysis settings."""
    measured = set().union(*(set(d["ours"]["model"]) for d in inputs.data.values()))
    return {
        "setup": paper_context.setup_context(inputs.env),
        "machines": machines_section.machines_context(inputs.made, inputs.env),
        "protocol": paper_context.protocol_context(inputs.cells),
        "models": paper_context.models_context(measured, inputs.cells),
        "modes": paper_context.modes_context(inputs.cells),
        "tasks": paper_context.tasks_context(inputs.cells),
        "choices": paper_context.choices_context(inputs.cells),
        "has_cells": inputs.cells is not None,
        "study": paper_context.study_context(inputs.study),
        "statistics": report_stats.statistics_context(inputs.env),
    }


def results_context(inputs: Inputs) -> dict:
    """The tables, what they show, and the verdicts on the seeds' claims."""
    data, confidence = inputs.data, inputs.confidence
    waiting = paper_context.waiting_conditions(inputs.cells)
    tables = [paper_tables.table_context(t, **data[t.name], waiting=waiting) for t in TABLES]
    main = [t for t, info in zip(tables, TABLES) if info.published]
    appendix = [t for t, info in zip(tables, TABLES) if not info.published]
    return {
        "overview": paper_tables.tables_overview(data),
        "main_tables": main,
        "main_runs": landscape_runs(main),
        "appendix_tables": appendix,
        "appendix_runs": landscape_runs(appendix),
        "appendix_refs": table_refs([t["name"] for t in appendix if t["measured"]]),
        "how_to_read": paper_tables.HOW_TO_READ,
        "headline": findings.headline(data, inputs.made),
        "example": findings.study_example(data),
        "findings": [{**f, "main": f["table"] in {t["name"] for t in main}}
                     for f in hypotheses.table_findings(data, inputs.study)],
        "disagreements": disagreements.disagreements_context(data, inputs.study, inputs.cells),
        "hypotheses": hypotheses.hypotheses(
            data, inputs.study, inputs.verdicts, inputs.groups, inputs.comparisons, waiting
        ),
        "scaled": findings.scaled_models(inputs.study, data, inputs.cells),
        "verdicts": report_stats.verdicts_context(
            inputs.verdicts, inputs.groups, inputs.comparisons, inputs.study, confidence, waiting
        ),
    }


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
    for figure in tbl.FIGURES_OF_TABLES:
        names = [t.name for t in plotting.figure_tables(figure)]
        if any(t["name"] in names for t in run) and table["name"] not in names:
            return False
    return True


def checks_context(inputs: Inputs) -> dict:
    """The gradient cross-check, the first iterations, the threads and the harness."""
    first = inputs.first
    tolerance = inputs.env.get("gradient_tolerance")
    return {
        "gradients": paper_context.gradient_summary(inputs.gradients, tolerance),
        "first_iterations": paper_context.first_iteration_summary(first),
        "first_iteration_max": paper_context.first_max(first),
        "figure_focus": paper_context.figure_focus(first) if len(first) else "none",
        "threads_check": paper_context.threads_check(inputs.cells),
        "memory": paper_context.memory_context(inputs.memory, inputs.cells),
        "validation": report_stats.validation_context(inputs.validation),
    }


def files_context(inputs: Inputs, args) -> dict:
    """The figures and the bibliography the template includes, by file name."""
    return {
        "first_figure": included(args.figure),
        "table_figures": table_figures(inputs, figure_files(args)),
        "memory_figure": included(args.memory_figure),
        "bibliography": Path(args.bib).stem,
    }


def included(path) -> dict | None:
    """A figure as the template includes it: its file name and its printed width (its own,
    never wider than the text: adbench.plotting)."""
    if not path:
        return None
    return {"file": Path(path).name, "width": plotting.width_option(path)}


def figure_files(args) -> dict:
    """The figures of the spec's tables given on the command line, by figure name."""
    return {
        figure: getattr(args, f"{figure}_figure")
        for figure in tbl.FIGURES_OF_TABLES
        if getattr(args, f"{figure}_figure")
    }


def table_figures(inputs: Inputs, files: dict) -> list[dict]:
    """Each figure of the spec's tables that was given and draws a table this run measured:
    its file, its label, the measured tables it draws (their captions cite it) and the table
    it follows in the paper (the first of them)."""
    out = []
    for figure, path in files.items():
        measured = [
            t.name for t in plotting.figure_tables(figure)
            if not inputs.data[t.name]["ours"].empty
        ]
        if measured:
            out.append(
                {
                    "name": figure,
                    **included(path),
                    "label": f"fig:{figure}",
                    "tables": measured,
                    "after": measured[0],
                    "refs": table_refs(measured),
                    "others": {
                        name: table_refs([t for t in measured if t != name]) for name in measured
                    },
                }
            )
    return out


def table_refs(names: list[str]) -> str:
    """'Table~\\ref{tab:a}', 'Tables~\\ref{tab:a} and~\\ref{tab:b}', 'Tables~..., ... and~...'."""
    refs = [f"\\ref{{tab:{name}}}" for name in names]
    if len(refs) <= 1:
        return f"Table~{refs[0]}" if refs else ""
    return f"Tables~{', '.join(refs[:-1])} and~{refs[-1]}"


# ----------------------------------------------------------------------------- render, compile
def make_environment(template_dir: Path) -> jinja2.Environment:
    # LaTeX-friendly delimiters: \BLOCK{}, \VAR{}, \#{}, and '%%' line statements.
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(template_dir)),
        block_start_string=r"\BLOCK{",
        block_end_string="}",
        variable_start_string=r"\VAR{",
        variable_end_string="}",
        comment_start_string=r"\#{",
        comment_end_string="}",
        line_statement_prefix="%%",
        line_comment_prefix="%#",
        trim_blocks=True,
        lstrip_blocks=True,
        # An included section keeps its last newline: otherwise its last line runs into the
        # next section's first, and a '%' comment there swallows the next \section.
        keep_trailing_newline=True,
        autoescape=False,
        undefined=jinja2.StrictUndefined,  # a missing number fails loudly, never prints blank
    )
    env.filters["latex"] = latex
    return env


def compile_pdf(folder: Path, tex: Path) -> Path:
    command = [
        "latexmk",
        "-pdf",
        "-interaction=nonstopmode",
        "-halt-on-error",
        f"-output-directory={folder}",
        tex.name,
    ]
    log(f"running {' '.join(command)} in {folder}")
    # TeX writes its log in bytes, and may cut a UTF-8 character in two at a line break.
    done = subprocess.run(command, cwd=folder, capture_output=True, text=True, errors="replace")
    pdf = folder / (tex.stem + ".pdf")
    if done.returncode != 0 or not pdf.exists():
        log_file = folder / (tex.stem + ".log")
        print("\n".join(first_error(log_file, done)), file=sys.stderr)
        raise SystemExit(f"render_paper: latexmk failed (exit {done.returncode}); see {log_file}")
    return pdf


def first_error(log_file: Path, done: subprocess.CompletedProcess) -> list[str]:
    """40 lines of TeX's log from its first error ('! ...'), else its last 40."""
    text = log_file.read_text(errors="replace") if log_file.exists() else done.stdout + done.stderr
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("! ")), None)
    return lines[-40:] if start is None else lines[start : start + 40]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--template", required=True, help="report/paper.tex.j2")
    p.add_argument("--bib", required=True, help="report/references.bib")
    p.add_argument("--published", required=True, help="folder of the study's tables")
    p.add_argument(
        "--tables",
        required=True,
        help="folder with <table>.csv for each report_spec.TABLES entry (a missing one reads as "
        "not measured)",
    )
    p.add_argument("--figure", required=True, help="first_iterations.pdf")
    for figure in tbl.FIGURES_OF_TABLES:
        p.add_argument(
            f"--{figure.replace('_', '-')}-figure",
            help=f"{figure}.pdf (optional): cited beside the tables it draws",
        )
    p.add_argument("--memory-figure", help="memory_per_cell.pdf (optional)")
    p.add_argument("--gradients", required=True, help="gradients.csv")
    p.add_argument("--environment", required=True, help="environment.json")
    p.add_argument("--first-iterations", required=True, help="first_iterations.csv")
    p.add_argument("--cells", help="cells.parquet, for the implementation choices (optional)")
    p.add_argument(
        "--made",
        metavar="COMPARISONS_PARQUET",
        help="compare.py's comparisons.parquet: the pooled ratios in the text (n/a without)",
    )
    p.add_argument("--claims", required=True, help="make_verdicts.py's claims.csv")
    p.add_argument("--groups", required=True, help="make_verdicts.py's groups.csv")
    p.add_argument("--comparisons", required=True, help="make_verdicts.py's comparisons.csv")
    p.add_argument(
        "--validation",
        help="benchmarks/validate_harness.py's JSON, when it was run (optional: the paper says "
        "it was not)",
    )
    p.add_argument("--graphs", help="the graphs rule's folder: the computation graphs' "
                   "section (optional)")
    p.add_argument("--scaling-table", help="tables/scaling.csv: the scaling section (optional)")
    p.add_argument("--peak", action="append", default=[], help="scaling/peak.json or "
                   "peak_cuda.json, a measured matmul rate (optional, repeatable)")
    p.add_argument("--scaling-figure", action="append", default=[], metavar="AXIS=PATH",
                   help="a scaling figure by the axis it sweeps (repeatable)")
    p.add_argument("--configfile", help="the config the run was made with, as the command line "
                   "names it (the last appendix's commands; none: the default config)")
    p.add_argument("--results", help="the run's results tree (the last appendix's files)")
    p.add_argument("--out", required=True, help="the PDF to write; paper.tex goes beside it")
    p.add_argument("--tex-only", action="store_true", help="render paper.tex, skip latexmk")
    return p.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    if not args.tex_only:  # fail before touching anything when the PDF cannot be built
        absent = [tool for tool in LATEX_TOOLS if shutil.which(tool) is None]
        if absent:
            raise SystemExit(
                f"render_paper: {', '.join(absent)} not found on PATH.\n" + INSTALL_HINT
            )
    out = Path(args.out)
    folder = out.parent.resolve()
    folder.mkdir(parents=True, exist_ok=True)
    log("reading inputs")
    context = build_context(load_inputs(args), args)
    template = Path(args.template)
    tex = folder / "paper.tex"
    tex.write_text(make_environment(template.parent).get_template(template.name).render(**context))
    log(f"wrote {tex}")
    figures = (args.figure, *figure_files(args).values(), args.memory_figure,
               *extension_figures(args))
    for figure in filter(None, figures):
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
