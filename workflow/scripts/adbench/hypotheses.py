"""What the paper says the two-task tables' ratios show and how the hypotheses stand: each
ratio table described (span, median, the ratio furthest from 1), and each hypothesis's
judgment exactly as the verdicts (make_verdicts.py) give it: the paper judges nothing itself.

Built from the tidy tables (make_tables.py), claims.json's words and the verdicts; text arrives
LaTeX-escaped.
"""

from __future__ import annotations

import math
import statistics

import pandas as pd

from adbench import formatting as fmt
from adbench import inference, report_stats
from adbench import tables as tbl
from adbench.claims import CLAIMS, MARGIN, VERDICT_STATISTIC, Claim
from adbench.formatting import latex, missing
from adbench.report_spec import TABLES, TableInfo, cited, model_label, task_label
from adbench import verdicts as verdicts_module
from adbench.verdicts import NOT_MEASURED

# What claims.json may say about a hypothesis (keyed by table name); only name and statement
# are required.
HYPOTHESIS_FIELDS = {"name": "", "premise": "", "statement": "", "source": ""}


def ratio_finding(table: TableInfo, ours: pd.DataFrame) -> dict | None:
    """A two-task table's ratios per model and mode, described: their span, median, the one
    furthest from 1, and in how many conditions the two tasks' costs differ beyond noise."""
    pair = tbl.ratio_tasks(table)
    if pair is None or ours.empty:
        return None
    rows = ours[(ours["task"] == pair[1]) & ours["task_ratio"].notna()]
    if rows.empty:
        return None
    several = report_stats.several_blocks(rows)
    ratios = [float(r) for r in rows["task_ratio"]]
    worst = max(rows.itertuples(), key=lambda r: abs(math.log(r.task_ratio)))
    # Told apart at all: the ratio's interval excludes 1, from two processes per side or more
    # (an interval of one process's iterations concludes nothing).
    judged = [r for r in rows.itertuples() if processes_of(r) >= 2]
    return {
        "table": table.name,
        "title": latex(table.title),
        "numerator": latex(task_label(pair[1])),
        "denominator": latex(task_label(pair[0])),
        "n": len(rows),
        "n_judged": len(judged),
        "n_one_process": len(rows) - len(judged),
        "n_differs": sum(interval_of(r).excludes_one for r in judged),
        "span": fmt.span(ratios, tex=True),
        "low": fmt.ratio(min(ratios)),
        "high": fmt.ratio(max(ratios)),
        "median": fmt.ratio(statistics.median(ratios)),
        "worst": latex(condition_label(worst, several)),
        "worst_ratio": fmt.ratio(worst.task_ratio),
    }


def hypothesis_claims(study: dict) -> dict[str, Claim]:
    """Table name -> the claim that judges the table's ratios, for every hypothesis the study's
    text states about a table (claims.json's "hypotheses", keyed by table name)."""
    # TODO(spec): a TableInfo.hypothesis field (name, statement, source) would replace
    # claims.json's "hypotheses", keyed by table name until then.
    stated = study.get("hypotheses", {})
    return {c.table: c for c in CLAIMS if c.table in stated}


def table_findings(data: dict, study: dict) -> list[dict]:
    """ratio_finding of every two-task table this run measured, but those a hypothesis
    section covers."""
    judged = hypothesis_claims(study)
    found = (ratio_finding(t, data[t.name]["ours"]) for t in TABLES if t.name not in judged)
    return [f for f in found if f is not None]


def hypotheses(
    data: dict,
    study: dict,
    verdicts: pd.DataFrame,
    groups: pd.DataFrame,
    comparisons: pd.DataFrame,
    waiting: set = frozenset(),
):
    """Per hypothesis on a measured table: its words (claims.json), the table's ratios
    described, and the judgment of its claim exactly as the verdicts (make_verdicts.py) give
    it, per (framework, mode) as well: the paper judges nothing itself.  `waiting`:
    paper_context.waiting_conditions, whose groups are marked."""
    judged = hypothesis_claims(study)
    out = []
    for table in (t for t in TABLES if t.name in judged):
        finding = ratio_finding(table, data[table.name]["ours"])
        if finding is None:
            continue
        finding = {**finding, **verdict_ratios(judged[table.name], comparisons)}
        words = {**HYPOTHESIS_FIELDS, **study["hypotheses"][table.name]}
        out.append(
            {
                **finding,
                "hypothesis": {
                    k: latex(cited(v) if k == "source" else v) for k, v in words.items()
                },
                "within_pct": fmt.percent(MARGIN, tex=True),
                **judgment(judged[table.name], verdicts, groups, comparisons, waiting),
            }
        )
    return out


def verdict_ratios(claim: Claim, comparisons: pd.DataFrame) -> dict:
    """A hypothesis's ratios as its verdict reads them (comparisons.csv: each condition's
    VERDICT_STATISTIC over its processes, numerator over denominator), described as
    ratio_finding describes a table's: what the paper quotes of a hypothesis is the
    statistic its verdict uses, not the tables' means.  Empty where none was measured."""
    mine = comparisons[(comparisons["claim"] == claim.key)
                       & (comparisons["verdict"] != NOT_MEASURED)
                       & pd.to_numeric(comparisons["ratio"], errors="coerce").gt(0)]
    if mine.empty:
        return {}
    several = report_stats.several_blocks(mine)
    rows = mine.rename(columns=lambda c: c.removeprefix("numerator_"))
    ratios = [float(r) for r in rows["ratio"]]
    worst = max(rows.itertuples(), key=lambda r: abs(math.log(r.ratio)))
    return {
        "n": len(rows),
        "span": fmt.span(ratios, tex=True),
        "low": fmt.ratio(min(ratios)),
        "high": fmt.ratio(max(ratios)),
        "median": fmt.ratio(statistics.median(ratios)),
        "worst": latex(condition_label(worst, several)),
        "worst_ratio": fmt.ratio(worst.ratio),
        "statistic": latex(VERDICT_STATISTIC),
    }


def judgment(
    claim: Claim,
    verdicts: pd.DataFrame,
    groups: pd.DataFrame,
    comparisons: pd.DataFrame,
    waiting: set = frozenset(),
) -> dict:
    """A claim's verdict and counts from claims.csv, its groups (each (framework, mode))
    from groups.csv, and from comparisons.csv the conditions it holds in alone."""
    row = verdicts[verdicts["claim"] == claim.key]
    if row.empty:  # verdicts written before the claim existed: nothing judged it
        return {
            "verdict": latex(NOT_MEASURED),
            "ratio": fmt.NA,
            "processes": fmt.NA,
            "n_judged": 0,
            "n_within": 0,
            "n_outside": 0,
            "n_noise": 0,
            "n_one_process": 0,
            "within": [],
            "groups": [],
            "n_unmeasured_groups": 0,
            "any_waited": False,
        }
    r = row.iloc[0]
    mine = comparisons[
        (comparisons["claim"] == claim.key) & (comparisons["verdict"] != NOT_MEASURED)
    ]
    several = report_stats.several_blocks(mine)
    # a comparison's condition is its numerator's (same device and threads on both sides)
    holds = mine[mine["verdict"] == inference.SUPPORTED].rename(
        columns=lambda c: c.removeprefix("numerator_")
    )
    own = groups[groups["claim"] == claim.key]
    shown = own[own["verdict"] != NOT_MEASURED]
    marked = report_stats.groups_that_waited(mine, waiting)
    waits = lambda g: tuple(  # noqa: E731
        g[k] for k in ["claim", *report_stats.BLOCK_FIELDS, *verdicts_module.GROUP_FIELDS]
    ) in marked
    return {
        "verdict": latex(report_stats.verdict_text(r)),
        "ratio": fmt.ratio(r["ratio"], r["low"], r["high"]),
        "processes": report_stats.processes_text(r["n_processes"]),
        "n_judged": int(r["n"]),
        "n_within": int(r["n_supported"]),
        "n_outside": int(r["n_contradicted"]),
        "n_noise": int(r["n_inconclusive"]) + int(r["n_equivalent"]),
        "n_one_process": int(r["n_one_process"]),
        "within": [latex(condition_label(c, several)) for c in holds.itertuples()],
        "groups": [
            report_stats.group_context(g, several, waits(g)) for _, g in shown.iterrows()
        ],
        "n_unmeasured_groups": len(own) - len(shown),
        "any_waited": bool(marked),
    }


def condition_label(r, with_block: bool | str) -> str:
    """'MLP 512, PyTorch (eager)' for a row with model, framework and mode; with its block
    (', cpu, 4 threads', and its machine where several) when the rows span several."""
    label = f"{model_label(r.model)}, {tbl.column_label(r.framework, r.mode)}"
    if not with_block:
        return label
    return f"{label}, {report_stats.block_text(r._asdict(), with_block)}"


def processes_of(r) -> int:
    """The processes per side behind a tidy row's task ratio (0 where not recorded)."""
    n = getattr(r, "task_ratio_n", math.nan)
    return 0 if missing(n) else int(n)


def interval_of(r) -> inference.Interval:
    """A tidy row's task ratio and its bootstrap interval (the ratio alone, as a point, in
    tables written without intervals)."""
    low, high = (getattr(r, "task_ratio_low", math.nan), getattr(r, "task_ratio_high", math.nan))
    if missing(low) or missing(high):
        low = high = r.task_ratio
    return inference.Interval(r.task_ratio, low, high, None)
