"""Every figure of the run, declared once (adbench.sections.Figure): the figures rule draws
each, the paper rule and render_paper include it, tables.figure_of cites it beside the tables
it draws, and Snakemake's report captions it.  A new figure is a declaration here, its module
(draw(FigureData) -> a matplotlib figure), its report caption (report/captions/<name>.rst)
and, where the paper prints it beside tables, its caption template (report/figures/)."""

from __future__ import annotations

from adbench.sections import Figure
from adbench.spec import TASKS


def _first_step(table) -> bool:
    return bool(table.first_step)


def _study_backward(table) -> bool:
    """The study's backward tables with published numbers (its Tables 1-2)."""
    return not table.first_step and bool(table.published) and set(table.tasks) == {"backward"}


def _jacobians(table) -> bool:
    """The output-Jacobian tables."""
    return not table.first_step and all(TASKS[t].derivative == "jacobian" for t in table.tasks)


def _hypothesis0(table) -> bool:
    """The table of two tasks whose ratio is Hypothesis 0."""
    return not table.first_step and tuple(table.tasks) == ("backward", "loss_jacobian")


ALWAYS = "first_iterations"  # drawn by every run (figures.py --out), read by the paper always
FIGURES = (
    Figure("first_iterations", "adbench.sections.figure_first_iterations",
           "the study's Figure 3: the first iterations", paper_option="figure",
           context_key="first_figure"),
    Figure("mlp_backward", "adbench.sections.figure_mlp_backward",
           "the study's MLP backward tables (its Tables 1-2)", draws=_study_backward,
           caption_tex="figures/mlp_backward.tex.j2", needs=("summary", "cells")),
    Figure("jacobians", "adbench.sections.figure_jacobians", "the Jacobian figure",
           draws=_jacobians, published_only=True, caption_tex="figures/jacobians.tex.j2",
           needs=("summary",)),
    Figure("hypothesis0", "adbench.sections.figure_hypothesis0",
           "Hypothesis 0: the loss Jacobian against one backward", draws=_hypothesis0,
           caption_tex="figures/hypothesis0.tex.j2", needs=("summary", "cells")),
    Figure("frameworks", "adbench.sections.figure_frameworks", "the every-framework figure",
           draws=_first_step, caption_tex="figures/frameworks.tex.j2",
           needs=("summary", "cells")),
    Figure("memory_per_cell", "adbench.sections.figure_memory_per_cell",
           "the memory per cell", paper_option="memory-figure", context_key="memory_figure",
           needs=("cells",)),
)


def by_name(name: str) -> Figure:
    """A declared figure by its name (read at call time: a test may declare one more)."""
    found = {f.name: f for f in FIGURES}
    if name not in found:
        raise KeyError(f"figure {name!r}: not declared in adbench/sections/figures.py "
                       f"(declared: {', '.join(found)})")
    return found[name]


def paper_requires(figure: Figure) -> bool:
    """Whether render_paper.py cannot run without the figure."""
    return figure.name == ALWAYS


def paper_option(figure: Figure) -> str:
    """render_paper.py's option for a figure (a figure of tables: --<name>-figure)."""
    return figure.paper_option or f"{figure.name.replace('_', '-')}-figure"


def of_tables() -> tuple[Figure, ...]:
    """The figures that draw spec tables, in declaration order."""
    return tuple(f for f in FIGURES if f.draws is not None)


def in_paper() -> tuple[Figure, ...]:
    """The figures the paper includes: those of tables and those a section reads."""
    return tuple(f for f in FIGURES if f.draws is not None or f.context_key)
