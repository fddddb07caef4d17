"""figures.py on the synthetic aggregate of tests/test_tables.py: files, and which lines."""

from __future__ import annotations

import functools
from pathlib import Path

import matplotlib
import pandas as pd
import pytest

matplotlib.use("Agg")

import figures  # noqa: E402
from matplotlib.container import ErrorbarContainer  # noqa: E402
from adbench import report_spec, stats  # noqa: E402
from test_tables import fake_iterations_and_cells, with_memory  # noqa: E402


def test_focus_prefers_the_first_spec_table_with_data():
    iterations, _ = fake_iterations_and_cells()
    mlps = figures.selection.focus_rows(iterations)
    assert set(mlps["model"]) == {"mlp512", "mlp354x2", "mlp294x3"}
    assert set(mlps["task"]) == {"backward"}
    without_mlps = iterations[~iterations["model"].str.startswith("mlp")]
    jacobians = figures.selection.focus_rows(
        without_mlps
    )  # the next table: FCN, CNN, LSTM Jacobians
    assert set(jacobians["model"]) == {"fcn"}
    assert set(jacobians["task"]) == {"jacobian_rows", "jacobian_vectorized"}


def test_panels_put_compiled_modes_first():
    iterations, _ = fake_iterations_and_cells()
    pairs = figures.panels(iterations)
    compiled = [figures.FRAMEWORKS[f].modes[m].compiled for f, m in pairs]
    n_modes = sum(len(info.modes) for info in figures.FRAMEWORKS.values())
    assert compiled == sorted(compiled, reverse=True) and len(pairs) == n_modes


def test_writes_every_figure(tmp_path):
    iterations, cells = fake_iterations_and_cells()
    summary = stats.across_seeds(stats.trial_stats(iterations))
    cells = with_memory(cells)
    for name, frame in (("iterations", iterations), ("summary", summary), ("cells", cells)):
        frame.to_parquet(tmp_path / f"{name}.parquet")
    outs = [tmp_path / "fig" / f"first_iterations.{ext}" for ext in ("pdf", "png")]
    jacs = [tmp_path / "fig" / f"jacobians.{ext}" for ext in ("pdf", "png")]
    fws = [tmp_path / "fig" / f"frameworks.{ext}" for ext in ("pdf", "png")]
    others = {  # every other figure, each by its own option
        name: tmp_path / "fig" / f"{name}.png"
        for name in figures.FIGURES
        if name not in ("jacobians", "frameworks")
    }
    assert (
        figures.main(
            [
                "--iterations",
                str(tmp_path / "iterations.parquet"),
                "--first",
                "5",
                *[a for o in outs for a in ("--out", str(o))],
                "--summary",
                str(tmp_path / "summary.parquet"),
                "--cells",
                str(tmp_path / "cells.parquet"),
                *[a for j in jacs for a in ("--jacobians-out", str(j))],
                *[a for f in fws for a in ("--frameworks-out", str(f))],
                "--published",
                PUBLISHED,
                *[a for name, path in others.items()
                  for a in (f"--{name.replace('_', '-')}-out", str(path))],
            ]
        )
        == 0
    )
    for path in outs + jacs + fws + list(others.values()):
        assert path.stat().st_size > 1000


def test_jacobian_figure_without_jacobian_cells_says_so():
    iterations, cells = fake_iterations_and_cells()
    summary = stats.across_seeds(stats.trial_stats(iterations))
    backward = cells[cells["task"] == "backward"]
    fig = figures.plot_jacobians(summary[summary["task"] == "backward"], backward)
    assert "No output-Jacobian" in fig.axes[0].texts[0].get_text()


@functools.cache  # built once: the figures only read it
def aggregate():
    iterations, cells = fake_iterations_and_cells()
    ok = stats.rows_of_ok_cells(iterations, cells)
    summary = stats.across_seeds(stats.trial_stats(ok))
    found = stats.replicates_by_condition(stats.bootstrap_replicates(ok, 100), "mean")
    return iterations, cells, summary, found


def series_drawn(fig) -> set[str]:
    """The labels of every series any panel drew (points, lines)."""
    return {label for ax in fig.axes for label in ax.get_legend_handles_labels()[1]}


def legend_labels(fig) -> set[str]:
    assert len(fig.legends) == 1  # one legend for the figure
    return {t.get_text() for t in fig.legends[0].get_texts()}


def overlapping_ticks(fig) -> list[tuple[str, str]]:
    """Pairs of tick labels of one axis whose drawn boxes overlap (Agg renderer)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    found = []
    for ax in fig.axes:
        for labels in (ax.get_xticklabels(which="both"), ax.get_yticklabels(which="both")):
            boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in labels if t.get_text()]
            found += [(a, b) for i, (a, box) in enumerate(boxes) for b, other in boxes[i + 1 :]
                      if box.overlaps(other)]
    return found


def bars_on_log_axes(fig) -> int:
    return sum(len(ax.patches) for ax in fig.axes
               if "log" in (ax.get_xscale(), ax.get_yscale()))


def intervals_drawn(fig) -> int:
    return sum(1 for ax in fig.axes for c in ax.containers
               if isinstance(c, ErrorbarContainer) and c.has_xerr + c.has_yerr)


def test_the_jacobian_figure_says_what_it_shows():
    _, cells, summary, found = aggregate()
    fig = figures.plot_jacobians(summary, cells, found)
    assert legend_labels(fig) == series_drawn(fig)  # every series named, none missing
    assert overlapping_ticks(fig) == [] and bars_on_log_axes(fig) == 0
    ok = cells[(cells["status"] == "ok") & cells["task"].isin(figures.jacobian_tasks())]
    conditions = ok[list(stats.CONDITION_FIELDS)].drop_duplicates()
    assert intervals_drawn(fig) == len(conditions)  # every ok condition with its interval
    assert "process" in fig._suptitle.get_text() and "cpu" in fig._suptitle.get_text()


def test_the_frameworks_figure_says_what_it_shows():
    _, cells, summary, found = aggregate()
    fig = figures.plot_frameworks(summary, cells, found)
    assert legend_labels(fig) == series_drawn(fig) == {"mean step", "time to first step"}
    assert overlapping_ticks(fig) == [] and bars_on_log_axes(fig) == 0
    ax = fig.axes[0]  # mlp512: every mode measured on both seeds
    n_modes = sum(len(info.modes) for info in figures.FRAMEWORKS.values())
    assert len(ax.get_yticklabels()) == n_modes
    assert sum(isinstance(c, ErrorbarContainer) for c in ax.containers) == n_modes
    assert intervals_drawn(fig) > 0


def test_the_first_iterations_figure_has_one_legend_outside_its_panels():
    iterations, *_ = aggregate()
    fig = figures.plot(iterations, 5)
    assert "warm-up" in legend_labels(fig) and not any(ax.get_legend() for ax in fig.axes)
    assert overlapping_ticks(fig) == []


def test_frameworks_figure_without_cells_says_so():
    iterations, cells = fake_iterations_and_cells()
    summary = stats.across_seeds(stats.trial_stats(iterations))
    fig = figures.plot_frameworks(summary, cells[cells["task"] == "jacobian_rows"])
    assert "No cell" in fig.axes[0].texts[0].get_text()


def test_a_run_where_no_cell_completed_still_gets_its_figures(tmp_path):
    """Every cell failed: no iteration rows, no summary; the figures say so (the paper
    still builds), and the cells still get a time-to-first-step column."""
    iterations, cells = fake_iterations_and_cells()
    empty = iterations.iloc[0:0]
    text = [t.get_text() for t in figures.plot(empty, 30).axes[0].texts]
    assert text == ["No cell of this run completed an iteration."]
    failed = cells.drop(columns=[c for c in cells if c.startswith("phase_")]).assign(
        status="failed"
    )
    first = stats.first_iteration_stats(empty)
    assert stats.with_time_to_first_step(failed, first)["time_to_first_step_s"].isna().all()


# ----------------------------------------------------------------------------- the tables' figures
PUBLISHED = str(Path(__file__).resolve().parents[1] / "report" / "published")


def says_what_it_shows(fig) -> None:
    """One legend naming exactly the series drawn, no tick labels overlapping, no bars on a
    log axis, and the figure's block (device, threads) and processes stated."""
    assert legend_labels(fig) == series_drawn(fig)
    assert overlapping_ticks(fig) == [] and bars_on_log_axes(fig) == 0
    title = " ".join(fig._suptitle.get_text().split())
    assert "cpu, 1 thread" in title and "process" in title


def ok_conditions(cells, tables_of_figure, tasks=None) -> int:
    """The ok conditions (cells without their seed) of some spec tables."""
    ok = cells[cells["status"] == "ok"]
    pairs = list(zip(ok["framework"], ok["mode"]))
    rows = pd.concat(
        [ok[ok["model"].isin(t.models) & ok["task"].isin(tasks or t.tasks)
            & pd.Series([p in figures.selection.table_modes(t) for p in pairs], index=ok.index)]
         for t in tables_of_figure]
    )
    return len(rows[list(stats.CONDITION_FIELDS)].drop_duplicates())


def test_the_mlp_figure_puts_the_studys_published_means_beside_ours():
    _, cells, summary, found = aggregate()
    fig = figures.plot_study_backward(summary, cells, figures.read_published(PUBLISHED), found)
    says_what_it_shows(fig)
    drawn = figures.tables.tables_drawn_in("mlp_backward")
    assert [t.name for t in drawn] == ["table1_eager", "table2_compiled"]
    assert figures.STUDY in legend_labels(fig)
    assert intervals_drawn(fig) == ok_conditions(cells, drawn)  # every ok cell's interval
    # the study's markers: one per published row of a mode the panel shows, in ms
    pub = figures.read_published(PUBLISHED)["table1_eager"]
    panel = fig.axes[0]
    diamonds = [line for line in panel.get_lines() if line.get_label() == figures.STUDY]
    assert sorted(round(line.get_ydata()[0], 3) for line in diamonds) == sorted(
        round(v / 1000, 3) for v in pub["mean"]
    )
    # tensorflow eager failed on [354, 354]: n/a at its slot
    assert "n/a" in [t.get_text() for t in panel.texts]


def test_the_hypothesis0_figure_draws_the_line_of_equality():
    _, cells, summary, found = aggregate()
    fig = figures.plot_hypothesis0(summary, cells, found)
    says_what_it_shows(fig)
    assert figures.EQUALITY in legend_labels(fig)
    ax = fig.axes[0]
    assert ax.get_xscale() == ax.get_yscale() == "log" and ax.get_xlim() == ax.get_ylim()
    equality = next(line for line in ax.get_lines() if line.get_label() == figures.EQUALITY)
    assert list(equality.get_xdata()) == list(equality.get_ydata())
    # every (model, mode) with both tasks ok: one point, intervals on both axes
    ok = cells[cells["status"] == "ok"]
    both = ok.groupby(["model", "framework", "mode"])["task"].apply(
        lambda t: {"backward", "loss_jacobian"} <= set(t)
    )
    errorbars = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    assert len(errorbars) == int(both.sum())
    assert all(c.has_xerr and c.has_yerr for c in errorbars)


def test_the_memory_figure_draws_every_condition_measured():
    _, cells, *_ = aggregate()
    cells = with_memory(cells)
    fig = figures.plot_memory(cells)
    says_what_it_shows(fig)
    assert all(ax.get_xscale() == "log" for ax in fig.axes)
    memory = figures.tables.memory_table(cells)
    peaks = [line for ax in fig.axes for line in ax.get_lines()
             if line.get_label().endswith(figures.MEMORY_SERIES["peak_over_baseline_bytes"][1])]
    assert len(peaks) == len(memory)  # one peak per condition measured
    assert "n/a" in [t.get_text() for ax in fig.axes for t in ax.texts]  # the failed cells


def test_the_memory_figure_without_memory_says_so():
    _, cells, *_ = aggregate()
    assert "No cell" in figures.plot_memory(cells).axes[0].texts[0].get_text()


def test_the_jacobian_figure_sets_the_studys_published_means_apart():
    _, cells, summary, found = aggregate()
    published = figures.read_published(PUBLISHED, "jacobians")
    fig = figures.plot_jacobians(summary, cells, found, published=published)
    says_what_it_shows(fig)
    fcn = next(ax for ax in fig.axes if ax.get_title() == report_spec.model_label("fcn"))
    assert [t.get_text() for t in fcn.get_xticklabels()][-1] == figures.STUDY_TICK
    diamonds = sorted(line.get_ydata()[0] for line in fcn.get_lines()
                      if line.get_label() == figures.STUDY)
    table3 = published["table3_jacobian"]
    study = table3[table3["model"] == "fcn"]
    assert diamonds == pytest.approx(sorted(study["mean"] * 1e-5 * 1e3))  # 10^-5 s -> ms
    # the legend's key of the study is one neutral marker, the colours are the modes'
    key = dict(zip(legend_labels_list(fig), fig.legends[0].legend_handles))[figures.STUDY]
    assert key.get_color() == "k"


def legend_labels_list(fig) -> list[str]:
    return [t.get_text() for t in fig.legends[0].get_texts()]
