"""Verdicts on the seeds' claims (adbench.claims), computed from the data by one rule.

Every comparison of a claim is evaluated in every (device, threads) block the run measured:
the ratio of the two conditions' times (claims.VERDICT_STATISTIC, paired by seed), its
bootstrap interval, the difference in microseconds, and what it says on its own (a
description, never the rule).  A comparison whose cells the run lacks is "not measured";
one with a single process per side is "one process": printed, never judged.

The verdicts (inference.decide against each claim's bound and margin, claims.MARGIN):
- a group (the comparisons of one pair of (framework, mode) in one block): the geometric
  mean of its judged comparisons with a between-comparison interval, Holm-corrected over
  the claim's groups;
- the claim: the geometric mean of all its judged comparisons, one test.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from adbench import inference, stats
from adbench.claims import CLAIMS, VERDICT_STATISTIC, Claim, Comparison, Side

NOT_MEASURED = "not measured"
DESCRIPTIVE = (inference.SUPPORTED, inference.CONTRADICTED, inference.EQUIVALENT,
               inference.INCONCLUSIVE, inference.ONE_PROCESS)
SIDE_FIELDS = ("framework", "mode", "model", "task", "quantity")
GROUP_FIELDS = ["numerator_framework", "numerator_mode", "denominator_framework",
                "denominator_mode"]
ESTIMATE = ["ratio", "low", "high", "n_processes"]
COUNTS = [f"n_{v.replace(' ', '_')}" for v in DESCRIPTIVE] + ["n_not_measured"]
COMPARISON_COLUMNS = [
    "claim", "device", "threads",
    *(f"{end}_{field}" for end in ("numerator", "denominator") for field in SIDE_FIELDS),
    *ESTIMATE, "difference_us", "difference_low_us", "difference_high_us", "verdict",
]
GROUP_COLUMNS = ["claim", "device", "threads", *GROUP_FIELDS, "n_planned", *COUNTS, *ESTIMATE,
                 "difference_us", "difference_low_us", "difference_high_us", "verdict"]
CLAIM_COLUMNS = ["claim", "kind", "test", "statistic", "margin", "bound", "n", "n_groups", *COUNTS,
                 *ESTIMATE, "verdict"]
MICRO = 1e6


def key_of(side: Side, device: str, threads: int) -> tuple:
    """The side's key in stats.replicates_by_condition."""
    return (side.framework, side.mode, side.model, side.task, device, threads, side.quantity)


def side_fields(comparison: Comparison) -> dict:
    return {f"{end}_{field}": getattr(getattr(comparison, end), field)
            for end in ("numerator", "denominator") for field in SIDE_FIELDS}


def compare(found: stats.Replicates, comparison: Comparison, device: str, threads: int,
            confidence: float) -> tuple[inference.Interval, inference.Interval] | None:
    """(ratio, difference) of one comparison in one block, paired by seed; None when a side
    was not measured (or the sides share no seed)."""
    numerator = found.processes.get(key_of(comparison.numerator, device, threads))
    denominator = found.processes.get(key_of(comparison.denominator, device, threads))
    if numerator is None or denominator is None:
        return None
    sides = inference.paired(numerator, denominator,
                             "/".join(map(str, (*side_fields(comparison).values(), device,
                                                threads))))
    if sides is None:
        return None
    num, den, n = sides
    # A difference in microseconds only of times (not of a ratio such as FIRST_OVER_STEADY).
    timed = comparison.numerator.quantity.endswith("_s")
    return (inference.ratio_interval(num, den, confidence, n),
            inference.difference_interval(num, den, confidence, n) if timed
            else inference.NO_INTERVAL)


def evidence(claim: Claim, ratio: inference.Interval) -> inference.Evidence:
    return inference.evidence(ratio, claim.margin, claim.bound)


def own_verdict(claim: Claim, ratio: inference.Interval, confidence: float) -> str:
    """What one comparison says alone (unadjusted, descriptive)."""
    if not ratio.judged:
        return inference.ONE_PROCESS
    return inference.decide(claim.kind, evidence(claim, ratio), confidence)


def estimate(ratio: inference.Interval) -> dict:
    return {"ratio": ratio.point, "low": ratio.low, "high": ratio.high,
            "n_processes": ratio.n_processes}


def difference(interval: inference.Interval | None) -> dict:
    if interval is None:
        interval = inference.NO_INTERVAL
    return {"difference_us": interval.point * MICRO, "difference_low_us": interval.low * MICRO,
            "difference_high_us": interval.high * MICRO}


def counts(verdicts: Sequence[str]) -> dict:
    return {f"n_{v.replace(' ', '_')}": list(verdicts).count(v) for v in (*DESCRIPTIVE,
                                                                          NOT_MEASURED)}


def comparison_rows(claim: Claim, found: stats.Replicates, blocks, confidence: float):
    """A row per comparison and block, with its ratio and difference intervals (or not
    measured), and the intervals themselves for pooling."""
    rows = []
    groups = list(dict.fromkeys(c.group for c in claim.comparisons))
    in_groups = sorted(claim.comparisons, key=lambda c: groups.index(c.group))
    for device, threads in blocks:
        for comparison in in_groups:
            row = {"claim": claim.key, "device": device, "threads": threads,
                   **side_fields(comparison)}
            measured = compare(found, comparison, device, threads, confidence)
            if measured is None:
                rows.append({**row, **estimate(inference.NO_INTERVAL), **difference(None),
                             "verdict": NOT_MEASURED, "_ratio": None, "_difference": None})
                continue
            ratio, diff = measured
            rows.append({**row, **estimate(ratio), **difference(diff),
                         "verdict": own_verdict(claim, ratio, confidence),
                         "_ratio": ratio, "_difference": diff})
    return rows


def pool(rows: list[dict], confidence: float, key: str):
    """(ratio, difference) pooled over rows' judged comparisons, or over every measured one
    when none is judged (then only printed); verdict-bearing only in the first case."""
    measured = [r for r in rows if r["_ratio"] is not None]
    judged = [r for r in measured if r["_ratio"].judged]
    use = judged or measured
    ratio = inference.pooled([r["_ratio"] for r in use], confidence, key)
    diff = inference.pooled_mean([r["_difference"] for r in use], confidence, key + "/us")
    return ratio, diff, bool(judged)


def group_rows(claim: Claim, rows: list[dict], confidence: float) -> list[dict]:
    """A row per group of the claim's comparisons (see the module), Holm over the groups."""
    out, tests = [], []
    keys = ["device", "threads", *GROUP_FIELDS]
    for values in dict.fromkeys(tuple(r[k] for k in keys) for r in rows):
        mine = [r for r in rows if tuple(r[k] for k in keys) == values]
        ratio, diff, judged = pool(mine, confidence, "/".join(map(str, (claim.key, *values))))
        measured = any(r["_ratio"] is not None for r in mine)
        out.append({"claim": claim.key, **dict(zip(keys, values)), "n_planned": len(mine),
                    **counts([r["verdict"] for r in mine]), **estimate(ratio),
                    **difference(diff if measured else None),
                    "verdict": (NOT_MEASURED if not measured else
                                inference.ONE_PROCESS if not judged else None)})
        if judged:
            tests.append((len(out) - 1, evidence(claim, ratio)))
    decided = inference.decide_all(claim.kind, [e for _, e in tests], confidence)
    for (index, _), verdict in zip(tests, decided):
        out[index]["verdict"] = verdict
    return out


def claim_row(claim: Claim, rows: list[dict], n_groups: int, confidence: float) -> dict:
    ratio, _, judged = pool(rows, confidence, claim.key)
    measured = any(r["_ratio"] is not None for r in rows)
    verdict = (inference.decide(claim.kind, evidence(claim, ratio), confidence)
               if judged else inference.ONE_PROCESS if measured else NOT_MEASURED)
    return {"claim": claim.key, "kind": claim.kind, "test": claim.test,
            "statistic": VERDICT_STATISTIC, "margin": claim.margin, "bound": claim.bound,
            "n": sum(r["_ratio"] is not None and r["_ratio"].judged for r in rows),
            "n_groups": n_groups, **counts([r["verdict"] for r in rows]), **estimate(ratio),
            "verdict": verdict}


def evaluate(bootstrap: pd.DataFrame, confidence: float,
             claims=CLAIMS) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(claims, groups, comparisons): a row per claim, per group and block, per comparison and
    block.  Without any block measured a claim's comparisons are all "not measured"."""
    found = stats.replicates_by_condition(bootstrap, VERDICT_STATISTIC)
    blocks = sorted(set(zip(bootstrap["device"], bootstrap["threads"])))
    claim_out, group_out, comparison_out = [], [], []
    for claim in claims:
        rows = comparison_rows(claim, found, blocks, confidence)
        groups = group_rows(claim, rows, confidence)
        row = claim_row(claim, rows, len(groups), confidence)
        if not blocks:
            row["n_not_measured"] = len(claim.comparisons)
        claim_out.append(row)
        group_out += groups
        comparison_out += rows
    return (pd.DataFrame(claim_out, columns=CLAIM_COLUMNS),
            pd.DataFrame(group_out, columns=GROUP_COLUMNS),
            pd.DataFrame(comparison_out, columns=COMPARISON_COLUMNS))
