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
from adbench.claims import CLAIMS, MARGIN, VERDICT_STATISTIC
from adbench.formatting import latex
from adbench.report_spec import cited, model_label, task_label
from adbench.machines_section import block_namer
from adbench.verdicts import GROUP_FIELDS, MIXED, NOT_MEASURED

VERDICT_ORDER = (inference.SUPPORTED, inference.CONTRADICTED, MIXED, inference.EQUIVALENT,
                 inference.INCONCLUSIVE, inference.ONE_PROCESS, NOT_MEASURED)
# How a verdict from fewer than three processes per side is printed (verdicts.provisional).
PROVISIONAL = "provisional"
BLOCK_FIELDS = ["machine", "device", "threads"]


def claim_words(claim, published: dict) -> dict:
    """name, source, statement and test of a claim: its words, all in claims.json's "claims"
    (a hypothesis's first three from "hypotheses"), the test's {margin} and {bound} filled
    with the claim's own numbers."""
    entry = published.get("claims", {}).get(claim.key, {})
    if "hypothesis" in entry:
        entry = {**published.get("hypotheses", {}).get(entry["hypothesis"], {}), **entry}
    words = {k: entry.get(k, claim.key if k == "name" else "")
             for k in ("name", "source", "statement", "test")}
    words["test"] = words["test"].format(margin=f"{claim.margin:.0%}", bound=f"{claim.bound:g}")
    return {k: latex(cited(v) if k == "source" else v) for k, v in words.items()}


def quantity_words(quantity: str, published: dict) -> str:
    """A compared quantity as the paper names it (claims.json's "quantities")."""
    return published.get("quantities", {}).get(quantity, str(quantity).replace("_", " "))


def side_label(r, end: str, published: dict) -> str:
    """'MLP 512, PyTorch (eager), backward' for one end of a comparison row ('the bound'
    for a comparison of one condition with its claim's bound)."""
    get = lambda field: r[f"{end}_{field}"]  # noqa: E731
    if pd.isna(get("framework")):
        return "the bound"
    quantity = quantity_words(get("quantity"), published)
    return (
        f"{model_label(get('model'))}, {tbl.column_label(get('framework'), get('mode'))}, "
        f"{task_label(get('task'))} ({quantity})"
    )


def group_label(r) -> str:
    """'PyTorch (eager)' when both sides share a (framework, mode) or the group tests one
    against a bound, else 'A over B'."""
    numerator = tbl.column_label(r["numerator_framework"], r["numerator_mode"])
    if pd.isna(r["denominator_framework"]):
        return numerator
    denominator = tbl.column_label(r["denominator_framework"], r["denominator_mode"])
    return numerator if numerator == denominator else f"{numerator} over {denominator}"


def verdict_text(r) -> str:
    """A verdict as printed: with '(provisional)' where it rests on fewer than three
    processes per side."""
    provisional = str(r.get("provisional", "")).lower() in ("true", "1")
    return r["verdict"] + (f" ({PROVISIONAL})" if provisional else "")


def basis_text(r) -> str:
    """What an interval rests on, where it is not several processes per side."""
    return "" if int(r["n_processes"] or 0) >= 2 else "iterations of one process"


def block_text(r, several) -> str:
    """The block of a row where a tree has several (`several`: several_blocks' namer; its
    machine by its short name where it has several machines), else ''."""
    return several(r) if several else ""


def several_blocks(frame: pd.DataFrame):
    """How rows of a verdicts file name their block (machines_section.block_namer): None
    (false) where they share one."""
    return block_namer(frame)


def sides_of_a_mixed_claim(groups: pd.DataFrame) -> str:
    """'supported: A, B; contradicted: C': the groups on each side of a mixed claim."""
    several = several_blocks(groups)
    named = []
    for verdict in VERDICT_ORDER:
        mine = groups[groups["verdict"] == verdict]
        if verdict in (inference.ONE_PROCESS, NOT_MEASURED) or mine.empty:
            continue
        labels = [group_label(r) + (f" ({block_text(r, several)})" if several else "")
                  for _, r in mine.iterrows()]
        named.append(f"{verdict}: {', '.join(labels)}")
    return "; ".join(named)


def counts_text(r) -> str:
    """What a claim's or group's comparisons say alone: 's/c/e/i', then one-process and
    not-measured counts when there are any."""
    text = "/".join(str(int(r[f"n_{v}"])) for v in (
        inference.SUPPORTED, inference.CONTRADICTED, inference.EQUIVALENT,
        inference.INCONCLUSIVE))
    for column, words in (("n_one_process", "one process"), ("n_not_measured", "not measured")):
        if int(r[column]):
            text += f"; {int(r[column])} {words}"
    return latex(text)


def processes_text(n) -> str:
    return fmt.NA if fmt.missing(n) or not int(n) else fmt.counted(int(n), "process", "processes")


def claim_context(claim, r, published: dict, groups: pd.DataFrame | None = None) -> dict:
    """A claim's words, test and verdict; for a mixed one, its groups on each side."""
    mine = groups[groups["claim"] == claim.key] if groups is not None else None
    return {
        **claim_words(claim, published),
        "key": claim.key.replace("_", "-"),  # for a LaTeX label
        "verdict": latex(verdict_text(r)),
        "sides": (latex(sides_of_a_mixed_claim(mine))
                  if r["verdict"] == MIXED and mine is not None else ""),
        "n": int(r["n"]),
        "counts": counts_text(r),
        "n_not_measured": int(r["n_not_measured"]),
        "ratio": fmt.ratio(r["ratio"], r["low"], r["high"]),
        "processes": latex(processes_text(r["n_processes"])),
    }


WAIT_MARK = "\\textsuperscript{w}"  # a side's loop waited (paper_context.waiting_conditions)


def side_condition(r, end: str) -> tuple:
    """A comparison row's side as paper_context.waiting_conditions keys it."""
    return (*(r[f"{end}_{f}"] for f in ("framework", "mode", "model", "task")), r["device"],
            int(r["threads"]))


def waited(r, waiting: set) -> bool:
    return any(side_condition(r, end) in waiting for end in ("numerator", "denominator"))


def groups_that_waited(comparisons: pd.DataFrame, waiting: set) -> set[tuple]:
    """(claim, machine, device, threads, *GROUP_FIELDS) of the groups with a waiting side."""
    keys = ["claim", *BLOCK_FIELDS, *GROUP_FIELDS]
    return {tuple(r[k] for k in keys) for _, r in comparisons.iterrows() if waited(r, waiting)}


def group_context(r, several: bool | str, waits: bool = False) -> dict:
    return {
        "waited": WAIT_MARK if waits else "",
        "label": latex(group_label(r)),
        "block": latex(block_text(r, several)),
        "measured": int(r["n_planned"]) - int(r["n_not_measured"]),
        "planned": int(r["n_planned"]),
        "counts": counts_text(r),
        "ratio": fmt.ratio(r["ratio"], r["low"], r["high"]),
        "difference": fmt.difference_us(
            r["difference_us"], r["difference_low_us"], r["difference_high_us"]),
        "processes": latex(processes_text(r["n_processes"])),
        "n": fmt.NA if fmt.missing(r["n_processes"]) else int(r["n_processes"]),
        "verdict": latex(verdict_text(r)),
    }


def rule_context(confidence: float) -> dict:
    """The decision rule as the verdicts applied it (claims and inference), for the paper."""
    return {
        "confidence": fmt.percent(confidence, tex=True),
        "margin": fmt.percent(MARGIN, tex=True),
        "low": fmt.number(1 - MARGIN, 2),
        "high": fmt.number(1 + MARGIN, 2),
        "statistic": latex(VERDICT_STATISTIC),
        "min_processes": inference.MIN_PROCESSES,
    }


def verdicts_context(
    claims: pd.DataFrame,
    groups: pd.DataFrame,
    comparisons: pd.DataFrame,
    published: dict,
    confidence: float,
    waiting: set = frozenset(),
) -> dict:
    """Per claim its words, test, verdict and pooled ratio; its groups with their
    Holm-corrected verdicts; every measured comparison for the appendix; the rule.
    `waiting`: paper_context.waiting_conditions, whose comparisons and groups are marked."""
    rows, grouped = [], []
    group_waits = groups_that_waited(comparisons, waiting)
    key = lambda r: tuple(r[k] for k in ["claim", *BLOCK_FIELDS, *GROUP_FIELDS])  # noqa
    several = several_blocks(groups)
    for claim in CLAIMS:
        found = claims[claims["claim"] == claim.key]
        if found.empty:
            continue
        rows.append(claim_context(claim, found.iloc[0], published, groups))
        mine = groups[groups["claim"] == claim.key]
        shown = mine[mine["verdict"] != NOT_MEASURED]
        grouped.append({
            "name": rows[-1]["name"],
            "groups": [group_context(r, several, key(r) in group_waits)
                       for _, r in shown.iterrows()],
            "n_unmeasured_groups": len(mine) - len(shown),
        })
    measured = comparisons
    names = {c.key: claim_words(c, published)["name"] for c in CLAIMS}
    tally = claims["verdict"].value_counts()
    provisional = claims["provisional"].astype(str).str.lower().isin(["true", "1"]) \
        if "provisional" in claims else pd.Series(False, index=claims.index)
    return {
        "claims": rows,
        "n_provisional": int(provisional.sum()),
        "n_mixed": int((claims["verdict"] == MIXED).sum()),
        "grouped": [g for g in grouped if g["groups"]],
        "tally": ", ".join(f"{int(tally[v])} {latex(v)}" for v in VERDICT_ORDER if v in tally),
        "comparisons": [
            {
                "claim": names.get(r["claim"], latex(r["claim"])),
                "group": latex(group_label(r)),
                "numerator": latex(side_label(r, "numerator", published)),
                "denominator": latex(side_label(r, "denominator", published)),
                "block": latex(block_text(r, several)),
                "ratio": fmt.ratio(r["ratio"], r["low"], r["high"]),
                "processes": int(r["n_processes"]),
                "basis": latex(basis_text(r)),
                "verdict": latex(verdict_text(r)),
                "waited": WAIT_MARK if waited(r, waiting) else "",
            }
            for _, r in measured.iterrows()
        ],
        "any_waited": bool(group_waits),
        **rule_context(confidence),
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
        "n_warmup_dropped": env.get("n_warmup_dropped", "n/a"),
        "iterations_dropped": env.get("iterations_dropped", "n/a"),
        "n_no_steady_state": env.get("n_no_steady_state", "n/a"),
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
