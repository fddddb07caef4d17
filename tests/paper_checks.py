"""What a compiled paper is checked for (issue 40), on its .tex, its PDF's text and its LaTeX
log: read by tests/test_paper_print.py (fabricated trees of the shipped configs) and the
end-to-end tests (the tiny config's real run).

Each check returns what it found wrong (an empty list: nothing), so a failing test names it.
"""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
from pathlib import Path

from adbench import report_spec, spec

ROOT = Path(__file__).resolve().parents[1]
MAIN_PAGES = 12  # the main text's pages at most (the references may end on the 12th)
OVERFULL_PT = 3.0  # LaTeX may overrun the text by a hair; anything wider is lost off a page
LAST_APPENDIX = "Reproducing this paper"


@dataclasses.dataclass
class Paper:
    """A compiled paper: its folder's .tex, .log and the PDF's text page by page."""

    folder: Path
    tex: str
    log: str
    pages: list[str]
    layout: str  # the PDF's text laid out as printed: a table's row on one line

    @classmethod
    def read(cls, pdf: Path) -> "Paper":
        folder = pdf.parent
        text = subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True, text=True,
                              check=True).stdout
        layout = subprocess.run(["pdftotext", "-layout", str(pdf), "-"], capture_output=True,
                                text=True, check=True).stdout
        return cls(folder, (folder / "paper.tex").read_text(),
                   (folder / "paper.log").read_text(errors="replace"), text.split("\f"),
                   layout)

    @property
    def text(self) -> str:
        return "\n".join(self.pages)

    def page_of(self, pattern: str) -> int | None:
        """The first page (1-based) with a heading matching `pattern` (its number and its
        title may be lines apart in the text)."""
        for number, page in enumerate(self.pages, 1):
            if re.search(rf"(?:^|\n){pattern}\s*(?:\n|$)", page):
                return number
        return None

    def last_heading(self) -> re.Match | None:
        """The last appendix's heading: its title on a line of its own (its letter may be
        lines above it in the text)."""
        found = list(re.finditer(rf"(?m)^(?:[A-Z]\s+)?{LAST_APPENDIX}\s*$", self.text))
        return found[-1] if found else None

    def prose(self) -> str:
        """The PDF's text before its last appendix (the one that may name commands and
        files), its lines joined and words broken at a line's end mended."""
        end = self.last_heading()
        return joined(self.text[: end.start()] if end else self.text)

    def last_appendix(self) -> str:
        found = self.last_heading()
        return self.text[found.end():] if found else ""


def joined(text: str) -> str:
    return " ".join(re.sub(r"(\w)-\n(\w)", r"\1\2", text).split())


# ----------------------------------------------------------------------------- the pages
def first_appendix_title(tex: str) -> str:
    return re.search(r"\\appendix.*?\\section\{([^}]*)\}", tex, re.S)[1]


def main_text_problems(paper: Paper) -> list[str]:
    """The references start by page 12 and the appendices right after them."""
    references = paper.page_of(r"References")
    title = re.escape(first_appendix_title(paper.tex))
    appendix = paper.page_of(rf"A\s+{title}")
    found = []
    if references is None or references > MAIN_PAGES:
        found.append(f"the references start on page {references}")
    if appendix is None or appendix > MAIN_PAGES + 1:
        found.append(f"the appendices start on page {appendix}")
    if paper.last_heading() is None:
        found.append(f"no appendix '{LAST_APPENDIX}'")
    return found


# ----------------------------------------------------------------------------- lost off a page
def log_problems(log: str) -> list[str]:
    """Overfull boxes wider than a few points, any overfull vertical box, floats too large."""
    found = [f"overfull hbox {w} pt" for w in re.findall(r"Overfull \\hbox \(([\d.]+)pt", log)
             if float(w) > OVERFULL_PT]
    found += ["overfull vbox" for _ in re.findall(r"Overfull \\vbox", log)]
    found += ["float too large" for _ in re.findall(r"Float too large", log)]
    # a label defined twice (a longtable's repeated head) or a reference to none: a wrong or
    # "??" cross-reference in the PDF
    found += [f"label {name} multiply defined"
              for name in re.findall(r"Label `([^']*)' multiply defined", log)]
    found += [f"reference {name} undefined"
              for name in re.findall(r"Reference `([^']*)' on page \d+ undefined", log)]
    return found


_COMMENTED = re.compile(r"(?m)^(?:[^%\n]|\\%)*?(?<!\\)%[^\n]*?(\\(?:section|subsection|paragraph|"
                        r"label|caption|begin|end)\b[^\n]*)")


def commented_out(tex: str) -> list[str]:
    """Structure lost in a comment: a heading, label or environment after a '%' on its line
    (one template's last comment run into the next template's first line)."""
    return [m[1][:80] for m in _COMMENTED.finditer(tex)]


def headings_not_printed(paper: Paper) -> list[str]:
    """Every \\section of the .tex (outside a comment) that is not a heading of the PDF's
    text: its title on a line of its own, after its number or letter."""
    found = []
    for title in re.findall(r"(?m)^[^%\n]*\\section\{([^}]*)\}", paper.tex):
        heading = re.escape(title).replace("'", "['’]")  # the PDF's apostrophe is curly
        if paper.page_of(rf"(?:[A-Z0-9.]+\s+)?{heading}") is None:
            found.append(title)
    return found


_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?")
_ROW_END = re.compile(r"\\\\(?:\*)?\s*$|\\tabularnewline\s*$")


def table_rows(tex: str) -> list[list[str]]:
    """Each body row of each longtable, as the numbers it prints (marks and intervals
    included), in the order of the .tex."""
    rows = []
    for body in re.findall(r"\\endfoot(.*?)\\end\{longtable\}", tex, re.S):
        for line in body.splitlines():
            line = line.strip()
            if not _ROW_END.search(line) or line.startswith(("\\multicolumn", "\\addlinespace")):
                continue
            cells = re.sub(r"\$\^\{\\mathrm\{[^}]*\}\}\$|\\textsuperscript\{w\}|"
                           r"\\multicolumn\{\d+\}\{[^}]*\}|\\begin\{tabular\}\[t\]\{[^}]*\}",
                           "", line)
            cells = re.sub(r"\\num\{([\d.]+)e[-+]?\d+\}", r"\1", cells)  # printed a x 10^b
            numbers = _NUMBER.findall(cells.replace("\\,", " "))
            if numbers:
                rows.append(numbers)
    return rows


def rows_on_the_pages(paper: Paper, span: int = 1500) -> list[str]:
    """Every row of every longtable printed: its numbers found together in the PDF's laid
    out text (within `span` characters), in the .tex's order.  A row run off a page is not
    in the text: pdftotext drops what lies outside the page."""
    text = paper.layout
    missing, at = [], 0
    for numbers in table_rows(paper.tex):
        first = re.compile(rf"(?<![\d.]){re.escape(numbers[0])}(?![\d])")
        found = None
        for m in first.finditer(text, at):
            part = text[max(at, m.start() - span // 2):m.start() + span]
            if all(re.search(rf"(?<![\d.]){re.escape(n)}(?![\d])", part) for n in numbers):
                found = m.start()
                break
        if found is None:
            missing.append(" ".join(numbers))
        else:
            at = found
    return missing


# ----------------------------------------------------------------------------- the prose
_SNAKE = re.compile(r"(?<![\w/.-])[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+(?![\w/])")
_DOTTED = re.compile(r"(?<![\w.])[a-z][a-z0-9_]*(?:\.[a-z_][A-Za-z0-9_]*)+(?![\w])")
_PATH = re.compile(r"(?<![\w/])(?:[\w.-]+/)+[\w.-]*\.(?:py|md|csv|yaml|json|parquet|pdf|tex|"
                   r"j2|png|npz|log|txt)\b|(?<![\w/])(?:results|config|docs|workflow|report|"
                   r"tables|figures|aggregate|verdicts|benchmarks|envs|profiles)/|"
                   # a cell's keys joined as the code joins them: torch/eager/jacobian_rows
                   rf"(?<![\w/])(?:{'|'.join(spec.FRAMEWORKS)})/[a-z_]+(?:/[a-z0-9_]+)*")
# A reader's abbreviations, not code.
_ABBREVIATIONS = {"e.g", "i.e", "w.r.t", "et al", "cf"}


def allowed_words(paper: Paper) -> set[str]:
    """Words of code a paper may print outside its last appendix: the spec's own words (the
    frameworks' API names its labels and descriptions use), the study's and the claims'
    words, the machine's names as it reports them, and the figures' pictures (a computation
    graph names its ops)."""
    texts = [m.label for fw in report_spec.FRAMEWORK_TEXT.values() for m in fw.modes.values()]
    texts += [m.description for fw in report_spec.FRAMEWORK_TEXT.values()
              for m in fw.modes.values()]
    texts += [t.label + " " + t.description for t in report_spec.TASK_TEXT.values()]
    texts += [m.label + " " + m.choices for m in report_spec.MODEL_TEXT.values()]
    texts += list(report_spec.SEQUENCE_TEXT.values()) + list(report_spec.LOSS_TEXT.values())
    # the study's and the claims' words: claims.json's values (its keys are the code's names)
    texts += list(json_strings(json.loads(
        (ROOT / "report" / "published" / "claims.json").read_text())))
    texts += [p.read_text() for folder in (paper.folder, paper.folder.parent / "graphs")
              for p in folder.glob("*.dot")]  # the graphs' pictures: their ops' names
    texts += refusal_reasons()
    texts += [json.dumps(_environment(paper))]
    words = set()
    for text in texts:
        for pattern in (_SNAKE, _DOTTED, _PATH):
            words.update(pattern.findall(text))
    return words


def json_strings(value):
    """Every string value of a JSON document, not its keys."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from json_strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from json_strings(item)


def refusal_reasons() -> list[str]:
    """Why a backend refuses a cell, as it declares it (the framework's own words: a cell's
    n/a prints it)."""
    from adbench import backends

    return [r.reason for f in spec.FRAMEWORKS for r in backends.capabilities(f).refusals]


def _environment(paper: Paper) -> dict:
    """The machine facts the paper prints (aggregate's environment.json, beside the tree)."""
    found = list(paper.folder.parent.glob("aggregate/environment.json"))
    return json.loads(found[0].read_text()) if found else {}


def code_in_the_prose(paper: Paper, graph_words: set[str] = frozenset()) -> list[str]:
    """snake_case words, dotted module names and paths outside the last appendix that are
    not the spec's words (allowed_words); and the spec's keys of models and tasks where the
    paper should name them by their labels."""
    prose = paper.prose()
    allowed = allowed_words(paper) | set(graph_words)
    found = set()
    for pattern in (_SNAKE, _DOTTED, _PATH):
        found |= {w for w in pattern.findall(prose)
                  if w not in allowed and w.rstrip(".") not in _ABBREVIATIONS}
    keys = [k for k in (*spec.MODELS, *spec.TASKS)
            if ("_" in k or any(c.isdigit() for c in k))
            and k not in (report_spec.MODEL_TEXT.get(k) or report_spec.TASK_TEXT.get(k)).label]
    found |= {k for k in keys if re.search(rf"(?<![\w/]){re.escape(k)}(?![\w/])", prose)}
    return sorted(found)


# Phrases a template stitches when a sentence is built of parts: a doubled word, a name
# doubled in its own parenthesis, a parenthesis glued to the word before it, a sentence glued
# to the one before.
_STITCHED = {
    "doubled word": re.compile(r"\b([A-Za-z]{2,})\s+\1\b", re.I),
    "doubled phrase": re.compile(r"\b([\w']+ [\w']+),?\s*\((?:the\s+)?\1\b", re.I),
    "possessive doubled": re.compile(r"\b(\w+)'s (?:the )?\1\b", re.I),
    "glued parenthesis": re.compile(r"[a-z\]×%)][(][A-Z][a-z]"),
    "glued sentence": re.compile(r"\b[a-z]{3,}\.[A-Z][a-z]{2,}"),
}
_DOUBLED_OK = {"that that", "had had"}


def _environments(*names: str) -> re.Pattern:
    """The whole of each of these LaTeX environments, \\begin to its \\end."""
    return re.compile(rf"\\begin\{{({'|'.join(names)})\}}.*?\\end\{{\1\}}", re.S)


_FLOAT_NAMES = ("longtable", "table", "figure", "tabular")
_FLOATS = _environments(*_FLOAT_NAMES)
# the floats with the tables' footnotes (the paper's tablenotes): a note under each table
# that shows its cell is the table's own, not a paragraph printed twice
_TABLE_PARTS = _environments(*_FLOAT_NAMES, "tablenotes")
_KEEP = re.compile(r"\\(?:emph|textbf|paragraph|section|subsection|item|mbox|texttt)\*?"
                   r"(?:\[([^]]*)\])?\{([^{}]*)\}")
_MATH = {r"$\pm$": "±", r"$\times$": "×", r"$\mu$": "µ", r"\textmu{}": "µ", "--": "–"}


def tex_prose(tex: str) -> str:
    """The paper's sentences from its .tex, before the last appendix: tables and figures
    left out (their cells repeat words by design), commands kept as their text, a
    reference read as a number."""
    body = tex.split(r"\begin{document}")[-1].split(rf"\section{{{LAST_APPENDIX}}}")[0]
    body = re.sub(r"(?m)(?<!\\)%.*$", "", _FLOATS.sub(" ", body))
    body = re.sub(r"\\(?:ref|eqref)\{[^}]*\}", "1", body)
    body = re.sub(r"\\cite\{[^}]*\}", "[1]", body)
    body = re.sub(r"\$\^\{\\mathrm\{[^}]*\}\}\$|\\label\{[^}]*\}", "", body)
    for before, after in _MATH.items():
        body = body.replace(before, after)
    while _KEEP.search(body):
        body = _KEEP.sub(lambda m: f"{m[1] or ''} {m[2]} ", body)
    body = re.sub(r"\\[a-zA-Z]+\*?", " ", body).replace("~", " ").replace("{", "")
    return " ".join(body.replace("}", "").replace("\\,", " ").split())


def stitched_phrases(paper: Paper) -> list[str]:
    prose = tex_prose(paper.tex)
    found = []
    for name, pattern in _STITCHED.items():
        for m in pattern.finditer(prose):
            if m.group(0).lower() in _DOUBLED_OK:
                continue
            found.append(f"{name}: ...{prose[max(0, m.start() - 30):m.end() + 30]}...")
    return found


# "cell" is one process (a condition on one seed), "condition" a cell over its seeds.
_CELL_AS_CONDITION = re.compile(r"process(?:es)? per cell|seeds? per cell|cells? over (?:its|"
                                r"their) seeds|per cell over", re.I)


def cell_in_two_senses(paper: Paper) -> list[str]:
    return [m.group(0) for m in _CELL_AS_CONDITION.finditer(paper.prose())]


# ----------------------------------------------------------------------------- references
def unreferred_floats(tex: str) -> list[str]:
    """Every table and figure label the text never refers to (outside its own float)."""
    found = []
    for label in re.findall(r"\\label\{((?:tab|fig):[^}]+)\}", tex):
        here = tex.index(rf"\label{{{label}}}")
        start = max(tex.rfind(r"\begin{longtable}", 0, here), tex.rfind(r"\begin{figure}", 0,
                                                                          here),
                    tex.rfind(r"\begin{table}", 0, here))
        end = min(i for i in (tex.find(r"\end{longtable}", here), tex.find(r"\end{figure}", here),
                              tex.find(r"\end{table}", here)) if i >= 0)
        outside = tex[:start] + tex[end:]
        if rf"\ref{{{label}}}" not in outside and not re.search(
                rf"\\ref\{{{re.escape(label)}\}}", outside):
            found.append(label)
    return found


# ----------------------------------------------------------------------------- commands
def commands(paper: Paper) -> list[str]:
    """The commands of the last appendix as a reader copies them from the PDF (a command
    wrapped at the line's end continues on the next line: a word without spaces)."""
    found, going = [], False
    for line in (line.strip() for line in paper.last_appendix().splitlines()):
        if line.startswith("snakemake "):
            found.append(line)
            going = True
        elif going and re.fullmatch(r"[a-z0-9./-]*[a-z./-][a-z0-9./-]*", line):
            found[-1] += " " + line
        else:
            going = False
    return [" ".join(c.split()) for c in found]


def dry_run(command: str, timeout: int = 600) -> subprocess.CompletedProcess:
    """A copied command, dry: Snakemake plans it (-n) without taking the directory's lock."""
    words = command.split()
    assert words[0] == "snakemake", command
    return subprocess.run(["python3", "-m", "snakemake", *words[1:], "-n", "--nolock", "-q"],
                          cwd=ROOT, capture_output=True, text=True, timeout=timeout)


# ----------------------------------------------------------------------------- what LaTeX set
def _uncommented(tex: str) -> str:
    return re.sub(r"(?m)(?<!\\)%.*$", "", tex)


def _around(text: str, at: int, span: int = 30) -> str:
    return " ".join(text[max(0, at - span):at + span].split())


def _ends_a_question(text: str, at: int) -> bool:
    """Whether the '?' at `at` closes a question: after a word (or its closing bracket or
    quote), before a space, the end, or closing punctuation."""
    before = text[at - 1] if at else " "
    after = text[at + 1] if at + 1 < len(text) else " "
    return (before.isalpha() or before in ")'’\"”") and (after.isspace() or after in ")'’\"”,;")


def unset_characters(paper: Paper) -> list[str]:
    """Characters LaTeX did not set as meant, in the PDF's text: a '?' that ends no question
    (a glyph formatting.latex folded to '?', an undefined reference's '??'), more '?' than the
    .tex writes (LaTeX's own), and a literal '^' (an exponent written as text, not math)."""
    text = paper.text
    found = [f"'?' that ends no question: ...{_around(text, m.start())}..."
             for m in re.finditer(r"\?", text) if not _ends_a_question(text, m.start())]
    printed, written = text.count("?"), _uncommented(paper.tex).count("?")
    if printed > written:
        found.append(f"{printed - written} '?' in the PDF that the .tex does not write")
    found += [f"literal '^': ...{_around(text, m.start())}..." for m in re.finditer(r"\^", text)]
    return found


ANNOTATION_SIZES = ("\\tiny",)  # under 7 pt in the paper's 10 pt class (formatting.ANNOTATION)


def small_type(tex: str) -> list[str]:
    """Type under 7 pt in the .tex: an annotation a printed page does not read."""
    return [f"{size} ...{_around(tex, m.start())}..." for size in ANNOTATION_SIZES
            for m in re.finditer(re.escape(size) + r"(?![A-Za-z])", _uncommented(tex))]


REPEATED_WORDS = 15  # a paragraph this long written twice is a template's, not the author's


def written_twice(tex: str) -> list[str]:
    """The paragraphs of REPEATED_WORDS words or more that the .tex writes twice or more,
    verbatim (tables, their notes and figures left out, before the last appendix)."""
    body = tex.split(r"\begin{document}")[-1].split(rf"\section{{{LAST_APPENDIX}}}")[0]
    body = _uncommented(_TABLE_PARTS.sub("\n\n", body))
    paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n|\\par\b", body)]
    counts: dict[str, int] = {}
    for p in paragraphs:
        if len(p.split()) >= REPEATED_WORDS:
            counts[p] = counts.get(p, 0) + 1
    return [p for p, n in counts.items() if n > 1]


def repeated_paragraphs(paper: Paper) -> list[str]:
    """A paragraph written twice (written_twice) whose words a page of the PDF prints twice:
    a template's paragraph repeated per item, which reads as a printing fault (a table's
    note under two tables pages apart is not one)."""
    found = []
    for paragraph in written_twice(paper.tex):
        words = tex_prose("\\begin{document}" + paragraph).split()[:REPEATED_WORDS // 2]
        start = " ".join(words)
        twice = [n for n, page in enumerate(paper.pages, 1) if joined(page).count(start) > 1]
        if twice:
            found.append(f"page {twice[0]}: {start}...")
    return found


# ----------------------------------------------------------------------------- every check
def all_checks(paper: Paper) -> dict[str, list]:
    """Every check of a compiled paper, by name: what it found wrong (the commands' dry
    runs apart: they take seconds each)."""
    return {
        "main text": main_text_problems(paper),
        "LaTeX log": log_problems(paper.log),
        "rows off the page": rows_on_the_pages(paper),
        "code in the prose": code_in_the_prose(paper),
        "stitched phrases": stitched_phrases(paper),
        "cell as a condition": cell_in_two_senses(paper),
        "floats never referred to": unreferred_floats(paper.tex),
        "structure in a comment": commented_out(paper.tex),
        "headings not printed": headings_not_printed(paper),
        "characters not set": unset_characters(paper),
        "type under 7 pt": small_type(paper.tex),
        "paragraphs repeated": repeated_paragraphs(paper),
    }


def problems(paper: Paper) -> dict[str, list]:
    """all_checks' findings, only the checks that found something."""
    return {name: found for name, found in all_checks(paper).items() if found}
