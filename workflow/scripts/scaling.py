#!/usr/bin/env python
"""How a derivative's cost grows: the scaling table of a results tree and its figures.

    python workflow/scripts/scaling.py --cells results/aggregate/cells.parquet \
        --comparisons results/aggregate/comparisons.parquet \
        --conditions results/aggregate/conditions.parquet --peak results/scaling/peak.json \
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
drawn) and the fraction of the peak, each point with its interval (the step's and the
rate's from the tree's conditions product, --conditions; none across trees), drawn at the
paper's text width (adbench.plotting).
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
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from adbench import formatting as fmt  # noqa: E402
from adbench import comparisons, plotting, scaling, scaling_section, stats  # noqa: E402
from adbench.claims import VERDICT_STATISTIC  # noqa: E402
from adbench.plotting import legend_rows  # noqa: E402

MS = fmt.unit_scale("ms")
plt.rcParams.update(plotting.RC)  # sizes as printed: the paper includes a figure at its own
# The three panels of a figure: (column, axis label); each point with its interval where
# the tree's conditions product gives one (interval_columns).
PANELS = (
    ("step_s", "step (ms)"),
    ("cheap_gradient_ratio", "step / forward"),
    ("fraction_of_peak", "GFLOP/s / matmul peak"),
)
ONE_PROCESS = comparisons.ITERATIONS


def with_intervals(table: pd.DataFrame, conditions: pd.DataFrame | None) -> pd.DataFrame:
    """The table with each panel's interval: the ratio's its own; the step's from the
    conditions product (its point, all of the condition's processes: the same statistic),
    and the rate's from the step's (a rate is FLOPs over a step); none without it."""
    out = table.assign(step_s_low=math.nan, step_s_high=math.nan, step_basis="")
    if conditions is not None and len(table):
        found = comparisons.estimates(conditions, VERDICT_STATISTIC)
        for i, r in out.iterrows():
            key = (*(r[f] for f in stats.CONDITION_FIELDS), "step_s")
            if key in found:
                point, low, high, basis = found[key]
                rate = r["fraction_of_peak"] * r["step_s"] / point
                out.loc[i, ["step_s", "step_s_low", "step_s_high", "step_basis",
                            "fraction_of_peak", "fraction_of_peak_low",
                            "fraction_of_peak_high"]] = (
                    point, low, high, basis, rate, rate * point / high, rate * point / low)
    out["cheap_gradient_basis"] = out.get("cheap_gradient_basis", "")
    return out


def interval_columns(column: str) -> tuple[str, str, str]:
    """(low, high, basis) columns of a panel's column."""
    if column == "cheap_gradient_ratio":
        return "cheap_gradient_ratio_low", "cheap_gradient_ratio_high", "cheap_gradient_basis"
    if column == "fraction_of_peak":
        return "fraction_of_peak_low", "fraction_of_peak_high", "step_basis"
    return "step_s_low", "step_s_high", "step_basis"


def draw_axis(table: pd.DataFrame, axis: str, paths: list[str],
              conditions: pd.DataFrame | None = None) -> None:
    """The figure of one sweep axis at the text's width: log-log, a point per condition
    with its interval (filled over processes, open over one process's iterations), joined
    per series."""
    table = with_intervals(table, conditions)
    fig, axes = plt.subplots(1, len(PANELS), figsize=(plotting.TEXT_WIDTH_IN, 2.9))
    series = scaling_section.series(table, axis)
    palette = plt.get_cmap("tab10" if len(series) <= 10 else "tab20").colors
    for i, (label, rows) in enumerate(series):
        for ax, (column, _) in zip(axes, PANELS):
            draw_series(ax, rows, axis, column, palette[i % len(palette)], label)
    for ax, (column, ylabel) in zip(axes, PANELS):
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
                    transform=ax.transAxes, color="grey")
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
    fig.tight_layout(rect=(0, legend_rows(fig), 1, 1), pad=0.3)
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
    """Every series of every panel once, below the panels, in as many columns as the widest
    label leaves room for in the figure's width; then the keys of the markers' fill."""
    found = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            found.setdefault(label, handle)
    bases = set().union(*(getattr(ax, "_adbench_bases", set()) for ax in axes))
    for basis, words in (("processes", "interval over processes"),
                         (ONE_PROCESS, "interval over one process's iterations")):
        if basis in bases:
            found[words] = Line2D([], [], marker="o", ms=4, color="k", ls="none",
                                  mfc="white" if basis == ONE_PROCESS else "k")
    if found:
        widest = max(len(label) for label in found) * 0.55 * plotting.SMALL_PT + 30
        columns = max(1, min(3, len(found), int(fig.get_figwidth() * 72 // widest)))
        fig.legend(list(found.values()), list(found), loc="lower center", frameon=False,
                   ncol=columns, bbox_to_anchor=(0.5, 0))


def draw_series(ax, rows: pd.DataFrame, axis: str, column: str, colour, label):
    """A series' points with their intervals, joined by a thin line, where measured: filled
    over processes, open over one process's iterations (no interval: the point alone)."""
    shown = rows.dropna(subset=[column])
    shown = shown[shown[column] > 0]
    if shown.empty:
        return
    scale = MS if column == "step_s" else 1.0
    y = shown[column] * scale
    low, high, basis = interval_columns(column)
    ax.plot(shown[axis], y, "-", lw=0.8, color=colour, label=label)
    for one, part in shown.groupby(shown[basis].fillna("") == ONE_PROCESS):
        part_y = part[column] * scale
        error = [(part_y - part[low] * scale).clip(lower=0).fillna(0),
                 (part[high] * scale - part_y).clip(lower=0).fillna(0)] \
            if low in part else None
        ax.errorbar(part[axis], part_y, yerr=error, fmt="o", ms=4, capsize=2, color=colour,
                    mfc="white" if one else colour)
        ax._adbench_bases = getattr(ax, "_adbench_bases", set()) | {
            ONE_PROCESS if one else "processes"}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cells", help="aggregate/cells.parquet of the tree")
    p.add_argument("--comparisons", help="aggregate/comparisons.parquet of the tree")
    p.add_argument("--conditions", help="aggregate/conditions.parquet of the tree")
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
        p.error("give either --cells, --comparisons, --conditions, --peak and --table, or "
                "--tables")
    if args.cells and not (args.comparisons and args.conditions and args.table):
        p.error("--cells needs --comparisons, --conditions and --table (--peak where CPU "
                "cells ran)")
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
                                      pd.read_parquet(args.comparisons),
                                      pd.read_parquet(args.conditions),
                                      scaling.read_peaks(args.peak))
        os.makedirs(os.path.dirname(args.table) or ".", exist_ok=True)
        table.to_csv(args.table + ".tmp", index=False)
        os.replace(args.table + ".tmp", args.table)
        print(f"{args.table}: {len(table)} conditions")
    conditions = pd.read_parquet(args.conditions) if args.conditions else None
    for axis, paths in figures_by_axis(args.figure).items():
        draw_axis(table, axis, paths, conditions)
        print(f"{axis}: {', '.join(paths)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
