"""How the tables, the figures and the paper write numbers, ratios, intervals, ± and units.

One home, so that a number reads the same wherever it is printed.  Every function writes plain
text; `tex=True` gives the form the paper's LaTeX needs (escaped, siunitx units and numbers,
an interval in small type inside a table cell).  A number that is missing reads "n/a".

The rules: measured numbers and ratios keep three significant digits ("686", "0.934", "1.23",
"0.0240", "709"), an sd takes its mean's decimals ("686 ± 21"), an interval's ends keep
their own ("1.23 [1.10, 1.35]"), a rough factor is whole from 10 up ("48", "4.9"), a share is
a whole percentage ("10%").
"""

from __future__ import annotations

import math
import re
import unicodedata

NA = "n/a"
NOTHING = "–"  # a published cell the study left empty
PLUS_MINUS = "±"
# The type of an annotation inside a table cell (an interval, an sd, n): \scriptsize, 7 pt in
# the paper's 10 pt class, the smallest a printed page reads (\tiny's 5 pt does not).
ANNOTATION = r"\scriptsize"

# Seconds -> a unit the study printed its tables in (spec.TableInfo.unit), and its name.
UNIT_SCALE = {"s": 1.0, "ms": 1e3, "us": 1e6, "1e-5 s": 1e5}
UNIT_TEXT = {"s": "s", "ms": "ms", "us": "µs", "1e-5 s": "10⁻⁵ s"}
UNIT_LATEX = {
    "s": r"\si{\second}",
    "ms": r"\si{\milli\second}",
    "us": r"\si{\micro\second}",
    "1e-5 s": r"$10^{-5}$\,\si{\second}",
}


# ----------------------------------------------------------------------------- missing values
def missing(value) -> bool:
    """A number that is not there: None, NaN, or text that is not a number."""
    try:
        return value is None or math.isnan(float(value))
    except (TypeError, ValueError):
        return True


def blank(value) -> bool:
    """Text that is not there: None, NaN (pandas' empty cell) or ''."""
    return value is None or (isinstance(value, float) and math.isnan(value)) or str(value) == ""


# ----------------------------------------------------------------------------- numbers
def decimals(value: float, digits: int = 3) -> int:
    """Decimals that show `digits` significant digits (none for numbers from 10**digits)."""
    if missing(value) or value == 0 or math.isinf(value):
        return 0
    return max(0, digits - 1 - math.floor(math.log10(abs(value))))


def number(value, places: int | None = None) -> str:
    """Three significant digits ('0.934', '2450'), or `places` decimals."""
    if missing(value):
        return NA
    return f"{value:.{decimals(value) if places is None else places}f}"


def pm(mean, sd, tex: bool = False) -> str:
    """'686 ± 21' in the study's style (sd with the mean's decimals); the mean alone when one
    seed gave no sd."""
    if missing(mean):
        return NA
    places = decimals(mean)
    text = number(mean, places) + ("" if missing(sd) else f" {PLUS_MINUS} {number(sd, places)}")
    return latex(text) if tex else text


def pm_stacked(mean, sd, mark: str = "") -> str:
    """LaTeX: a mean over its '± sd' in small type, one above the other (a narrow column of
    a wide table); the mean alone (with `mark`) where there is no sd."""
    if missing(mean) or missing(sd):
        return pm(mean, sd, tex=True) + mark
    places = decimals(mean)
    return (f"\\begin{{tabular}}[t]{{@{{}}c@{{}}}}{number(mean, places)}{mark}\\\\"
            f"{{{ANNOTATION}$\\pm$\\,{number(sd, places)}}}\\end{{tabular}}")


def verbatim_pm(mean, sd, tex: bool = False) -> str:
    """A published cell exactly as the study printed it: its mean, and '± sd' where it gave
    one; a dash where it gave nothing."""
    if blank(mean):
        text = NOTHING
    else:
        text = str(mean) + ("" if blank(sd) else f" {PLUS_MINUS} {sd}")
    return latex(text) if tex else text


def ratio(value, low=math.nan, high=math.nan, tex: bool = False) -> str:
    """'1.23', or '1.23 [1.10, 1.35]' with its interval; in LaTeX the interval is set small,
    '1.23\\,{\\scriptsize[1.10, 1.35]}' (ANNOTATION), to keep table columns narrow."""
    if missing(value):
        return NA
    if missing(low) or missing(high):
        return number(value)
    ends = f"[{number(low)}, {number(high)}]"
    return f"{number(value)}\\,{{{ANNOTATION}{ends}}}" if tex else f"{number(value)} {ends}"


def ratio_of(row, name: str, tex: bool = False) -> str:
    """A row's ratio `name` with its interval (columns <name>_low and <name>_high)."""
    return ratio(row.get(name), row.get(f"{name}_low"), row.get(f"{name}_high"), tex)


def span(values, tex: bool = False) -> str:
    """'1.30–1.50' over several ratios, a single value when they agree, 'n/a' when none."""
    values = sorted(float(v) for v in values if not missing(v))
    if not values:
        return NA
    low, high = number(values[0]), number(values[-1])
    text = low if low == high else f"{low}–{high}"
    return latex(text) if tex else text


def whole_span(values, tex: bool = False) -> str:
    """'2' or '1–5' over whole numbers (processes, iterations), 'n/a' when none."""
    values = sorted({int(v) for v in values if not missing(v)})
    if not values:
        return NA
    text = str(values[0]) if len(values) == 1 else f"{values[0]}–{values[-1]}"
    return latex(text) if tex else text


def factor(value) -> str:
    """A rough factor like the study's '~50x': whole numbers from 10 up, one decimal below."""
    return NA if missing(value) else f"{value:.0f}" if value >= 10 else f"{value:.1f}"


def percent(value, places: int | None = 0, tex: bool = False) -> str:
    """A share as a percentage: '95%' (whole), or three significant digits with places=None."""
    text = NA if missing(value) else f"{number(100 * value, places)}%"
    return latex(text) if tex else text


def percent_span(values, tex: bool = False) -> str:
    """'0.35–3.9%' over shares (the precision a median reached), two significant digits
    and no trailing zero ('2%'), a single value when they agree, 'n/a' when none."""
    values = sorted(100 * float(v) for v in values if not missing(v))
    if not values:
        return NA
    low, high = (f"{round(v, decimals(v, 2)):g}" for v in (values[0], values[-1]))
    text = f"{low}%" if low == high else f"{low}–{high}%"
    return latex(text) if tex else text


def cores(value) -> str:
    """CPU time over a window, in cores: '0.72' (two decimals: a reading's resolution is a
    clock tick per CPU, a hundredth of a core over a second)."""
    return number(value, 2)


def cores_span(values, tex: bool = False) -> str:
    """'0.41–0.93' cores over readings (cores), one value when they agree, 'n/a' when none."""
    values = sorted(float(v) for v in values if not missing(v))
    if not values:
        return NA
    low, high = cores(values[0]), cores(values[-1])
    text = low if low == high else f"{low}–{high}"
    return latex(text) if tex else text


def seconds(value) -> str:
    """A stated time in seconds, '5 s', '0.5 s'."""
    return NA if missing(value) else f"{float(value):g} s"


def scientific(value, tex: bool = False) -> str:
    """A small error or tolerance: '1.2e-06', for siunitx '\\num{1.2e-06}'."""
    if missing(value):
        return NA
    return f"\\num{{{value:.1e}}}" if tex else f"{value:.1e}"


# ----------------------------------------------------------------------------- units, counts
def unit_scale(unit: str) -> float:
    """Seconds -> `unit`."""
    return UNIT_SCALE[unit]


def unit_text(unit: str, tex: bool = False) -> str:
    """'µs' (plain), '\\si{\\micro\\second}' (LaTeX)."""
    if tex:
        return UNIT_LATEX.get(unit, latex(unit))
    return UNIT_TEXT.get(unit, unit)


def microseconds(seconds) -> str:
    return number(seconds * unit_scale("us")) if not missing(seconds) else NA


def milliseconds(seconds) -> str:
    return number(seconds * unit_scale("ms")) if not missing(seconds) else NA


def threads_text(n) -> str:
    """'1 thread', '4 threads'."""
    return counted(n, "thread")


def counted(n, noun: str, plural: str | None = None) -> str:
    """'1 process', '3 processes': a count with its noun in the right number."""
    return f"{n} {noun if str(n) == '1' else plural or noun + 's'}"


def joined(items: list[str], last: str = " and ") -> str:
    """'a', 'a and b', 'a, b and c' (`last`: what comes before the last item, e.g. ' or ')."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])}{last}{items[-1]}"


def difference_us(value, low=math.nan, high=math.nan, tex: bool = False) -> str:
    """A signed difference in microseconds, '+312 [250, 380]', as `ratio` sets intervals."""
    if missing(value):
        return NA
    signed = lambda v: ("+" if v > 0 else "") + number(v)  # noqa: E731
    if missing(low) or missing(high):
        return signed(value)
    ends = f"[{signed(low)}, {signed(high)}]"
    return f"{signed(value)}\\,{{{ANNOTATION}{ends}}}" if tex else f"{signed(value)} {ends}"


def block(device, threads, machine: str | None = None) -> str:
    """A (device, threads) block of the grid: 'cpu, 4 threads'; with the machine where a tree
    holds several: 'NVIDIA H100 (driver 580), Xeon: cuda, 1 thread'."""
    where = f"{device}, {threads_text(threads)}"
    return f"{machine}: {where}" if machine else where


def shape_text(shape) -> str:
    """'3×32×32'."""
    return "×".join(str(n) for n in shape)


# ----------------------------------------------------------------------------- LaTeX
_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "±": r"$\pm$",
    "µ": r"\textmu{}",
    "μ": r"\textmu{}",
    "×": r"$\times$",
    "→": r"$\to$",
    "–": "--",
    "—": "---",
    "…": r"\dots{}",
    "≤": r"$\le$",
    "≥": r"$\ge$",
    "§": r"\S{}",
    "‖": r"$\|$",
    "−": r"$-$",
    "®": r"\textregistered{}",
    "™": r"\texttrademark{}",
    "©": r"\textcopyright{}",
    "°": r"\textdegree{}",
}
# Super- and subscript characters, a run of them set as one LaTeX script ("10⁻⁵" -> 10$^{-5}$).
_SUPERSCRIPTS = dict(zip("⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺", "0123456789-+"))
_SUBSCRIPTS = dict(zip("₀₁₂₃₄₅₆₇₈₉₋₊", "0123456789-+"))
_SCRIPT_RUN = re.compile(f"[{''.join(_SUPERSCRIPTS)}]+|[{''.join(_SUBSCRIPTS)}]+")


def breakable(text: str) -> str:
    """LaTeX text (already escaped) that may break after a dot, slash, parenthesis, equals
    sign or underscore: a long API name or path in a narrow column, never over its edge."""
    text = text.replace(r"\_", "\\_\\allowbreak{}")
    return re.sub(r"([./(=])(?=[A-Za-z(\\])", r"\1\\allowbreak{}", text)


def latex(value) -> str:
    """Escape a text value for LaTeX: its special characters, super- and subscript runs as
    math scripts, and the few other characters pdflatex may not know folded to ASCII (an
    unknown glyph with no ASCII base reads '?', which the paper's checks report)."""
    text, out, at = str(value), [], 0
    for run in _SCRIPT_RUN.finditer(text):
        out.append(_escaped(text[at:run.start()]))
        script = run.group()
        if script[0] in _SUPERSCRIPTS:
            out.append("$^{" + "".join(_SUPERSCRIPTS[c] for c in script) + "}$")
        else:
            out.append("$_{" + "".join(_SUBSCRIPTS[c] for c in script) + "}$")
        at = run.end()
    out.append(_escaped(text[at:]))
    return "".join(out)


def _escaped(text: str) -> str:
    out = []
    for ch in text:
        if ch in _LATEX_SPECIAL:
            out.append(_LATEX_SPECIAL[ch])
        elif ord(ch) < 128:
            out.append(ch)
        else:  # an unknown glyph would stop the build: keep its ASCII base letter, or '?'
            out.append(unicodedata.normalize("NFKD", ch).encode("ascii", "ignore").decode() or "?")
    return "".join(out)
