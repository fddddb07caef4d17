"""What the paper says about its statistics, its verdicts and its harness (render_paper).

Every sentence's numbers come from the run: the config's statistics (environment.json), the
verdicts (make_verdicts.py's claims.csv and comparisons.csv) and, when it was run, the
harness validation (benchmarks/validate_harness.py's JSON).  Text is LaTeX-escaped here.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from adbench import formatting as fmt
from adbench import inference
from adbench import tables as tbl
from adbench.claims import CLAIMS, EQUAL_MARGIN
from adbench.formatting import latex
from adbench.spec import MODELS, TASKS


def geometric_mean_text(found: dict, sides: list[tuple[tuple, tuple]], confidence: float) -> str:
    """'1.23 [1.10, 1.35]': the geometric mean over (numerator, denominator) keys of
    stats.replicates_by_condition, with its interval; ', within noise' when it contains 1."""
    intervals = [
        inference.ratio_interval(found[n], found[d], confidence)
        for n, d in sides
        if n in found and d in found
    ]
    if not intervals:
        return "n/a"
    mean = inference.geometric_mean_interval(intervals, confidence)
    return fmt.ratio(mean.point, mean.low, mean.high) + (
        "" if mean.excludes_one else ", within noise"
    )


def claim_words(key: str, published: dict) -> dict:
    """name, source, statement of a claim, as claims.json gives them."""
    entry = published.get("claims", {}).get(key, {})
    if "hypothesis" in entry:
        entry = {**published.get("hypotheses", {}).get(entry["hypothesis"], {}), **entry}
    return {
        k: latex(entry.get(k, key if k == "name" else "")) for k in ("name", "source", "statement")
    }


def side_label(r, end: str) -> str:
    """'MLP 512, PyTorch (eager), backward' for one end of a comparison row."""
    get = lambda field: r[f"{end}_{field}"]  # noqa: E731
    quantity = get("quantity").removesuffix("_s")
    return (
        f"{MODELS[get('model')].label}, {tbl.column_label(get('framework'), get('mode'))}, "
        f"{TASKS[get('task')].label} ({quantity})"
    )


def verdicts_context(
    claims: pd.DataFrame, comparisons: pd.DataFrame, published: dict, confidence: float
) -> dict:
    """A row per claim (its words, our test, verdict and interval), and every measured
    comparison for the appendix table."""
    rows = []
    for claim in CLAIMS:
        found = claims[claims["claim"] == claim.key]
        if found.empty:
            continue
        r = found.iloc[0]
        rows.append(
            {
                **claim_words(claim.key, published),
                "test": latex(claim.test),
                "verdict": latex(r["verdict"]),
                "n": int(r["n"]),
                "counts": latex(
                    f"{int(r['n_supported'])}/{int(r['n_contradicted'])}/"
                    f"{int(r['n_inconclusive'])}"
                ),
                "n_not_measured": int(r["n_not_measured"]),
                "ratio": fmt.ratio(r["ratio"], r["low"], r["high"]),
            }
        )
    measured = comparisons[comparisons["verdict"] != "not measured"]
    several = measured[["device", "threads"]].drop_duplicates().shape[0] > 1
    names = {
        row_key: words["name"]
        for row_key, words in ((c.key, claim_words(c.key, published)) for c in CLAIMS)
    }
    tally = claims["verdict"].value_counts()
    return {
        "claims": rows,
        "tally": ", ".join(
            f"{int(tally[v])} {latex(v)}"
            for v in ("supported", "contradicted", "inconclusive", "not measured")
            if v in tally
        ),
        "comparisons": [
            {
                "claim": names.get(r["claim"], latex(r["claim"])),
                "numerator": latex(side_label(r, "numerator")),
                "denominator": latex(side_label(r, "denominator")),
                "block": latex(fmt.block(r["device"], r["threads"])) if several else "",
                "ratio": fmt.ratio(r["ratio"], r["low"], r["high"]),
                "verdict": latex(r["verdict"]),
            }
            for _, r in measured.iterrows()
        ],
        "confidence": fmt.percent(confidence, tex=True),
        "margin": fmt.percent(EQUAL_MARGIN, tex=True),
    }


def statistics_context(env: dict) -> dict:
    """The analysis settings and how many cells the flags caught."""
    rules = env.get("statistics", {})
    return {
        "confidence": fmt.percent(rules.get("confidence"), tex=True),
        "replicates": rules.get("bootstrap_replicates", "n/a"),
        "noise_threshold": fmt.percent(rules.get("noise_threshold"), tex=True),
        "warmup_window": rules.get("warmup_window", "n/a"),
        "warmup_tolerance": fmt.percent(rules.get("warmup_tolerance"), tex=True),
        "n_ok": env.get("n_ok", "n/a"),
        "n_noisy": env.get("n_noisy", "n/a"),
        "n_warmup_short": env.get("n_warmup_short", "n/a"),
    }


def validation_context(path: str | None) -> dict | None:
    """benchmarks/validate_harness.py's findings, or None when it was not run."""
    if not path or not Path(path).exists():
        return None
    found = json.loads(Path(path).read_text())
    null = found.get("null_overhead") or {}
    interference = found.get("interference")
    return {
        "date": latex(str(found.get("ended_at", ""))[:10]),
        "machine": latex(
            f"{found.get('machine', {}).get('cpu_model', 'n/a')}, "
            f"{found.get('machine', {}).get('cpu_count', 'n/a')} CPUs"
        ),
        "repeats": found.get("workload", {}).get("repeats", "n/a"),
        "comparisons": [
            {
                "what": latex(f"{c['framework']} {c['quantity'].removesuffix('_s')}"),
                "timer": latex(c["independent_timer"]),
                "ratio": fmt.ratio(c["ratio_median"]),
                "spread": latex(", ".join(fmt.number(x, 3) for x in c["ratios"])),
                "ok": c["within_target"],
                "target": fmt.percent(c["target"], tex=True),
            }
            for c in found.get("comparisons", [])
        ],
        "null_split_us": fmt.microseconds(null.get("split_timer_median_s")),
        "null_whole_us": fmt.microseconds(null.get("whole_timer_median_s")),
        "null_fraction": fmt.percent(null.get("fraction_of_fastest"), places=None, tex=True),
        "null_ok": bool(null.get("within_target")),
        "interference": (
            None
            if not interference
            else {
                "ratio": fmt.ratio(interference.get("ratio_median", math.nan)),
                "ok": bool(interference.get("within_noise")),
                "n": len(interference.get("cells", [])),
            }
        ),
    }
