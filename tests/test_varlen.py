"""Variable-length inputs downstream of the cells (issue 26, item 2): the epoch, steady step
and retraces of a process, read from fabricated raw rows whose answers are known; the claim
judged per (framework, mode); the table and the paper's section."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from test_verdicts import claim_row, evaluate, frame, processes

from adbench import claims, spec, stats, varlen, verdicts

CELL = {"framework": "tensorflow", "mode": "graph", "model": "lstm", "task": "backward_varlen",
        "device": "cpu", "threads": 1, "seed": 0, "machine": "x86 CPU"}


def rows(steps, traces, warmup=1, cell=CELL):
    return pd.DataFrame([{**cell, "iteration": i, "phase": "warmup" if i < warmup else
                          "measured", "step_s": s, "sequence_length": 4 + i, "traces": t}
                         for i, (s, t) in enumerate(zip(steps, traces))])


def test_an_epoch_sums_its_measured_steps_and_counts_the_new_traces():
    # warm-up traced once; the measured epoch traces anew at iterations 2 and 4 (0.5 s and
    # 0.3 s against a steady 0.01 s)
    epochs = stats.sequence_epochs(rows([1.0, 0.01, 0.5, 0.01, 0.3, 0.01],
                                        [1, 1, 2, 2, 3, 3]))
    (e,) = epochs.to_dict("records")
    assert e["epoch_s"] == pytest.approx(0.83) and e["epoch_steps"] == 5
    assert e["n_traces"] == 2 and e["steady_step_s"] == pytest.approx(0.01)
    assert e["retrace_s"] == pytest.approx(0.49 + 0.29)
    assert e["epoch_mean_length"] == pytest.approx(np.mean([5, 6, 7, 8, 9]))


def test_a_mode_without_a_counter_has_an_epoch_but_no_traces():
    (e,) = stats.sequence_epochs(rows([0.2, 0.1, 0.1], [None] * 3)).to_dict("records")
    assert e["epoch_s"] == pytest.approx(0.2) and np.isnan(e["n_traces"])
    assert np.isnan(e["retrace_s"]) and e["steady_step_s"] == pytest.approx(0.1)


def test_fixed_shape_cells_have_no_epoch():
    fixed = rows([0.1, 0.1], [None, None]).assign(task="backward", sequence_length=None)
    assert stats.sequence_epochs(fixed).empty
    assert stats.sequence_epochs(fixed.drop(columns=["sequence_length", "traces"])).empty


def epoch(framework, mode, model, task, seconds):
    return processes(framework, mode, model, task, stats.EPOCH, seconds)


def test_padding_is_judged_against_the_true_length_per_mode():
    """Eager pays for the padded steps; a compiled mode that retraces per length pays more
    for the true length: the groups say so, each on its own."""
    data = frame(epoch("torch", "eager", "lstm", "backward_padded", 2.0),
                 epoch("torch", "eager", "lstm", "backward_varlen", 1.0),
                 epoch("tensorflow", "graph", "lstm", "backward_padded", 2.0),
                 epoch("tensorflow", "graph", "lstm", "backward_varlen", 30.0))
    claims_frame, groups, comparisons = evaluate(data)
    mine = groups[groups["claim"] == "varying_lengths"].set_index(
        ["numerator_framework", "numerator_mode"])
    assert mine.loc[("torch", "eager"), "verdict"] == "supported"
    assert mine.loc[("tensorflow", "graph"), "verdict"] == "contradicted"
    measured = comparisons[(comparisons["claim"] == "varying_lengths")
                           & (comparisons["verdict"] != verdicts.NOT_MEASURED)]
    assert set(measured["numerator_task"]) == {"backward_padded"}
    assert set(measured["denominator_task"]) == {"backward_varlen"}
    assert claim_row((claims_frame, groups, comparisons), "varying_lengths")["n"] == 2


def test_the_claim_covers_every_sequence_model_and_no_other():
    models = {c.numerator.model for c in claims.varying_lengths().comparisons}
    assert models == {m for m, s in spec.MODELS.items() if s.sequence_features}


def cells_frame():
    base = {"device": "cpu", "threads": 1, "machine": "x86 CPU", "model": "rnn_cell",
            "status": "ok",
            "message": "", "epoch_steps": 5, "epoch_mean_length": 30.0}
    out = []
    for seed in (0, 1):
        out += [{**base, "framework": "torch", "mode": "eager", "task": "backward_varlen",
                 "seed": seed, "epoch_s": 1.0 + seed, "steady_step_s": 0.2, "n_traces": 0,
                 "retrace_s": 0.0},
                {**base, "framework": "torch", "mode": "compile", "task": "backward_padded",
                 "seed": seed, "epoch_s": 3.0, "steady_step_s": 0.3, "n_traces": 1,
                 "retrace_s": 2.0}]
    out.append({**base, "framework": "jax", "mode": "jit", "task": "backward_varlen_dynamic",
                "seed": 0, "status": "unsupported", "message": "jax.jit has no dynamic shapes",
                "epoch_s": np.nan, "steady_step_s": np.nan, "n_traces": np.nan,
                "retrace_s": np.nan})
    out.append({**base, "framework": "torch", "mode": "eager", "task": "backward",
                "seed": 0, "epoch_s": np.nan})
    return pd.DataFrame(out)


def test_the_table_has_a_row_per_condition_with_medians_over_processes():
    table = varlen.varlen_table(cells_frame())
    assert list(table.columns) == varlen.VARLEN_COLUMNS
    assert list(zip(table["mode"], table["strategy"])) == [("eager", "true"),
                                                           ("compile", "padded")]
    assert list(table["epoch_s"]) == [1.5, 3.0] and list(table["n_processes"]) == [2, 2]
    assert varlen.varlen_table(cells_frame().drop(columns="epoch_s")).empty


def test_the_section_lists_what_ran_and_what_did_not():
    empty = pd.DataFrame(columns=["claim", "verdict"])
    context = varlen.varlen_context(cells_frame(), empty, empty.assign(
        numerator_model=[], numerator_framework=[], numerator_mode=[]), {"claims": {}})
    assert [r["strategy"] for r in context["rows"]] == ["true", "padded"]
    assert [r["traces"] for r in context["rows"]] == ["0", "1"]
    assert [r["status"] for r in context["not_ok"]] == ["unsupported"]
    assert [s["task"] for s in context["strategies"]] == [
        t.replace("_", r"\_") for t in spec.SEQUENCE_TASKS]
    fixed = cells_frame()[lambda c: ~c["task"].isin(spec.SEQUENCE_TASKS)]
    assert varlen.varlen_context(fixed, empty, empty, {}) is None
