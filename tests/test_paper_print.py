"""The paper as a researcher reads it (issue 40), compiled for the shipped configs from
fabricated measurements of each config's own cells (tests/fabricated.py: the pipeline's
analysis, figures and renderer on made-up timings): a main text of at most twelve pages with
the appendices after the references, nothing lost off a page, prose without code, commands
that run when copied, every table and figure referred to, figures printed at 7 pt or more,
a title that says what the config is.  The checks themselves: tests/paper_checks.py (the
end-to-end tests run them on the tiny config's real paper too).

The quick default, the full configuration and the tiny config here; every other shipped
config in the extended tier (pytest -m extended).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import matplotlib
import pandas as pd
import pytest

matplotlib.use("Agg")

import fabricated  # noqa: E402
import figures  # noqa: E402
import paper_checks  # noqa: E402
from adbench import comparisons, graphs, plotting  # noqa: E402
from adbench.sections import drawing  # noqa: E402
from paper_checks import Paper  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
pytestmark = [
    pytest.mark.latex,
    pytest.mark.skipif(shutil.which("latexmk") is None or shutil.which("pdftotext") is None,
                       reason="latexmk and pdftotext (./setup.sh --test installs them)"),
]

CONFIGS = {"default": "config/config.yaml", "full": "config/paper.yaml",
           "tiny": ".test/config.yaml"}
# Every other shipped config: the extended tier.
OTHERS = {p.stem: str(p.relative_to(ROOT)) for p in sorted((ROOT / "config").glob("*.yaml"))
          if str(p.relative_to(ROOT)) not in CONFIGS.values()}
KINDS = {"default": "quick check", "full": "reproduction", "tiny": "quick check",
         "all-frameworks": "extension", "gpu": "extension", "gpu-smoke": "extension",
         "sweep-batch": "extension", "sweep-depth": "extension", "sweep-threads": "extension",
         "sweep-width": "extension", "varlen": "extension", "machines-example": "extension"}
_BUILT: dict[str, Paper] = {}


def built(name: str, tmp_path_factory) -> Paper:
    """The compiled paper of a config's fabricated tree, made once per session."""
    if name not in _BUILT:
        config = {**CONFIGS, **OTHERS}[name]
        tree = tmp_path_factory.mktemp(f"paper-{name}")
        _BUILT[name] = Paper.read(fabricated.fabricated_paper(ROOT / config, tree))
    return _BUILT[name]


@pytest.fixture(scope="module", params=list(CONFIGS))
def paper(request, tmp_path_factory) -> Paper:
    return built(request.param, tmp_path_factory)


@pytest.fixture(scope="module", params=[pytest.param(n, marks=pytest.mark.extended)
                                        for n in OTHERS])
def other_paper(request, tmp_path_factory) -> Paper:
    return built(request.param, tmp_path_factory)


# ----------------------------------------------------------------------------- items 1, 3
def test_the_main_text_is_at_most_twelve_pages_and_the_appendices_follow_the_references(paper):
    assert paper_checks.main_text_problems(paper) == []
    references = paper.page_of("References")
    appendix = paper.page_of(rf"A\s+{re.escape(paper_checks.first_appendix_title(paper.tex))}")
    assert references <= appendix  # per-condition detail after the references
    # the study's tables are the main text's; every framework and mode the appendix's
    main, rest = paper.tex.split(r"\appendix")
    assert r"\label{tab:table1_eager}" in main and r"\label{tab:table8_frameworks}" in rest


def test_nothing_is_lost_off_a_page(paper):
    assert paper_checks.log_problems(paper.log) == []
    assert paper_checks.rows_on_the_pages(paper) == []
    assert len(paper_checks.table_rows(paper.tex)) > 50  # the check read the tables


def test_the_checks_find_a_table_run_off_its_page(tmp_path):
    """The check itself: a table in a float taller than its page is reported by LaTeX's log,
    and its last rows are not in the PDF's text."""
    rows = "\n".join(f"row & {1000 + i} & {2000 + i} \\\\" for i in range(90))
    (tmp_path / "paper.tex").write_text(
        "\\documentclass{article}\\usepackage{longtable}\\begin{document}\n"
        "\\begin{table}\\begin{tabular}{lrr}\n" + rows + "\n\\end{tabular}\\end{table}\n"
        "\\begin{longtable}{lrr}\\endfoot\nlast & 777 & 888 \\\\\n\\end{longtable}\n"
        "\\end{document}\n")
    subprocess.run(["latexmk", "-pdf", "-interaction=nonstopmode", "paper.tex"], cwd=tmp_path,
                   capture_output=True)
    found = Paper.read(tmp_path / "paper.pdf")
    assert "float too large" in paper_checks.log_problems(found.log)
    tex = found.tex.replace(r"\begin{tabular}{lrr}", r"\endfoot").replace(
        r"\end{tabular}", r"\end{longtable}")
    found.tex = tex
    assert paper_checks.rows_on_the_pages(found)  # the rows past the page's end


def test_no_heading_or_label_is_lost_in_a_comment(paper):
    """Every section the templates write is a heading of the paper: none is swallowed by the
    previous template's last comment (a label defined twice: test_nothing_is_lost_off_a_page)."""
    assert paper_checks.commented_out(paper.tex) == []
    assert paper_checks.headings_not_printed(paper) == []


def test_the_checks_find_a_commented_heading_and_a_label_defined_twice(tmp_path):
    """The checks themselves: a section after a comment on its line, and a longtable whose
    label sits in the head repeated on every page it spans."""
    assert paper_checks.commented_out("a % note\\section{Memory}\n") == ["\\section{Memory}"]
    assert paper_checks.commented_out("50\\% of it\n\\section{A} % note\n") == []
    rows = "\n".join(f"row {i} \\\\" for i in range(120))
    (tmp_path / "paper.tex").write_text(
        "\\documentclass{article}\\usepackage{longtable}\\begin{document}\n"
        "\\begin{longtable}{l}\\caption{x}\\label{tab:x}\\\\\n\\endhead\n" + rows +
        "\n\\end{longtable}\n\\end{document}\n")
    subprocess.run(["latexmk", "-pdf", "-interaction=nonstopmode", "paper.tex"], cwd=tmp_path,
                   capture_output=True)
    log = (tmp_path / "paper.log").read_text(errors="replace")
    assert "label tab:x multiply defined" in paper_checks.log_problems(log)


# ----------------------------------------------------------------------------- item 4
def test_the_prose_names_no_code_and_no_spec_key(paper):
    assert paper_checks.code_in_the_prose(paper) == []


def test_no_stitched_or_doubled_phrase_and_cell_in_one_sense(paper):
    assert paper_checks.stitched_phrases(paper) == []
    assert paper_checks.cell_in_two_senses(paper) == []


def test_the_checks_find_stitched_phrases_and_code():
    """The checks themselves, on the phrases the issue found."""
    tex = (r"\begin{document} The study's the study, Table 4 gives 45 s. The study's draft "
           r"(the study's draft, \S{}2) states it. In compiled modes up to 34$\times$(PyTorch "
           r"(eager)) and a median(PyTorch the the end.\section{Reproducing this paper} "
           r"\end{document}")
    found = paper_checks.stitched_phrases(Paper(ROOT, tex, "", [], ""))
    kinds = {f.split(":")[0] for f in found}
    assert kinds == {"possessive doubled", "doubled phrase", "glued parenthesis",
                     "doubled word"}
    text = ("Table 21 prints step_s; the cells are in tables/memory.csv (adbench.tables) and "
            "torch/eager/jacobian_rows; mlp512 is a model.\nZ Reproducing this paper\n"
            "snakemake --cores 8 results/paper/paper.pdf")
    prose = paper_checks.code_in_the_prose(Paper(ROOT, "", "", [text], text))
    assert {"step_s", "tables/memory.csv", "adbench.tables", "torch/eager/jacobian_rows",
            "mlp512"} <= set(prose)
    assert "results/paper/paper.pdf" not in prose  # the last appendix may name files


def test_commands_work_when_copied_from_the_pdf(paper):
    """Copied out of the PDF's text, each command of the last appendix plans its jobs (a dry
    run): its double dashes are two hyphens, its words whole."""
    found = paper_checks.commands(paper)
    assert found and all("--" in c and "–" not in c and "—" not in c for c in found)
    for command in (c for c in found if "--cores" in c):
        done = paper_checks.dry_run(command)
        assert done.returncode == 0, f"{command}\n{done.stderr[-2000:]}"


# ----------------------------------------------------------------------------- item 5
def test_every_table_and_figure_is_referred_to_in_the_text(paper):
    assert paper_checks.unreferred_floats(paper.tex) == []


def test_the_check_finds_a_table_never_referred_to():
    tex = (r"\begin{longtable}{l}\caption{x}\label{tab:alone}\\ a \\ \end{longtable}"
           r"\begin{figure}\caption{y, see Table~\ref{tab:alone}}\label{fig:seen}\end{figure}"
           r"Figure~\ref{fig:seen}.")
    assert paper_checks.unreferred_floats(tex) == []
    assert paper_checks.unreferred_floats(tex.replace(r"Figure~\ref{fig:seen}.", "")) == [
        "fig:seen"]


# ----------------------------------------------------------------------------- item 2
INCLUDED = re.compile(r"\\includegraphics\[width=([\d.]+)bp\]\{([^}]+)\}")


def redrawn(name: str, tree: Path, confidence: float = 0.95):
    """A figure of the paper drawn again from its tree, as the figures rule draws it."""
    agg = tree / "aggregate"
    data = drawing.FigureData(
        iterations=pd.read_parquet(agg / "iterations.parquet"), first=15,
        summary=pd.read_parquet(agg / "summary.parquet"),
        cells=pd.read_parquet(agg / "cells.parquet"),
        found=comparisons.estimates(pd.read_parquet(agg / "conditions.parquet"), "mean"),
        confidence=confidence, published=str(ROOT / "report" / "published"))
    return figures.draw(name, data)


def test_every_figure_prints_its_text_at_seven_points_or_more(paper):
    """For each figure the paper includes: every text element's size in the figure times the
    width the template gives it over the figure's own width; a graph's labels (Graphviz's
    10 pt) likewise."""
    tree = paper.folder.parent
    seen = set()
    for width, file in INCLUDED.findall(paper.tex):
        name = Path(file).stem
        natural, _ = plotting.pdf_size_bp(paper.folder / file)
        scale = float(width) / natural
        if name.startswith("graph_"):
            assert graphs.NODE_FONT_PT * scale >= plotting.MIN_FONT_PT - 0.05, name
            continue
        if name.startswith("scaling_"):
            assert scale == pytest.approx(1.0, abs=0.01), name  # drawn at the text's width
            continue
        fig = redrawn(name, tree)
        assert fig.get_figwidth() * plotting.BP_PER_IN == pytest.approx(natural, abs=1), name
        sizes = [t.get_fontsize() * scale for t in fig.findobj(matplotlib.text.Text)
                 if t.get_visible() and t.get_text().strip()]
        assert min(sizes) >= plotting.MIN_FONT_PT - 1e-6, name
        assert len([ax for ax in fig.axes if ax.get_visible() and ax.has_data()]) \
            <= plotting.MAX_PANELS, name
        seen.add(name)
    assert {"mlp_backward", "first_iterations"} <= seen


def test_every_estimate_figures_caption_says_what_its_intervals_resample(paper):
    for caption in re.findall(r"\\begin\{figure\}.*?\\caption\{(.*?)\}\s*\\label", paper.tex,
                              re.S):
        words = " ".join(caption.split())
        if "graph" in words or "step / median" in words or "over the median" in words:
            continue  # a picture of a graph; single iterations, no estimate
        assert ("over processes" in words or "range over" in words
                or "interval" in words), words[:80]
        if "interval" in words and "processes" in words:
            assert "iterations of its one process" in words or "one process" in words, \
                words[:80]


# ----------------------------------------------------------------------------- item 7
def test_the_title_and_introduction_say_what_the_config_is(paper):
    name = next(n for n, p in {**CONFIGS, **OTHERS}.items()
                if _BUILT.get(n) is paper)
    title = paper.tex.split(r"\title{")[1].split(r"\author")[0]
    intro = paper.tex.split(r"\section{Introduction}")[1].split(r"\section")[0]
    kind = KINDS[name]
    assert kind in title or (kind == "reproduction" and "a reproduction" in title), title
    if kind == "quick check":
        assert "not the reproduction" in paper.tex.split(r"\end{abstract}")[0]
        assert "quick check" in intro and "reproduces every one" not in intro
    if kind == "reproduction":
        assert "reproduces every one of their tables" in intro


def test_the_limitations_are_the_runs(paper):
    section = paper.tex.split(r"\label{sec:limitations}")[1].split(r"\section")[0]
    assert "One machine" in section
    assert "No GPU" in section  # every shipped CPU config; the GPU configs say otherwise
    if "resnet50" in paper.tex or "ResNet50" in section:
        assert "ResNet50's input is" in section


@pytest.mark.extended
def test_every_other_shipped_config_makes_a_paper_that_passes_every_check(other_paper):
    assert paper_checks.problems(other_paper) == {}
    name = next(n for n in OTHERS if _BUILT.get(n) is other_paper)
    title = other_paper.tex.split(r"\title{")[1].split(r"\author")[0]
    assert KINDS[name] in title


# ----------------------------------------------------------------------------- machines
@pytest.fixture(scope="module")
def two_machines(tmp_path_factory) -> Paper:
    tree = tmp_path_factory.mktemp("paper-two-machines")
    args = fabricated.fabricated_tree(ROOT / CONFIGS["tiny"], tree,
                                      machines=fabricated.TWO_MACHINES)
    import render_paper

    render_paper.main(args)
    return Paper.read(tree / "paper" / "paper.pdf")


def test_a_tree_of_two_machines_makes_a_paper_that_compares_them(two_machines):
    """Each machine named by its processor, as people say it (never the provenance string in
    the section's text), a section and a table setting one against the other, every
    condition in the appendix; and every check of a paper passes."""
    tex = " ".join(two_machines.tex.split())
    section = tex.split(r"\label{sec:machines}")[1].split(r"\section")[0]
    first, second = fabricated.TWO_MACHINES
    short = [graphs_name(m) for m in (first, second)]
    assert all(s in section for s in short)
    assert first not in section.split(r"\caption")[0]
    assert r"\label{tab:machines}" in section and r"\label{tab:machines-every}" in tex
    assert f"{short[0]} over {short[1]}" in section or f"{short[1]} over {short[0]}" in section
    assert paper_checks.problems(two_machines) == {}


def graphs_name(machine: str) -> str:
    from adbench.machines_section import machine_names

    return machine_names(fabricated.TWO_MACHINES)[machine]
