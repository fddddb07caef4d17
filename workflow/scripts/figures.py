#!/usr/bin/env python
"""The study's Figure 3 (first iterations) and, optionally, a figure of the Jacobian timings.

    python workflow/scripts/figures.py --iterations results/aggregate/iterations.parquet \
        --first 30 --out results/figures/first_iterations.pdf --out ....png \
        [--summary results/aggregate/summary.parquet --cells results/aggregate/cells.parquet \
         --jacobians-out results/figures/jacobians.pdf --jacobians-out ....png]

First iterations: one panel per (framework, mode) of the spec present, compiled modes first
(their first calls trace and optimise); one line per (model, task), first seed, log scale,
warm-up shaded.  Which models and tasks: those of the first table of spec.TABLES that has
data (the study's MLP backward passes when present), so the panels stay legible however large
the grid; everything present when no table matches.

Jacobians: one panel per model with output-Jacobian cells, log-scale bars of the mean step time
per task and (framework, mode), n/a where a cell did not complete.
"""

from __future__ import annotations

import argparse
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from adbench import tables  # noqa: E402
from adbench.spec import FRAMEWORKS, MODELS, TASKS  # noqa: E402


# ----------------------------------------------------------------------------- selection rules
def pairs_present(data: pd.DataFrame) -> list[tuple[str, str]]:
    """(framework, mode) pairs present, in spec order."""
    present = set(zip(data["framework"], data["mode"]))
    return [(f, m) for f, info in FRAMEWORKS.items() for m in info.modes if (f, m) in present]


def panels(iterations: pd.DataFrame) -> list[tuple[str, str]]:
    """Compiled modes first: their first iterations are the point of the figure."""
    return sorted(pairs_present(iterations),
                  key=lambda fm: not FRAMEWORKS[fm[0]].modes[fm[1]].compiled)


def lines_of(cell: pd.DataFrame) -> list[tuple[str, str]]:
    """(model, task) pairs of a panel, in spec order."""
    present = set(zip(cell["model"], cell["task"]))
    ordered = [(m, t) for m in MODELS for t in TASKS if (m, t) in present]
    return ordered + sorted(present - set(ordered))


def first_condition(data: pd.DataFrame) -> tuple:
    """One figure per (device, threads) would multiply panels: draw the first condition."""
    condition = data[["device", "threads"]].drop_duplicates().sort_values(["device", "threads"])
    return tuple(condition.iloc[0])


def line_label(model: str, task: str, several_tasks: bool) -> str:
    label = MODELS[model].label if model in MODELS else model
    return f"{label}, {TASKS[task].label}" if several_tasks and task in TASKS else label


# ----------------------------------------------------------------------------- first iterations
def plot(iterations: pd.DataFrame, first: int):
    seed = iterations["seed"].min()
    data = iterations[(iterations["seed"] == seed) & (iterations["iteration"] < first)]
    device, threads = first_condition(data)
    data = tables.focus_rows(data[(data["device"] == device) & (data["threads"] == threads)])
    several_tasks = data["task"].nunique() > 1
    colours = {line: f"C{i}" for i, line in enumerate(lines_of(data))}  # same in every panel
    pairs = panels(data)
    columns = min(2, len(pairs))  # 2 x 2 for four modes: legible at a page's width
    n_rows = -(-len(pairs) // columns)
    fig, axes = plt.subplots(n_rows, columns, figsize=(3.4 * columns, 2.6 * n_rows + 0.4),
                             sharey=True, squeeze=False)
    for ax in axes.flat[len(pairs):]:
        ax.set_visible(False)
    for ax, (framework, mode) in zip(axes.flat, pairs):
        cell = data[(data["framework"] == framework) & (data["mode"] == mode)]
        warm = cell.loc[cell["phase"] == "warmup", "iteration"]
        if len(warm):
            ax.axvspan(-0.5, warm.max() + 0.5, color="0.9")
        for model, task in lines_of(cell):
            rows = cell[(cell["model"] == model) & (cell["task"] == task)]
            rows = rows.sort_values("iteration")
            ax.plot(rows["iteration"], rows["step_s"] * 1e3, marker=".", lw=1,
                    color=colours[(model, task)], label=line_label(model, task, several_tasks))
        info = FRAMEWORKS[framework]
        ax.set_title(f"{info.label} {info.modes[mode].label}", fontsize=9)
        ax.set_yscale("log")
        ax.set_xlabel("iteration")
    for row in axes:
        row[0].set_ylabel("step time (ms)")
    # Every line in the legend, also those missing from the first panel (a failed cell).
    handles = [Patch(color="0.9", label="warm-up")] + [
        Line2D([], [], color=colour, marker=".", lw=1, label=line_label(m, t, several_tasks))
        for (m, t), colour in colours.items()]
    axes.flat[0].legend(handles=handles, fontsize=7)
    fig.suptitle(f"First {first} iterations, seed {seed}, {device}, {threads} thread(s)",
                 fontsize=9)
    fig.tight_layout()
    return fig


# ----------------------------------------------------------------------------- Jacobians
def jacobian_tasks() -> list[str]:
    return [t for t, info in TASKS.items() if info.derivative == "jacobian"]


def jacobian_data(summary: pd.DataFrame, cells: pd.DataFrame | None):
    """Mean step times of the Jacobian cells (first condition), and the cells not completed."""
    steps = summary[(summary["quantity"] == "step_s") & summary["task"].isin(jacobian_tasks())]
    wanted = (cells[cells["task"].isin(jacobian_tasks())] if cells is not None
              else steps.drop(columns=[c for c in steps.columns if c.endswith("_s")]))
    if wanted.empty:
        return steps, wanted, None
    device, threads = first_condition(wanted)
    keep = lambda df: df[(df["device"] == device) & (df["threads"] == threads)]  # noqa: E731
    return keep(steps), keep(wanted), (device, threads)


def plot_jacobians(summary: pd.DataFrame, cells: pd.DataFrame | None):
    steps, wanted, condition = jacobian_data(summary, cells)
    models = [m for m in MODELS if m in set(wanted["model"])]
    if not models:
        fig, ax = plt.subplots(figsize=(5, 1.5))
        ax.axis("off")
        ax.text(0.5, 0.5, "No output-Jacobian cell was measured in this run.",
                ha="center", va="center")
        return fig
    pairs = pairs_present(wanted)
    columns = min(3, len(models))
    n_rows = -(-len(models) // columns)
    fig, axes = plt.subplots(n_rows, columns, figsize=(3.3 * columns, 2.6 * n_rows + 0.6),
                             squeeze=False)
    for ax in axes.flat[len(models):]:
        ax.set_visible(False)
    for ax, model in zip(axes.flat, models):
        jacobian_panel(ax, model, steps, wanted, pairs)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(4, len(pairs)), fontsize=7)
    device, threads = condition
    fig.suptitle(f"Output Jacobians: mean step time, {device}, {threads} thread(s)",
                 fontsize=9)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    return fig


def jacobian_panel(ax, model: str, steps: pd.DataFrame, wanted: pd.DataFrame, pairs) -> None:
    tasks = [t for t in jacobian_tasks() if t in set(wanted.loc[wanted["model"] == model,
                                                                  "task"])]
    width = 0.8 / len(pairs)
    for i, (framework, mode) in enumerate(pairs):
        for j, task in enumerate(tasks):
            x = j - 0.4 + width * (i + 0.5)
            found = steps[(steps["model"] == model) & (steps["task"] == task)
                          & (steps["framework"] == framework) & (steps["mode"] == mode)]
            if found.empty:
                ran = wanted[(wanted["model"] == model) & (wanted["task"] == task)
                             & (wanted["framework"] == framework) & (wanted["mode"] == mode)]
                if len(ran):  # in the grid but not completed: say so instead of a gap
                    ax.text(x, 0.02, "n/a", rotation=90, ha="center", va="bottom",
                            fontsize=6, transform=ax.get_xaxis_transform())
                continue
            r = found.iloc[0]
            info = FRAMEWORKS[framework]
            ax.bar(x, r["mean_s"], width, yerr=r["mean_sd_s"] if pd.notna(r["mean_sd_s"])
                   else None, color=f"C{i}", label=f"{info.label} {info.modes[mode].label}"
                   if j == 0 else None)
    ax.set_xticks(range(len(tasks)))
    ax.set_xticklabels([TASKS[t].label for t in tasks], fontsize=7)
    ax.set_yscale("log")
    ax.set_title(MODELS[model].label, fontsize=9)
    ax.set_ylabel("step (s)", fontsize=8)


# ----------------------------------------------------------------------------- CLI
def save(fig, paths: list[str]) -> None:
    for path in paths:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        fig.savefig(path, dpi=150)
    plt.close(fig)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--iterations", required=True)
    p.add_argument("--first", type=int, default=30)
    p.add_argument("--out", action="append", required=True, help="repeat for each format")
    p.add_argument("--summary", help="summary.parquet: needed for --jacobians-out")
    p.add_argument("--cells", help="cells.parquet: marks Jacobian cells that did not complete")
    p.add_argument("--jacobians-out", action="append", default=[],
                   help="the Jacobian figure; repeat for each format")
    args = p.parse_args(argv)
    if args.jacobians_out and not args.summary:
        p.error("--jacobians-out needs --summary")
    save(plot(pd.read_parquet(args.iterations), args.first), args.out)
    if args.jacobians_out:
        cells = pd.read_parquet(args.cells) if args.cells else None
        save(plot_jacobians(pd.read_parquet(args.summary), cells), args.jacobians_out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
