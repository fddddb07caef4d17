"""adbench.formatting: how every number, ratio, interval, ± and unit is written."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from adbench import formatting as fmt

NAN = math.nan


def test_numbers_keep_three_significant_digits():
    assert fmt.number(0.93391) == "0.934"
    assert fmt.number(2449.6) == "2450"
    assert fmt.number(0.0240123) == "0.0240"
    assert fmt.number(1.23456, 3) == "1.235"
    assert fmt.number(NAN) == fmt.number(None) == fmt.number("text") == "n/a"
    assert fmt.number(math.inf) == "inf"  # a ratio over a zero time must not crash the paper


def test_plus_minus_takes_the_means_decimals():
    assert fmt.pm(686.2, 21.4) == "686 ± 21"
    assert fmt.pm(686.2, NAN) == "686"  # one seed: no spread
    assert fmt.pm(NAN, 21.4) == "n/a"
    assert fmt.pm(0.9339, 0.1104) == "0.934 ± 0.110"
    assert fmt.pm(11.179, 0.3152) == "11.2 ± 0.3"
    assert fmt.pm(686.2, 21.4, tex=True) == r"686 $\pm$ 21"


def test_a_published_cell_is_printed_as_the_study_wrote_it():
    assert fmt.verbatim_pm("11698", "1079") == "11698 ± 1079"
    assert fmt.verbatim_pm("45.0729", "") == "45.0729"
    assert fmt.verbatim_pm("5.36", NAN, tex=True) == "5.36"
    assert fmt.verbatim_pm("", "3", tex=True) == "--"
    assert fmt.verbatim_pm("1_000", "2", tex=True) == r"1\_000 $\pm$ 2"


def test_ratios_and_intervals_one_rule_plain_and_latex():
    assert fmt.ratio(1.234) == "1.23"
    assert fmt.ratio(0.25) == "0.250" and fmt.ratio(709.4) == "709"
    assert fmt.ratio(1.234, 1.1, 1.35) == "1.23 [1.10, 1.35]"
    assert fmt.ratio(1.234, 1.1, 1.35, tex=True) == r"1.23\,{\scriptsize[1.10, 1.35]}"
    assert fmt.ratio(1.234, NAN, 1.35) == "1.23"  # half an interval is none
    assert fmt.ratio(NAN, 1.1, 1.35) == "n/a"
    row = pd.Series({"task_ratio": 0.5, "task_ratio_low": 0.45, "task_ratio_high": 0.55})
    assert fmt.ratio_of(row, "task_ratio") == "0.500 [0.450, 0.550]"
    assert fmt.ratio_of({"improvement": 2.0}, "improvement", tex=True) == "2.00"


def test_spans_factors_percentages_and_scientific_numbers():
    assert fmt.span([1.5, 1.3, NAN]) == "1.30–1.50"
    assert fmt.span([1.5, 1.3], tex=True) == "1.30--1.50"
    assert fmt.span([1.501, 1.499]) == "1.50" and fmt.span([NAN]) == "n/a"
    assert fmt.factor(48.3) == "48" and fmt.factor(4.9) == "4.9" and fmt.factor(None) == "n/a"
    assert fmt.percent(0.95) == "95%" and fmt.percent(0.1, tex=True) == r"10\%"
    assert fmt.percent(0.002, places=None, tex=True) == r"0.200\%"
    assert fmt.percent(None) == "n/a"
    assert fmt.scientific(1.2e-6) == "1.2e-06"
    assert fmt.scientific(3e-4, tex=True) == r"\num{3.0e-04}"


def test_units_blocks_and_shapes():
    assert fmt.unit_scale("us") == 1e6 and fmt.unit_scale("1e-5 s") == 1e5
    assert fmt.unit_text("us") == "µs" and fmt.unit_text("us", tex=True) == r"\si{\micro\second}"
    assert fmt.unit_text("furlong", tex=True) == "furlong"
    assert fmt.microseconds(1.5e-7) == "0.150" and fmt.milliseconds(None) == "n/a"
    assert fmt.block("cpu", 1) == "cpu, 1 thread" and fmt.block("cuda", 4) == "cuda, 4 threads"
    assert fmt.shape_text((3, 32, 32)) == "3×32×32"


@pytest.mark.parametrize(
    "text, escaped",
    [
        ("x_1 at 100% & #2 costs $3", r"x\_1 at 100\% \& \#2 costs \$3"),
        (
            "{a} C:\\tmp ~user 2^10",
            r"\{a\} C:\textbackslash{}tmp \textasciitilde{}user 2\textasciicircum{}10",
        ),
        ("10 µs ± 3 × 2", r"10 \textmu{}s $\pm$ 3 $\times$ 2"),
        ("Théano ☃", "Theano ?"),
        ("‖y − f(x)‖₂", r"$\|$y $-$ f(x)$\|$$_{2}$"),
        ("10⁻⁵ s, x²", r"10$^{-5}$ s, x$^{2}$"),
        ("Xeon® Platinum™", r"Xeon\textregistered{} Platinum\texttrademark{}"),
    ],
)
def test_latex_escapes_specials_and_folds_unknown_glyphs(text, escaped):
    assert fmt.latex(text) == escaped


def test_every_unit_and_loss_reaches_latex_without_a_caret_or_a_folded_glyph():
    """What the tables' captions and the models' table print: no literal '^' (a unit's
    exponent is a script) and no '?' of a glyph pdflatex cannot set."""
    from adbench.report_spec import LOSS_TEXT

    for text in [*fmt.UNIT_TEXT.values(), *LOSS_TEXT.values()]:
        escaped = fmt.latex(text)
        assert "?" not in escaped and "textasciicircum" not in escaped, (text, escaped)


def test_missing_numbers_and_blank_text():
    assert fmt.missing(None) and fmt.missing(NAN) and fmt.missing("n/a")
    assert not fmt.missing(0) and not fmt.missing("1.5")
    assert fmt.blank(None) and fmt.blank(NAN) and fmt.blank("")
    assert not fmt.blank("n/a") and not fmt.blank(0)


def test_joined_lists_items_as_prose():
    assert fmt.joined(["1"]) == "1"
    assert fmt.joined(["1", "2"]) == "1 and 2"
    assert fmt.joined(["1", "2", "4"], " or ") == "1, 2 or 4"
