#!/usr/bin/env python
"""How a derivative's cost grows: the scaling table of a results tree and its figures.

    python workflow/scripts/scaling.py --cells results/aggregate/cells.parquet \
        --bootstrap results/aggregate/bootstrap.parquet --peak results/scaling/peak.json \
        --table results/tables/scaling.csv \
        [--figure threads=results/figures/scaling_threads.pdf ...]

    # an axis across trees (the batch sweep: one batch size per tree)
    python workflow/scripts/scaling.py --tables results-sweep-batch/b*/tables/scaling.csv \
        --figure batch_size=results-sweep-batch/scaling_batch_size.pdf

The table (adbench.scaling): per condition the cheap-gradient ratio (step / forward) with
its interval and verdict against the bound, FLOPs per step, the achieved GFLOP/s and its
fraction of the measured matmul peak.  A figure per sweep axis in ADBench's style: log-log,
points joined along the axis, one series per (framework, mode) and whatever else varies,
one legend below its three panels: the step time, the cheap-gradient ratio (the bound
drawn) and the fraction of the peak.
"""

from __future__ import annotations

import argparse
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from adbench import formatting as fmt  # noqa: E402
from adbench import scaling  # noqa: E402
from figures import legend_rows  # noqa: E402

MS = fmt.unit_scale("ms")
# The three panels of a figure: (column, its interval's columns or None, axis label).
PANELS = (
    ("step_s", None, "step (ms)"),
    ("cheap_gradient_ratio", ("cheap_gradient_ratio_low", "cheap_gradient_ratio_high"),
     "step / forward"),
    ("fraction_of_peak", None, "GFLOP/s / matmul peak"),
)


def draw_axis(table: pd.DataFrame, axis: str, paths: list[str]) -> None:
    """The figure of one sweep axis: log-log, a point per condition, joined per series."""
    fig, axes = plt.subplots(1, len(PANELS), figsize=(10, 3.6))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (label, rows) in enumerate(scaling.series(table, axis)):
        colour = colours[i % len(colours)]
        for ax, (column, interval, _) in zip(axes, PANELS):
            draw_series(ax, rows, axis, column, interval, colour, label)
    for ax, (column, _, ylabel) in zip(axes, PANELS):
        ax.set_xscale("log", base=2 if axis == "threads" else 10)
        ax.set_xlabel(scaling.AXES[axis])
        ax.set_ylabel(ylabel)
        if ax.has_data():
            ax.set_yscale("log")
        if column == "cheap_gradient_ratio":
            ax.axhline(scaling.CHEAP_GRADIENT_BOUND, color="grey", ls="--", lw=0.8,
                       label=f"cheap-gradient bound ({scaling.CHEAP_GRADIENT_BOUND:g})")
            ax.set_ylim(*ratio_limits(scaling.along(table, axis)[column]))
        if not ax.has_data():
            ax.text(0.5, 0.5, "n/a: not measured", ha="center", va="center",
                    transform=ax.transAxes, fontsize=8, color="grey")
    one_legend(fig, axes)
    ticks = sorted(scaling.along(table, axis)[axis].unique())
    for ax in axes:  # the sweep's own points on x; 1, 2 and 5 times a power of ten on y
        ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
        ax.xaxis.set_minor_locator(NullLocator())
        if ax.get_yscale() == "log":
            low, high = ax.get_ylim()
            decades = math.log10(high / low) if low > 0 else 0
            ax.yaxis.set_major_locator(LogLocator(subs=(1, 2, 5) if decades < 3 else (1,)))
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            ax.yaxis.set_minor_locator(NullLocator())
    fig.tight_layout(rect=(0, legend_rows(fig), 1, 1))
    for path in paths:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        fig.savefig(path)
    plt.close(fig)


def ratio_limits(ratios: pd.Series) -> tuple[float, float]:
    """The ratio panel's range: 1 (a free derivative), the bound and every point in view; an
    interval reaching further (two processes give wide ones) runs off the panel."""
    points = ratios[ratios > 0]
    low = min(0.8, points.min() / 1.5) if len(points) else 0.8
    high = max(2 * scaling.CHEAP_GRADIENT_BOUND, points.max() * 1.5 if len(points) else 0)
    return low, high


def one_legend(fig, axes) -> None:
    """Every series of every panel once, below the panels, in columns wide enough for the
    labels (figures.figure_legend's four would run off the page here)."""
    found = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            found.setdefault(label, handle)
    if found:
        fig.legend(list(found.values()), list(found), loc="lower center", fontsize=7,
                   ncol=min(3, len(found)), bbox_to_anchor=(0.5, 0))


def draw_series(ax, rows: pd.DataFrame, axis: str, column: str, interval, colour, label):
    """A series' points (with their intervals) joined by a thin line, where measured."""
    shown = rows.dropna(subset=[column])
    shown = shown[shown[column] > 0]
    if shown.empty:
        return
    scale = MS if column == "step_s" else 1.0
    y = shown[column] * scale
    error = None
    if interval is not None:
        low, high = (shown[c] * scale for c in interval)
        error = [(y - low).clip(lower=0).fillna(0), (high - y).clip(lower=0).fillna(0)]
    ax.errorbar(shown[axis], y, yerr=error, fmt="o-", ms=4, lw=0.8, capsize=2,
                color=colour, label=label)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cells", help="aggregate/cells.parquet of the tree")
    p.add_argument("--bootstrap", help="aggregate/bootstrap.parquet of the tree")
    p.add_argument("--peak", action="append", default=[], help="scaling/peak.json or "
                   "peak_cuda.json (measure_peak.py); repeatable")
    p.add_argument("--confidence", type=float, default=0.95)
    p.add_argument("--table", help="the scaling table to write (CSV)")
    p.add_argument("--tables", nargs="+", help="scaling tables to draw instead (several "
                   "trees: the batch axis)")
    p.add_argument("--figure", action="append", default=[], metavar="AXIS=PATH",
                   help=f"a figure of one axis ({', '.join(scaling.AXES)}); repeatable, "
                   "also for a second format of the same axis")
    args = p.parse_args(argv)
    if bool(args.tables) == bool(args.cells):
        p.error("give either --cells, --bootstrap, --peak and --table, or --tables")
    if args.cells and not (args.bootstrap and args.table):
        p.error("--cells needs --bootstrap and --table (--peak where CPU cells ran)")
    for figure in args.figure:
        if figure.partition("=")[0] not in scaling.AXES or "=" not in figure:
            p.error(f"--figure {figure}: AXIS=PATH with AXIS one of {', '.join(scaling.AXES)}")
    return args


def figures_by_axis(figures: list[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for figure in figures:
        axis, _, path = figure.partition("=")
        out.setdefault(axis, []).append(path)
    return out


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.tables:
        table = pd.concat([pd.read_csv(t) for t in args.tables], ignore_index=True)
    else:
        table = scaling.scaling_table(pd.read_parquet(args.cells),
                                      pd.read_parquet(args.bootstrap),
                                      scaling.read_peaks(args.peak),
                                      args.confidence)
        os.makedirs(os.path.dirname(args.table) or ".", exist_ok=True)
        table.to_csv(args.table + ".tmp", index=False)
        os.replace(args.table + ".tmp", args.table)
        print(f"{args.table}: {len(table)} conditions")
    for axis, paths in figures_by_axis(args.figure).items():
        draw_axis(table, axis, paths)
        print(f"{axis}: {', '.join(paths)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
