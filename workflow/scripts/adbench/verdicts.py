"""Verdicts on the seeds' claims (adbench.claims), decided from the comparisons product
(adbench.comparisons: every ratio, interval and replicate is made there, none here).

Per comparison, what it says alone (descriptive, never the rule): inference.decide on its own
evidence, or "one process" where a side has one process (printed, never judged).

Per group (one pair of (framework, mode) in one (machine, device, threads) block): the
decision rule on the group's pooled ratio (the geometric mean of its judged comparisons, its
interval resampling them as well), with the claim's groups Holm-corrected together; a group
is judged by its comparisons' kind (a claim with "only" has groups of two kinds).

Per claim, a rule over its groups that cannot hide disagreement: the verdict every judged
group shares (supported only when every judged group supports it, contradicted only when
every one contradicts it); "mixed" when they disagree, the groups on each side named in
groups.csv; "one process" when no group could be judged, "not measured" when none was
measured.  The claim's pooled ratio is printed as a summary and decides nothing.

A verdict is provisional when it rests on fewer than PROVISIONAL_BELOW processes per side
(a group's fewest; a claim's, its deciding groups' fewest): printed and counted so.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from adbench import comparisons as cmp
from adbench import inference
from adbench.claims import CLAIMS, VERDICT_STATISTIC, Claim

NOT_MEASURED = "not measured"
MIXED = "mixed"
JUDGED = (inference.SUPPORTED, inference.CONTRADICTED, inference.EQUIVALENT,
          inference.INCONCLUSIVE)
DESCRIPTIVE = (*JUDGED, inference.ONE_PROCESS)
# A verdict from fewer processes per side is provisional: with two, Student's t has one
# degree of freedom and the interval says little about a third process.
PROVISIONAL_BELOW = 3
SIDE_FIELDS = cmp.SIDE_FIELDS
BLOCK_FIELDS = list(cmp.BLOCK_FIELDS)
GROUP_FIELDS = ["numerator_framework", "numerator_mode", "denominator_framework",
                "denominator_mode"]
ESTIMATE = ["ratio", "low", "high", "n_processes", "basis"]
COUNTS = [f"n_{v.replace(' ', '_')}" for v in DESCRIPTIVE] + ["n_not_measured"]
DIFFERENCE = ["difference_us", "difference_low_us", "difference_high_us"]
COMPARISON_COLUMNS = [
    "claim", *BLOCK_FIELDS,
    *(f"{end}_{field}" for end in ("numerator", "denominator") for field in SIDE_FIELDS),
    "kind", "seeds", "numerator_point", "denominator_point", *ESTIMATE, *DIFFERENCE,
    "verdict", "provisional",
]
GROUP_COLUMNS = ["claim", *BLOCK_FIELDS, *GROUP_FIELDS, "kind", "n_planned", *COUNTS,
                 *ESTIMATE, *DIFFERENCE, "verdict", "provisional"]
CLAIM_COLUMNS = ["claim", "kind", "statistic", "margin", "bound", "n", "n_groups",
                 *COUNTS, *(f"n_groups_{v}" for v in JUDGED), *ESTIMATE,
                 "verdict", "provisional"]


def evidence(claim: Claim, replicates, point: float) -> inference.Evidence:
    interval = inference.Interval(point, np.nan, np.nan, np.asarray(replicates, dtype=float))
    return inference.evidence(interval, claim.margin, claim.bound)


def provisional(n_processes) -> bool:
    return bool(n_processes) and int(n_processes) < PROVISIONAL_BELOW


def group_of(r) -> tuple:
    """A row's group as claims.Comparison.group names it (None for a bound's side)."""
    return tuple(None if pd.isna(r[f]) else r[f] for f in GROUP_FIELDS)


def block_of(r) -> tuple:
    return tuple(r[f] for f in BLOCK_FIELDS)


def comparison_verdict(claim: Claim, r, confidence: float) -> str:
    """What one comparison says alone (unadjusted, descriptive)."""
    if int(r["n_processes"]) < inference.MIN_PROCESSES:
        return inference.ONE_PROCESS
    found = evidence(claim, r["replicates"], r["ratio"])
    return inference.decide(claim.kind_of(group_of(r)), found, confidence)


def comparison_rows(claim: Claim, made: pd.DataFrame, confidence: float) -> list[dict]:
    rows = []
    for _, r in made.iterrows():
        verdict = comparison_verdict(claim, r, confidence)
        rows.append({**{c: r[c] for c in COMPARISON_COLUMNS if c in r},
                     "claim": claim.key, "kind": claim.kind_of(group_of(r)),
                     "verdict": verdict,
                     "provisional": verdict in JUDGED and provisional(r["n_processes"])})
    return rows


def counts(verdicts: Sequence[str], not_measured: int = 0) -> dict:
    found = {f"n_{v.replace(' ', '_')}": list(verdicts).count(v) for v in DESCRIPTIVE}
    return {**found, "n_not_measured": not_measured}


def estimate(r) -> dict:
    return {k: r[k] for k in ESTIMATE}


def group_rows(claim: Claim, group_means: pd.DataFrame, compared: list[dict],
               confidence: float) -> list[dict]:
    """A row per group measured, its verdict Holm-corrected over the claim's judged groups."""
    out, tests = [], []
    planned = {g: sum(c.group == g for c in claim.comparisons)
               for g in dict.fromkeys(c.group for c in claim.comparisons)}
    for _, g in group_means.iterrows():
        mine = [c for c in compared if block_of(c) == block_of(g) and group_of(c) == group_of(g)]
        verdicts = [c["verdict"] for c in mine]
        judged = any(v != inference.ONE_PROCESS for v in verdicts)
        kind = claim.kind_of(group_of(g))
        n_planned = planned[group_of(g)]
        out.append({"claim": claim.key, **{f: g[f] for f in BLOCK_FIELDS},
                    **dict(zip(GROUP_FIELDS, group_of(g))), "kind": kind,
                    "n_planned": n_planned, **counts(verdicts, n_planned - len(mine)),
                    **estimate(g), **{k: g[k] for k in DIFFERENCE},
                    "verdict": inference.ONE_PROCESS, "provisional": False})
        if judged:
            tests.append((len(out) - 1, kind, evidence(claim, g["replicates"], g["ratio"])))
    adjusted = holm_evidence([found for _, _, found in tests])
    for (index, kind, _), found in zip(tests, adjusted):
        out[index]["verdict"] = inference.decide(kind, found, confidence)
        out[index]["provisional"] = provisional(out[index]["n_processes"])
    return out


def holm_evidence(found: Sequence[inference.Evidence]) -> list[inference.Evidence]:
    """Each side's p-values Holm-corrected over the family (the claim's judged groups)."""
    if not found:
        return []
    columns = [inference.holm([getattr(e, side) for e in found])
               for side in ("above", "below", "within")]
    return [inference.Evidence(*ps) for ps in zip(*columns)]


def claim_verdict(groups: Sequence[dict]) -> tuple[str, bool]:
    """The rule over a claim's groups (the module's), and whether it is provisional."""
    judged = [g for g in groups if g["verdict"] in JUDGED]
    if not judged:
        return (inference.ONE_PROCESS if groups else NOT_MEASURED), False
    verdicts = {g["verdict"] for g in judged}
    verdict = verdicts.pop() if len(verdicts) == 1 else MIXED
    return verdict, any(g["provisional"] for g in judged)


def claim_row(claim: Claim, summary, groups: list[dict], compared: list[dict],
              n_blocks: int) -> dict:
    verdict, is_provisional = claim_verdict(groups)
    planned = len(claim.comparisons) * max(n_blocks, 1)
    group_counts = {f"n_groups_{v}": sum(g["verdict"] == v for g in groups)
                    for v in JUDGED}
    return {"claim": claim.key, "kind": claim.kind,
            "statistic": VERDICT_STATISTIC, "margin": claim.margin, "bound": claim.bound,
            "n": sum(c["verdict"] != inference.ONE_PROCESS for c in compared),
            "n_groups": len(groups),
            **counts([c["verdict"] for c in compared], planned - len(compared)),
            **group_counts,
            **(estimate(summary) if summary is not None else
               {k: (None if k == "basis" else np.nan) for k in ESTIMATE}),
            "verdict": verdict, "provisional": is_provisional}


def evaluate(comparisons: pd.DataFrame, confidence: float,
             claims=CLAIMS) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(claims, groups, comparisons) from the comparisons product's claim rows."""
    mine = comparisons[comparisons["kind"] == "claim"]
    n_blocks = len({block_of(r) for _, r in mine.iterrows()})
    claim_out, group_out, comparison_out = [], [], []
    for claim in claims:
        rows = mine[mine["name"] == claim.key]
        compared = comparison_rows(claim, rows[rows["level"] == "comparison"], confidence)
        groups = group_rows(claim, rows[rows["level"] == "group"], compared, confidence)
        summary = rows[rows["level"] == "claim"]
        claim_out.append(claim_row(claim, summary.iloc[0] if len(summary) else None, groups,
                                   compared, n_blocks))
        group_out += groups
        comparison_out += compared
    return (pd.DataFrame(claim_out, columns=CLAIM_COLUMNS),
            pd.DataFrame(group_out, columns=GROUP_COLUMNS),
            pd.DataFrame(comparison_out, columns=COMPARISON_COLUMNS))
