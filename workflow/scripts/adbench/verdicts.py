"""Verdicts on the seeds' claims (adbench.claims), computed from the data.

Every comparison of a claim is evaluated in every (device, threads) block the run measured:
the ratio of the two conditions' means, its bootstrap interval (adbench.inference) and what
it says (supported, contradicted, inconclusive: within noise).  A comparison whose cells the
run lacks is "not measured", never dropped.  A claim's verdict combines its measured
comparisons (inference.combine); a claim none of whose cells were measured says so.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from adbench import inference, stats
from adbench.claims import CLAIMS, EQUAL_MARGIN, Claim, Side

NOT_MEASURED = "not measured"
COMPARISON_COLUMNS = [
    "claim", "device", "threads",
    *(f"{end}_{field}" for end in ("numerator", "denominator")
      for field in ("framework", "mode", "model", "task", "quantity")),
    "ratio", "low", "high", "verdict",
]
CLAIM_COLUMNS = ["claim", "kind", "test", "n", "n_supported", "n_contradicted",
                 "n_inconclusive", "n_not_measured", "ratio", "low", "high", "verdict"]


def key_of(side: Side, device: str, threads: int) -> tuple:
    """The side's key in stats.replicates_by_condition."""
    return (side.framework, side.mode, side.model, side.task, device, threads, side.quantity)


def judge(claim: Claim, interval: inference.Interval) -> str:
    if claim.kind == "equal":
        return inference.verdict_equal(interval, EQUAL_MARGIN)
    return inference.verdict_greater(interval)


def evaluate(bootstrap: pd.DataFrame, confidence: float,
             claims=CLAIMS) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(claims, comparisons): a row per claim with its verdict, one per comparison and block."""
    found = stats.replicates_by_condition(bootstrap)
    blocks = sorted(set(zip(bootstrap["device"], bootstrap["threads"])))
    claim_rows, comparison_rows = [], []
    for claim in claims:
        intervals, verdicts, missing = [], [], 0
        for device, threads in blocks:
            for comparison in claim.comparisons:
                row = {"claim": claim.key, "device": device, "threads": threads,
                       **{f"{end}_{field}": getattr(getattr(comparison, end), field)
                          for end in ("numerator", "denominator")
                          for field in ("framework", "mode", "model", "task", "quantity")}}
                numerator = found.get(key_of(comparison.numerator, device, threads))
                denominator = found.get(key_of(comparison.denominator, device, threads))
                if numerator is None or denominator is None:
                    missing += 1
                    comparison_rows.append({**row, "ratio": np.nan, "low": np.nan,
                                            "high": np.nan, "verdict": NOT_MEASURED})
                    continue
                interval = inference.ratio_interval(numerator, denominator, confidence)
                verdict = judge(claim, interval)
                intervals.append(interval)
                verdicts.append(verdict)
                comparison_rows.append({**row, "ratio": interval.point, "low": interval.low,
                                        "high": interval.high, "verdict": verdict})
        overall = inference.geometric_mean_interval(intervals, confidence)
        claim_rows.append({
            "claim": claim.key, "kind": claim.kind, "test": claim.test, "n": len(verdicts),
            **{f"n_{v}": verdicts.count(v) for v in (inference.SUPPORTED, inference.CONTRADICTED,
                                                     inference.INCONCLUSIVE)},
            "n_not_measured": missing if blocks else len(claim.comparisons),
            "ratio": overall.point, "low": overall.low, "high": overall.high,
            "verdict": inference.combine(verdicts) if verdicts else NOT_MEASURED,
        })
    return (pd.DataFrame(claim_rows, columns=CLAIM_COLUMNS),
            pd.DataFrame(comparison_rows, columns=COMPARISON_COLUMNS))
