"""The paper checks of issue 47 (tests/paper_checks.py) find each planted case and pass a
clean one: a '?' or '^' LaTeX printed that the text did not mean, type under 7 pt, a
paragraph written twice.  One case compiled, so the check reads what pdftotext gives."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

import paper_checks
from adbench import formatting as fmt
from paper_checks import Paper

CLEAN_TEX = (r"\begin{document}" "\nDoes it hold? We ask whether it does (it does?).\n"
             r"\end{document}")


def paper_of(tex: str, text: str) -> Paper:
    return Paper(Path("."), tex, "", [text], text)


def test_a_clean_paper_passes():
    clean = paper_of(CLEAN_TEX, "Does it hold? We ask whether it does (it does?).")
    assert paper_checks.unset_characters(clean) == []
    assert paper_checks.small_type(CLEAN_TEX) == []
    assert paper_checks.repeated_paragraphs(clean) == []


@pytest.mark.parametrize("printed", [
    "the loss ?y ? f(x)?2 of the MLPs",          # glyphs folded to '?' (Table 21's loss)
    "as Table ?? shows",                          # an undefined reference
])
def test_a_question_mark_that_ends_no_question_is_found(printed):
    found = paper_checks.unset_characters(paper_of(CLEAN_TEX + printed, printed))
    assert found and all("?" in f for f in found)


def test_a_question_mark_the_tex_does_not_write_is_found():
    """LaTeX's own '?' (a reference it could not resolve) after a word still counts: the
    .tex writes none there."""
    found = paper_checks.unset_characters(paper_of("Table \\ref{x} shows", "Table? shows"))
    assert found == ["1 '?' in the PDF that the .tex does not write"]


def test_a_literal_caret_is_found():
    found = paper_checks.unset_characters(paper_of(CLEAN_TEX, "in 10^-5 s per step"))
    assert found == ["literal '^': ...in 10^-5 s per step..."]


def test_tiny_type_is_found_and_the_annotations_size_is_not():
    assert paper_checks.small_type(r"1.23\,{\tiny[1.10, 1.35]}")
    assert paper_checks.small_type(fmt.ratio(1.23, 1.1, 1.35, tex=True)) == []
    assert paper_checks.small_type(r"% {\tiny a comment}") == []


def test_a_paragraph_written_twice_on_one_page_is_found_and_one_pages_apart_is_not():
    paragraph = ("The claim is \\textbf{not measured} (n/a, n/a; the rule of Section~\\ref{m}). "
                 "No comparison of this claim was measured in this run.")
    printed = ("The claim is not measured (n/a, n/a; the rule of Section 2). No comparison "
               "of this claim was measured in this run.")
    tex = "\\begin{document}\n" + "\n\n".join(["Intro.", paragraph, "Other.", paragraph]) + "\n"
    one_page = Paper(Path("."), tex, "", [f"Intro. {printed} Other. {printed}"], "")
    (found,) = paper_checks.repeated_paragraphs(one_page)
    assert found.startswith("page 1: The claim is not measured")
    two_pages = Paper(Path("."), tex, "", [f"Intro. {printed}", f"Other. {printed}"], "")
    assert paper_checks.repeated_paragraphs(two_pages) == []


def test_a_paragraph_is_written_twice_only_outside_tables_and_at_length():
    paragraph = ("The claim is not measured (n/a, n/a; the rule of Section 2). No comparison "
                 "of this claim was measured in this run.")
    doubled = "\\begin{document}\n" + paragraph + "\n\n" + paragraph + "\n"
    assert paper_checks.written_twice(doubled) == [paragraph]
    table = "\\begin{table}\n" + paragraph + "\n\\end{table}\n\n"
    assert paper_checks.written_twice("\\begin{document}\n" + table + paragraph) == []
    # a flagged cell shown in two tables: each table's notes carry its note
    note = ("\\begin{tablenotes}\nHIPS autograd (eager), RNN cell, backward: noisy in 1 of 1 "
            "seeds (step IQR / median above 10 percent) and so on\n\\end{tablenotes}\n\n")
    assert paper_checks.written_twice("\\begin{document}\n" + note + "Text.\n\n" + note) == []
    assert paper_checks.written_twice("\\begin{document}\nNot measured.\n\nNot measured.\n") == []


def test_every_new_check_is_in_the_list():
    tex = CLEAN_TEX.replace("\\end{document}", "\\appendix\\section{Every}\n\\end{document}")
    found = paper_checks.all_checks(paper_of(tex, "in 10^-5 s"))
    assert found["characters not set"] and found["type under 7 pt"] == []
    assert "paragraphs repeated" in found


@pytest.mark.latex
@pytest.mark.skipif(shutil.which("latexmk") is None or shutil.which("pdftotext") is None,
                    reason="latexmk and pdftotext (./setup.sh --test installs them)")
def test_the_check_reads_what_latex_printed(tmp_path):
    """Compiled: a glyph formatting.latex cannot set and a caret escaped as text are found in
    the PDF's text; the loss and the unit as formatting.latex now writes them are not."""
    from adbench.report_spec import LOSS_TEXT

    def compiled(body: str) -> Paper:
        (tmp_path / "paper.tex").write_text(
            "\\documentclass{article}\\usepackage[T1]{fontenc}\\usepackage{siunitx}"
            "\\begin{document}\n" + body + "\n\\end{document}\n")
        for name in ("paper.pdf", "paper.log", "paper.aux", "paper.fdb_latexmk"):
            (tmp_path / name).unlink(missing_ok=True)
        subprocess.run(["latexmk", "-pdf", "-interaction=nonstopmode", "paper.tex"],
                       cwd=tmp_path, capture_output=True)
        return Paper.read(tmp_path / "paper.pdf")

    bad = compiled(f"The loss {fmt.latex('☃')} and 10\\textasciicircum{{}}-5 s.")
    found = paper_checks.unset_characters(bad)
    assert any("ends no question" in f for f in found)
    assert any("literal '^'" in f for f in found)
    good = compiled(f"The loss {fmt.latex(LOSS_TEXT['l2'])}, in "
                    f"{fmt.latex(fmt.unit_text('1e-5 s'))} or {fmt.unit_text('1e-5 s', tex=True)}.")
    assert paper_checks.unset_characters(good) == []
