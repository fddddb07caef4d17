"""figures.py on the synthetic aggregate of tests/test_tables.py: files, which lines, and
each figure made for print (issue 40): drawn at the width it is printed at, no text under
7 pt there, at most six panels, every marker tied to a legend entry, every estimate with its
interval, open where the interval resamples the iterations of one process."""

from __future__ import annotations

import functools
from pathlib import Path

import matplotlib
import pandas as pd
import pytest

matplotlib.use("Agg")

import figures  # noqa: E402
from matplotlib.colors import to_hex  # noqa: E402
from matplotlib.container import ErrorbarContainer  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.text import Text  # noqa: E402
from adbench import comparisons, plotting, report_spec, selection, spec, stats, tables  # noqa: E402
from adbench.sections import drawing  # noqa: E402
from adbench.sections import figure_first_iterations as first_iterations  # noqa: E402
from adbench.sections import figure_frameworks as fw  # noqa: E402
from adbench.sections import figure_hypothesis0 as h0  # noqa: E402
from adbench.sections import figure_jacobians as jac  # noqa: E402
from adbench.sections import figure_memory_per_cell as mem  # noqa: E402
from adbench.sections import figure_mlp_backward as mlp  # noqa: E402
from test_tables import fake_iterations_and_cells, with_memory  # noqa: E402


def test_focus_prefers_the_first_spec_table_with_data():
    iterations, _ = fake_iterations_and_cells()
    mlps = selection.focus_rows(iterations)
    assert set(mlps["model"]) == {"mlp512", "mlp354x2", "mlp294x3"}
    assert set(mlps["task"]) == {"backward"}
    without_mlps = iterations[~iterations["model"].str.startswith("mlp")]
    jacobians = selection.focus_rows(
        without_mlps
    )  # the next table: FCN, CNN, LSTM Jacobians
    assert set(jacobians["model"]) == {"fcn"}
    assert set(jacobians["task"]) == {"jacobian_rows", "jacobian_vectorized"}


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
    fig = jac.plot_jacobians(summary[summary["task"] == "backward"], backward)
    assert "No output-Jacobian" in fig.axes[0].texts[0].get_text()


@functools.cache  # built once: the figures only read it
def aggregate():
    iterations, cells = fake_iterations_and_cells()
    ok = stats.rows_of_ok_cells(iterations, cells)
    summary = stats.across_seeds(stats.trial_stats(ok))
    conditions = comparisons.conditions(stats.bootstrap_replicates(ok, 100), 0.95)
    return iterations, cells, summary, comparisons.estimates(conditions, "mean")


def legend_labels(fig) -> set[str]:
    assert len(fig.legends) == 1  # one legend for the figure
    return {t.get_text() for t in fig.legends[0].get_texts()}


def series_drawn(fig) -> set[str]:
    """The labels of every series any panel drew (points, lines)."""
    return {label for ax in fig.axes for label in ax.get_legend_handles_labels()[1]}


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


# ----------------------------------------------------------------------------- made for print
def printed_texts(fig, tmp_path: Path) -> list[tuple[str, float]]:
    """Every text the figure shows with its printed size in points: its size in the figure
    times the scale the paper prints the figure at (the width the template is given for the
    saved PDF, plotting.printed_width_bp, over the figure's own width)."""
    pdf = tmp_path / "figure.pdf"
    fig.savefig(pdf)
    scale = plotting.printed_width_bp(pdf) / (fig.get_figwidth() * plotting.BP_PER_IN)
    fig.canvas.draw()
    return [(t.get_text(), t.get_fontsize() * scale) for t in fig.findobj(Text)
            if t.get_visible() and t.get_text().strip()]


def panels(fig) -> list:
    return [ax for ax in fig.axes if ax.get_visible() and ax.has_data()]


def tied_to_the_legend(fig) -> list[str]:
    """The drawn markers and lines no legend entry explains: each must match an entry's
    colour (a mode) and an entry's marker (a kind of point: ours over processes or one
    process, the study's, a model), or be an entry itself."""
    lines = fig.legends[0].findobj(Line2D)  # every key the legend draws
    colours = {to_hex(h.get_color()) for h in lines}
    markers = {(h.get_marker(), to_hex(h.get_markerfacecolor()) == "#ffffff") for h in lines}
    loose = []
    for ax in fig.axes:
        for line in ax.get_lines():
            if line.get_marker() in ("None", None, "", " ") or not line.get_visible():
                continue
            if line.get_marker() in ("_", "|") and line.get_label().startswith("_"):
                continue  # an interval's caps
            open_ = to_hex(line.get_markerfacecolor()) == "#ffffff"
            if to_hex(line.get_color()) not in colours:
                loose.append(f"colour {to_hex(line.get_color())}")
            elif (line.get_marker(), open_) not in markers and (
                    line.get_marker(), not open_) not in markers:
                loose.append(f"marker {line.get_marker()}")
    return loose


def title_over_panels(fig) -> list[str]:
    """The panels (with their titles, tick and axis labels) whose drawn box the figure's
    title overlaps, by the layout's bounding boxes (Agg renderer)."""
    if fig._suptitle is None:
        return []
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    title = fig._suptitle.get_window_extent(renderer)
    return [ax.get_title() or "panel" for ax in fig.axes
            if ax.get_visible() and ax.get_tightbbox(renderer).overlaps(title)]


def made_for_print(fig, tmp_path: Path) -> None:
    """Drawn at the width it is printed at: no text under 7 pt there, at most six panels,
    every marker tied to the legend, nothing wider than the text, the title clear of every
    panel."""
    small = [(text, size) for text, size in printed_texts(fig, tmp_path)
             if size < plotting.MIN_FONT_PT - 1e-6]
    assert small == []
    assert len(panels(fig)) <= plotting.MAX_PANELS
    assert fig.get_figwidth() <= plotting.TEXT_WIDTH_IN + 1e-6
    assert fig.get_figheight() <= plotting.MAX_FIGURE_HEIGHT_IN + 1e-6
    assert tied_to_the_legend(fig) == []
    assert title_over_panels(fig) == []


def says_what_it_shows(fig, tmp_path: Path) -> None:
    """One legend naming every series drawn (and the markers' keys), no tick labels
    overlapping, no bars on a log axis, the figure's block and processes stated; made for
    print."""
    assert series_drawn(fig) <= legend_labels(fig)
    assert overlapping_ticks(fig) == [] and bars_on_log_axes(fig) == 0
    title = " ".join(fig._suptitle.get_text().split())
    assert "cpu, 1 thread" in title and "process" in title
    made_for_print(fig, tmp_path)


def open_markers(fig) -> int:
    """Estimates drawn open: their interval resamples the iterations of one process."""
    return sum(1 for ax in fig.axes for c in ax.containers if isinstance(c, ErrorbarContainer)
               and to_hex(c.lines[0].get_markerfacecolor()) == "#ffffff")


def one_process_conditions(found: dict, keys) -> int:
    return sum(found[k][3] == drawing.ONE_PROCESS for k in keys if k in found)


def test_the_jacobian_figure_says_what_it_shows(tmp_path):
    _, cells, summary, found = aggregate()
    fig = jac.plot_jacobians(summary, cells, found)
    says_what_it_shows(fig, tmp_path)
    models = {m for t in plotting.figure_tables("jacobians") for m in t.models}
    ok = cells[(cells["status"] == "ok") & cells["task"].isin(jac.jacobian_tasks())
               & cells["model"].isin(models)]
    conditions = ok[list(stats.CONDITION_FIELDS)].drop_duplicates()
    assert intervals_drawn(fig) == len(conditions)  # every ok condition with its interval
    keys = [(*r, "step_s") for r in conditions.itertuples(index=False)]
    assert open_markers(fig) == one_process_conditions(found, keys)


def test_the_frameworks_figure_says_what_it_shows(tmp_path):
    _, cells, summary, found = aggregate()
    fig = fw.plot_frameworks(summary, cells, found)
    says_what_it_shows(fig, tmp_path)
    assert fw.FIRST_STEP in legend_labels(fig)
    ax = fig.axes[0]  # mlp512: every mode measured on both seeds
    n_modes = sum(len(info.modes) for info in spec.FRAMEWORKS.values())
    assert len(ax.get_yticklabels()) == n_modes
    # per mode its mean step and its time to first step, each with its interval
    assert sum(isinstance(c, ErrorbarContainer) for c in ax.containers) == 2 * n_modes
    assert intervals_drawn(fig) > 0


def test_the_first_iterations_figure_has_one_legend_outside_its_panels(tmp_path):
    iterations, *_ = aggregate()
    fig = first_iterations.plot(iterations, 5)
    assert "warm-up" in legend_labels(fig) and not any(ax.get_legend() for ax in fig.axes)
    assert overlapping_ticks(fig) == []
    made_for_print(fig, tmp_path)
    # a panel per model of the focus table, a line per mode: never more than six panels
    assert len(panels(fig)) == 3
    n_modes = sum(len(info.modes) for info in spec.FRAMEWORKS.values())
    assert len([line for line in fig.axes[0].get_lines() if line.get_marker() == "."]) \
        == n_modes


def test_frameworks_figure_without_cells_says_so():
    iterations, cells = fake_iterations_and_cells()
    summary = stats.across_seeds(stats.trial_stats(iterations))
    fig = fw.plot_frameworks(summary, cells[cells["task"] == "jacobian_rows"])
    assert "No condition" in fig.axes[0].texts[0].get_text()


def test_a_run_where_no_cell_completed_still_gets_its_figures(tmp_path):
    """Every cell failed: no iteration rows, no summary; the figures say so (the paper
    still builds), and the cells still get a time-to-first-step column."""
    iterations, cells = fake_iterations_and_cells()
    empty = iterations.iloc[0:0]
    text = [t.get_text() for t in first_iterations.plot(empty, 30).axes[0].texts]
    assert text == ["No cell of this run completed an iteration."]
    failed = cells.drop(columns=[c for c in cells if c.startswith("phase_")]).assign(
        status="failed"
    )
    first = stats.first_iteration_stats(empty, empty)
    assert stats.with_time_to_first_step(failed, first)["time_to_first_step_s"].isna().all()


# ----------------------------------------------------------------------------- the tables' figures
PUBLISHED = str(Path(__file__).resolve().parents[1] / "report" / "published")


def ok_conditions(cells, tables_of_figure, tasks=None) -> int:
    """The ok conditions (cells without their seed) of some spec tables."""
    ok = cells[cells["status"] == "ok"]
    pairs = list(zip(ok["framework"], ok["mode"]))
    rows = pd.concat(
        [ok[ok["model"].isin(t.models) & ok["task"].isin(tasks or t.tasks)
            & pd.Series([p in selection.table_modes(t) for p in pairs], index=ok.index)]
         for t in tables_of_figure]
    )
    return len(rows[list(stats.CONDITION_FIELDS)].drop_duplicates())


def test_the_mlp_figure_puts_the_studys_published_means_beside_ours(tmp_path):
    _, cells, summary, found = aggregate()
    fig = mlp.plot_study_backward(summary, cells, drawing.read_published(PUBLISHED), found)
    says_what_it_shows(fig, tmp_path)
    drawn = plotting.figure_tables("mlp_backward")
    assert [t.name for t in drawn] == ["table1_eager", "table2_compiled"]
    assert drawing.STUDY in legend_labels(fig)
    assert intervals_drawn(fig) == ok_conditions(cells, drawn)  # every ok condition's interval
    # the study's markers: one per published row of a mode the panel shows, in ms, each in
    # the colour of its mode's points (tied to the mode's legend entry)
    pub = drawing.read_published(PUBLISHED)["table1_eager"]
    panel = fig.axes[0]
    diamonds = [line for line in panel.get_lines() if line.get_label() == drawing.STUDY]
    assert sorted(round(line.get_ydata()[0], 3) for line in diamonds) == sorted(
        round(v / 1000, 3) for v in pub["mean"]
    )
    ours = {to_hex(c.lines[0].get_color()) for c in panel.containers}
    assert {to_hex(line.get_color()) for line in diamonds} <= ours
    # tensorflow eager failed on [354, 354]: n/a at its slot
    assert "n/a" in [t.get_text() for t in panel.texts]


def test_the_hypothesis0_figure_draws_the_line_of_equality(tmp_path):
    _, cells, summary, found = aggregate()
    fig = h0.plot_hypothesis0(summary, cells, found)
    says_what_it_shows(fig, tmp_path)
    assert h0.EQUALITY in legend_labels(fig)
    ax = fig.axes[0]
    assert ax.get_xscale() == ax.get_yscale() == "log" and ax.get_xlim() == ax.get_ylim()
    equality = next(line for line in ax.get_lines() if line.get_label() == h0.EQUALITY)
    assert list(equality.get_xdata()) == list(equality.get_ydata())
    # every (model, mode) with both tasks ok: one point, intervals on both axes, its model
    # told by its marker (a legend entry each), not by a label floating beside it
    ok = cells[cells["status"] == "ok"]
    both = ok.groupby(["model", "framework", "mode"])["task"].apply(
        lambda t: {"backward", "loss_jacobian"} <= set(t)
    )
    errorbars = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    assert len(errorbars) == int(both.sum())
    assert all(c.has_xerr and c.has_yerr for c in errorbars)
    models = {m for (m, _, _), yes in both.items() if yes}
    assert {report_spec.model_label(m) for m in models} <= legend_labels(fig)
    assert not ax.texts


def test_the_memory_figure_draws_every_condition_measured(tmp_path):
    _, cells, *_ = aggregate()
    cells = with_memory(cells)
    fig = mem.plot_memory(cells)
    says_what_it_shows(fig, tmp_path)
    assert all(ax.get_xscale() == "log" for ax in panels(fig))
    memory = tables.memory_table(cells)
    backward = memory[memory["task"] == mem.MEMORY_TASK]
    peak = next(ax for ax in fig.axes
                if ax.get_title() == mem.MEMORY_SERIES["peak_over_baseline_bytes"][0])
    assert sum(isinstance(c, ErrorbarContainer) for c in peak.containers) == len(backward)
    assert "n/a" in [t.get_text() for ax in fig.axes for t in ax.texts]  # the failed cells


def test_the_memory_figure_without_memory_says_so():
    _, cells, *_ = aggregate()
    assert "No cell" in mem.plot_memory(cells).axes[0].texts[0].get_text()


def test_the_jacobian_figure_sets_the_studys_published_means_apart(tmp_path):
    _, cells, summary, found = aggregate()
    published = drawing.read_published(PUBLISHED, "jacobians")
    fig = jac.plot_jacobians(summary, cells, found, published=published)
    says_what_it_shows(fig, tmp_path)
    fcn = next(ax for ax in fig.axes if ax.get_title() == report_spec.model_label("fcn"))
    assert [t.get_text() for t in fcn.get_xticklabels()][-1] == jac.STUDY_TICK
    diamonds = sorted(line.get_ydata()[0] for line in fcn.get_lines()
                      if line.get_label() == drawing.STUDY)
    table3 = published["table3_jacobian"]
    study = table3[table3["model"] == "fcn"]
    assert diamonds == pytest.approx(sorted(study["mean"] * 1e-5 * 1e3))  # 10^-5 s -> ms
    # the legend's key of the study is one neutral marker, the colours are the modes'
    key = dict(zip(legend_labels_list(fig), fig.legends[0].legend_handles))[drawing.STUDY]
    assert key.get_color() == "k"


def legend_labels_list(fig) -> list[str]:
    return [t.get_text() for t in fig.legends[0].get_texts()]


def test_a_figure_of_many_models_keeps_six_panels_at_most(tmp_path):
    """The first iterations of a grid of eight (model, task) pairs in no spec table (the width
    sweep's models, backward and forward alone): six panels, the rest in its table; no
    figure of the pipeline asks for more."""
    iterations, _ = fake_iterations_and_cells()
    backward = iterations[(iterations["task"] == "backward") & (iterations["model"] == "mlp512")]
    many = pd.concat([backward.assign(model=m, task=t) for m in spec.MLP_WIDTHS
                      if m != "mlp512" for t in ("backward", "forward")]
                     + [backward.assign(model="mlp8192", task="forward")])
    assert len(set(zip(many["model"], many["task"]))) > plotting.MAX_PANELS
    fig = first_iterations.plot(many, 5)
    assert len(panels(fig)) == plotting.MAX_PANELS
    made_for_print(fig, tmp_path)
    with pytest.raises(AssertionError):
        drawing.grid(plotting.MAX_PANELS + 1, 3, 1.0, 1.0)


def test_every_declared_figure_has_its_module_and_captions():
    """Each declaration names what the rules, the paper and the report read: a module with
    draw(), the report's caption (report/captions/<name>.rst), the paper's caption template
    where the paper prints it beside tables, and a figure of tables draws at least one."""
    import importlib

    from adbench.sections import figures as declared

    root = Path(__file__).resolve().parents[1] / "report"
    for figure in declared.FIGURES:
        assert callable(importlib.import_module(figure.module).draw), figure.name
        assert (root / "captions" / f"{figure.report_caption}.rst").is_file(), figure.name
        if figure.draws is not None:
            assert (root / figure.caption_tex).is_file(), figure.name
            assert tables.tables_drawn_in(figure.name), figure.name
    assert tables.FIGURES_OF_TABLES == tuple(f.name for f in declared.of_tables())
