"""Every estimate and comparison the outputs show, made once (analysis environment: numpy,
pandas); the tables, figures, scaling, verdicts and the paper read them and format.

Two products (workflow/scripts/compare.py writes them beside aggregate's files):

conditions  per condition (stats.CONDITION_FIELDS: a cell over its seeds, on one machine),
            quantity and statistic: the mean over its processes of each process's
            statistic, its interval, the processes and seeds behind it, the interval's basis.
comparisons per comparison: its two conditions (or one, tested against a bound), how they
            are paired (the seeds both ran, drawn together), the statistic, each side's mean
            over those seeds, the ratio and its interval, the difference of two times and its
            interval, the processes per side and the basis.  A comparison is one of:
            improvement    a framework's eager mode over one of its compiled modes, per
                           stats.IMPROVEMENTS (eager quantity / compiled quantity)
            task_ratio     one task's step over another's, same mode and model (TASK_PAIRS:
                           Hypothesis 0's, and the vectorised over the row-by-row Jacobian)
            cheap_gradient a condition's step over its forward (scaling.forward_source)
            frameworks     each framework's eager mode over the first framework's (spec order)
            machines       a condition on one machine over the same condition on the first
                           machine (sort order) that measured it: the trees of several
                           machines, compared (`denominator_machine` names the other)
            claim          a comparison of a claim (adbench.claims), in every block measured
            A row's `level` says what it is: "comparison" (two conditions, or one against a
            bound), or a set of comparisons' geometric mean, its interval resampling the
            comparisons as well: "models" (an improvement, task ratio, framework ratio or
            cheap-gradient ratio over a block's models of one of MODEL_SETS, `models` naming
            those it pools), "group" (a claim's comparisons of
            one pair of (framework, mode) in one block) and "claim" (all of a claim's: a
            summary, never its verdict: adbench.verdicts decides group by group).

The interval's basis (`basis`): "processes" where at least two processes per side were
resampled (then widened for their number, inference.expanded); "iterations of one process"
where one process per side was: its interval says how steady that process was, not how a
fresh process would time, and no conclusion is drawn from it; "comparisons" for a pooled row
(the spread between the comparisons it pools, each of its own basis).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from adbench import claims as claim_defs
from adbench import inference, spec, stats

PROCESSES, ITERATIONS, COMPARISONS = "processes", "iterations of one process", "comparisons"
KINDS = ("improvement", "task_ratio", "cheap_gradient", "frameworks", "machines", "claim")
BLOCK_FIELDS = ("machine", "device", "threads")
SIDE_FIELDS = ("framework", "mode", "model", "task", "quantity")
CONDITION_COLUMNS = [*stats.CONDITION_FIELDS, "quantity", "statistic", "point", "low", "high",
                     "n_processes", "seeds", "basis"]
COMPARISON_COLUMNS = [
    "kind", "name", "level", "n_pooled", "models", *BLOCK_FIELDS,
    *(f"{end}_{field}" for end in ("numerator", "denominator") for field in SIDE_FIELDS),
    "denominator_machine", "statistic", "seeds", "n_processes", "basis", "numerator_point", "denominator_point",
    "ratio", "low", "high", "difference_us", "difference_low_us", "difference_high_us",
    "replicates",
]
MICRO = 1e6
# The sets of models a "models" row pools over (those of them measured): the study's MLPs
# (its depth experiment, Tables 1-2), its small Jacobian models (Table 3), every model.
MODEL_SETS = (spec.MLPS, spec.STUDY_JACOBIAN_MODELS, tuple(spec.MODELS))
TABLE_STATISTIC = "mean"  # the study's tables: the mean over processes of each one's mean


def basis(n_processes: int) -> str:
    return PROCESSES if n_processes >= inference.MIN_PROCESSES else ITERATIONS


# ----------------------------------------------------------------------------- conditions
def condition_rows(found: stats.Replicates, statistic: str, confidence: float) -> list[dict]:
    rows = []
    for key, by_seed in found.processes.items():
        point, reps = found[key]
        n = len(by_seed)
        interval = inference.percentile_interval(
            point, inference.expanded(point, reps, n, confidence), confidence, n)
        rows.append({**dict(zip((*stats.CONDITION_FIELDS, "quantity"), key)),
                     "statistic": statistic, "point": interval.point, "low": interval.low,
                     "high": interval.high, "n_processes": n,
                     "seeds": seeds_text(by_seed), "basis": basis(n)})
    return rows


def conditions(bootstrap: pd.DataFrame, confidence: float) -> pd.DataFrame:
    """Every condition's estimate, per quantity and statistic (the module's `conditions`)."""
    rows = [row for statistic in inference.STATISTICS
            for row in condition_rows(stats.replicates_by_condition(bootstrap, statistic),
                                      statistic, confidence)]
    return pd.DataFrame(rows, columns=CONDITION_COLUMNS)


def estimates(conditions: pd.DataFrame, statistic: str) -> dict[tuple, tuple]:
    """(*CONDITION_FIELDS, quantity) -> (point, low, high, basis) of one statistic's rows of
    the conditions product: what a figure or table draws for a condition."""
    mine = conditions[conditions["statistic"] == statistic]
    keys = [*stats.CONDITION_FIELDS, "quantity"]
    return {tuple(r[:len(keys)]): tuple(r[len(keys):])
            for r in mine[keys + ["point", "low", "high", "basis"]].itertuples(index=False)}


def seeds_text(seeds: Iterable[int]) -> str:
    return ",".join(str(s) for s in sorted(seeds))


# ----------------------------------------------------------------------------- one comparison
@dataclasses.dataclass(frozen=True)
class Planned:
    """A comparison to make: its kind and name, its block, its two conditions' keys (the
    denominator None for a test against a bound), and the statistic."""

    kind: str
    name: str
    block: tuple  # (machine, device, threads)
    numerator: tuple  # (framework, mode, model, task, quantity)
    denominator: tuple | None
    statistic: str
    denominator_machine: str | None = None  # the other machine of a "machines" comparison

    def key(self, side: tuple, machine: str | None = None) -> tuple:
        """The side's key in stats.Replicates: (*CONDITION_FIELDS, quantity), on the block's
        machine unless another is named."""
        framework, mode, model, task, quantity = side
        block_machine, device, threads = self.block
        machine = machine or block_machine
        named = {"framework": framework, "mode": mode, "model": model, "task": task,
                 "device": device, "threads": threads, "machine": machine}
        return (*(named[f] for f in stats.CONDITION_FIELDS), quantity)

    def fields(self) -> dict:
        out = {"kind": self.kind, "name": self.name, **dict(zip(BLOCK_FIELDS, self.block)),
               "statistic": self.statistic, "denominator_machine": self.denominator_machine}
        for end, side in (("numerator", self.numerator), ("denominator", self.denominator)):
            out.update({f"{end}_{f}": (None if side is None else v)
                        for f, v in zip(SIDE_FIELDS, side or SIDE_FIELDS)})
        return out


@dataclasses.dataclass
class Made:
    """A comparison made: its row, and its ratio's and difference's intervals (kept for
    pooling)."""

    row: dict
    ratio: inference.Interval
    difference: inference.Interval = inference.NO_INTERVAL


def make(found: stats.Replicates, plan: Planned, confidence: float) -> Made | None:
    """One comparison, paired by seed; None where a side was not measured (or the sides
    share no seed)."""
    numerator = found.processes.get(plan.key(plan.numerator))
    if numerator is None:
        return None
    if plan.denominator is None:  # a condition's own value against a bound
        n = len(numerator)
        point, reps = found[plan.key(plan.numerator)]
        ratio = inference.percentile_interval(
            point, inference.expanded(point, reps, n, confidence, log=True), confidence, n)
        return Made(row(plan, ratio, sorted(numerator), point, math.nan,
                        inference.NO_INTERVAL), ratio)
    denominator = found.processes.get(plan.key(plan.denominator, plan.denominator_machine))
    if denominator is None:
        return None
    name = "/".join(map(str, (plan.kind, plan.name, *plan.block, *plan.numerator,
                              *plan.denominator, plan.denominator_machine)))
    sides = inference.paired(numerator, denominator, name)
    if sides is None:
        return None
    num, den, n = sides
    ratio = inference.ratio_interval(num, den, confidence, n)
    timed = plan.numerator[-1].endswith("_s") and plan.denominator[-1].endswith("_s")
    difference = (inference.difference_interval(num, den, confidence, n) if timed
                  else inference.NO_INTERVAL)
    seeds = sorted(set(numerator) & set(denominator))
    return Made(row(plan, ratio, seeds, num[0], den[0], difference), ratio, difference)


def row(plan: Planned, ratio: inference.Interval, seeds: Sequence[int], numerator: float,
        denominator: float, difference: inference.Interval) -> dict:
    return {**plan.fields(), "level": "comparison", "n_pooled": 1,
            "models": plan.numerator[2], "seeds": seeds_text(seeds),
            "n_processes": ratio.n_processes, "basis": basis(ratio.n_processes),
            "numerator_point": numerator, "denominator_point": denominator,
            "ratio": ratio.point, "low": ratio.low, "high": ratio.high,
            "difference_us": difference.point * MICRO,
            "difference_low_us": difference.low * MICRO,
            "difference_high_us": difference.high * MICRO,
            "replicates": ratio.replicates.astype(np.float32)}


def pooled_row(made: Sequence[Made], level: str, confidence: float) -> dict | None:
    """The geometric mean of comparisons (inference.pooled: the between-comparison interval),
    with the fields they all share (the others None)."""
    usable = [m for m in made if np.isfinite(m.ratio.point) and m.ratio.point > 0]
    if not usable:
        return None
    fields = shared_fields(usable)
    key = "/".join(map(str, (level, *fields.values())))
    mean = inference.pooled([m.ratio for m in usable], confidence, key)
    differences = [m.difference for m in usable if np.isfinite(m.difference.point)]
    difference = (inference.pooled_mean(differences, confidence, key + "/difference")
                  if len(differences) == len(usable) else inference.NO_INTERVAL)
    return {**{c: None for c in COMPARISON_COLUMNS}, **fields, "level": level,
            "n_pooled": len(usable), "seeds": common_seeds(usable),
            "models": ",".join(m for m in spec.MODELS if m in {u.row["models"] for u in usable}),
            "n_processes": mean.n_processes, "basis": COMPARISONS,
            "ratio": mean.point, "low": mean.low, "high": mean.high,
            "difference_us": difference.point * MICRO,
            "difference_low_us": difference.low * MICRO,
            "difference_high_us": difference.high * MICRO,
            "replicates": mean.replicates.astype(np.float32)}


def common_seeds(made: Sequence[Made]) -> str:
    shared = set.intersection(*(set(m.row["seeds"].split(",")) for m in made))
    return seeds_text(int(s) for s in shared if s)


def shared_fields(made: Sequence[Made]) -> dict:
    """The comparison fields every one of `made` has in common (the others None)."""
    names = [c for c in COMPARISON_COLUMNS if c.startswith(("numerator_", "denominator_"))
             and not c.endswith("_point")]
    return {c: values.pop() if len(values := {m.row[c] for m in made}) == 1 else None
            for c in ("kind", "name", *BLOCK_FIELDS, "statistic", "denominator_machine",
                      *names)}


# ----------------------------------------------------------------------------- what is compared
def blocks_of(found: stats.Replicates) -> list[tuple]:
    """(machine, device, threads) of every condition measured, in sort order."""
    fields = stats.CONDITION_FIELDS
    return sorted({(k[fields.index("machine")], k[fields.index("device")],
                    k[fields.index("threads")]) for k in found.processes})


def sides_measured(found: stats.Replicates) -> set[tuple]:
    """(block, (framework, mode, model, task, quantity)) of every condition measured."""
    f = stats.CONDITION_FIELDS
    return {((k[f.index("machine")], k[f.index("device")], k[f.index("threads")]),
             (k[f.index("framework")], k[f.index("mode")], k[f.index("model")],
              k[f.index("task")], k[-1])) for k in found.processes}


def improvement_plans(measured: set[tuple], statistic: str) -> list[Planned]:
    """Each compiled condition against its framework's eager mode, per stats.IMPROVEMENTS."""
    plans = []
    for block, (framework, mode, model, task, quantity) in sorted(measured):
        eager = spec.eager_mode_of(framework)
        if not spec.FRAMEWORKS[framework].modes[mode].compiled or eager is None:
            continue
        for name, (eager_q, compiled_q) in stats.IMPROVEMENTS.items():
            denominator = (framework, mode, model, task, compiled_q)
            numerator = (framework, eager, model, task, eager_q)
            if quantity == compiled_q and (block, numerator) in measured:
                plans.append(Planned("improvement", name, block, numerator, denominator,
                                     statistic))
    return plans


# The pairs of tasks whose ratio is printed (second over first, same mode and model): the
# loss Jacobian over the backward pass (Hypothesis 0), the vectorised Jacobian over the row
# by row one.
TASK_PAIRS = (spec.HYPOTHESIS0_TASKS, spec.JACOBIANS)


def task_ratio_plans(measured: set[tuple], statistic: str) -> list[Planned]:
    """Each TASK_PAIRS ratio, same mode and model, on the step."""
    plans = []
    for first, second in TASK_PAIRS:
        plans += [Planned("task_ratio", f"{second}/{first}", block,
                          (framework, mode, model, second, "step_s"),
                          (framework, mode, model, first, "step_s"), statistic)
                  for block, (framework, mode, model, task, quantity) in sorted(measured)
                  if task == first and quantity == "step_s"
                  and (block, (framework, mode, model, second, "step_s")) in measured]
    return plans


def cheap_gradient_plans(measured: set[tuple], statistic: str) -> list[Planned]:
    """Each condition's step over its forward (forward_of's rule: its own iterations' forward
    where it times one, else the forward task's step in the same mode and model)."""
    plans = []
    for block, (framework, mode, model, task, quantity) in sorted(measured):
        if quantity != "step_s" or task == spec.FORWARD_TASK:
            continue
        own = (framework, mode, model, task, "forward_s")
        task_forward = (framework, mode, model, spec.FORWARD_TASK, "step_s")
        forward = own if (block, own) in measured else task_forward
        if (block, forward) in measured:
            plans.append(Planned("cheap_gradient", forward_source(forward, task), block,
                                 (framework, mode, model, task, "step_s"), forward,
                                 statistic))
    return plans


# Where a cheap-gradient ratio's forward time comes from (its comparison's `name`).
IN_PROCESS = "same iterations"
FORWARD_TASK_SOURCE = "forward task"


def forward_source(forward: tuple, task: str) -> str:
    return IN_PROCESS if forward[3] == task else FORWARD_TASK_SOURCE


def framework_plans(measured: set[tuple], statistic: str) -> list[Planned]:
    """Each framework's eager mode over the first framework's (spec order), same model,
    task and quantity: how the frameworks' define-by-run modes compare."""
    eager = [(f, m) for f in spec.FRAMEWORKS if (m := spec.eager_mode_of(f))]
    plans = []
    for block, (framework, mode, model, task, quantity) in sorted(measured):
        if (framework, mode) != eager[0]:
            continue
        for other, other_mode in eager[1:]:
            numerator = (other, other_mode, model, task, quantity)
            if (block, numerator) in measured:
                plans.append(Planned("frameworks", f"{other}/{framework}", block, numerator,
                                     (framework, mode, model, task, quantity), statistic))
    return plans


def machine_plans(measured: set[tuple], statistic: str) -> list[Planned]:
    """Each condition on a machine over the same condition on the first machine (sort order)
    that measured it: the seeds are the same inputs on both, so the pairing holds."""
    where: dict[tuple, list[str]] = {}
    for (machine, device, threads), side in sorted(measured):
        where.setdefault((device, threads, side), []).append(machine)
    return [Planned("machines", f"{machine}/{machines[0]}", (machine, device, threads), side,
                    side, statistic, denominator_machine=machines[0])
            for (device, threads, side), machines in where.items()
            for machine in machines[1:]]


def claim_plans(claim: claim_defs.Claim, blocks: Sequence[tuple]) -> list[Planned]:
    """Every comparison of a claim in every block, in the claim's group order."""
    groups = list(dict.fromkeys(c.group for c in claim.comparisons))
    ordered = sorted(claim.comparisons, key=lambda c: groups.index(c.group))
    return [Planned("claim", claim.key, block, side_tuple(c.numerator),
                    None if c.denominator is None else side_tuple(c.denominator),
                    claim_defs.VERDICT_STATISTIC)
            for block in blocks for c in ordered]


def side_tuple(side: claim_defs.Side) -> tuple:
    return tuple(getattr(side, f) for f in SIDE_FIELDS)


# ----------------------------------------------------------------------------- all of them
def compare_all(bootstrap: pd.DataFrame, confidence: float,
                claims: Sequence[claim_defs.Claim] = claim_defs.CLAIMS) -> pd.DataFrame:
    """Every comparison of the module's kinds, and their pooled rows."""
    found = {s: stats.replicates_by_condition(bootstrap, s) for s in inference.STATISTICS}
    table, claim_found = found[TABLE_STATISTIC], found[claim_defs.VERDICT_STATISTIC]
    measured, by_claims = sides_measured(table), sides_measured(claim_found)
    rows = []
    for plans, over in ((improvement_plans(measured, TABLE_STATISTIC), table),
                        (task_ratio_plans(measured, TABLE_STATISTIC), table),
                        (framework_plans(measured, TABLE_STATISTIC), table),
                        # Machines compare by the verdicts' statistic (the median step).
                        (machine_plans(by_claims, claim_defs.VERDICT_STATISTIC),
                         claim_found),
                        (cheap_gradient_plans(by_claims, claim_defs.VERDICT_STATISTIC),
                         claim_found)):
        made = [m for p in plans if (m := make(over, p, confidence))]
        rows += [m.row for m in made] + pooled_over_models(made, confidence)
    for claim in claims:
        rows += claim_rows(claim, claim_found, blocks_of(claim_found), confidence)
    return pd.DataFrame(rows, columns=COMPARISON_COLUMNS)


def pooled_over_models(made: Sequence[Made], confidence: float) -> list[dict]:
    """Per (name, block, both sides' framework and mode, task and quantity) and set of
    models (MODEL_SETS): the geometric mean over its models compared (more than one), once
    per distinct set found."""
    groups: dict[tuple, list[Made]] = {}
    for m in made:
        r = m.row
        key = (r["name"], *(r[f] for f in BLOCK_FIELDS),
               *(r[f"{end}_{f}"] for end in ("numerator", "denominator")
                 for f in ("framework", "mode", "task", "quantity")))
        groups.setdefault(key, []).append(m)
    out = []
    for mine in groups.values():
        chosen = {}
        for models in MODEL_SETS:
            pooled = [m for m in mine if m.row["models"] in models]
            chosen.setdefault(tuple(m.row["models"] for m in pooled), pooled)
        for pooled in chosen.values():
            if len(pooled) > 1 and (found := pooled_row(pooled, "models", confidence)):
                out.append(found)
    return out


def claim_rows(claim: claim_defs.Claim, found: stats.Replicates, blocks: Sequence[tuple],
               confidence: float) -> list[dict]:
    """A claim's comparisons (not measured ones left out), each group's pooled row and the
    claim's pooled summary."""
    made = [(plan, m) for plan in claim_plans(claim, blocks)
            if (m := make(found, plan, confidence))]
    rows = [m.row for _, m in made]
    groups: dict[tuple, list[Made]] = {}
    for plan, m in made:
        groups.setdefault(group_key(plan), []).append(m)
    for mine in groups.values():
        if (pooled := pooled_row(judged_or_all(mine), "group", confidence)) is not None:
            rows.append(pooled)
    everything = judged_or_all([m for _, m in made])
    if (pooled := pooled_row(everything, "claim", confidence)) is not None:
        rows.append(pooled)
    return rows


def judged_or_all(made: Sequence[Made]) -> list[Made]:
    """What a pooled row of a claim pools: the comparisons from enough processes to judge
    where there are any (the others are printed, not judged), else all of them."""
    judged = [m for m in made if m.ratio.judged]
    return judged or list(made)


def group_key(plan: Planned) -> tuple:
    """A claim's group: one pair of (framework, mode) in one block."""
    denominator = plan.denominator or (None, None)
    return (*plan.block, *plan.numerator[:2], *denominator[:2])
