#!/usr/bin/env python
"""Draw the run's figures (adbench.sections.figures.FIGURES), each by its own module.

    python workflow/scripts/figures.py --iterations results/aggregate/iterations.parquet \
        --first 30 --out results/figures/first_iterations.pdf --out ....png \
        [--summary results/aggregate/summary.parquet --cells results/aggregate/cells.parquet \
         --conditions results/aggregate/conditions.parquet --published report/published \
         --<name>-out results/figures/<name>.pdf --<name>-out ....png ...]

The first iterations are always drawn (--out); every other declared figure where its
--<name>-out is given.  What each draws is its module's docstring
(adbench/sections/figure_<name>.py); what they share, adbench/sections/drawing.py.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import pandas as pd  # noqa: E402

from adbench import comparisons  # noqa: E402
from adbench.sections import drawing  # noqa: E402
from adbench.sections import figures as declared  # noqa: E402

FIRST = declared.ALWAYS  # drawn always, to --out


def optional_figures() -> list:
    """The declared figures drawn only where asked for (--<name>-out)."""
    return [f for f in declared.FIGURES if f.name != FIRST]


# The figures drawn where asked for, by name (tests/fabricated.py gives every one's option).
FIGURES = tuple(f.name for f in declared.FIGURES if f.name != FIRST)


def draw(name: str, data: drawing.FigureData):
    """A declared figure, drawn by its module."""
    return importlib.import_module(declared.by_name(name).module).draw(data)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--iterations", required=True)
    p.add_argument("--first", type=int, default=30)
    p.add_argument("--out", action="append", required=True, help="repeat for each format")
    p.add_argument("--summary", help="summary.parquet: needed for the figures of the tables")
    p.add_argument("--cells", help="cells.parquet: cells not completed, times to first step, "
                   "memory")
    p.add_argument("--conditions", help="conditions.parquet (compare.py): the points' intervals "
                   "(none without)")
    p.add_argument("--confidence", type=float, default=0.95, help="the intervals' level")
    p.add_argument("--published", help="report/published: the study's numbers")
    for figure in optional_figures():
        p.add_argument(f"--{figure.out_option}", action="append", default=[],
                       help=f"{figure.what}; repeat for each format")
    args = p.parse_args(argv)
    for figure in optional_figures():
        for need in figure.needs if outputs(args, figure) else ():
            if getattr(args, need) is None:
                p.error(f"--{figure.out_option} needs --{need}")
    return args


def outputs(args, figure) -> list[str]:
    return getattr(args, figure.out_option.replace("-", "_"))


def main(argv=None) -> int:
    args = parse_args(argv)
    data = drawing.FigureData(
        iterations=pd.read_parquet(args.iterations),
        first=args.first,
        summary=pd.read_parquet(args.summary) if args.summary else None,
        cells=pd.read_parquet(args.cells) if args.cells else None,
        found=(comparisons.estimates(pd.read_parquet(args.conditions), "mean")
               if args.conditions else drawing.NO_INTERVALS),
        confidence=args.confidence,
        published=args.published,
    )
    drawing.save(draw(FIRST, data), args.out)
    for figure in optional_figures():
        if outputs(args, figure):
            drawing.save(draw(figure.name, data), outputs(args, figure))
    return 0


if __name__ == "__main__":
    sys.exit(main())
