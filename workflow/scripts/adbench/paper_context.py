"""What the paper says about its setup and its checks, as template context (render_paper.py):
the machine and the protocol, the models, modes and tasks of the spec with the sizes this run
used, the implementation choices the cells recorded, the gradient cross-check, the first
iterations and the threads check.  Text arrives LaTeX-escaped.
"""

from __future__ import annotations

import json
import math
from collections import Counter

import pandas as pd

from adbench import formatting as fmt
from adbench import tables as tbl
from adbench.claims import CLAIMS
from adbench.formatting import latex, missing
from adbench.machines_section import block_namer, machine_names
from adbench import paper_tables
from adbench.paper_tables import pair_label
from adbench.selection import focus_rows
from adbench.report_spec import (
    LOSS_TEXT,
    MODEL_TEXT,
    cited,
    in_words,
    mode_description,
    model_label,
    task_description,
    task_label,
)
from adbench.spec import FRAMEWORKS, MODELS, STUDY_MODELS, TASKS, timed_quantities
from adbench.timing import CONFIDENCE as STOP_CONFIDENCE

QUANTITY_SHORT = {"backward_s": "backward", "forward_s": "forward", "step_s": "step"}
# Beyond this many tasks the quantities table abbreviates its cells and turns its headers.
WIDE_TASKS = 3
# A loop that kept more cores busy than this over its thread count ignored the setting.
CORES_OVER_THREADS = 0.5
# A loop computing on its threads keeps them busy but for the interpreter's own gaps (about
# 0.98 cores per thread); a quarter of a core idle is time spent off the CPU: waiting (for
# the scheduler, another job, memory).  1 thread: below 0.75, so 0.58 is flagged.
CORES_UNDER_THREADS = 0.25
# Processes per cell that config/paper.yaml runs for every cell entering a verdict
# (tests/test_paper_config.py): fewer is the quick configuration.
FULL_PROCESSES = 5


# ----------------------------------------------------------------------------- setup
def machine_details(env: dict, names: dict) -> list[dict]:
    """Each machine of a tree of several: its name, what it is, its software."""
    return [{"name": latex(names[m["machine"]]), "full": latex(m["machine"]),
             "cpu_count": m.get("cpu_count") or fmt.NA, "platform": latex(m.get("platform")),
             "python": latex(m.get("python")), "n_cells": m.get("n_cells", fmt.NA),
             "versions": latex(", ".join(f"{k} {v}" for k, v in
                                         sorted((m.get("versions") or {}).items())))}
            for m in env.get("machines", [])]


def setup_context(env: dict) -> dict:
    devices = env.get("devices", [])
    names = [n for n in env.get("device_names", []) if n not in devices]  # e.g. a GPU's name
    commit = env.get("git_commit")
    machines = [m["machine"] for m in env.get("machines", [])] or [
        env.get("cpu_model", fmt.NA)]
    short = machine_names(machines)
    return {
        "machine_name": latex(short[machines[0]]),
        "several": len(machines) > 1,
        "n_machines": len(machines),
        "machine_names": latex(", ".join(short[m] for m in machines)),
        "machines": machine_details(env, short),
        "cpu_model": latex(env.get("cpu_model", fmt.NA)),
        "cpu_count": env.get("cpu_count", fmt.NA),
        "hostname": latex(env.get("hostname", fmt.NA)),
        "platform": latex(env.get("platform", fmt.NA)),
        "python": latex(env.get("python", fmt.NA)),
        "versions": [
            {"name": latex(k), "version": latex(v)}
            for k, v in sorted(env.get("versions", {}).items())
        ],
        "devices": latex(
            ", ".join(devices) + (f" ({', '.join(names)})" if names else "") or fmt.NA
        ),
        "threads": ", ".join(str(t) for t in env.get("threads", [])) or fmt.NA,
        "git": latex(
            (commit[:12] if commit else "unknown")
            + (" (with uncommitted changes)" if env.get("git_dirty") else "")
        ),
        "n_cells": env.get("n_cells", fmt.NA),
        "n_ok": env.get("n_ok", fmt.NA),
        "date": latex(str(env.get("ended_at", ""))[:10] or fmt.NA),
        "started_at": latex(env.get("started_at", fmt.NA)),
        "ended_at": latex(env.get("ended_at", fmt.NA)),
    }


# ----------------------------------------------------------------------------- protocol
CONDITION = ["framework", "mode", "model", "task", "device", "threads"]
PROTOCOL_KEYS = ("seeds", "processes", "warmup", "iterations", "rule")
# Why a measured phase ended (schema.MEASURING_FIELDS' stop_reason), as the protocol table
# counts them (its caption says each), in its order: the precision reached, the measured-time
# cap spent, the most iterations done, a fixed count done, the process's budget out.
STOP_REASONS = {"precision": "precision", "budget": "time", "max_count": "most",
                "fixed": "fixed", "timeout": "budget"}
# The same, in the method's sentence: how many cells stopped, and why.
STOP_REASON_WORDS = {"precision": "at their precision", "budget": "at the time cap",
                     "max_count": "at the most iterations", "fixed": "after a fixed count",
                     "timeout": "when their process's budget ran out"}
# The precision stop's keys (spec.WORKLOAD_STOPPING) each cell's rule is read from: the
# cells' own where aggregate carries them, else the config's (environment.json's workload).
RULE_KEYS = ("precision", "min_iterations", "measure_s")


def with_stop_rule(measured: pd.DataFrame, workload: dict | None) -> pd.DataFrame:
    """The cells with their stop rule: `stop` (precision, or fixed: a file from before the
    precision stop measured a fixed count) and RULE_KEYS."""
    out = measured.copy()
    stop = out["stop"] if "stop" in out else pd.Series(None, index=out.index, dtype=object)
    out["stop"] = stop.where(stop.notna(), "fixed")
    for key in RULE_KEYS:
        given = (workload or {}).get(key)
        column = out[key] if key in out else pd.Series(math.nan, index=out.index)
        out[key] = pd.to_numeric(column, errors="coerce").fillna(
            math.nan if given is None else float(given))
    return out


def rule_text(mine: pd.DataFrame) -> str:
    """A group of cells' stop rule: 'fixed', or the precision stop's target, time cap and
    fewest iterations ('±2% or 5 s, 10 at least'), each distinct rule once."""
    texts = []
    for stop, rows in mine.groupby("stop", sort=True):
        if stop != "precision":
            texts.append(str(stop))
            continue
        fewest = [min(int(a), int(b)) for a, b in zip(rows["min_iterations"].fillna(
            rows["iterations"]), rows["iterations"])]
        target = f"±{fmt.percent_span(rows['precision'].drop_duplicates())}"
        capped = rows["measure_s"].dropna().drop_duplicates()
        cap = f" or {', '.join(fmt.seconds(v) for v in sorted(capped))}" if len(capped) else ""
        texts.append(f"{target}{cap}, {fmt.whole_span(fewest)} at least")
    return "; ".join(texts)


def reasons_text(mine: pd.DataFrame, tex: bool = True) -> str:
    """How many cells stopped for each reason: 'precision 8, time 2'; 'n/a' where no cell
    recorded one (files from before the reasons were recorded)."""
    if "stop_reason" not in mine:
        return fmt.NA
    counts = mine["stop_reason"].dropna().value_counts()
    text = ", ".join(f"{words} {int(counts[reason])}" for reason, words in STOP_REASONS.items()
                     if reason in counts)
    return (latex(text) if tex else text) or fmt.NA


def reasons_words(mine: pd.DataFrame) -> str | None:
    """'8 stopped at their precision, 2 at the time cap, 6 after a fixed count' (LaTeX);
    None where no cell recorded why it stopped."""
    if "stop_reason" not in mine:
        return None
    counts = mine["stop_reason"].dropna().value_counts()
    said = [f"{int(counts[reason])} {words}" for reason, words in STOP_REASON_WORDS.items()
            if reason in counts]
    if not said:
        return None
    return latex(said[0].replace(" ", " stopped ", 1) + "".join(f", {w}" for w in said[1:]))


def reached_text(mine: pd.DataFrame) -> str:
    """The range of the precision the cells' medians reached (LaTeX), 'n/a' where none."""
    reached = mine["precision_reached"] if "precision_reached" in mine else []
    return fmt.percent_span(pd.to_numeric(pd.Series(reached), errors="coerce"), tex=True)


def protocol_rows(measured: pd.DataFrame) -> list[dict]:
    """Per task, the models that ran alike: their seeds, processes per condition (one per
    seed: the `processes` column), warm-up, measured iterations (the most) and stop rule
    (with_stop_rule), in spec order; each row with how many of its cells stopped for each
    reason and the range of precision they reached."""
    rows = []
    for task in (t for t in TASKS if t in set(measured["task"])):
        alike: dict[tuple, list[str]] = {}
        for model in (m for m in MODELS if m in set(measured["model"])):
            mine = measured[(measured["task"] == task) & (measured["model"] == model)]
            if mine.empty:
                continue
            key = (", ".join(str(s) for s in sorted(set(mine["seed"]))),
                   fmt.whole_span(mine["processes"]), fmt.whole_span(mine["warmup"]),
                   fmt.whole_span(mine["iterations"]), rule_text(mine))
            alike.setdefault(key, []).append(model)
        for key, models in alike.items():
            mine = measured[(measured["task"] == task) & measured["model"].isin(models)]
            rows.append({"task": latex(task_label(task)),
                         "models": latex(", ".join(model_label(m) for m in models)),
                         **{k: latex(v) for k, v in zip(PROTOCOL_KEYS, key)},
                         "reasons": reasons_text(mine), "reached": reached_text(mine)})
    return rows


def stop_context(measured: pd.DataFrame) -> dict:
    """What the method says of the stop over the whole run: whether any cell stopped at a
    precision, and any at a fixed count; the precision stop's rule (its target, time cap,
    fewest and most iterations); how many cells stopped for each reason and the range of
    precision reached."""
    precise = measured[measured["stop"] == "precision"]
    fewest = [min(int(a), int(b)) for a, b in zip(
        precise["min_iterations"].fillna(precise["iterations"]), precise["iterations"])]
    capped = precise["measure_s"].dropna().drop_duplicates()
    return {
        "precision": not precise.empty,
        "confidence": fmt.percent(STOP_CONFIDENCE, tex=True),
        "fixed": bool((measured["stop"] != "precision").any()),
        "target": fmt.percent_span(precise["precision"].drop_duplicates(), tex=True),
        "measure_s": latex(", ".join(fmt.seconds(v) for v in sorted(capped))) or None,
        "count": count_words(fewest, precise["iterations"]),
        "between": fmt.whole_span([*fewest, *precise["iterations"]], tex=True),
        "reasons": reasons_words(measured),
        "reached": reached_text(measured),
    }


NO_STOP = {"precision": False, "confidence": fmt.NA, "fixed": True, "target": fmt.NA,
           "measure_s": None, "count": fmt.NA, "between": fmt.NA, "reasons": None,
           "reached": fmt.NA}


def count_words(fewest, most) -> str:
    """'after at least 10 and at most 469 iterations', or 'after 3 iterations' where the
    most is the fewest (LaTeX)."""
    low, high = fmt.whole_span(fewest, tex=True), fmt.whole_span(most, tex=True)
    if low == high:
        return f"after {high} iterations"
    return f"after at least {low} and at most {high} iterations"


def protocol_context(cells: pd.DataFrame | None, workload: dict | None = None) -> dict:
    """The protocol as run, read from the cells measured (status ok), never from the config
    but for a precision stop's keys the cells do not carry (with_stop_rule): one statement
    when every task and model ran alike, else a table per task and model."""
    if cells is None or not (cells["status"] == "ok").any():
        return {"quick": quick_configuration(cells), "uniform": True, "rows": [],
                "stop": NO_STOP, **{k: fmt.NA for k in PROTOCOL_KEYS}}
    measured = with_stop_rule(cells[cells["status"] == "ok"], workload)
    measured = measured.assign(processes=measured.groupby(CONDITION)["seed"].transform("size"))
    rows = protocol_rows(measured)
    return {
        "quick": quick_configuration(cells),
        "uniform": len({tuple(r[k] for k in PROTOCOL_KEYS) for r in rows}) == 1,
        "rows": rows,
        "seeds": latex(", ".join(str(s) for s in sorted(set(measured["seed"])))),
        "processes": fmt.whole_span(measured["processes"], tex=True),
        "warmup": fmt.whole_span(measured["warmup"], tex=True),
        "iterations": fmt.whole_span(measured["iterations"], tex=True),
        "stop": stop_context(measured),
    }


def busy_context(env: dict) -> dict | None:
    """The busy rule as run (the config's workload.busy_share and busy_retimes) and what it
    found (aggregate's environment.json: n_busy_retimed cells measured again, n_busy kept
    busy, busy_other_cores the range other processes took of their CPUs); None where no
    measured phase was judged."""
    workload = env.get("workload") or {}
    share = workload.get("busy_share")
    n_busy, n_retimed = int(env.get("n_busy") or 0), int(env.get("n_busy_retimed") or 0)
    if share is None and not n_busy and not n_retimed:
        return None
    retimes = int(workload.get("busy_retimes") or 0)
    return {"share": fmt.NA if share is None else f"{float(share):g}",
            "retimes": {1: "once", 2: "twice"}.get(retimes, fmt.counted(retimes, "time")),
            "retimed_at_all": retimes > 0,
            "n_busy": n_busy, "n_retimed": n_retimed, "n_ok": env.get("n_ok", fmt.NA),
            "other_cores": fmt.cores_span(env.get("busy_other_cores") or [], tex=True),
            "found": busy_found(n_busy, n_retimed, retimes > 0)}


def busy_found(n_busy: int, n_retimed: int, retimed_at_all: bool) -> str:
    """What the busy rule found, in a sentence (LaTeX)."""
    if not n_busy and not n_retimed:
        return "No measured phase was busy."
    said = [f"{fmt.counted(n_retimed, 'cell was', 'cells were')} measured again"] \
        if n_retimed else []
    if n_busy:
        said.append(f"{n_busy} stayed busy" if retimed_at_all and n_retimed
                    else f"{fmt.counted(n_busy, 'cell was', 'cells were')} busy")
    return " and ".join(said) + " (Section~\\ref{sec:limitations})."


def verdict_sides() -> set[tuple[str, str, str, str]]:
    """(framework, mode, model, task) of every side of every claim's comparisons: the cells
    whose numbers enter a verdict (in every device and threads block)."""
    return {
        (side.framework, side.mode, side.model, side.task)
        for claim in CLAIMS
        for comparison in claim.comparisons
        for side in comparison.sides
    }


def quick_configuration(cells: pd.DataFrame | None) -> dict | None:
    """The cells entering a verdict that ran fewer than FULL_PROCESSES processes, counted
    when any did (the quick configuration), else None.  Processes are those started,
    completed or not: what the configuration asked for, not what went wrong."""
    if cells is None or cells.empty:
        return None
    sides = verdict_sides()
    entering = cells[[key in sides for key in
                      zip(cells["framework"], cells["mode"], cells["model"], cells["task"])]]
    processes = entering.groupby(CONDITION)["seed"].nunique()
    if processes.empty or processes.min() >= FULL_PROCESSES:
        return None
    return {
        "n_cells": len(processes),
        "n_single": int((processes == 1).sum()),
        "n_fewer": int((processes < FULL_PROCESSES).sum()),
        "full": FULL_PROCESSES,
    }


def study_context(claims: dict) -> dict:
    return {
        "n_trials": claims.get("n_trials", fmt.NA),
        "first_iteration_factor": claims.get("first_iteration_factor", fmt.NA),
        "n_batches": claims.get("n_batches", fmt.NA),
        "gradient_agreement": fmt.scientific(claims.get("gradient_agreement"), tex=True),
    }


# ----------------------------------------------------------------------------- spec facts
def run_sizes(cells, model: str, column: str, default: int) -> str:
    """The sizes this run used for a model (a config may override the spec's default)."""
    if cells is None or column not in cells or model not in set(cells["model"]):
        return str(default)
    used = sorted({int(v) for v in cells.loc[cells["model"] == model, column].dropna()})
    return ", ".join(map(str, used)) or str(default)


def cells_deriving(cells: pd.DataFrame | None, derivative: str) -> pd.DataFrame | None:
    """The cells whose task computes `derivative` ("jacobian", "gradients")."""
    if cells is None:
        return None
    return cells[cells["task"].map(lambda t: TASKS[t].derivative == derivative)]


def models_context(measured: set, cells=None) -> list[dict]:
    """Every model of the seeds' documents, and a sweep's sizes where measured: where the
    seeds name it, what we chose, the sizes used."""
    jacobian_cells = cells_deriving(cells, "jacobian")
    loss_cells = cells_deriving(cells, "gradients")
    rows = []
    for name, spec in MODELS.items():
        if name not in STUDY_MODELS and name not in measured:
            continue
        rows_used = run_sizes(jacobian_cells, name, "jacobian_rows", spec.n_jacobian_rows)
        jacobian = f"{rows_used} × {fmt.shape_text(spec.input_shape)}"
        if rows_used != str(spec.n_outputs):
            jacobian += f" (of {spec.n_outputs} rows)"
        rows.append(
            {
                "label": latex(MODEL_TEXT[name].label),
                "name": latex(name),
                "source": latex(cited(MODEL_TEXT[name].source)),
                "choices": latex(MODEL_TEXT[name].choices),
                "n_parameters": spec.n_parameters,
                "jacobian": latex(jacobian),
                "batch_size": run_sizes(loss_cells, name, "batch_size", spec.batch_size),
                "loss": latex(LOSS_TEXT.get(spec.loss, spec.loss)),
                "measured": name in measured,
            }
        )
    return rows


def modes_in_grid(cells: pd.DataFrame | None) -> set[tuple[str, str]]:
    """The (framework, mode) pairs this run's grid has cells of (every pair without cells)."""
    if cells is None or cells.empty:
        return {(f, m) for f, fw in FRAMEWORKS.items() for m in fw.modes}
    return set(zip(cells["framework"], cells["mode"]))


def modes_context(cells: pd.DataFrame | None = None) -> dict:
    """The modes this run measured, described; the spec's others named in one line."""
    ran = modes_in_grid(cells)
    pairs = [(f, m, info) for f, fw in FRAMEWORKS.items() for m, info in fw.modes.items()]
    return {
        "measured": [
            {
                "label": pair_label(f, m),
                "compiled": info.compiled,
                "whole_step": info.whole_step,
                "description": latex(mode_description(f, m)),
            }
            for f, m, info in pairs
            if (f, m) in ran
        ],
        "others": ", ".join(pair_label(f, m) for f, m, _ in pairs if (f, m) not in ran),
        "labels": "; ".join(pair_label(f, m) for f, m, _ in pairs if (f, m) in ran),
    }


def tasks_in_grid(cells: pd.DataFrame | None) -> list[str]:
    """The tasks this run's grid has cells of, in the spec's order (every task without cells)."""
    if cells is None or cells.empty:
        return list(TASKS)
    return [t for t in TASKS if t in set(cells["task"])]


def tasks_context(cells: pd.DataFrame | None = None) -> dict:
    """The tasks this run measured, what each computes, and which quantities every mode
    records for each (a row per mode: any number of frameworks fits)."""
    tasks = tasks_in_grid(cells)
    rows = [
        {
            "label": latex(task_label(t)),
            "description": latex(task_description(t)),
            "words": latex(in_words(task_description(t))),
            "derivative": latex(TASKS[t].derivative),
        }
        for t in tasks
    ]
    many = len(tasks) > WIDE_TASKS
    modes = [
        {
            "label": pair_label(f, m),
            "quantities": [quantities_text(timed_quantities(f, m, task), many)
                           for task in tasks],
        }
        for f, fw in FRAMEWORKS.items()
        for m in fw.modes
        if (f, m) in modes_in_grid(cells)
    ]
    labels = [latex(task_label(t)) for t in tasks]
    return {
        "rows": rows,
        "modes": modes,
        "labels": [rf"\rotatebox{{90}}{{{label}}}" if many else label for label in labels],
        "labels_text": "; ".join(labels),  # a label may hold a comma
        "colspec": "c" * len(tasks),
        "abbreviated": many,
    }


def quantities_text(quantities, abbreviated: bool) -> str:
    """'forward, backward, step', or 'f, b, s' in a table of many tasks (its caption says)."""
    words = [QUANTITY_SHORT.get(q, q) for q in quantities]
    return latex(", ".join(w[0] if abbreviated else w for w in words))


# ----------------------------------------------------------------------------- choices
def choices_context(cells: pd.DataFrame | None) -> list[dict]:
    """Per (framework, mode): each recorded implementation choice and its values, with the
    tasks (and number of cells) each value applies to."""
    if cells is None or "choices" not in cells:
        return []
    out = []
    for f, fw in FRAMEWORKS.items():
        for m in fw.modes:
            mine = cells[(cells["framework"] == f) & (cells["mode"] == m)]
            values: dict[str, Counter] = {}
            tasks: dict[tuple, set] = {}
            for blob, task in zip(mine["choices"], mine["task"]):
                for key, value in parse_choices(blob).items():
                    text = value if isinstance(value, str) else json.dumps(value)
                    values.setdefault(key, Counter())[text] += 1
                    tasks.setdefault((key, text), set()).add(task)
            for key, counter in values.items():
                shown = [
                    f"{fmt.breakable(latex(v))} ({choice_scope(tasks[(key, v)], n, len(mine))})"
                    for v, n in counter.most_common()
                ]
                first_of_mode = not out or out[-1]["pair"] != (f, m)
                out.append(
                    {
                        "pair": (f, m),
                        "mode": pair_label(f, m) if first_of_mode else "",
                        "key": fmt.breakable(latex(key)),
                        "shown": shown,
                    }
                )
    return out


def parse_choices(blob) -> dict:
    if fmt.blank(blob):
        return {}
    try:
        parsed = json.loads(blob)
    except (TypeError, ValueError):
        return {"choices": str(blob)}
    return parsed if isinstance(parsed, dict) else {"choices": parsed}


def choice_scope(tasks: set, n: int, n_cells: int) -> str:
    if n == n_cells:
        return "every cell"
    labels = [task_label(t) if t in TASKS else t for t in TASKS if t in tasks]
    labels += sorted(t for t in tasks if t not in TASKS)
    return f"{n} cells: {', '.join(labels)}"


# ----------------------------------------------------------------------------- checks
def gradient_summary(gradients: pd.DataFrame, default_tolerance) -> dict:
    """Pass counts, per model the largest errors, and the comparisons that did not pass."""
    passed = gradients["passed"].astype(str).str.lower().isin(["true", "1"])
    ok = gradients[gradients["status"] == "ok"] if len(gradients) else gradients
    has_ref = "ref_rel_error" in gradients
    failed = gradients[~passed]
    errors = ok["max_rel_error"].dropna() if len(ok) else pd.Series(dtype=float)
    worst = gradients.loc[errors.idxmax()] if len(errors) else None
    references = sorted({reference_label(r) for r in gradients["reference"].dropna() if str(r)})
    return {
        "tolerance": (
            "per model (see the table)"
            if "tolerance" in gradients
            else fmt.scientific(default_tolerance, tex=True)
        ),
        "has_reference": has_ref,
        "per_model": gradients_per_model(gradients, passed, default_tolerance),
        "n_compared": len(gradients),
        "n_passed": int(passed.sum()),
        "n_failed": len(failed),
        "all_passed": bool(len(gradients)) and bool(passed.all()),
        "max_rel_error": fmt.scientific(errors.max() if len(errors) else math.nan, tex=True),
        "max_ref_error": (
            fmt.scientific(ok["ref_rel_error"].max(), tex=True) if has_ref and len(ok) else fmt.NA
        ),
        "worst": (
            latex(
                f"{tbl.column_label(worst['framework'], worst['mode'])} against "
                f"{reference_label(worst['reference'])}, {label_of(worst['model'], MODELS)}, "
                f"{label_of(worst['task'], TASKS)}"
            )
            if worst is not None
            else fmt.NA
        ),
        "references": latex("; ".join(references)) or "none",
        "failed": not_passed_text(failed),
    }


def label_of(key, known) -> str:
    """A model's or task's label; a key the spec does not know, as it is."""
    if known is MODELS:
        return model_label(key) if key in MODELS else str(key)
    return task_label(key) if key in TASKS else str(key)


def reference_label(reference) -> str:
    """check_gradients' reference cell ('torch/eager/backward') as the paper names it:
    'PyTorch (eager), backward'."""
    parts = str(reference).split("/")
    if len(parts) not in (2, 3) or parts[0] not in FRAMEWORKS \
            or parts[1] not in FRAMEWORKS[parts[0]].modes:
        return str(reference)
    pair = tbl.column_label(parts[0], parts[1])
    return f"{pair}, {label_of(parts[2], TASKS)}" if len(parts) == 3 else pair


def gradients_per_model(gradients: pd.DataFrame, passed: pd.Series, default_tolerance) -> list:
    """Per model, in spec order: comparisons, passes, the largest errors and the tolerance."""
    order = {m: i for i, m in enumerate(MODELS)}
    by_model = sorted(gradients.groupby("model", sort=False), key=lambda g: order.get(g[0], 99))
    rows = []
    for model, g in by_model:
        g_ok = g[g["status"] == "ok"]
        largest = lambda column: (  # noqa: E731
            fmt.scientific(g_ok[column].max(), tex=True)
            if column in g_ok and len(g_ok)
            else fmt.NA
        )
        rows.append(
            {
                "model": latex(model_label(model) if model in MODELS else model),
                "n": len(g),
                "n_passed": int(passed[g.index].sum()),
                "max_rel_error": largest("max_rel_error"),
                "ref_rel_error": largest("ref_rel_error"),
                "tolerance": fmt.scientific(
                    g["tolerance"].max() if "tolerance" in g else default_tolerance, tex=True
                ),
            }
        )
    return rows


def not_passed_text(failed: pd.DataFrame, most: int = 10) -> str:
    """The first `most` comparisons that did not pass, in words, and how many more."""
    listed = [
        latex(
            f"{tbl.column_label(r.framework, r.mode)}"
            f"{'' if fmt.blank(r.reference) else ' against ' + reference_label(r.reference)}, "
            f"{model_label(r.model) if r.model in MODELS else r.model}, "
            f"{task_label(r.task) if r.task in TASKS else r.task}, "
            f"{fmt.block(r.device, r.threads)}, seed {r.seed}: {r.status}"
        )
        + ("" if missing(r.max_rel_error) else f" ({fmt.scientific(r.max_rel_error, tex=True)})")
        for r in failed.head(most).itertuples()
    ]
    more = len(failed) - len(listed)
    return "; ".join(listed) + (f"; and {more} more" if more > 0 else "")


def first_iteration_summary(first: pd.DataFrame) -> list[dict]:
    """Per framework, mode and task, over models, devices, threads and seeds."""
    rows = []
    for (f, m, task), g in first.groupby(["framework", "mode", "task"], sort=False):
        known = f in FRAMEWORKS and m in FRAMEWORKS[f].modes
        r = g["first_over_median"].dropna()
        rows.append(
            {
                "mode": pair_label(f, m) if known else latex(f"{f} {m}"),
                "task": latex(task_label(task) if task in TASKS else task),
                "compiled": known and FRAMEWORKS[f].modes[m].compiled,
                "order": (
                    not (known and FRAMEWORKS[f].modes[m].compiled),
                    list(FRAMEWORKS).index(f) if f in FRAMEWORKS else 99,
                    list(TASKS).index(task) if task in TASKS else 99,
                ),
                "n_cells": len(g),
                "first_ms": fmt.milliseconds(g["first_step_s"].median()),
                "median_ms": fmt.milliseconds(g["median_step_s"].median()),
                "ratio_median": fmt.factor(r.median() if len(r) else math.nan),
                "ratio_max": fmt.factor(r.max() if len(r) else math.nan),
            }
        )
    return sorted(rows, key=lambda row: row["order"])


def first_max(first: pd.DataFrame) -> dict:
    """The largest first iteration over the steady-state median, in compiled and in eager modes
    (the study saw it 'only in compiled models'), and the cell of each."""
    compiled = pd.Series(
        [
            f in FRAMEWORKS and m in FRAMEWORKS[f].modes and FRAMEWORKS[f].modes[m].compiled
            for f, m in zip(first["framework"], first["mode"])
        ],
        index=first.index,
        dtype=bool,
    )
    out = {}
    for name, rows in (("compiled", first[compiled]), ("eager", first[~compiled])):
        rows = rows[rows["first_over_median"].notna()]
        if rows.empty:
            out[name], out[f"{name}_where"] = fmt.factor(math.nan), ""
            continue
        top = rows.loc[rows["first_over_median"].idxmax()]
        out[name] = fmt.factor(top["first_over_median"])
        out[f"{name}_where"] = latex(
            f"{tbl.column_label(top['framework'], top['mode'])}, "
            f"{model_label(top['model']) if top['model'] in MODELS else top['model']}, "
            f"{task_label(top['task']) if top['task'] in TASKS else top['task']}"
        )
    return out


def figure_focus(first: pd.DataFrame) -> str:
    """The models and tasks the first-iterations figure draws (the same rule as figures.py)."""
    rows = focus_rows(first)
    models = [model_label(m) for m in MODELS if m in set(rows["model"])]
    tasks = [task_label(t) for t in TASKS if t in set(rows["task"])]
    return latex(f"{', '.join(models)}; task{'s' if len(tasks) > 1 else ''} {', '.join(tasks)}")


def measured_loops(cells: pd.DataFrame | None) -> pd.DataFrame | None:
    """The completed cells that recorded the cores their timed loop kept busy."""
    if cells is None or "cpu_utilisation" not in cells:
        return None
    return cells[(cells["status"] == "ok") & cells["cpu_utilisation"].notna()]


def waiting(loops: pd.DataFrame) -> pd.Series:
    """Per cell: its CPU loop kept markedly fewer cores busy than its threads.  A CUDA loop
    waits for its device by design, so only CPU cells are judged."""
    return (loops["device"] == "cpu") & (
        loops["cpu_utilisation"] < loops["threads"] - CORES_UNDER_THREADS
    )


def waiting_conditions(cells: pd.DataFrame | None) -> set[tuple]:
    """(framework, mode, model, task, device, threads) of the conditions with at least one
    waiting process: their numbers are marked wherever the paper's tables print them."""
    loops = measured_loops(cells)
    if loops is None:
        return set()
    flagged = loops[waiting(loops)]
    return {(*key[:-1], int(key[-1])) for key in zip(*(flagged[k] for k in CONDITION))}


def waiting_text(loops: pd.DataFrame, most: int = 12) -> str:
    """'PyTorch (eager), RNN cell, backward, 1 thread, seed 0: 0.58 cores; ...' for the first
    `most` waiting cells, fewest cores first, and how many more."""
    flagged = loops[waiting(loops)].sort_values("cpu_utilisation")
    listed = [
        latex(
            f"{tbl.column_label(r.framework, r.mode)}, {model_label(r.model)}, "
            f"{task_label(r.task)}, {fmt.threads_text(r.threads)}, seed {r.seed}: "
            f"{fmt.number(r.cpu_utilisation, 2)} cores"
        )
        for r in flagged.head(most).itertuples()
    ]
    more = len(flagged) - len(listed)
    return "; ".join(listed) + (f"; and {more} more" if more > 0 else "")


def threads_check(cells: pd.DataFrame | None) -> dict | None:
    """Per (framework, mode, threads): the cores the timed loops kept busy (CPU-seconds per
    second, measure.py), the modes whose loops used more than their threads and the cells
    whose loops used markedly fewer (waiting)."""
    ok = measured_loops(cells)
    if ok is None:
        return None
    rows, over = [], []
    for f, fw in FRAMEWORKS.items():
        for m in fw.modes:
            mine = ok[(ok["framework"] == f) & (ok["mode"] == m)]
            for threads, g in mine.groupby("threads"):
                busy = g["cpu_utilisation"]
                rows.append(
                    {
                        "mode": pair_label(f, m),
                        "threads": int(threads),
                        "n": len(g),
                        "min": fmt.number(busy.min(), 2),
                        "median": fmt.number(busy.median(), 2),
                        "max": fmt.number(busy.max(), 2),
                        "n_waiting": int(waiting(g).sum()),
                    }
                )
                if busy.max() > threads + CORES_OVER_THREADS:
                    over.append(
                        f"{pair_label(f, m)} ({fmt.threads_text(threads)}: up to "
                        f"{fmt.number(busy.max(), 2)} cores)"
                    )
    if not rows:
        return None
    return {
        "rows": rows,
        "over": over,
        "margin": fmt.number(CORES_OVER_THREADS, 1),
        "under": waiting_text(ok),
        "n_under": int(waiting(ok).sum()),
        "n_cells": len(ok),
        "under_margin": fmt.number(CORES_UNDER_THREADS, 2),
    }


# ----------------------------------------------------------------------------- memory
MIB = 2**20


def mebibytes(value) -> str:
    return fmt.NA if missing(value) else fmt.number(float(value) / MIB)


NOT_MEASURABLE_MARK = "n/m"  # the kept bytes of a condition no valid method reads


def kept_by_step(row) -> str:
    """The bytes a step keeps (MiB), or the mark of a condition whose processes' backend has no
    valid reading on the device (tables.memory_table's n_not_measurable)."""
    kept = getattr(row, "kept_by_step_bytes", math.nan)  # tables made before it was measured
    n_not_measurable = getattr(row, "n_not_measurable", 0)
    if missing(kept) and not missing(n_not_measurable) and n_not_measurable:
        return NOT_MEASURABLE_MARK
    return mebibytes(kept)


def memory_context(memory: pd.DataFrame | None, cells: pd.DataFrame | None) -> dict | None:
    """tables/memory.csv as the paper's memory table: a row per condition (medians over its
    processes, MiB), the device columns only where a cuda cell ran, and whether any peak
    counts from the process's start; None where no cell recorded its memory."""
    if memory is None or memory.empty:
        return None
    cuda = bool(cells is not None and (cells["device"] == "cuda").any()) or (
        memory["device"] == "cuda"
    ).any()
    block = block_namer(memory)
    rows = [
        {
            "model": latex(model_label(r.model) if r.model in MODELS else r.model),
            "task": latex(task_label(r.task) if r.task in TASKS else r.task),
            "mode": pair_label(r.framework, r.mode),
            "block": latex(block(r)) if block else "",
            "n": int(r.n_processes),
            "peak": mebibytes(r.peak_over_baseline_bytes),
            "held": mebibytes(r.held_after_step_bytes),
            "heap": mebibytes(r.heap_after_step_bytes),
            "kept": kept_by_step(r),
            "kept_over_saved": fmt.number(getattr(r, "kept_over_saved", math.nan)),
            "far_above": paper_tables.far_above(r),
            "from_start": int(r.n_peak_from_start) > 0,
            "device_allocated": mebibytes(r.device_peak_allocated_bytes),
            "device_reserved": mebibytes(r.device_peak_reserved_bytes),
            "device_held": mebibytes(r.device_held_after_step_bytes),
            "device_process": mebibytes(r.device_process_bytes),
        }
        for r in memory.itertuples()
    ]
    return {
        "rows": rows,
        "cuda": bool(cuda),
        "any_from_start": any(r["from_start"] for r in rows),
        "any_not_measurable": any(r["kept"] == NOT_MEASURABLE_MARK for r in rows),
        "n_conditions": len(rows),
        "notes": paper_tables.memory_notes(memory),
    }
