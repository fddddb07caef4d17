#!/usr/bin/env python
"""The study's Figure 3: step time of the first iterations, per framework and mode.

    python workflow/scripts/figures.py --iterations results/aggregate/iterations.parquet \
        --first 30 --out results/figures/first_iterations.pdf --out ....png

Compiled modes come first (their first calls trace and optimise); eager modes are drawn
beside them for contrast. One line per model, first seed, log scale; warm-up shaded.
"""

from __future__ import annotations

import argparse
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from adbench.spec import FRAMEWORKS, MODELS  # noqa: E402


def panels(iterations: pd.DataFrame) -> list[tuple[str, str]]:
    present = set(zip(iterations["framework"], iterations["mode"]))
    ordered = [(f, m) for f, info in FRAMEWORKS.items() for m in info.modes if (f, m) in present]
    return sorted(ordered, key=lambda fm: not FRAMEWORKS[fm[0]].modes[fm[1]].compiled)


def plot(iterations: pd.DataFrame, first: int):
    seed = iterations["seed"].min()
    data = iterations[(iterations["seed"] == seed) & (iterations["iteration"] < first)]
    # One figure per (device, threads) would multiply panels; draw the first condition.
    condition = data[["device", "threads"]].drop_duplicates().sort_values(["device", "threads"])
    device, threads = condition.iloc[0]
    data = data[(data["device"] == device) & (data["threads"] == threads)]
    pairs = panels(data)
    columns = min(2, len(pairs))  # 2 x 2 for the four modes: legible at a page's width
    n_rows = -(-len(pairs) // columns)
    fig, axes = plt.subplots(n_rows, columns, figsize=(3.4 * columns, 2.6 * n_rows + 0.4),
                             sharey=True, squeeze=False)
    for ax in axes.flat[len(pairs):]:
        ax.set_visible(False)
    for ax, (framework, mode) in zip(axes.flat, pairs):
        cell = data[(data["framework"] == framework) & (data["mode"] == mode)]
        warm = cell.loc[cell["phase"] == "warmup", "iteration"]
        if len(warm):
            ax.axvspan(-0.5, warm.max() + 0.5, color="0.9", label="warm-up")
        for model in [m for m in MODELS if m in set(cell["model"])]:
            rows = cell[cell["model"] == model].sort_values("iteration")
            ax.plot(rows["iteration"], rows["step_s"] * 1e3, marker=".", lw=1,
                    label=MODELS[model].label)
        info = FRAMEWORKS[framework]
        ax.set_title(f"{info.label} {info.modes[mode].label}", fontsize=9)
        ax.set_yscale("log")
        ax.set_xlabel("iteration")
    for row in axes:
        row[0].set_ylabel("step time (ms)")
    axes.flat[0].legend(fontsize=7)
    fig.suptitle(f"First {first} iterations, seed {seed}, {device}, {threads} thread(s)",
                 fontsize=9)
    fig.tight_layout()
    return fig


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--iterations", required=True)
    p.add_argument("--first", type=int, default=30)
    p.add_argument("--out", action="append", required=True, help="repeat for each format")
    args = p.parse_args(argv)
    fig = plot(pd.read_parquet(args.iterations), args.first)
    for path in args.out:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        fig.savefig(path, dpi=150)
    return 0


if __name__ == "__main__":
    sys.exit(main())
