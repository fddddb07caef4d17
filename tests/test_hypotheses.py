"""adbench.hypotheses: the paper's Hypothesis 0 is judged by the verdicts, never by the paper."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from adbench import hypotheses, spec, tables, verdicts
from adbench.claims import CLAIMS
from adbench.report_spec import TABLES

H0 = next(c for c in CLAIMS if c.key == "hypothesis0")
H0_TABLE = next(t for t in TABLES if t.name == H0.table)
STUDY = {"hypotheses": {H0.table: {"name": "Hypothesis 0", "statement": "equal costs"}}}
# Two conditions of H0's table, from the spec: its first model in two (framework, mode) pairs.
CONDITIONS = [(H0_TABLE.models[0], *pair) for pair in spec.pairs()[:2]]


def tidy_h0(ratios: dict) -> pd.DataFrame:
    """H0's tidy table: a backward and a loss-Jacobian row per (model, framework, mode), the
    latter with its task ratio and an interval far from 1 (the data contradict H0)."""
    first, second = H0_TABLE.tasks
    rows = []
    for (model, framework, mode), ratio in ratios.items():
        where = {
            "model": model,
            "framework": framework,
            "mode": mode,
            "device": "cpu",
            "threads": 1,
            "status": "ok",
            "mean": 1.0,
        }
        rows.append({**where, "task": first})
        rows.append(
            {
                **where,
                "task": second,
                "mean": ratio,
                "task_ratio": ratio,
                "task_ratio_low": ratio * 0.95,
                "task_ratio_high": ratio * 1.05,
            }
        )
    return pd.DataFrame(rows).reindex(columns=tables.TIDY_COLUMNS)


def data_with(tidy: pd.DataFrame) -> dict:
    empty = pd.DataFrame(columns=tables.TIDY_COLUMNS)
    return {
        t.name: {"ours": tidy if t.name == H0.table else empty, "published": pd.DataFrame()}
        for t in TABLES
    }


def claims_table(verdict: str, counts: tuple[int, int, int]) -> pd.DataFrame:
    """One small synthetic claims table (make_verdicts.py's claims.csv) with H0's row."""
    supported, contradicted, inconclusive = counts
    return pd.DataFrame(
        [
            {
                "claim": H0.key,
                "kind": H0.kind,
                "n": sum(counts),
                "n_supported": supported,
                "n_contradicted": contradicted,
                "n_inconclusive": inconclusive,
                "n_equivalent": 0,
                "n_one_process": 0,
                "n_not_measured": 0,
                "ratio": 1.5,
                "low": 1.4,
                "high": 1.6,
                "n_processes": 5,
                "verdict": verdict,
            }
        ],
        columns=verdicts.CLAIM_COLUMNS,
    )


def groups_table(rows: list[tuple[str, str, str]]) -> pd.DataFrame:
    """groups.csv rows of H0: (framework, mode, verdict), one measured model each."""
    return pd.DataFrame(
        [
            {
                "claim": H0.key,
                "machine": "x86 CPU",
                "device": "cpu",
                "threads": 1,
                "numerator_framework": f,
                "numerator_mode": m,
                "denominator_framework": f,
                "denominator_mode": m,
                "n_planned": len(H0_TABLE.models),
                **{c: 0 for c in verdicts.COUNTS},
                "n_not_measured": len(H0_TABLE.models) - 1,
                "ratio": 1.5,
                "low": 1.4,
                "high": 1.6,
                "n_processes": 5,
                "difference_us": 312.0,
                "difference_low_us": 250.0,
                "difference_high_us": 380.0,
                "verdict": verdict,
            }
            for f, m, verdict in rows
        ],
        columns=verdicts.GROUP_COLUMNS,
    )


def comparisons_table(rows: list[tuple[str, str, str, str]]) -> pd.DataFrame:
    """comparisons.csv rows of H0: (model, framework, mode, verdict)."""
    first, second = H0_TABLE.tasks
    return pd.DataFrame(
        [
            {
                "claim": H0.key,
                "machine": "x86 CPU",
                "device": "cpu",
                "threads": 1,
                **{
                    f"{end}_{field}": value
                    for end, task in (("numerator", second), ("denominator", first))
                    for field, value in (
                        ("framework", f),
                        ("mode", m),
                        ("model", model),
                        ("task", task),
                        ("quantity", "step_s"),
                    )
                },
                "ratio": math.nan,
                "low": math.nan,
                "high": math.nan,
                "n_processes": 5,
                "verdict": verdict,
            }
            for model, f, m, verdict in rows
        ],
        columns=verdicts.COMPARISON_COLUMNS,
    )


@pytest.mark.parametrize(
    "verdict, counts",
    [("supported", (2, 0, 0)), ("contradicted", (1, 1, 0)), ("inconclusive", (1, 0, 1))],
)
def test_the_hypothesis_0_verdict_is_the_claims_tables_value(verdict, counts):
    # The tidy ratios (1.5 and 1.6, intervals within 5%) contradict H0 whatever the claims
    # table says: a paper that judged H0 itself would print "contradicted" every time.
    data = data_with(tidy_h0(dict(zip(CONDITIONS, (1.5, 1.6)))))
    each = ["supported"] * counts[0] + ["contradicted"] * counts[1] + ["inconclusive"] * counts[2]
    comparisons = comparisons_table([(*c, v) for c, v in zip(CONDITIONS, each)])
    (h0,) = hypotheses.hypotheses(
        data, STUDY, claims_table(verdict, counts), groups_table([]), comparisons
    )
    assert h0["verdict"] == verdict
    assert (h0["n_within"], h0["n_outside"], h0["n_noise"]) == counts
    assert h0["n_judged"] == sum(counts)
    # the conditions named within the margin are those whose comparison the verdicts support
    assert len(h0["within"]) == counts[0]
    assert h0["table"] == H0.table and h0["n"] == 2  # the table's own ratios, described


def test_a_claims_table_without_hypothesis_0_says_not_measured():
    data = data_with(tidy_h0({CONDITIONS[0]: 1.5}))
    (h0,) = hypotheses.hypotheses(
        data,
        STUDY,
        claims_table("supported", (1, 0, 0)).iloc[0:0],
        groups_table([]),
        comparisons_table([]),
    )
    assert h0["verdict"] == verdicts.NOT_MEASURED and h0["n_judged"] == 0


def test_hypothesis_0_is_shown_per_framework_and_mode_as_the_groups_judge_it():
    (first, f1, m1), (_, f2, m2) = CONDITIONS
    data = data_with(tidy_h0(dict(zip(CONDITIONS, (1.5, 1.02)))))
    groups = groups_table([(f1, m1, "contradicted"), (f2, m2, "supported")])
    (h0,) = hypotheses.hypotheses(
        data, STUDY, claims_table("inconclusive", (1, 1, 0)), groups, comparisons_table([])
    )
    assert [g["verdict"] for g in h0["groups"]] == ["contradicted", "supported"]
    assert [g["label"] for g in h0["groups"]] == [
        tables.column_label(f1, m1),
        tables.column_label(f2, m2),
    ]
    assert h0["groups"][0]["difference"].startswith("+312")
    assert h0["groups"][0]["measured"] == 1 and h0["groups"][0]["processes"] == "5 processes"


def test_a_table_a_hypothesis_covers_gets_no_second_finding():
    data = data_with(tidy_h0({CONDITIONS[0]: 1.5}))
    assert [f["table"] for f in hypotheses.table_findings(data, STUDY)] == []
    assert [f["table"] for f in hypotheses.table_findings(data, {})] == [H0.table]


def test_a_group_whose_loop_waited_is_marked_and_only_it():
    (model, f1, m1), (_, f2, m2) = CONDITIONS
    data = data_with(tidy_h0(dict(zip(CONDITIONS, (1.5, 1.02)))))
    groups = groups_table([(f1, m1, "contradicted"), (f2, m2, "supported")])
    comparisons = comparisons_table([(model, f1, m1, "contradicted"),
                                     (model, f2, m2, "supported")])
    waiting = {(f2, m2, model, H0_TABLE.tasks[0], "cpu", 1)}  # its backward side waited
    (h0,) = hypotheses.hypotheses(
        data, STUDY, claims_table("inconclusive", (1, 1, 0)), groups, comparisons, waiting
    )
    assert [bool(g["waited"]) for g in h0["groups"]] == [False, True] and h0["any_waited"]


def test_the_ratios_quoted_of_a_hypothesis_are_its_verdicts_not_the_tables_means():
    """The tidy table's ratios are of means (0.289 and 2.41 here); the verdicts' comparisons
    of medians (0.79 and 1.97): the abstract and the section quote the latter."""
    data = data_with(tidy_h0(dict(zip(CONDITIONS, (0.289, 2.41)))))
    comparisons = comparisons_table([(*c, "contradicted") for c in CONDITIONS])
    comparisons["ratio"] = [0.79, 1.97]
    (h0,) = hypotheses.hypotheses(data, STUDY, claims_table("contradicted", (0, 2, 0)),
                                  groups_table([]), comparisons)
    assert (h0["low"], h0["high"], h0["median"]) == ("0.790", "1.97", "1.38")
    assert h0["span"].startswith("0.790") and h0["span"].endswith("1.97")
    assert h0["worst_ratio"] == "1.97" and h0["statistic"] == "median"
    # without measured comparisons the table's own ratios stand, and say nothing of medians
    bare = comparisons.assign(ratio=math.nan)
    (h0,) = hypotheses.hypotheses(data, STUDY, claims_table("contradicted", (0, 2, 0)),
                                  groups_table([]), bare)
    assert h0["high"] == "2.41" and "statistic" not in h0
