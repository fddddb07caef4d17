"""The paper's two plug-in shapes: a figure and a section are each one declaration.

A figure (adbench.sections.figures.FIGURES) names its module, which draws it, the spec tables
it draws (the paper cites it beside them), how the paper includes it and its captions; the
figures rule, the paper rule, the tables, render_paper and Snakemake's report read it.  A
section (adbench.sections.paper.SECTIONS) names its template, its context function (one
signature) and the inputs it reads; render_paper, paper.tex.j2 and the paper rule read it.
This module holds the shapes alone and imports nothing heavy: the rules load it while
planning.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable


@dataclasses.dataclass(frozen=True)
class Figure:
    """figures/<name>.{pdf,png}, drawn by `module`'s draw(FigureData) (one module each)."""

    name: str
    module: str  # dotted, under workflow/scripts: the code input of the figures rule
    what: str  # a few words: the figures script's help
    # The spec tables it draws (the paper places it after the first and cites it in each
    # caption); None: it draws none of the spec's tables.
    draws: Callable[[Any], bool] | None = None
    # Of those, only the tables with the study's published numbers where there are any
    # (the others' conditions are in the appendix tables).
    published_only: bool = False
    # How the paper includes it: its option of render_paper.py (--<option>) and the context
    # key its section reads ({file, width}); a figure of tables is listed in table_figures.
    paper_option: str | None = None
    context_key: str | None = None
    caption_tex: str | None = None  # the paper's caption, a template under report/
    needs: tuple[str, ...] = ()  # the figures script's inputs beyond --iterations

    @property
    def out_option(self) -> str:
        """The figures script's option for its files (repeated per format)."""
        return f"{self.name.replace('_', '-')}-out"

    @property
    def report_caption(self) -> str:
        """Its caption in Snakemake's report: report/captions/<name>.rst."""
        return self.name


@dataclasses.dataclass(frozen=True)
class Input:
    """A file (or folder) a section reads: render_paper's option --<name with dashes>, the
    paper rule's input of the same name."""

    name: str
    help: str
    required: bool = False
    many: bool = False  # repeatable option: a list
    # Where the paper rule finds it in the results tree; None: the rule names it
    # (paper.smk's FOREIGN_INPUTS: files other rule files declare).
    tree: str | None = None


@dataclasses.dataclass(frozen=True)
class Section:
    """A part of the paper.  `context` names (module.function) its context function,
    context(inputs) -> the context keys it adds; None: it adds none.  Its template (under
    report/) is included where its own key (`name`) is not None; a section without a
    template adds context that the master template or other sections print.  `files` names a
    function(inputs) -> the files its template includes beyond the declared figures (copied
    beside paper.tex)."""

    name: str
    context: str | None
    template: str | None = None
    part: str = "main"  # "main" (before the references) or "appendix"
    inputs: tuple[Input, ...] = ()
    files: str | None = None
