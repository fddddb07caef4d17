"""Where our numbers and the study's disagree: every number of the study's tables that ours
differs from by more than a factor of two, and for each the explanations put to the test.

A published number is set against our condition of the same framework, mode and model only
(never another framework's), in every block measured: for a Jacobian table, whose method the
study never stated, against the nearer of our two Jacobian tasks; for the study's printed
improvement column, against our same construction of it (our eager backward pass over our
compiled step).

Each explanation is a named test (TESTS) over this run's data, with the cells it rests on and
a rule that can fail.  On a disagreement it applies to, a test says one of
    explains        the rule held: the number as the explanation reads it is within the factor;
    refuted         the rule failed;
    not testable    the run lacks the test's inputs: "needs ..." says which.
A disagreement is explained where a test explains it, unexplained where every test that
applies refuted it, and open where none explains it and at least one could not be run.

machine      a machine-speed factor per framework: ours over the study's on the other numbers
             of the framework in the same part of the study (STUDY_SETUP), fitted as their
             geometric mean with the number explained held out (leave-one-out); the rule: the
             others agree with the factor within the factor of two, and the held-out number
             divided by it comes within it.
flop_rate    the FLOP rate the study's number implies (flops.task_flops at the study's sizes)
             against this machine's measured matmul peak per thread (scaling/peak.json), for
             ours slower: refuted where the rate is within our peak at our thread count; else
             the study's number needs more of this machine's cores than ours used, and ours
             sped up by the ratio of that rate to our peak must come within the factor.
backward     the study's compiled column (Table 2) read as the backward pass alone: ours
             from the compiled mode's own backward cells (TorchScript times its backward), or
             the whole step less the forward task's step of the same mode and model
             (tf.function times only whole steps); the printed improvement likewise.
first_steps  the study's means over a trial's batches kept their first iterations (claims.json
             n_batches): our first iteration (cells: time to first step less the compile
             phase; the study's protocol cells' where the run has them, whose first batch
             is the study's loop's first) averaged into as many iterations.  Not the tidy
             tables' first_step: that is the time to first step, compile included, and only
             tables with TableInfo.first_step fill it (tables.tidy_table), none of the
             study's.
threads      the study's unstated thread count: our same condition at another thread count,
             on the cores this machine has.
protocol     the study's protocol emulated (spec.STUDY_PROTOCOL_TASK: its Figs. 1-2 code,
             timed as it timed it, first batches kept): for a Table 1-2 number, our
             protocol cells' mean over their epoch (the study's statistic, every batch) of
             the quantity the study's column timed (the backward line in eager modes and
             TorchScript, the tf.function's call in tf.function), beside our backward
             cell's; the rule: it explains where the protocol comes within the factor and
             our backward cell did not, and is refuted where it does not (as far as ours
             or further, or nearer but still beyond the factor).  The printed improvement
             likewise: the eager mode's protocol mean over the compiled mode's, against
             our improvement built the study's way.
jacobian     the Jacobian's size: our Jacobian of fewer rows (and a smaller input, the study's
             presumed one) scaled up (findings.jacobian_scalings, the appendix's factors),
             each of our Jacobian tasks by its own time, never one task's time with
             another's; a number from the task the row does not name says which task.
The section reads the tidy tables and the study's text, and where given the cells, the
matmul peak (scaling.read_peaks) and the per-condition estimates (conditions.parquet); a test
whose input is not given says so.  Text escaped for LaTeX.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable

import pandas as pd

from adbench import findings, flops
from adbench import formatting as fmt
from adbench.formatting import latex
from adbench.machines_section import block_namer
from adbench.report_spec import (TABLES, TableInfo, cited, framework_label, model_label,
                                 task_label)
from adbench.scaling import peak_of
from adbench.spec import MODELS, STUDY_PROTOCOL_TASK, TASKS, eager_mode_of, timed_quantities
from adbench.tables import at_fewest_threads, column_label

FACTOR = 2.0  # a disagreement: ours and the study's differ by more than this factor
BLOCK = ["machine", "device", "threads"]
EXPLAINS, REFUTED, NOT_TESTABLE = "explains", "refuted", "not testable"
EXPLAINED, UNEXPLAINED, OPEN = "explained", "unexplained", "open"

# The parts of the study whose numbers were measured together (one setup, one machine): its
# §3.1 (Tables 1-2, the MLPs), its §3.2 (Tables 3-4, "linux4", one thread), its draft's
# dense-layer table.  A machine-speed factor is fitted within one part only.
STUDY_SETUP = {"table1_eager": "§3.1 (Tables 1–2)", "table2_compiled": "§3.1 (Tables 1–2)",
               "table3_jacobian": "§3.2 (Tables 3–4)", "table4_resnet50": "§3.2 (Tables 3–4)",
               "table5_dense": "draft, Table 1"}
# Where the study states its thread count: §3.2, "single thread of CPU" (000).
STUDY_ONE_THREAD = ("table3_jacobian", "table4_resnet50")
# Where the study states its sizes: §3.1 gives the MLPs' layers and the batch (128), which
# our models and claims.json's batch_size are; its other tables give no layer sizes.
STUDY_SIZES_STATED = ("table1_eager", "table2_compiled")
# The study's tables whose means averaged a trial's batches, its first included (claims.json
# n_batches: 469 batches per trial, 000 §3.1).
FIRST_STEP_TABLES = ("table1_eager", "table2_compiled")


def far(ratio: float) -> bool:
    return math.isfinite(ratio) and ratio > 0 and max(ratio, 1 / ratio) > FACTOR


def close(ratio: float) -> bool:
    return math.isfinite(ratio) and ratio > 0 and not far(ratio)


def number(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


# ----------------------------------------------------------------------------- pairs
def our_rows(ours: pd.DataFrame, r, table: TableInfo) -> pd.DataFrame:
    """Our completed conditions of a published row's framework, mode and model."""
    tasks = [r["task"]] if r["task"] in table.tasks else list(table.tasks)
    return ours[(ours["framework"] == r["framework"]) & (ours["mode"] == r["mode"])
                & (ours["model"] == r["model"]) & ours["task"].isin(tasks)
                & ours["mean"].notna()]


def nearest(rows: pd.DataFrame, study: float):
    """Our row nearest a published number, in ratio terms."""
    return min((r for _, r in rows.iterrows()),
               key=lambda r: abs(math.log(r["mean"] / study)))


def pairs_of_table(table: TableInfo, ours: pd.DataFrame, published: pd.DataFrame) -> list:
    """(table, published row, our nearest row of each block, quantity) for every published
    number with a condition of ours; the printed improvements against our same construction.
    Ours at the fewest threads of each machine and device, as the main text prints them: a
    row at another thread count is the thread test's (by_threads), not a pair of its own."""
    found, ours = [], ours[at_fewest_threads(ours)]
    for _, r in published.iterrows():
        study = number(r["mean"])
        mine = our_rows(ours, r, table)
        for _, block in (mine.groupby(BLOCK, sort=False) if len(mine) and study > 0 else []):
            found.append({"table": table, "published": r, "ours": nearest(block, study),
                          "what": "mean", "study": study, "block": block})
        improvement = number(r.get("improvement"))
        for _, block in (mine.groupby(BLOCK, sort=False) if improvement > 0 else []):
            row = block.iloc[0]
            if not fmt.missing(row.get("improvement_study_style")):
                found.append({"table": table, "published": r, "ours": row,
                              "what": "improvement", "study": improvement, "block": block})
    return found


def our_value(pair) -> float:
    r = pair["ours"]
    return float(r["improvement_study_style"] if pair["what"] == "improvement" else r["mean"])


def all_pairs(data: dict) -> list[dict]:
    found = []
    for table in TABLES:
        published = data[table.name]["published"]
        if len(published) and not data[table.name]["ours"].empty:
            found += pairs_of_table(table, data[table.name]["ours"], published)
    for pair in found:
        pair["ratio"] = our_value(pair) / pair["study"]
    return found


def same_block(a, b) -> bool:
    return all(a["ours"][k] == b["ours"][k] for k in BLOCK)


def framework_of(pair) -> str:
    return pair["ours"]["framework"]


# ----------------------------------------------------------------------------- the tests
@dataclasses.dataclass(frozen=True)
class Outcome:
    """One test on one disagreement: EXPLAINS, REFUTED or NOT_TESTABLE, and what it found
    (for NOT_TESTABLE, what it needs)."""

    test: str
    verdict: str
    text: str
    short: str = ""  # its number in a few characters, for the table's row
    # NOT_TESTABLE: what it needs, and for what (a model, a framework), merged per test
    needs: str = ""
    subject: str = ""


@dataclasses.dataclass(frozen=True)
class Run:
    """What the tests read: every pair compared, the tidy tables, the study's text, the
    cells, the matmul peak (scaling.read_peaks) and the per-condition estimates
    (conditions.parquet), the last three optional."""

    pairs: list
    data: dict
    study: dict
    cells: pd.DataFrame | None
    peak: dict | None
    conditions: pd.DataFrame | None


def verdict_of(test: str, ratio: float, text: str) -> Outcome:
    """EXPLAINS where `ratio` (ours, as the explanation reads it, over the study's) is within
    the factor, else REFUTED; `text` says how it was computed."""
    return Outcome(test, EXPLAINS if close(ratio) else REFUTED,
                   f"{text}: {fmt.ratio(ratio)} times the study's", fmt.ratio(ratio))


def needs(test: str, what: str, subject: str = "") -> Outcome:
    """NOT_TESTABLE: the test needs `what` (for `subject`)."""
    return Outcome(test, NOT_TESTABLE, f"needs {what}" + (f": {subject}" if subject else ""),
                   needs=what, subject=subject)


def log_mean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


# -- (a) machine speed, per framework, leave-one-out
def by_machine(pair, run: Run) -> Outcome | None:
    if pair["what"] != "mean":
        return None
    setup = STUDY_SETUP.get(pair["table"].name)
    others = [p["ratio"] for p in run.pairs if p is not pair and p["what"] == "mean"
              and framework_of(p) == framework_of(pair) and same_block(p, pair)
              and STUDY_SETUP.get(p["table"].name) == setup]
    label = framework_label(framework_of(pair))
    if len(others) < 2:
        return needs("machine", f"at least two other numbers of the framework from the "
                                f"study's {setup} in this run", f"{label} has {len(others)}")
    fitted = log_mean(others)
    words = (f"ours over the study's on {len(others)} other numbers of {label} in its {setup}: "
             f"{fmt.ratio(fitted)} (they span {fmt.span(others)})")
    if not all(close(o / fitted) for o in others):
        return Outcome("machine", REFUTED, f"{words}, not one factor", "no one factor")
    return verdict_of("machine", pair["ratio"] / fitted, f"{words}; this one divided by it")


# -- (b) the FLOP rate the study's number implies
def study_flops(pair, run: Run) -> float:
    """FLOPs of the timed quantity at the study's sizes (STUDY_SIZES_STATED: our models'
    layers, the study's batch)."""
    r, table = pair["ours"], pair["table"]
    model = MODELS[r["model"]]
    batch = number(run.study.get("batch_size"))
    counted = flops.task_flops(r["model"], r["task"], int(batch) if batch > 0
                               else model.batch_size, model.n_outputs)
    return float(counted[table.quantity])


def by_flop_rate(pair, run: Run) -> Outcome | None:
    r = pair["ours"]
    if pair["what"] != "mean" or r["device"] != "cpu" or pair["ratio"] < 1:
        return None  # only ours slower on a CPU asks whether the study used more cores
    if pair["table"].name not in STUDY_SIZES_STATED:
        return needs("flop_rate", "the study's sizes of the model (its text states none)",
                     model_label(r["model"]))
    counted = study_flops(pair, run)
    threads = int(r["threads"])
    per_thread = peak_of(run.peak or {}, "cpu", 1)
    ours_peak = peak_of(run.peak or {}, "cpu", threads)
    if not per_thread > 0 or not ours_peak > 0:
        at = "one thread" + (f" and at {fmt.threads_text(threads)}" if threads > 1 else "")
        return needs("flop_rate", f"this machine's measured matrix-multiply peak at {at}")
    seconds = pair["study"] / fmt.unit_scale(pair["table"].unit)
    rate = counted / seconds / 1e9
    cores = rate / per_thread
    text = (f"the study's number implies {fmt.number(rate)} GFLOP/s, {fmt.number(cores)} of "
            f"this machine's cores at its peak of {fmt.number(per_thread)} GFLOP/s per thread")
    cpus = machine_cores(run.cells, r["machine"])
    if cpus:
        text += f" (it has {cpus})"
    if not rate > ours_peak:
        return Outcome("flop_rate", REFUTED, f"{text}; within this machine's peak on "
                       f"{fmt.threads_text(threads)}, as ours ran", f"{fmt.number(cores)} cores")
    # The study's number is out of our threads' reach by ours_peak / rate at best: ours
    # sped up by as much is what the explanation leaves of the disagreement.
    left = pair["ratio"] * ours_peak / rate
    outcome = verdict_of("flop_rate", left, f"{text}; ours sped up by the cores it lacks")
    return dataclasses.replace(outcome, short=f"{fmt.number(cores)} cores: {outcome.short}")


def machine_cores(cells: pd.DataFrame | None, machine) -> int | None:
    if cells is None or "cpu_count" not in cells:
        return None
    mine = cells[cells["machine"] == machine] if "machine" in cells else cells
    counts = pd.to_numeric(mine["cpu_count"], errors="coerce").dropna()
    return int(counts.max()) if len(counts) else None


# -- (c) the compiled column read as the backward pass alone
def condition_mean(run: Run, r, task: str, quantity: str, unit: str) -> float:
    """Our mean of a condition's quantity (conditions.parquet), in `unit`; NaN if absent."""
    c = run.conditions
    if c is None or c.empty:
        return math.nan
    hit = c[(c["framework"] == r["framework"]) & (c["mode"] == r["mode"])
            & (c["model"] == r["model"]) & (c["task"] == task) & (c["quantity"] == quantity)
            & (c["statistic"] == "mean") & (c["device"] == r["device"])
            & (c["threads"] == r["threads"]) & (c["machine"] == r["machine"])]
    return float(hit["point"].iloc[0]) * fmt.unit_scale(unit) if len(hit) else math.nan


def compiled_backward(pair, run: Run) -> tuple[float, str] | Outcome:
    """Our compiled mode's backward pass, in the table's unit, and how it was read; or the
    outcome saying what is missing."""
    r, unit = pair["ours"], pair["table"].unit
    if "backward_s" in timed_quantities(r["framework"], r["mode"], r["task"]):
        value = number(r.get("improvement_backward_denominator_s"))
        if not value > 0:
            value = condition_mean(run, r, r["task"], "backward_s", unit)
        label = column_label(r["framework"], r["mode"])
        return ((value, f"{label}'s own backward pass") if value > 0
                else needs("backward", f"{label}'s backward cells of the model",
                           model_label(r["model"])))
    step = number(r["mean"])
    forward = condition_mean(run, r, "forward", "step_s", unit)
    label = column_label(r["framework"], r["mode"])
    if not forward > 0:
        return needs("backward", f"{label}'s forward cells of the model (the forward task) "
                                 "and the run's per-condition estimates of their mean steps",
                     model_label(r["model"]))
    if not step > forward:
        return needs("backward", f"a {label} step longer than its forward",
                     model_label(r["model"]))
    return step - forward, (f"{label}'s step less its forward (the forward task's mean "
                            "step, same model and block)")


def by_backward(pair, run: Run) -> Outcome | None:
    table = pair["table"]
    if not (table.compiled and table.quantity == "step_s" and table.tasks == ("backward",)):
        return None
    found = compiled_backward(pair, run)
    if isinstance(found, Outcome):
        return found
    backward, method = found
    if pair["what"] == "improvement":
        eager = number(pair["ours"].get("improvement_study_style_numerator_s"))
        if not eager > 0:
            return needs("backward", "our eager backward pass of the same model")
        return verdict_of("backward", eager / backward / pair["study"],
                          f"our eager backward over {method}")
    return verdict_of("backward", backward / pair["study"], method)


# -- (d) the first iterations averaged in
def ok_cells(run: Run, r, task: str) -> pd.DataFrame:
    """The ok cells (cells.parquet) of a row's framework, mode, model and block, of `task`."""
    c = run.cells
    if c is None or c.empty:
        return pd.DataFrame()
    hit = c[(c["framework"] == r["framework"]) & (c["mode"] == r["mode"])
            & (c["model"] == r["model"]) & (c["task"] == task)
            & (c["device"] == r["device"]) & (c["threads"] == r["threads"])
            & (c["status"] == "ok")]
    return hit[hit["machine"] == r["machine"]] if "machine" in c else hit


def first_iteration(run: Run, r, unit: str) -> tuple[float, str]:
    """The condition's first timed iteration (its whole step), mean over its ok seeds, in
    `unit`: time to first step less the ahead-of-time compile phase (cells.parquet); from
    the study's protocol cells where the run has them (their first batch is the first of the
    study's loop), else from the row's own task's.  NaN if neither has it; and whose."""
    for task, whose in ((STUDY_PROTOCOL_TASK, "the study's protocol cells' first batch"),
                        (r["task"], "our first iteration")):
        first = first_of(ok_cells(run, r, task))
        if first > 0:
            return first * fmt.unit_scale(unit), whose
    return math.nan, ""


def first_of(hit: pd.DataFrame) -> float:
    """Mean over the cells of time to first step less the compile phase, seconds."""
    if hit.empty or "time_to_first_step_s" not in hit:
        return math.nan
    compile_s = (pd.to_numeric(hit["phase_compile_s"], errors="coerce").fillna(0.0)
                 if "phase_compile_s" in hit else 0.0)
    first = pd.to_numeric(hit["time_to_first_step_s"], errors="coerce") - compile_s
    first = first.dropna()
    return float(first.mean()) if len(first) else math.nan


def by_first_steps(pair, run: Run) -> Outcome | None:
    if pair["what"] != "mean" or pair["table"].name not in FIRST_STEP_TABLES:
        return None
    n = number(run.study.get("n_batches"))
    if not n > 1:
        return needs("first_steps", "the study's batches per trial")
    r = pair["ours"]
    first, whose = first_iteration(run, r, pair["table"].unit)
    if not first > 0:
        return needs("first_steps", "the condition's first iteration (its cells' time to "
                                    "first step)")
    with_first = (first + (n - 1) * float(r["mean"])) / n
    whole = "" if pair["table"].quantity == "step_s" else " (its whole step: an upper bound)"
    return verdict_of("first_steps", with_first / pair["study"],
                      f"{whose}{whole} averaged into {int(n)}")


# -- (g) the study's protocol emulated
def protocol_quantity(r) -> str:
    """What the study's column timed: the backward line where the mode separates it (eager,
    TorchScript), else the compiled call (tf.function's step)."""
    timed = timed_quantities(r["framework"], r["mode"], STUDY_PROTOCOL_TASK)
    return "backward_s" if "backward_s" in timed else "step_s"


def protocol_mean(r, table: TableInfo, run: Run) -> tuple[float, str] | Outcome:
    """Our protocol cells' mean over their epoch, every batch (the study's statistic), of
    row `r`'s condition, in the table's unit, and how many cells and batches; or what is
    missing."""
    subject = model_label(r["model"])  # merged per need: every mode of a model at once
    cells = ok_cells(run, r, STUDY_PROTOCOL_TASK)
    quantity = protocol_quantity(r)
    mean = condition_mean(run, r, STUDY_PROTOCOL_TASK, quantity, table.unit)
    if cells.empty or not mean > 0:
        return needs("protocol", "the study's protocol cells "
                                 f"({task_label(STUDY_PROTOCOL_TASK)})", subject)
    # the statistic reads every batch only where the aggregate dropped none as warm-up
    skipped = sum(pd.to_numeric(cells.get(k, pd.Series(0, index=cells.index)),
                                errors="coerce").fillna(0).sum()
                  for k in ("warmup", "warmup_dropped"))
    if skipped > 0:
        return needs("protocol", f"the study's protocol cells' mean over every batch "
                                 f"({int(skipped)} of their first batches left out as warm-up)",
                     subject)
    iterations = pd.to_numeric(cells.get("iterations", pd.Series(dtype=float)),
                               errors="coerce").dropna()
    batches = f" of {int(iterations.max())} batches" if len(iterations) else ""
    n = len(cells)
    return mean, (f"our protocol {'cell' if n == 1 else 'cells'} ({n}), {quantity} mean over "
                  f"{'its' if n == 1 else 'their'} epoch{batches}, first ones included: "
                  f"{fmt.number(mean)} {fmt.unit_text(table.unit)}")


def protocol_improvement(pair, run: Run) -> tuple[float, str] | Outcome:
    """The study's printed improvement built from our protocol cells as the study built it:
    the eager mode's epoch mean over the compiled mode's (each the quantity its column
    timed); or what is missing."""
    r, table = pair["ours"], pair["table"]
    eager = r.copy()
    eager["mode"] = eager_mode_of(r["framework"])
    found = [protocol_mean(row, table, run) for row in (eager, r)]
    missing = next((f for f in found if isinstance(f, Outcome)), None)
    if missing is not None:
        return missing
    (eager_mean, _), (compiled_mean, _) = found
    labels = [column_label(r["framework"], row["mode"]) for row in (eager, r)]
    return eager_mean / compiled_mean, (
        f"our protocol cells' {labels[0]} {protocol_quantity(eager)} epoch mean over "
        f"{labels[1]}'s {protocol_quantity(r)} epoch mean, first batches included: "
        f"{fmt.ratio(eager_mean / compiled_mean)}")


def by_protocol(pair, run: Run) -> Outcome | None:
    if pair["table"].name not in FIRST_STEP_TABLES:
        return None
    if pair["what"] == "improvement":
        found, what = protocol_improvement(pair, run), "our improvement"
    else:
        found, what = protocol_mean(pair["ours"], pair["table"], run), "our backward cell"
    if isinstance(found, Outcome):
        return found
    mean, words = found
    ratio, ours = mean / pair["study"], pair["ratio"]
    beside = f"; {what}: {fmt.ratio(ours)} times"
    short = fmt.ratio(ratio)  # our backward cell's ratio is the row's own, beside it
    if close(ratio) and far(ours):
        return Outcome("protocol", EXPLAINS, f"{words}: {fmt.ratio(ratio)} times the "
                       f"study's{beside}", short)
    nearer = abs(math.log(ratio)) < abs(math.log(ours))
    how = (f"nearer than {what}, still beyond the factor" if nearer and not
           close(ratio) else f"as far as {what} or further")
    return Outcome("protocol", REFUTED, f"{words}: {fmt.ratio(ratio)} times the study's, "
                   f"{how}{beside}", short)


# -- (e) the thread count
def by_threads(pair, run: Run) -> Outcome | None:
    if pair["what"] != "mean":
        return None
    r, table = pair["ours"], pair["table"]
    if table.name in STUDY_ONE_THREAD:
        return Outcome("threads", REFUTED, "the study states one thread for this table",
                       "the study: 1 thread")
    ours = run.data[table.name]["ours"]
    others = ours[(ours["framework"] == r["framework"]) & (ours["mode"] == r["mode"])
                  & (ours["model"] == r["model"]) & (ours["task"] == r["task"])
                  & (ours["machine"] == r["machine"]) & (ours["device"] == r["device"])
                  & (ours["threads"] != r["threads"]) & ours["mean"].notna()]
    if others.empty:
        cores = machine_cores(run.cells, r["machine"])
        where = f"; this machine has {cores} cores" if cores else ""
        return needs("threads", f"the same condition at another thread count{where}")
    best = min((o for _, o in others.iterrows()),
               key=lambda o: abs(math.log(o["mean"] / pair["study"])))
    return verdict_of("threads", best["mean"] / pair["study"],
                      f"ours on {fmt.threads_text(int(best['threads']))}")


# -- (f) the Jacobian's size, per task
def by_jacobian_size(pair, run: Run) -> Outcome | None:
    r = pair["ours"]
    if pair["what"] != "mean" or TASKS[r["task"]].derivative != "jacobian":
        return None
    shape = run.study.get("study_input_shape", {}).get(r["model"])
    scaled = findings.jacobian_scalings(r["model"], shape, run.cells)
    if not scaled:
        return None  # ours is the study's size: nothing to scale
    # each of our Jacobian tasks scaled by its own time, named with it
    tried = sorted(
        ((abs(math.log(scaling.of(mine["mean"]) / pair["study"])),
          scaling.of(mine["mean"]) / pair["study"], mine["task"], scaling)
         for _, mine in pair["block"].iterrows() for scaling in scaled),
        key=lambda t: t[0])
    _, ratio, task, scaling = tried[0]
    outcome = verdict_of("jacobian", ratio, scaled_words(task, scaling))
    rest = "; ".join(f"{scaled_words(t, k)}: {fmt.ratio(v)}" for _, v, t, k in tried[1:])
    # the row names our nearest task: a number from the other task says which it is
    which = "" if task == r["task"] else f"{task_label(task)} "
    return dataclasses.replace(outcome, text=outcome.text + (f" (also {rest})" if rest else ""),
                               short=f"{which}×{fmt.factor(scaling.factor)}: {outcome.short}")


def scaled_words(task: str, scaling: findings.Scaling) -> str:
    return f"{task_label(task)} ×{fmt.factor(scaling.factor)} by {scaling.words}"


@dataclasses.dataclass(frozen=True)
class Test:
    """One explanation: its name in the paper, the cells it rests on, its rule."""

    key: str
    code: str  # its letter in the table of disagreements
    name: str
    rests_on: str
    rule: str
    run: Callable


TESTS = (
    Test("machine", "M", "machine speed",
         "the framework's other numbers from the same part of the study, same block",
         "their ratios share one factor within 2×, and the number held out divided by it is "
         "within 2×", by_machine),
    Test("flop_rate", "F", "FLOP rate",
         "the study's number and the FLOP count at its sizes; this machine's measured "
         "matrix-multiply peak per thread",
         "the study's implied rate exceeds our peak at our thread count (its number needs "
         "more of this machine's cores), and ours sped up by the cores it lacks is within 2×",
         by_flop_rate),
    Test("backward", "B", "compiled column as backward",
         "TorchScript's backward cells; tf.function's step and forward cells",
         "our compiled backward (or the improvement built on it) within 2×", by_backward),
    Test("first_steps", "I", "first iterations averaged in",
         "the condition's cells' first iterations; the study's batches per trial",
         "our mean with its first iteration averaged into the study's batches within 2×",
         by_first_steps),
    Test("protocol", "P", "the study's protocol emulated",
         "the study's protocol cells (its code timed as it timed it, first batches kept)",
         "their mean over the epoch (or the improvement built from them) within 2× where "
         "our backward cell's (our improvement) is not", by_protocol),
    Test("threads", "T", "thread count",
         "the same condition at another thread count",
         "ours at another thread count within 2× (where the study does not state one)",
         by_threads),
    Test("jacobian", "J", "Jacobian size",
         "each of our Jacobian tasks of the condition; its rows and input size",
         "a task's own time scaled by the rows (and the presumed input) within 2×",
         by_jacobian_size),
)
TEST_NAMES = {t.key: t.name for t in TESTS}
TEST_CODES = {t.key: t.code for t in TESTS}


def outcomes(pair, run: Run) -> list[Outcome]:
    return [o for o in (t.run(pair, run) for t in TESTS) if o is not None]


def status(found: list[Outcome]) -> str:
    """explained (a test explains it), unexplained (every test refuted), open (else)."""
    verdicts = {o.verdict for o in found}
    if EXPLAINS in verdicts:
        return EXPLAINED
    return OPEN if NOT_TESTABLE in verdicts or not found else UNEXPLAINED


# ----------------------------------------------------------------------------- the section
def unit_text(pair) -> str:
    return "" if pair["what"] == "improvement" else fmt.unit_text(pair["table"].unit)


def outcome_text(found: list[Outcome]) -> str:
    """'explained by M 1.24; refuted: T 3.10; not testable: F': each test by its letter
    (TESTS), with its number as the explanation reads it (ours over the study's, or the
    cores the study's number needs)."""
    parts = []
    for verdict, lead in ((EXPLAINS, "explained by"), (REFUTED, "refuted:"),
                          (NOT_TESTABLE, "not testable:")):
        names = [TEST_CODES[o.test] + (f" {o.short}" if o.short else "")
                 for o in found if o.verdict == verdict]
        if names:
            parts.append(f"{lead} {', '.join(names)}")
    return "; ".join(parts) or "no test applies"


def row_text(pair, block) -> dict:
    r, published, table = pair["ours"], pair["published"], pair["table"]
    what = "improvement" if pair["what"] == "improvement" else task_label(r["task"])
    where = f"{model_label(r['model'])}, {column_label(r['framework'], r['mode'])}, {what}"
    if block:
        where += f" ({block(r)})"
    n = int(r["n_seeds"]) if not fmt.missing(r.get("n_seeds")) else 0
    return {
        "table": latex(cited(table.study_table)
                       + (f" ({unit_text(pair)})" if pair["what"] == "mean" else "")),
        "where": latex(where),
        "study": latex(str(published[pair["what"]])),
        "ours": latex(fmt.number(our_value(pair))),
        "n": n,
        "ratio": fmt.ratio(pair["ratio"]),
        "status": pair["status"],
        "explanation": latex(outcome_text(pair["outcomes"])),
        "tests": [{"name": latex(TEST_NAMES[o.test]), "verdict": o.verdict,
                   "text": latex(o.text)} for o in pair["outcomes"]],
    }


def needed(untestable) -> list[str]:
    """What a test needs, once per need, with the subjects that need it."""
    subjects: dict[str, list[str]] = {}
    for o in untestable:
        listed = subjects.setdefault(o.needs, [])
        if o.subject and o.subject not in listed:
            listed.append(o.subject)
    return [f"{what}: {'; '.join(listed)}" if listed else what
            for what, listed in sorted(subjects.items())]


def test_rows(found: list[dict]) -> list[dict]:
    """Per test: what it rests on, its rule, and on how many disagreements it explains, is
    refuted or could not run (with what it needs)."""
    rows = []
    for test in TESTS:
        mine = [o for p in found for o in p["outcomes"] if o.test == test.key]
        count = lambda v: sum(o.verdict == v for o in mine)  # noqa: E731
        missing = needed(o for o in mine if o.verdict == NOT_TESTABLE)
        rows.append({"key": test.key, "code": test.code, "name": latex(test.name),
                     "rests_on": latex(test.rests_on), "rule": latex(test.rule),
                     "explains": count(EXPLAINS), "refuted": count(REFUTED),
                     "not_testable": count(NOT_TESTABLE),
                     "needs": [latex(m) for m in missing],
                     "state": ("survives" if count(EXPLAINS) else "refuted" if count(REFUTED)
                               else "open" if count(NOT_TESTABLE) else "not applicable")})
    return rows


def disagreements_context(data: dict, study: dict, cells: pd.DataFrame | None,
                          peak: dict | None = None,
                          conditions: pd.DataFrame | None = None) -> dict:
    """Every published number ours differs from by more than FACTOR, with each explanation's
    test on it; per test, its tally; and how many numbers were compared."""
    pairs = all_pairs(data)
    run = Run(pairs, data, study, cells, peak, conditions)
    found = [p for p in pairs if far(p["ratio"])]
    for p in found:
        p["outcomes"] = outcomes(p, run)
        p["status"] = status(p["outcomes"])
    block = block_namer(pd.DataFrame([p["ours"] for p in pairs])) if pairs else None
    found.sort(key=lambda p: ([t.name for t in TABLES].index(p["table"].name),
                              p["what"] == "improvement"))
    tests = test_rows(found)
    count_of = {"survives": "explains", "refuted": "refuted", "open": "not_testable"}
    by_state = lambda s: [f"{t['name']} ({t[count_of[s]]})"  # noqa: E731
                          for t in tests if t["state"] == s]
    return {
        "n_compared": len(pairs),
        "n_study": len({(id(p["table"]), p["published"].name, p["what"]) for p in pairs}),
        "factor": fmt.factor(FACTOR),
        "rows": [row_text(p, block) for p in found],
        "n_explained": sum(p["status"] == EXPLAINED for p in found),
        "n_unexplained": sum(p["status"] == UNEXPLAINED for p in found),
        "n_open": sum(p["status"] == OPEN for p in found),
        "tests": tests,
        "survive": by_state("survives"),
        "refuted": by_state("refuted"),
        "open": by_state("open"),
        "any_one_process": any(int(p["ours"]["n_seeds"]) < 2 for p in found
                               if not fmt.missing(p["ours"].get("n_seeds"))),
    }
