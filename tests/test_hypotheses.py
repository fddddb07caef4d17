"""adbench.findings: the paper's Hypothesis 0 is judged by the verdicts, never by the paper."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from adbench import hypotheses, selection, tables, verdicts
from adbench.claims import CLAIMS
from adbench.spec import TABLES

H0 = next(c for c in CLAIMS if c.key == "hypothesis0")
H0_TABLE = next(t for t in TABLES if t.name == H0.table)
STUDY = {"hypotheses": {H0.table: {"name": "Hypothesis 0", "statement": "equal costs"}}}
# Two conditions of H0's table, from the spec: its first model in two (framework, mode) pairs.
CONDITIONS = [(H0_TABLE.models[0], *pair) for pair in selection.pairs()[:2]]


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
                "test": H0.test,
                "n": sum(counts),
                "n_supported": supported,
                "n_contradicted": contradicted,
                "n_inconclusive": inconclusive,
                "n_not_measured": 0,
                "ratio": 1.5,
                "low": 1.4,
                "high": 1.6,
                "verdict": verdict,
            }
        ],
        columns=verdicts.CLAIM_COLUMNS,
    )


def comparisons_table(rows: list[tuple[str, str, str, str]]) -> pd.DataFrame:
    """comparisons.csv rows of H0: (model, framework, mode, verdict)."""
    first, second = H0_TABLE.tasks
    return pd.DataFrame(
        [
            {
                "claim": H0.key,
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
    (h0,) = hypotheses.hypotheses(data, STUDY, claims_table(verdict, counts), comparisons)
    assert h0["verdict"] == verdict
    assert (h0["n_within"], h0["n_outside"], h0["n_noise"]) == counts
    assert h0["n_judged"] == sum(counts)
    # the conditions named within the margin are those whose comparison the verdicts support
    assert len(h0["within"]) == counts[0]
    assert h0["table"] == H0.table and h0["n"] == 2  # the table's own ratios, described


def test_a_claims_table_without_hypothesis_0_says_not_measured():
    data = data_with(tidy_h0({CONDITIONS[0]: 1.5}))
    (h0,) = hypotheses.hypotheses(
        data, STUDY, claims_table("supported", (1, 0, 0)).iloc[0:0], comparisons_table([])
    )
    assert h0["verdict"] == verdicts.NOT_MEASURED and h0["n_judged"] == 0


def test_a_table_a_hypothesis_covers_gets_no_second_finding():
    data = data_with(tidy_h0({CONDITIONS[0]: 1.5}))
    assert [f["table"] for f in hypotheses.table_findings(data, STUDY)] == []
    assert [f["table"] for f in hypotheses.table_findings(data, {})] == [H0.table]
