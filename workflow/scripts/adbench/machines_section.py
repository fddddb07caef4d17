"""Machines as a reader names them, and the paper's comparison of the machines of a tree.

A tree measured on several machines (result trees from several sites analysed together)
keeps each machine a stratum of its own (stats.machine_of: the CPU model, and a CUDA cell's
GPU and driver).  The paper names a machine by its GPU, or its CPU for a CPU cell, shortened
as people say it ("H100 80GB HBM3", "Xeon Platinum 8480+"), adding the driver or the CPU only
where two machines would read alike; and sets one machine against another from the
comparisons product's "machines" rows (adbench.comparisons.machine_plans): per (framework,
mode, task) the geometric mean over models of one machine's step over the other's, every
condition's ratio in an appendix.  Text escaped for LaTeX.

One quantity per comparison: every ratio here divides one machine's step (QUANTITY) by the
other's, by the verdicts' statistic (claims.VERDICT_STATISTIC, the median over a process's
iterations) where the product holds it, and names the statistic it used.  The other
quantities the product sets side by side (a first step over the steady state, the forward
alone) are not shown: a headline that mixed them would divide different things under one
caption.  Two trees whose workloads differ are compared only where the step's shape is the
same (the batch and, for a Jacobian, its rows: SHAPE_FIELDS); what else differs (iterations,
warm-up, samples: a per-step statistic does not depend on them) is stated.
"""

from __future__ import annotations

import re

import pandas as pd

from adbench import formatting as fmt
from adbench.claims import VERDICT_STATISTIC
from adbench.comparisons import ITERATIONS
from adbench.formatting import latex
from adbench.report_spec import model_label, task_label
from adbench.spec import FRAMEWORKS, MODELS, TASKS
from adbench.tables import column_label

KIND = "machines"
QUANTITY = "step_s"  # the quantity every verdict reads: the step
# A step's shape: two machines' cells are comparable only where these are the same.
SHAPE_FIELDS = ("batch_size", "jacobian_rows")
# The workload's sizes a per-step statistic does not depend on: stated where they differ.
RUN_FIELDS = (("iterations", "iterations"), ("warmup", "warm-up iterations"),
              ("n_samples", "samples"))
# What a CPU's brand string carries that no one says aloud.
_CPU_NOISE = re.compile(r"\((?:R|TM|tm|r)\)|\bCPU\b|\bProcessor\b|@\s*[\d.]+\s*GHz|"
                        r"\b\d+-Core\b|\bwith Radeon.*$", re.IGNORECASE)


def parts(machine: str) -> dict:
    """{gpu, driver, cpu} of a machine string as stats.machine_of writes it."""
    found = re.fullmatch(r"(?P<gpu>.+?)(?: \(driver (?P<driver>[^)]+)\))?, (?P<cpu>.+)", machine)
    if found and not machine.startswith(found["cpu"]):
        return {"gpu": found["gpu"], "driver": found["driver"], "cpu": found["cpu"]}
    return {"gpu": None, "driver": None, "cpu": machine}


def short_cpu(cpu: str) -> str:
    words = " ".join(_CPU_NOISE.sub(" ", cpu).split())
    return words.removeprefix("Intel ").removeprefix("AMD ") or cpu


def short_gpu(gpu: str) -> str:
    return gpu.removeprefix("NVIDIA ").strip() or gpu


def candidates(machine: str) -> list[str]:
    """A machine's names, shortest first: its GPU (or CPU), then with the driver, then with
    the CPU, then the whole string."""
    p = parts(machine)
    if p["gpu"] is None:
        return [short_cpu(p["cpu"]), machine]
    gpu = short_gpu(p["gpu"])
    driver = f"{gpu}, driver {p['driver']}" if p["driver"] else gpu
    return [gpu, driver, f"{driver}, {short_cpu(p['cpu'])}", machine]


def machine_names(machines) -> dict[str, str]:
    """Each machine's shortest name that no other machine of the tree shares."""
    machines = list(dict.fromkeys(machines))
    options = {m: candidates(m) for m in machines}
    names = {}
    for m in machines:
        others = [o for o in machines if o != m]
        names[m] = next((name for level, name in enumerate(options[m])
                         if all(name not in options[o][level:level + 1] for o in others)),
                        m)
    return names


def machine_name(machine: str, machines) -> str:
    return machine_names(machines)[machine]


def block_namer(frame: pd.DataFrame):
    """How a frame's rows name their block (formatting.block): None where they all share one,
    else a function of a row giving its device and threads, and its machine by its short
    name where the rows span several machines."""
    if frame is None or frame.empty:
        return None
    keys = [k for k in ("machine", "device", "threads") if k in frame]
    if frame[keys].drop_duplicates().shape[0] < 2:
        return None
    names = (machine_names(sorted(set(frame["machine"])))
             if "machine" in frame and frame["machine"].nunique() > 1 else {})
    get = lambda r, k: r[k] if isinstance(r, dict) else getattr(r, k)  # noqa: E731
    return lambda r: fmt.block(get(r, "device"), get(r, "threads"),
                               names.get(get(r, "machine")) if names else None)


# ----------------------------------------------------------------------------- the section
def side_text(r) -> str:
    return (f"{column_label(r['numerator_framework'], r['numerator_mode'])}, "
            f"{task_label(r['numerator_task'])}")


def one_process(r) -> bool:
    """A ratio from one process per side: a comparison's own, or a geometric mean of such."""
    return r["basis"] == ITERATIONS or fmt.missing(r["n_processes"]) or int(
        r["n_processes"]) < 2


def ratio_text(r) -> str:
    text = fmt.ratio(r["ratio"], r["low"], r["high"])
    return text + (" (iterations of one process)" if one_process(r) else "")


def models_text(r) -> str:
    models = [m for m in str(r["models"]).split(",") if m in MODELS]
    return ", ".join(model_label(m) for m in models)


def pooled_rows(mine: pd.DataFrame) -> list[dict]:
    """Per (framework, mode, task, device, threads): the geometric mean over the most models
    both machines measured, or the one model's ratio where only one was; in spec order."""
    keys = ["device", "threads", "numerator_framework", "numerator_mode", "numerator_task"]
    several = mine[["device", "threads"]].drop_duplicates().shape[0] > 1
    rows = []
    for _, group in mine.groupby(keys, sort=False):
        pooled = group[group["level"] == "models"]
        best = (pooled.loc[pooled["n_pooled"].idxmax()] if len(pooled)
                else group[group["level"] == "comparison"].iloc[0])
        rows.append({"condition": latex(side_text(best)),
                     "block": latex(fmt.block(best["device"], best["threads"]))
                     if several else "",
                     "models": latex(models_text(best)),
                     "n_models": int(best["n_pooled"]),
                     "ratio": latex(ratio_text(best)), "value": float(best["ratio"]),
                     "one_process": one_process(best),
                     "order": spec_order(best)})
    return sorted(rows, key=lambda r: r["order"])


def spec_order(r) -> tuple:
    pairs = [(f, m) for f, info in FRAMEWORKS.items() for m in info.modes]
    pair = (r["numerator_framework"], r["numerator_mode"])
    return (pairs.index(pair) if pair in pairs else len(pairs),
            list(TASKS).index(r["numerator_task"]) if r["numerator_task"] in TASKS else 99)


def every_row(mine: pd.DataFrame) -> list[dict]:
    rows = mine[mine["level"] == "comparison"]
    order = {m: i for i, m in enumerate(MODELS)}
    rows = rows.assign(_m=rows["numerator_model"].map(order),
                       _t=rows["numerator_task"].map(list(TASKS).index))
    several = rows[["device", "threads"]].drop_duplicates().shape[0] > 1
    return [{"model": latex(model_label(r["numerator_model"])),
             "condition": latex(side_text(r)),
             "block": latex(fmt.block(r["device"], r["threads"])) if several else "",
             "ratio": latex(ratio_text(r)), "seeds": latex(r["seeds"])}
            for _, r in rows.sort_values(["_m", "_t"], kind="stable").iterrows()]


def statistic_of(mine: pd.DataFrame) -> str:
    """The statistic the section's ratios use: the verdicts' where the product holds it."""
    held = set(mine["statistic"])
    return VERDICT_STATISTIC if VERDICT_STATISTIC in held or not held else sorted(held)[0]


def step_rows(made: pd.DataFrame) -> pd.DataFrame:
    """The product's machines rows of the step, by one statistic (statistic_of)."""
    mine = made[(made["kind"] == KIND) & (made["numerator_quantity"] == QUANTITY)]
    return mine[mine["statistic"] == statistic_of(mine)] if len(mine) else mine


def workloads(cells: pd.DataFrame | None, machine: str) -> pd.DataFrame:
    """A machine's ok cells' workload sizes, per (framework, mode, model, task, device,
    threads)."""
    keys = ["framework", "mode", "model", "task", "device", "threads"]
    if cells is None or "machine" not in cells:
        return pd.DataFrame(columns=keys)
    ok = cells[(cells["machine"] == machine) & (cells["status"] == "ok")]
    fields = [f for f in (*SHAPE_FIELDS, *(f for f, _ in RUN_FIELDS)) if f in ok]
    return ok[keys + fields].drop_duplicates(keys)


def side_key(r) -> tuple:
    return (r["numerator_framework"], r["numerator_mode"], r["numerator_model"],
            r["numerator_task"], r["device"], r["threads"])


def same_shape(mine: pd.DataFrame, numerator: pd.DataFrame,
               denominator: pd.DataFrame) -> pd.Series:
    """Per comparison row: whether both machines' cells ran the step on the same shape
    (SHAPE_FIELDS); True where a machine's cells are not known (no cells table given)."""
    if numerator.empty or denominator.empty:
        return pd.Series(True, index=mine.index)
    keys = ["framework", "mode", "model", "task", "device", "threads"]
    top, bottom = numerator.set_index(keys), denominator.set_index(keys)
    fields = [f for f in SHAPE_FIELDS if f in top and f in bottom]

    def same(r) -> bool:
        k = side_key(r)
        if k not in top.index or k not in bottom.index:
            return True
        return all(str(top.loc[k, f]) == str(bottom.loc[k, f]) for f in fields)

    rows = mine[mine["level"] == "comparison"]
    keep = {i: same(r) for i, r in rows.iterrows()}
    return pd.Series([keep.get(i, True) for i in mine.index], index=mine.index)


def sizes_text(frame: pd.DataFrame, field: str) -> str:
    values = sorted({int(v) for v in pd.to_numeric(frame[field], errors="coerce").dropna()})
    return fmt.NA if not values else "/".join(f"{v:,}" for v in values)


def workload_differences(numerator: pd.DataFrame, denominator: pd.DataFrame,
                         compared: pd.DataFrame) -> list[dict]:
    """What differs between two machines' workloads over the conditions compared (RUN_FIELDS):
    each field's sizes on each side, where they are not the same."""
    keys = ["framework", "mode", "model", "task", "device", "threads"]
    wanted = {side_key(r) for _, r in compared.iterrows()}
    pick = lambda frame: frame[[tuple(k) in wanted  # noqa: E731
                                for k in frame[keys].itertuples(index=False)]]
    top, bottom = pick(numerator), pick(denominator)
    out = []
    for field, noun in RUN_FIELDS:
        if field in top and field in bottom and len(top) and len(bottom):
            mine, theirs = sizes_text(top, field), sizes_text(bottom, field)
            if mine != theirs:
                out.append({"what": noun, "numerator": mine, "denominator": theirs})
    return out


def machines_context(made: pd.DataFrame | None, env: dict,
                     cells: pd.DataFrame | None = None) -> dict | None:
    """The section where the comparisons product sets machines against each other, on the
    step (QUANTITY) by one statistic; None for a tree of one machine (or whose machines
    measured no condition in common).  `cells` (aggregate's cells table) gives each machine's
    workload: a condition whose step shape differs is left out and counted, and the sizes a
    per-step statistic does not depend on are stated where they differ."""
    if made is None or made.empty:
        return None
    steps = step_rows(made)
    if steps.empty:
        return None
    machines = [m["machine"] for m in env.get("machines", [])] or sorted(
        set(made["machine"]))
    names = machine_names(machines)
    pairs = []
    for (numerator, denominator), group in steps.groupby(["machine", "denominator_machine"],
                                                         sort=False):
        top, bottom = workloads(cells, numerator), workloads(cells, denominator)
        shared = same_shape(group, top, bottom)
        unlike = group[~shared & (group["level"] == "comparison")]
        group = group[shared]
        if group.empty:
            continue
        rows = pooled_rows(group)
        values = [r["value"] for r in rows if not r["one_process"]] or [
            r["value"] for r in rows]
        compared = group[group["level"] == "comparison"]
        pairs.append({"numerator": latex(names.get(numerator, numerator)),
                      "denominator": latex(names.get(denominator, denominator)),
                      "rows": rows, "every": every_row(group),
                      "span": fmt.span(values, tex=True),
                      "n_one_process": sum(r["one_process"] for r in rows),
                      "differences": [{k: latex(v) for k, v in d.items()} for d in
                                      workload_differences(top, bottom, compared)],
                      "n_unlike_shape": len(unlike)})
    if not pairs:
        return None
    return {
        "machines": [{"name": latex(names[m["machine"]]), "full": latex(m["machine"]),
                      "n_cells": m.get("n_cells", fmt.NA)}
                     for m in env.get("machines", []) if m["machine"] in names],
        "pairs": pairs,
        "statistic": latex(steps["statistic"].iloc[0]),
        "verdicts_statistic": latex(VERDICT_STATISTIC),
    }
