"""A paper section and a figure added by declaration alone (adbench/sections): a toy figure
(this file is its module) and a toy section (its template, its context function here, an
input of its own) declared beside the project's, then the figures script draws the figure,
the paper rule's command line and render_paper.py take both, and the compiled PDF shows
them.  Nothing else is edited: not render_paper.py, not paper.tex.j2, not the rules."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

import figures as figures_script
import render_paper
from adbench import stats
from adbench.sections import Figure, Input, Section
from adbench.sections import figures as declared_figures
from adbench.sections import paper as declared_sections
from test_render_paper import ROOT, make_inputs, real_figure
from test_tables import fake_iterations_and_cells

HEADING = "A toy section by declaration"
FIGURE_WORD = "Toyfigurewords"
NOTE = "read from its own input"

TOY_FIGURE = Figure("toy", __name__, "a toy figure", paper_option="toy-figure",
                    context_key="toy_figure", needs=("cells",))
TOY_INPUT = Input("toy_note", "a text file the toy section prints")
TOY_SECTION = Section("toy", f"{__name__}.toy_context", "sections/toy.tex.j2", "appendix",
                      inputs=(TOY_INPUT,))
TOY_TEMPLATE = rf"""\section{{{HEADING}}}\label{{app:toy}}
Its context: \VAR{{toy.note}}; \VAR{{toy.models}} models in the run's cells.
\begin{{figure}}[h]
\centering
\includegraphics[width=\VAR{{toy_figure.width}}]{{\VAR{{toy_figure.file}}}}
\caption{{The toy figure.}}
\end{{figure}}
"""


def draw(data):
    """The toy figure's module's one function, as every figure module has."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(3, 1.5))
    counts = data.cells.groupby("model").size()
    ax.plot(range(len(counts)), counts.values, marker="o")
    ax.set_title(FIGURE_WORD)
    return fig


def toy_context(inputs) -> dict:
    """The toy section's context function: one signature, like every section's."""
    return {"toy": {"note": Path(inputs.path("toy_note")).read_text().strip(),
                    "models": inputs.cells["model"].nunique()}}


@pytest.fixture
def declared(monkeypatch):
    monkeypatch.setattr(declared_figures, "FIGURES", (*declared_figures.FIGURES, TOY_FIGURE))
    monkeypatch.setattr(declared_sections, "SECTIONS",
                        (*declared_sections.SECTIONS, TOY_SECTION))


def draw_toy(tmp_path: Path) -> Path:
    """The figures script, as the figures rule runs it, with the toy's option."""
    iterations, cells = fake_iterations_and_cells()
    iterations.to_parquet(tmp_path / "iterations.parquet")
    cells.to_parquet(tmp_path / "cells.parquet")
    toy = tmp_path / "figures" / "toy.pdf"
    assert figures_script.main([
        "--iterations", str(tmp_path / "iterations.parquet"), "--first", "5",
        "--out", str(tmp_path / "figures" / "first_iterations.pdf"),
        "--cells", str(tmp_path / "cells.parquet"), f"--{TOY_FIGURE.out_option}", str(toy)]) == 0
    return toy


# What paper.smk gives the project's inputs that no tree path names (SECTION_FILES).
GIVEN = {name: [] for name in ("tables", "published", "graphs", "scaling_table", "peak",
                               "scaling_figure", "validation", "configfile", "results")}


def test_the_paper_rule_gives_a_declared_input_and_figure(declared):
    """paper.smk's inputs and command line come from the declarations: the toy's are there."""
    inputs = declared_sections.rule_inputs(
        lambda path: f"results/{path}", {**GIVEN, "toy_note": "results/toy.txt"},
        {f.name: f"results/figures/{f.name}.pdf" for f in declared_figures.FIGURES})
    assert inputs["toy_note"] == "results/toy.txt"
    assert inputs["toy_figure"] == "results/figures/toy.pdf"
    words = declared_sections.command_line(inputs, ["results/paper/paper.pdf"], {}).split()
    assert words[words.index("--toy-note") + 1] == "results/toy.txt"
    assert words[words.index("--toy-figure") + 1] == "results/figures/toy.pdf"
    assert "adbench.sections.contexts" in declared_sections.context_modules()
    assert __name__ in declared_sections.context_modules()  # a code input of the paper rule


def test_an_input_nobody_gives_is_refused_by_name(declared):
    with pytest.raises(ValueError, match="toy_note"):
        declared_sections.rule_inputs(lambda path: path, GIVEN, {})


def test_the_figures_script_draws_a_declared_figure(declared, tmp_path):
    assert draw_toy(tmp_path).read_bytes().startswith(b"%PDF")
    with pytest.raises(SystemExit):  # its declared needs are checked like every figure's
        figures_script.parse_args(["--iterations", "x", "--out", "y",
                                   f"--{TOY_FIGURE.out_option}", "z"])


@pytest.mark.latex
def test_a_declared_section_and_figure_reach_the_compiled_pdf(declared, tmp_path):
    if shutil.which("latexmk") is None or shutil.which("pdftotext") is None:
        pytest.skip("latexmk or pdftotext not installed (./setup.sh --test installs both)")
    toy = draw_toy(tmp_path)
    report = tmp_path / "report"  # the project's templates, and the toy section's own
    report.mkdir()
    for part in ("paper.tex.j2", "sections", "figures"):
        copy = shutil.copytree if (ROOT / "report" / part).is_dir() else shutil.copyfile
        copy(ROOT / "report" / part, report / part)
    (report / TOY_SECTION.template).write_text(TOY_TEMPLATE)
    (tmp_path / "note.txt").write_text(NOTE)
    run = tmp_path / "run"
    run.mkdir()
    render_paper.main(make_inputs(run, real_figure(tmp_path)) + [
        "--template", str(report / "paper.tex.j2"), "--toy-figure", str(toy),
        "--toy-note", str(tmp_path / "note.txt")])
    text = subprocess.run(["pdftotext", str(run / "paper" / "paper.pdf"), "-"],
                          capture_output=True, text=True, check=True).stdout
    _, cells = fake_iterations_and_cells()
    assert HEADING in text
    assert f"{NOTE}; {cells['model'].nunique()} models" in " ".join(text.split())
    assert FIGURE_WORD in text  # the figure's own text, inside the included PDF
    assert "The toy figure." in text
