"""figures.py on the synthetic aggregate of tests/test_tables.py: files, and which lines."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import figures  # noqa: E402
from adbench import stats  # noqa: E402
from test_tables import fake_iterations_and_cells  # noqa: E402


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
    for name, frame in (("iterations", iterations), ("summary", summary), ("cells", cells)):
        frame.to_parquet(tmp_path / f"{name}.parquet")
    outs = [tmp_path / "fig" / f"first_iterations.{ext}" for ext in ("pdf", "png")]
    jacs = [tmp_path / "fig" / f"jacobians.{ext}" for ext in ("pdf", "png")]
    fws = [tmp_path / "fig" / f"frameworks.{ext}" for ext in ("pdf", "png")]
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
            ]
        )
        == 0
    )
    for path in outs + jacs + fws:
        assert path.stat().st_size > 1000


def test_jacobian_figure_without_jacobian_cells_says_so():
    iterations, cells = fake_iterations_and_cells()
    summary = stats.across_seeds(stats.trial_stats(iterations))
    backward = cells[cells["task"] == "backward"]
    fig = figures.plot_jacobians(summary[summary["task"] == "backward"], backward)
    assert "No output-Jacobian" in fig.axes[0].texts[0].get_text()


def test_frameworks_figure_has_a_bar_per_mode_and_first_step_ticks():
    iterations, cells = fake_iterations_and_cells()
    summary = stats.across_seeds(stats.trial_stats(iterations))
    fig = figures.plot_frameworks(summary, cells)
    ax = fig.axes[0]  # mlp512: every mode measured on both seeds
    n_modes = sum(len(info.modes) for info in figures.FRAMEWORKS.values())
    assert len(ax.patches) == n_modes and len(ax.get_yticklabels()) == n_modes
    assert len(ax.lines) == n_modes  # one time-to-first-step tick per mode


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
