"""What every figure script and the paper share about figures: the page they are printed on.

A figure is drawn at the size it is printed (the paper includes it at its own width, never
wider than the text), so a font size set here is the size a reader sees: no text below
MIN_FONT_PT.  A figure has at most MAX_PANELS panels.  The figures that draw the study's
tables draw those with its published numbers (the others' conditions are in the appendix
tables).  Matplotlib is imported by the figures' modules (adbench/sections/drawing.py and
figure_*.py), not here (render_paper reads the sizes without it).
"""

from __future__ import annotations

import re
from pathlib import Path

# The paper's text block (report/paper.tex.j2: letter paper, 2.2 cm margins), in inches.
TEXT_WIDTH_IN = (8.5 * 72 - 2 * 2.2 / 2.54 * 72) / 72  # 6.77
TEXT_HEIGHT_IN = (11 * 72 - 2 * 2.2 / 2.54 * 72) / 72  # 9.27
# A figure leaves room on its page for its caption.
MAX_FIGURE_HEIGHT_IN = 0.8 * TEXT_HEIGHT_IN
MIN_FONT_PT = 7.0
FONT_PT = 8.0  # labels and titles
SMALL_PT = 7.0  # ticks, legends, annotations
MAX_PANELS = 6
BP_PER_IN = 72.0
# The rcParams every figure is drawn with: the sizes above, no text smaller.
RC = {"font.size": FONT_PT, "axes.titlesize": FONT_PT, "axes.labelsize": FONT_PT,
      "xtick.labelsize": SMALL_PT, "ytick.labelsize": SMALL_PT, "legend.fontsize": SMALL_PT,
      "legend.title_fontsize": SMALL_PT, "figure.titlesize": FONT_PT,
      "pdf.fonttype": 42}


def legend_rows(fig) -> float:
    """The share of the figure's height its legend's rows take."""
    legend = fig.legends[0] if fig.legends else None
    rows = 0 if legend is None else -(-len(legend.get_texts()) // legend._ncols)
    line_in = 1.45 * SMALL_PT / BP_PER_IN
    return min(0.45, (rows * line_in + 0.1) / fig.get_figheight())


def figure_tables(figure: str) -> list:
    """The tables a figure of the study's tables draws: every table its declaration's rule
    picks, or, for a figure declared published_only, those with the study's published
    numbers where there are any (the Jacobian figure: the study's Tables 3-5, not every
    model's Jacobian of the appendix)."""
    from adbench.sections import figures as declared
    from adbench.tables import tables_drawn_in

    drawn = tables_drawn_in(figure)
    published = [t for t in drawn if t.published]
    return published if declared.by_name(figure).published_only and published else drawn


# ----------------------------------------------------------------------------- printed size
_MEDIABOX = re.compile(rb"/MediaBox\s*\[\s*([-\d.]+)\s+([-\d.]+)\s+([-\d.]+)\s+([-\d.]+)\s*\]")


def pdf_size_bp(path) -> tuple[float, float]:
    """A one-page PDF's width and height in big points (its first MediaBox)."""
    found = _MEDIABOX.search(Path(path).read_bytes())
    if found is None:
        raise ValueError(f"{path}: no MediaBox (not a PDF?)")
    x0, y0, x1, y1 = map(float, found.groups())
    return x1 - x0, y1 - y0


def printed_width_bp(path) -> float:
    """The width the paper prints a figure at: its own, shrunk only to fit the text block's
    width and the figure's share of its height."""
    width, height = pdf_size_bp(path)
    scale = min(1.0, TEXT_WIDTH_IN * BP_PER_IN / width,
                MAX_FIGURE_HEIGHT_IN * BP_PER_IN / height)
    return width * scale


def width_option(path) -> str:
    """\\includegraphics' width for a figure: 'Wbp', its printed width (the text's width for
    a file that is no PDF yet: a stand-in)."""
    try:
        return f"{printed_width_bp(path):.1f}bp"
    except (OSError, ValueError):
        return "\\linewidth"
