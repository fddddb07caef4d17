"""The paper's tables (adbench.paper_tables) and headline numbers (adbench.findings) on
fabricated tidy rows: medians beside means, the speed-ups each where it belongs, the marks of
cells whose loops waited, and the study's improvement column re-derived."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from adbench import findings, paper_tables
from adbench.selection import table_modes
from adbench.report_spec import TABLES
from adbench.spec import FRAMEWORKS, eager_mode_of, timed_quantities

NAN = math.nan
ROOT = Path(__file__).resolve().parents[1]
BY_NAME = {t.name: t for t in TABLES}
COMPILED_TABLE = BY_NAME["table2_compiled"]  # the study's improvement table (columns layout)
EAGER_TABLE = BY_NAME["table1_eager"]  # the study's layout, no speed-ups
WIDE_TABLE = BY_NAME["table3_jacobian"]  # the study's layout, every mode of its frameworks
ROWS_TABLE = BY_NAME["table8_frameworks"]  # rows layout with speed-ups


def tidy_row(table, framework, mode, model, task, **numbers) -> dict:
    """One condition of a tidy table, ok, one thread on the CPU; `numbers` override."""
    return {
        "framework": framework, "mode": mode, "model": model, "task": task, "device": "cpu",
        "threads": 1, "machine": "x86 CPU", "status": "ok", "note": "", "flags": "", "n_seeds": 5,
        "mean": 100.0, "mean_sd": 4.0, "median": 97.0, "iqr": 3.0, "std": 10.0, "std_sd": 1.0,
        **numbers,
    }


def tidy(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(rows)


def no_study(table) -> pd.DataFrame:
    return pd.DataFrame(columns=["model", "task", "framework", "mode", "study_label", "mean",
                                 "std"])


def lines_of(context: dict) -> list[dict]:
    return [line for block in context["blocks"] for group in block["groups"]
            for line in group["lines"]]


def line(context: dict, label: str) -> dict:
    return next(x for x in lines_of(context) if x["label"] == label)


def compiled_pairs(table) -> list:
    return [p for p in table_modes(table) if FRAMEWORKS[p[0]].modes[p[1]].compiled]


def speedups(pair, **values) -> dict:
    """Every speed-up column of tables.py with its interval and processes."""
    out = {}
    for name, value in values.items():
        out.update({name: value, f"{name}_low": value * 0.9, f"{name}_high": value * 1.1,
                    f"{name}_n": 5})
    return out


# ----------------------------------------------------------------------------- medians
def test_a_narrow_study_table_prints_the_median_in_a_column_beside_the_mean():
    pairs = table_modes(EAGER_TABLE)[:2]
    model, task = EAGER_TABLE.models[0], EAGER_TABLE.tasks[0]
    ours = tidy([tidy_row(EAGER_TABLE, *p, model, task, median=91.5 + i)
                 for i, p in enumerate(pairs)])
    context = paper_tables.table_context(EAGER_TABLE, ours, no_study(EAGER_TABLE))
    assert [c["heads"] for c in context["columns"]] == [["mean", "median", "std"]] * 2
    cells = line(context, "this work")["cells"]
    assert cells[1] == "91.5" and cells[4] == "92.5"  # each pair's median beside its mean
    assert r"100 $\pm$ 4" in cells[0]
    assert "median" in context["caption"]
    assert not context["landscape"] and context["fontsize"].startswith(r"\small")


def test_a_wide_study_table_gives_median_and_iqr_a_line_under_our_row():
    pairs = table_modes(WIDE_TABLE)
    assert len(pairs) > paper_tables.MEDIAN_COLUMN_GROUPS
    model, task = WIDE_TABLE.models[0], WIDE_TABLE.tasks[0]
    ours = tidy([tidy_row(WIDE_TABLE, *p, model, task, median=50.0 + i, iqr=2.5)
                 for i, p in enumerate(pairs)])
    context = paper_tables.table_context(WIDE_TABLE, ours, no_study(WIDE_TABLE))
    assert all(c["heads"] == ["mean", "std"] for c in context["columns"])
    # small type always; a landscape page exactly where its printed width exceeds the text's
    assert context["fontsize"].startswith(r"\small")
    assert context["landscape"] == (paper_tables.table_pt(context["blocks"], context)
                                    > paper_tables.TEXT_PT)
    medians = next(x for x in lines_of(context) if x["label"].startswith("median, IQR"))
    assert medians["cells"] == [v for i in range(len(pairs)) for v in (f"{50.0 + i:.1f}", "2.50")]
    # every line spans the same columns as the header
    n_stats = sum(c["n"] for c in context["columns"])
    for x in lines_of(context):
        widths = [int(c.split("}")[0].split("{")[1]) if c.startswith(r"\multicolumn") else 1
                  for c in x["cells"]]
        assert sum(widths) == n_stats, x["label"]


def test_the_rows_layout_prints_a_median_beside_every_mean():
    pair = table_modes(ROWS_TABLE)[0]
    model, task = ROWS_TABLE.models[0], ROWS_TABLE.tasks[0]
    ours = tidy([tidy_row(ROWS_TABLE, *pair, model, task, median=88.8, first_step=NAN,
                          first_step_sd=NAN)])
    context = paper_tables.table_context(ROWS_TABLE, ours, no_study(ROWS_TABLE))
    heads = context["columns"][0]["heads"]
    assert heads[:2] == ["mean", "median"]
    assert lines_of(context)[0]["cells"][1] == "88.8"


# ----------------------------------------------------------------------------- speed-ups
def compiled_table_with_speedups(pairs, model, task) -> pd.DataFrame:
    """The compiled table's rows of one model and task: like-for-like step 2.0, backward 1.25,
    the study's construction 1.5."""
    return tidy([
        tidy_row(COMPILED_TABLE, *p, model, task,
                 **speedups(p, improvement=2.0, improvement_backward=1.25,
                            improvement_study_style=1.5))
        for p in pairs
    ])


def test_the_study_table_gives_both_like_for_like_speed_ups_and_the_studys_construction():
    pairs = compiled_pairs(COMPILED_TABLE)
    model, task = COMPILED_TABLE.models[0], COMPILED_TABLE.tasks[0]
    ours = compiled_table_with_speedups(pairs, model, task)
    published = pd.DataFrame([
        {"model": model, "task": task, "framework": f, "mode": m, "study_label": f,
         "mean": "465", "mean_sd": "14", "std": "21", "std_sd": "18", "improvement": "5.36"}
        for f, m in pairs
    ])
    context = paper_tables.table_context(COMPILED_TABLE, ours, published)
    labels = [x["label"] for x in lines_of(context)]
    for label in paper_tables.SPEEDUPS.values():
        assert paper_tables.latex(label) in labels
    step = line(context, paper_tables.latex(paper_tables.SPEEDUPS["improvement"]))["cells"]
    backward = line(
        context, paper_tables.latex(paper_tables.SPEEDUPS["improvement_backward"]))["cells"]
    study_style = line(
        context, paper_tables.latex(paper_tables.SPEEDUPS["improvement_study_style"]))["cells"]
    for i, pair in enumerate(pairs):
        assert "2.00" in step[i] and "n=5" in step[i] and "[1.80, 2.20]" in step[i]
        assert "1.50" in study_style[i]
        if "backward_s" in timed_quantities(*pair, task):
            assert "1.25" in backward[i]
        else:  # a whole-step mode has no backward pass of its own
            assert paper_tables.DASH in backward[i] and "1.25" not in backward[i]
    assert all("5.36" in c for c in line(context, "study (published): improvement")["cells"])
    assert "construction" in context["caption"]


def test_the_rows_layout_gives_only_like_for_like_speed_ups_and_a_dash_for_eager_modes():
    framework = next(f for f in FRAMEWORKS if eager_mode_of(f) and any(
        info.compiled for info in FRAMEWORKS[f].modes.values()))
    eager = (framework, eager_mode_of(framework))
    compiled = next(p for p in compiled_pairs(ROWS_TABLE) if p[0] == framework)
    model, task = ROWS_TABLE.models[0], ROWS_TABLE.tasks[0]
    ours = tidy([
        tidy_row(ROWS_TABLE, *eager, model, task, first_step=NAN, first_step_sd=NAN),
        tidy_row(ROWS_TABLE, *compiled, model, task, first_step=NAN, first_step_sd=NAN,
                 **speedups(compiled, improvement=3.0, improvement_backward=2.5,
                            improvement_study_style=9.75)),
    ])
    context = paper_tables.table_context(ROWS_TABLE, ours, no_study(ROWS_TABLE))
    heads = context["columns"][0]["heads"]
    assert heads == ["mean", "median", "time to first step", "step/step", "bwd/bwd"]
    eager_line, compiled_line = lines_of(context)
    assert eager_line["cells"][3:] == [paper_tables.DASH] * 2
    assert "3.00" in compiled_line["cells"][3]
    assert not any("9.75" in c for x in lines_of(context) for c in x["cells"])


# ----------------------------------------------------------------------------- waiting loops
def test_a_condition_whose_loop_waited_is_marked_on_its_mean_with_one_shared_note():
    pairs = table_modes(EAGER_TABLE)[:2]
    model, task = EAGER_TABLE.models[0], EAGER_TABLE.tasks[0]
    ours = tidy([tidy_row(EAGER_TABLE, *p, model, task) for p in pairs])
    waited = (*pairs[0], model, task, "cpu", 1)
    context = paper_tables.table_context(EAGER_TABLE, ours, no_study(EAGER_TABLE),
                                         waiting={waited})
    cells = line(context, "this work")["cells"]
    assert cells[0].endswith(r"$^{\mathrm{a}}$") and "$^" not in cells[3]
    assert context["notes"] == [{"mark": "a", "text": paper_tables.WAITING}]


def test_marks_of_a_partial_waiting_cell_share_one_superscript():
    pairs = table_modes(EAGER_TABLE)[:1]
    model, task = EAGER_TABLE.models[0], EAGER_TABLE.tasks[0]
    ours = tidy([tidy_row(EAGER_TABLE, *pairs[0], model, task, status="partial",
                          note="1 of 5 seeds not ok", flags="noisy in 1 of 4 seeds")])
    context = paper_tables.table_context(EAGER_TABLE, ours, no_study(EAGER_TABLE),
                                         waiting={(*pairs[0], model, task, "cpu", 1)})
    assert line(context, "this work")["cells"][0].endswith(r"$^{\mathrm{a,b,c}}$")
    assert [n["mark"] for n in context["notes"]] == ["a", "b", "c"]


# ----------------------------------------------------------------------------- a busy machine
def test_a_condition_measured_on_a_busy_machine_is_marked_with_one_shared_note():
    """Both layouts: the busy condition's mean carries the note's mark, a quiet one none, and
    the note is printed once however many conditions were busy."""
    for table in (EAGER_TABLE, ROWS_TABLE):
        pairs = table_modes(table)[:3]
        model, task = table.models[0], table.tasks[0]
        busy = [1, 0, 2][:len(pairs)]
        ours = tidy([tidy_row(table, *p, model, task, n_busy=n, busy_other_cores=0.7)
                     for p, n in zip(pairs, busy)])
        context = paper_tables.table_context(table, ours, no_study(table))
        assert context["notes"] == [{"mark": "a", "text": paper_tables.BUSY}], table.name
        marked = [c for x in lines_of(context) for c in x["cells"] if r"$^{\mathrm{a}}$" in c]
        assert len(marked) == sum(n > 0 for n in busy), table.name  # the quiet one has none


def test_without_a_busy_condition_nothing_is_marked():
    for n_busy in (0, NAN, None):  # none busy; tidy tables from before the reading
        ours = tidy([tidy_row(EAGER_TABLE, *p, EAGER_TABLE.models[0], EAGER_TABLE.tasks[0],
                              n_busy=n_busy) for p in table_modes(EAGER_TABLE)[:2]])
        context = paper_tables.table_context(EAGER_TABLE, ours, no_study(EAGER_TABLE))
        assert context["notes"] == [] and "$^" not in "".join(line(context, "this work")["cells"])


# ----------------------------------------------------------------------------- headline
def test_the_headline_gives_like_for_like_speed_ups_and_backward_only_where_timed():
    pairs = compiled_pairs(COMPILED_TABLE)
    model, task = COMPILED_TABLE.models[0], COMPILED_TABLE.tasks[0]
    ours = compiled_table_with_speedups(pairs, model, task)
    headline = findings.improvement_headline(COMPILED_TABLE, ours, no_study(COMPILED_TABLE),
                                             None)
    assert len(headline) == len(pairs)
    for g, pair in zip(headline, pairs):
        assert g["step"]["span"] == "2.00"
        if "backward_s" in timed_quantities(*pair, task):
            assert g["backward"]["span"] == "1.25"
        else:
            assert g["backward"] is None
        assert g["ours_study_style"] == "1.50"  # kept, but not a headline


def test_the_studys_improvement_column_is_its_eager_mean_over_its_compiled_mean():
    from adbench.sections.contexts import read_published

    data = {t.name: {"ours": pd.DataFrame(),
                     "published": read_published(ROOT / "report" / "published", t)}
            for t in TABLES}
    example = findings.study_example(data)
    assert example["n_printed"] > 0 and example["n_reproduced"] == example["n_printed"]
    assert abs(float(example["eager"]) / float(example["compiled"])
               - float(example["ratio"])) < 1e-3


def test_a_printed_number_is_reproduced_rounded_or_cut_to_its_digits():
    assert findings.reproduces(2889 / 538, "5.36")  # 5.370, cut
    assert findings.reproduces(1.476, "1.48")  # rounded
    assert not findings.reproduces(1.49, "1.47")
    assert not findings.reproduces(1.0, "n/a")


def test_the_seeds_of_a_table_are_counted_in_words():
    assert paper_tables.seeds_text(pd.DataFrame({"n_seeds": [1, 1]})) == "1 seed"
    assert paper_tables.seeds_text(pd.DataFrame({"n_seeds": [2, 2]})) == "2 seeds"
    assert paper_tables.seeds_text(pd.DataFrame({"n_seeds": [1, 2, 5]})) == "1, 2 or 5 seeds"


def test_a_table_goes_landscape_by_what_it_prints_not_by_its_column_count():
    """Estimated from its cells: narrow numbers in four mode groups fit the portrait text;
    the same table with seven-digit means over their sd, a ratio line and a long label does
    not (a landscape page in the same small type, never a smaller one)."""
    pairs = table_modes(WIDE_TABLE)
    model, task = WIDE_TABLE.models[0], WIDE_TABLE.tasks[0]
    narrow = tidy([tidy_row(WIDE_TABLE, *p, model, task, mean=1.5, std=0.1, median=1.5)
                   for p in pairs[:2]])
    context = paper_tables.table_context(WIDE_TABLE, narrow, no_study(WIDE_TABLE))
    assert not context["landscape"]
    wide_row = [{"label": "a label as long as a sentence of the study's own words",
                 "cells": ["1234567.8 $\\pm$ 123456.7"] * (context["n_cols"] - 1)}]
    blocks = [{"groups": [{"lines": wide_row}]}]
    assert paper_tables.table_pt(blocks, context) > paper_tables.TEXT_PT
    assert paper_tables.fitted(blocks, context)["landscape"]
    assert paper_tables.fitted(blocks, context)["fontsize"].startswith(r"\small")


def test_the_memory_appendix_prints_what_a_step_keeps_or_that_it_is_not_measurable():
    """Kept bytes in MiB with their ratio to the saved activations' size; a condition whose
    backend has no valid reading on the device reads n/m, never 0."""
    from adbench import paper_context
    from adbench.tables import MEMORY_COLUMNS

    mib = 2**20
    base = {c: NAN for c in MEMORY_COLUMNS} | {
        "machine": "x86 CPU", "device": "cpu", "model": "mlp512", "task": "backward_retained",
        "threads": 1, "n_processes": 2, "n_peak_from_start": 0, "n_not_measurable": 0,
        "peak_over_baseline_bytes": 40 * mib, "held_after_step_bytes": 300 * mib,
        "heap_after_step_bytes": 200 * mib}
    memory = pd.DataFrame([
        base | {"framework": "torch", "mode": "eager", "kept_by_step_bytes": 12 * mib,
                "saved_activations_bytes": 12.5 * mib, "kept_over_saved": 0.96},
        base | {"framework": "tensorflow", "mode": "eager", "n_not_measurable": 2},
    ])
    context = paper_context.memory_context(memory, None)
    torch_row, tf_row = context["rows"]
    assert torch_row["kept"] == "12.0" and torch_row["kept_over_saved"] == "0.960"
    assert tf_row["kept"] == paper_context.NOT_MEASURABLE_MARK
    assert tf_row["kept_over_saved"] == "n/a" and context["any_not_measurable"]
