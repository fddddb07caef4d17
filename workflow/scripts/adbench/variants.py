"""The paper's section on the backward pass's variants (spec.TASKS' variant_of): a model's
frozen part excluded from the derivative, the graph retained past the step, the GPU allocator
as it comes; each judged by its claim (claims.frozen_subgraphs, claims.graph_freed,
claims.memory_grab) with the comparisons behind it.
Context of report/sections/variants.tex.j2, text escaped for LaTeX."""

from __future__ import annotations

import pandas as pd

from adbench import formatting as fmt
from adbench import report_stats
from adbench.claims import CLAIMS
from adbench.formatting import latex
from adbench.machines_section import block_namer
from adbench.report_spec import model_label, task_description, task_label
from adbench.spec import DEVICES, MODELS, TASKS
from adbench.tables import column_label
from adbench.verdicts import NOT_MEASURED


def variant_tasks() -> dict[str, str]:
    """Each fixed-shape variant task and the task it varies (the variable-length tasks have
    a section of their own: adbench.varlen)."""
    return {task: info.variant_of for task, info in TASKS.items()
            if info.variant_of and info.sequence is None}


def claims_of_variants() -> list:
    """The claims whose comparisons put a variant task beside the task it varies."""
    variants = variant_tasks()
    return [c for c in CLAIMS
            if any({s.task for s in x.sides} & set(variants)
                   for x in c.comparisons)]


def claim_devices(claim) -> list[str]:
    """The devices where every side of a claim can be measured (spec.TaskInfo.devices)."""
    sides = [s for x in claim.comparisons for s in x.sides]
    return [d for d in DEVICES if all(d in TASKS[s.task].devices for s in sides)]


def frozen_parts(measured_models) -> list[dict]:
    """The frozen part of each measured model that has one (spec.ModelSpec.frozen), in words:
    how many of its parameters, in how many arrays (their names are the code's)."""
    out = []
    for m in (m for m in MODELS if m in measured_models and MODELS[m].frozen):
        frozen = [p for p in MODELS[m].params if p.name in MODELS[m].frozen]
        n = sum(p.size for p in frozen)
        out.append({"model": latex(model_label(m)),
                    "part": latex(f"{n} of its {MODELS[m].n_parameters} parameters "
                                  f"({fmt.counted(len(frozen), 'array')}, its first "
                                  "layers)")})
    return out


def comparison_rows(comparisons: pd.DataFrame, key: str) -> list[dict]:
    mine = comparisons[(comparisons["claim"] == key)
                       & (comparisons["verdict"] != NOT_MEASURED)]
    block = block_namer(mine)  # several machines, devices or thread counts: each row's
    return [{"model": latex(model_label(r["numerator_model"])),
             "mode": latex(column_label(r["numerator_framework"], r["numerator_mode"])
                           + (f" ({block(r)})" if block else "")),
             "ratio": fmt.ratio(r["ratio"], r["low"], r["high"]),
             "processes": int(r["n_processes"]), "verdict": latex(r["verdict"])}
            for _, r in mine.iterrows()]


def variants_context(cells: pd.DataFrame | None, claims: pd.DataFrame,
                     comparisons: pd.DataFrame, published: dict) -> dict | None:
    """None where the run measured no variant task (the section is left out)."""
    if cells is None or cells.empty:
        return None
    ran = cells[cells["task"].isin(list(variant_tasks()))]
    if ran.empty:
        return None
    judged = []
    for claim in claims_of_variants():
        found = claims[claims["claim"] == claim.key]
        if found.empty:
            continue
        devices = claim_devices(claim)
        judged.append({**report_stats.claim_context(claim, found.iloc[0], published),
                       "rows": comparison_rows(comparisons, claim.key),
                       "only_on": ", ".join(devices) if devices != list(DEVICES) else None})
    return {
        "tasks": [{"label": latex(task_label(t)), "description": latex(task_description(t)),
                   "varies": latex(task_label(varied))}
                  for t, varied in variant_tasks().items() if t in set(ran["task"])],
        "frozen_parts": frozen_parts(set(ran.loc[ran["task"].map(
            lambda t: TASKS[t].frozen), "model"])),
        "claims": judged,
    }
