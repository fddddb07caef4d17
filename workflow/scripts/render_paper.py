"""Render the paper (report/paper.tex.j2) from the pipeline's outputs and compile it to PDF.

Standalone (no snakemake object), so it runs and is tested outside the workflow.  This is the
command alone: its options come from the declarations (adbench/sections/paper.py: the
sections and the inputs each reads; adbench/sections/figures.py: the figures the paper
includes), the context from the sections' context functions; it renders, copies the
figures beside paper.tex and compiles.  The template only lays it out: a main text of at most
twelve pages, per-condition detail in appendices after the references
(tests/test_paper_print.py).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

import jinja2

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from adbench.formatting import latex  # noqa: E402
from adbench.sections import figures as declared_figures  # noqa: E402
from adbench.sections import contexts  # noqa: E402
from adbench.sections import paper as declared_sections  # noqa: E402

LATEX_TOOLS = ("latexmk", "pdflatex", "bibtex")
INSTALL_HINT = (
    "render_paper.py needs latexmk, pdflatex and bibtex (TeX Live). Install them with\n"
    "  apt-get install --no-install-recommends texlive-latex-recommended texlive-latex-extra "
    "texlive-fonts-recommended texlive-science lmodern latexmk\n"
    "on Debian/Ubuntu, or run ./setup.sh (as root). Use --tex-only to render paper.tex alone."
)


def log(message: str) -> None:
    print(f"render_paper: {message}", file=sys.stderr, flush=True)


def figure_files(args) -> dict[str, str]:
    """The declared figures given on the command line, by figure name."""
    found = {f.name: getattr(args, dest(declared_figures.paper_option(f)))
             for f in declared_figures.in_paper()}
    return {name: path for name, path in found.items() if path}


def dest(option: str) -> str:
    return option.replace("-", "_")


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
    for item in declared_sections.declared_inputs():
        p.add_argument(f"--{item.name.replace('_', '-')}", dest=item.name, help=item.help,
                       required=item.required, **({"action": "append", "default": []}
                                                  if item.many else {}))
    for figure in declared_figures.in_paper():
        p.add_argument(f"--{declared_figures.paper_option(figure)}",
                       required=declared_figures.paper_requires(figure),
                       help=f"{figure.name}.pdf: {figure.what}")
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
    figures = figure_files(args)
    inputs = contexts.PaperInputs(args, figures)
    context = {**contexts.build(inputs), "bibliography": Path(args.bib).stem}
    template = Path(args.template)
    tex = folder / "paper.tex"
    tex.write_text(make_environment(template.parent).get_template(template.name).render(**context))
    log(f"wrote {tex}")
    for figure in [*figures.values(), *contexts.section_files(inputs)]:
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
