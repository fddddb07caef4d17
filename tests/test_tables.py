"""adbench.tables: every spec table from synthetic aggregates built from the spec itself.

`fake_aggregate` and `fake_comparisons` are also the input of tests/test_render_paper.py and
tests/test_figures.py.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math

import pandas as pd
import pytest

from adbench import comparisons, formatting, report_spec, stats, tables
from adbench.report_spec import TABLES
from adbench.spec import FRAMEWORKS, MODELS, TASKS, timed_quantities

NAN = math.nan
BY_NAME = {t.name: t for t in TABLES}
MACHINE = "x86 CPU"  # the one machine the fake cells ran on
# (models, tasks) measured; no cell of table5_dense (dense) nor of table7's other layers.
MEASURED = [
    (("mlp512", "mlp354x2", "mlp294x3"), ("backward",)),
    (("fcn",), ("jacobian_rows", "jacobian_vectorized", "backward", "loss_jacobian")),
    (("resnet50",), ("jacobian_rows", "jacobian_vectorized")),
    (("mlp512",), ("loss_jacobian",)),
    (("ctc",), ("backward",)),
]
MISSING_TABLE = "table5_dense"
# A mode whose loops keep more cores busy than their threads (CPU-s per s, per thread).
OVER_THREADS = {("jax", "eager"): 1.8}
# Seconds of one eager step; compiled modes take half, tasks scale it, seed 1 takes 10% more.
BASE_S = {
    "mlp512": 1e-3,
    "mlp354x2": 2e-3,
    "mlp294x3": 3e-3,
    "fcn": 4e-4,
    "resnet50": 0.5,
    "ctc": 2e-4,
}
TASK_FACTOR = {
    "backward": 1.0,
    "loss_jacobian": 1.5,
    "jacobian_rows": 2.0,
    "jacobian_vectorized": 0.5,
}
# Not ok: tensorflow eager mlp354x2 on every seed (n/a); torch script mlp512 on seed 1
# (partial); tensorflow graph ctc on every seed (unsupported).
NOT_OK = {
    ("tensorflow", "eager", "mlp354x2", "backward", 0): ("failed", "RuntimeError: boom"),
    ("tensorflow", "eager", "mlp354x2", "backward", 1): ("failed", "RuntimeError: boom"),
    ("torch", "script", "mlp512", "backward", 1): ("unsupported", "no GPU"),
    ("tensorflow", "graph", "ctc", "backward", 0): ("unsupported", "CTC: no XLA kernel"),
    ("tensorflow", "graph", "ctc", "backward", 1): ("unsupported", "CTC: no XLA kernel"),
}


def step_seconds(framework, mode, model, task, seed) -> float:
    compiled = FRAMEWORKS[framework].modes[mode].compiled
    return BASE_S[model] * TASK_FACTOR[task] * (0.5 if compiled else 1.0) * (1 + 0.1 * seed)


def cell_choices(framework, mode, task) -> str:
    """An implementation choice per cell, as the backends record them (a JSON object)."""
    choice = {
        "jacobian_rows": "python loop of VJPs",
        "jacobian_vectorized": "vmap",
        "loss_jacobian": "jacobian API",
    }.get(task)
    return json.dumps({"dtype": "float32", **({"jacobian": choice} if choice else {})})


def iteration_rows(cell: dict, step: float) -> list[dict]:
    """Two warm-up iterations (the first one slow) and three measured ones."""
    rows = []
    split = "backward_s" in timed_quantities(cell["framework"], cell["mode"], cell["task"])
    for i in range(5):
        s = step * (20 if i == 0 else 1 + 0.01 * i)
        rows.append(
            {
                **cell,
                "iteration": i,
                "phase": "warmup" if i < 2 else "measured",
                "forward_s": s / 4 if split else NAN,
                "backward_s": 3 * s / 4 if split else NAN,
                "step_s": s,
            }
        )
    return rows


def grid(threads: tuple[int, ...]):
    for framework, info in FRAMEWORKS.items():
        for mode in info.modes:
            for models, tasks in MEASURED:
                for model in models:
                    for task in tasks:
                        for n_threads in threads:
                            for seed in (0, 1):
                                yield {
                                    "framework": framework,
                                    "mode": mode,
                                    "model": model,
                                    "task": task,
                                    "device": "cpu",
                                    "threads": n_threads,
                                    "seed": seed,
                                    "machine": MACHINE,
                                }


def fake_iterations_and_cells(threads: tuple[int, ...] = (1,)):
    """Raw iterations and cells.parquet rows; more threads run proportionally faster."""
    iterations, cells = [], []
    for cell in grid(threads):
        f, m, model, task, seed = (cell[k] for k in ("framework", "mode", "model", "task", "seed"))
        status, message = NOT_OK.get((f, m, model, task, seed), ("ok", ""))
        # Modes that compile ahead of time (here: every compiled one) report it.
        compile_s = 0.25 if FRAMEWORKS[f].modes[m].compiled else 0.0
        cells.append(
            {
                **cell,
                "status": status,
                "message": message,
                "warmup": 2,  # as iteration_rows writes them
                "iterations": 3,
                "choices": cell_choices(f, m, task),
                "phase_compile_s": compile_s if status == "ok" else NAN,
                "cpu_utilisation": (
                    OVER_THREADS.get((f, m), 0.98) * cell["threads"] if status == "ok" else NAN
                ),
            }
        )
        if status == "ok":
            step = step_seconds(f, m, model, task, seed) / cell["threads"]
            iterations += iteration_rows(cell, step)
    iterations = pd.DataFrame(iterations)
    measured = iterations[iterations["phase"] == "measured"]
    cells = stats.with_time_to_first_step(
        pd.DataFrame(cells), stats.first_iteration_stats(iterations, measured)
    )
    return iterations, cells


def with_memory(cells: pd.DataFrame) -> pd.DataFrame:
    """cells.parquet with measure.py's memory fields: 300 MB resident before the loop, a peak
    a little above it that grows with the row, 310 MB after the step; failed cells have none."""
    ok = cells["status"] == "ok"
    return cells.assign(
        rss_baseline_bytes=pd.Series(300e6, index=cells.index).where(ok),
        rss_peak_bytes=(320e6 + cells.index * 1e5).where(ok),
        rss_after_step_bytes=pd.Series(310e6, index=cells.index).where(ok),
        rss_peak_scope="measured phase",
    )


def fake_aggregate() -> tuple[pd.DataFrame, pd.DataFrame]:
    """summary and cells as aggregate.py writes them."""
    iterations, cells = fake_iterations_and_cells()
    return stats.across_seeds(stats.trial_stats(iterations)), cells


@functools.cache
def fake_products() -> tuple[pd.DataFrame, pd.DataFrame]:
    """compare.py's conditions and comparisons of the fake cells (200 replicates)."""
    iterations, _ = fake_iterations_and_cells()
    bootstrap = stats.bootstrap_replicates(iterations, 200)
    return comparisons.conditions(bootstrap, 0.95), comparisons.compare_all(bootstrap, 0.95)


def fake_comparisons() -> pd.DataFrame:
    return fake_products()[1]


@pytest.fixture(scope="module")
def aggregate():
    return fake_aggregate()


@pytest.fixture(scope="module")
def tidy(aggregate):
    summary, cells = aggregate
    return {t.name: tables.tidy_table(t, summary, cells, fake_comparisons()) for t in TABLES}


def test_every_spec_table_has_the_tidy_columns(tidy):
    assert set(tidy) == {t.name for t in TABLES}
    for table in TABLES:
        assert list(tidy[table.name].columns) == tables.TIDY_COLUMNS
    assert tidy[MISSING_TABLE].empty


def test_rows_are_the_tables_models_and_tasks_in_spec_order(tidy):
    for table in TABLES:
        t = tidy[table.name]
        assert set(t["model"]) <= set(table.models) and set(t["task"]) <= set(table.tasks)
        assert set(t["quantity"]) <= {table.quantity} and set(t["unit"]) <= {table.unit}
        if table.compiled is not None:
            assert set(t["compiled"]) <= {table.compiled}
        if table.frameworks is not None:
            assert set(t["framework"]) <= set(table.frameworks)
        model_order = [list(MODELS).index(m) for m in t["model"]]
        assert model_order == sorted(model_order)
    eager = tidy["table1_eager"]
    expected = [
        (m, f, "eager")
        for m in ("mlp512", "mlp354x2", "mlp294x3")
        for f in FRAMEWORKS
        if f in BY_NAME["table1_eager"].frameworks and "eager" in FRAMEWORKS[f].modes
    ]
    assert list(zip(eager["model"], eager["framework"], eager["mode"])) == expected
    # fcn has all four tasks measured, but table3 shows only its two Jacobian tasks.
    assert list(dict.fromkeys(tidy["table3_jacobian"]["task"])) == list(
        BY_NAME["table3_jacobian"].tasks
    )


def test_modes_that_do_not_record_the_quantity_are_absent(aggregate):
    summary, cells = aggregate
    every_mode = dataclasses.replace(BY_NAME["table1_eager"], compiled=None, frameworks=None)
    t = tables.tidy_table(every_mode, summary, cells)
    pairs = set(zip(t["framework"], t["mode"]))
    for framework, info in FRAMEWORKS.items():
        for mode, mode_info in info.modes.items():
            assert ((framework, mode) in pairs) == (not mode_info.whole_step)


def test_numbers_are_in_the_tables_unit(tidy):
    rows = tidy["table3_jacobian"].set_index(["model", "task", "framework", "mode"])
    r = rows.loc[("fcn", "jacobian_rows", "torch", "eager")]
    # Seeds 0 and 1 scale the step by 1 and 1.1; measured iterations by 1.02-1.04; 1e-5 s.
    assert r["mean"] == pytest.approx(4e-4 * 2.0 * 1.03 * 1.05 * 1e5)
    resnet = tidy["table4_resnet50"].set_index(["task", "framework", "mode"])
    assert resnet.loc[("jacobian_rows", "torch", "eager"), "mean"] == pytest.approx(
        0.5 * 2.0 * 1.03 * 1.05
    )
    eager = tidy["table1_eager"].set_index(["framework", "model"])
    # Backward is 3/4 of the step; µs.
    assert eager.loc[("torch", "mlp512"), "mean"] == pytest.approx(0.75 * 1000 * 1.03 * 1.05)


def test_failed_partial_and_unsupported_cells_get_status_and_note(tidy):
    eager = tidy["table1_eager"].set_index(["framework", "model"])
    na = eager.loc[("tensorflow", "mlp354x2")]
    assert na["status"] == "n/a" and math.isnan(na["mean"])
    assert "2 of 2 seeds" in na["note"] and "RuntimeError: boom" in na["note"]
    ok = eager.loc[("torch", "mlp512")]
    assert (ok["status"], ok["note"], ok["n_seeds"]) == ("ok", "", 2)

    compiled = tidy["table2_compiled"].set_index(["framework", "mode", "model"])
    partial = compiled.loc[("torch", "script", "mlp512")]
    assert partial["status"] == "partial" and partial["n_seeds"] == 1
    assert "1 of 2 seeds" in partial["note"] and "unsupported: no GPU" in partial["note"]
    assert math.isnan(partial["mean_sd"]) and not math.isnan(partial["mean"])

    layers = tidy["table7_layers"].set_index(["framework", "mode", "model", "task"])
    ctc = layers.loc[("tensorflow", "graph", "ctc", "backward")]
    assert ctc["status"] == "n/a" and "CTC: no XLA kernel" in ctc["note"]


def test_improvements_only_where_the_table_asks(tidy):
    for table in TABLES:
        if not table.improvement:
            assert tidy[table.name]["improvement"].isna().all()
    compiled = tidy["table2_compiled"].set_index(["framework", "mode", "model"])
    # Eager step / compiled step: 2x, as both seeds of both modes scale alike.
    tf_graph = ("tensorflow", "graph")
    assert compiled.loc[(*tf_graph, "mlp512"), "improvement"] == pytest.approx(2.0)
    assert compiled.loc[(*tf_graph, "mlp512"), "improvement_study_style"] == pytest.approx(1.5)
    assert math.isnan(compiled.loc[(*tf_graph, "mlp354x2"), "improvement"])  # eager failed


def test_two_task_tables_report_the_ratio_of_their_tasks(tidy):
    h0 = tidy["table6_hypothesis0"]
    second = h0[h0["task"] == "loss_jacobian"]
    assert set(second["model"]) == {"mlp512", "fcn"}
    # torch script mlp512's backward has seed 0 only (partial): the ratio pairs the loss
    # Jacobian's seed 0 with it, never its two-seed mean with a one-seed one.
    partial = (second["model"] == "mlp512") & (second["mode"] == "script")
    assert second["task_ratio"].to_numpy() == pytest.approx(1.5)
    assert set(second.loc[partial, "task_ratio_n"]) == {1}
    assert h0.loc[h0["task"] == "backward", "task_ratio"].isna().all()
    jac = tidy["table3_jacobian"]
    assert jac.loc[jac["task"] == "jacobian_vectorized", "task_ratio"].to_numpy() == pytest.approx(
        0.25
    )
    assert tidy["table7_layers"]["task_ratio"].isna().all()  # four tasks: no single ratio


def test_markdown_and_latex_name_every_model_task_and_mode(tidy):
    for table in TABLES:
        t = tidy[table.name]
        markdown, latex = tables.to_markdown(t, table), tables.to_latex(t, table)
        assert table.title in markdown
        if t.empty:
            assert tables.EMPTY_NOTE in markdown and tables.EMPTY_NOTE in latex
            continue
        for text in (markdown, latex):
            for model in set(t["model"]):
                assert str(MODELS[model].n_parameters) in text
            for f, m in set(zip(t["framework"], t["mode"])):
                label = tables.column_label(f, m)
                assert label in text or formatting.latex(label) in text, label
        if len(set(t["task"])) > 1:
            assert all(report_spec.task_label(task) in markdown for task in set(t["task"]))
        assert "±" not in latex and r"\begin{tabular}" in latex
    assert "RuntimeError: boom" in tables.to_markdown(tidy["table1_eager"], TABLES[0])
    assert "loss_jacobian/backward" in tables.to_markdown(
        tidy["table6_hypothesis0"], BY_NAME["table6_hypothesis0"]
    )


def test_write_table_writes_csv_md_and_tex(tidy, tmp_path):
    table = BY_NAME["table2_compiled"]
    tables.write_table(table, tidy[table.name], str(tmp_path / table.name))
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        f"{table.name}.{ext}" for ext in ("csv", "md", "tex")
    ]
    back = pd.read_csv(tmp_path / f"{table.name}.csv")
    assert list(back.columns) == tables.TIDY_COLUMNS and len(back) == len(tidy[table.name])
    assert (tmp_path / f"{table.name}.md").read_text() == tables.to_markdown(
        tidy[table.name], table
    )


def test_make_tables_writes_every_table_even_unmeasured_ones(aggregate, tmp_path):
    import make_tables

    summary, cells = aggregate
    summary.to_parquet(tmp_path / "summary.parquet")
    cells.to_parquet(tmp_path / "cells.parquet")
    out = tmp_path / "tables"
    assert (
        make_tables.main(
            [
                "--summary",
                str(tmp_path / "summary.parquet"),
                "--cells",
                str(tmp_path / "cells.parquet"),
                "--outdir",
                str(out),
            ]
        )
        == 0
    )
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [f"{t.name}.{ext}" for t in TABLES for ext in ("csv", "md", "tex")]
        + [make_tables.MEMORY_FILE, make_tables.VARLEN_FILE]
    )
    empty = pd.read_csv(out / f"{MISSING_TABLE}.csv")
    assert empty.empty and list(empty.columns) == tables.TIDY_COLUMNS
    assert tables.EMPTY_NOTE in (out / f"{MISSING_TABLE}.md").read_text()


def test_time_to_first_step_is_the_ahead_of_time_compile_plus_the_first_call(tidy):
    table = next(t for t in TABLES if t.first_step)
    rows = tidy[table.name].set_index(["framework", "mode", "model"])
    for (framework, mode, model), r in rows[rows["status"] == "ok"].iterrows():
        compiled = FRAMEWORKS[framework].modes[mode].compiled
        # The fake first iteration is 20 steps; compiled modes add 0.25 s ahead of time.
        first_s = [
            (0.25 if compiled else 0.0)
            + 20 * step_seconds(framework, mode, model, "backward", seed)
            for seed in (0, 1)
        ]
        assert r["first_step"] == pytest.approx(sum(first_s) / 2 * 1e6), (framework, mode)
    for table in TABLES:
        if not table.first_step:
            assert tidy[table.name]["first_step"].isna().all(), table.name


def test_rows_layout_has_a_row_per_mode_and_a_column_group_per_task(tidy):
    for table in (t for t in TABLES if t.layout == "rows"):
        t = tidy[table.name]
        if t.empty:
            continue
        wide = tables.wide_table(t, table)
        labels = set(wide["framework (mode)"])
        assert labels == {tables.column_label(f, m) for f, m in zip(t["framework"], t["mode"])}
        assert len(wide) == len(t[["model", "framework", "mode"]].drop_duplicates())
        for task in set(t["task"]):
            assert f"{report_spec.task_label(task)} mean" in wide.columns
        assert any(c.endswith("first step") for c in wide.columns) == table.first_step


def test_every_printed_ratio_is_the_comparisons_products_with_its_operands(aggregate):
    """Each ratio, its interval, basis and processes come from the comparisons product; its
    operands beside it are the means of the seeds it paired (here: the cells that ran both
    seeds pair two, the partial one one), so ratio = numerator / denominator exactly."""
    summary, cells = aggregate
    for table in TABLES:
        tidy = tables.tidy_table(table, summary, cells, fake_comparisons())
        for name in tables.RATIOS:
            printed = tidy[tidy[name].notna()]
            assert printed[f"{name}_low"].notna().all(), (table.name, name)
            assert (printed[f"{name}_low"] <= printed[name] * 1.001).all()
            assert (printed[name] <= printed[f"{name}_high"] * 1.001).all()
            assert tidy.loc[tidy[name].isna(), f"{name}_low"].isna().all()
            operands = printed[f"{name}_numerator_s"] / printed[f"{name}_denominator_s"]
            assert operands.to_numpy() == pytest.approx(printed[name].to_numpy())
            one = printed[printed[f"{name}_n"] == 1]
            assert set(one[f"{name}_basis"]) <= {comparisons.ITERATIONS}
    compiled = tables.tidy_table(BY_NAME["table2_compiled"], summary, cells,
                                 fake_comparisons()).set_index(["framework", "mode", "model"])
    partial = compiled.loc[("torch", "script", "mlp512")]  # ran seed 0 only: paired on it
    assert partial["improvement_n"] == 1
    assert partial["improvement_basis"] == comparisons.ITERATIONS
    h0 = tables.tidy_table(BY_NAME["table6_hypothesis0"], summary, cells, fake_comparisons())
    assert "[" in tables.to_markdown(h0, BY_NAME["table6_hypothesis0"])


def test_noisy_cells_dropped_warmup_and_no_steady_state_are_counted_and_said(aggregate):
    summary, cells = aggregate
    flagged = cells.assign(noisy=False, warmup_dropped=0, no_steady_state=False)
    torch = (flagged["framework"] == "torch") & (flagged["mode"] == "eager")
    flagged.loc[torch & (flagged["seed"] == 0), ["noisy", "no_steady_state"]] = True
    flagged.loc[torch, "warmup_dropped"] = 4
    tidy = tables.tidy_table(BY_NAME["table1_eager"], summary, flagged, noise_threshold=0.1)
    mine = tidy[tidy["framework"] == "torch"]
    assert (mine["n_noisy"] == 1).all() and (mine["n_no_steady_state"] == 1).all()
    assert (mine["warmup_dropped"] == 8).all()  # 4 iterations in each of 2 seeds
    assert mine["flags"].str.contains("noisy in 1 of 2 seeds").all()
    assert (tidy.loc[tidy["framework"] != "torch", "flags"] == "").all()
    assert "no steady state found" in tables.to_markdown(tidy, BY_NAME["table1_eager"])


def test_a_condition_measured_on_a_busy_machine_is_counted_marked_and_said(aggregate):
    """A busy seed (aggregate's `busy`, after its re-timings) makes its condition's n_busy and
    how busy; the Markdown marks its mean and says how many cells were busy.  A busy reading
    of a failed cell does not count, and a quiet run marks nothing."""
    summary, cells = aggregate
    table = BY_NAME["table1_eager"]
    quiet = cells.assign(busy=False, busy_retimed=0, load_other_cores=0.05)
    torch = (quiet["framework"] == "torch") & (quiet["mode"] == "eager")
    planted = quiet.copy()
    planted.loc[torch & (planted["seed"] == 0), ["busy", "load_other_cores"]] = [True, 0.72]
    planted.loc[planted["status"] != "ok", "busy"] = True  # never measured: not counted
    tidy = tables.tidy_table(table, summary, planted)
    mine = tidy[tidy["framework"] == "torch"]
    assert (mine["n_busy"] == 1).all() and (mine["busy_other_cores"] == 0.72).all()
    assert (tidy.loc[tidy["framework"] != "torch", "n_busy"] == 0).all()
    markdown = tables.to_markdown(tidy, table)
    assert markdown.count(tables.BUSY_MARK) == len(mine) + 1  # each mean, and the count's line
    assert f"{len(mine)} cells of {len(mine)} conditions" in markdown
    assert "busy in 1 of 2 seeds (other processes took up to 0.72 cores)" in markdown
    for calm in (quiet, cells):  # no busy cell; cells from before the reading
        tidy = tables.tidy_table(table, summary, calm)
        assert (tidy["n_busy"] == 0).all() and tidy["busy_other_cores"].isna().all()
        assert "busy" not in tables.to_markdown(tidy, table)


def test_a_failed_cells_note_names_its_log_and_an_unsupported_one_needs_none(aggregate):
    _, cells = aggregate
    cells = cells.assign(log=[f"tree/logs/{i}.log" for i in range(len(cells))])
    notes = tables.condition_status(cells)
    failed = cells[cells["status"] == "failed"].iloc[0]
    assert f"(log: {failed['log']})" in " ".join(notes["note"])
    unsupported = notes[notes["note"].str.contains("unsupported")]
    assert not unsupported.empty and not unsupported["note"].str.contains("log:").any()


def test_each_figure_of_the_tables_draws_the_tables_of_its_kind():
    drawn = {t.name: tables.figure_of(t) for t in TABLES}
    assert {f for f in drawn.values() if f} == set(tables.FIGURES_OF_TABLES)
    assert [t.name for t in tables.tables_drawn_in("mlp_backward")] == [
        t.name for t in TABLES if t.published and set(t.tasks) == {"backward"}]
    for table in tables.tables_drawn_in("jacobians"):
        assert {TASKS[t].derivative for t in table.tasks} == {"jacobian"}
    assert all(tables.ratio_tasks(t) == ("backward", "loss_jacobian")
               for t in tables.tables_drawn_in("hypothesis0"))
    assert all(t.first_step for t in tables.tables_drawn_in("frameworks"))
