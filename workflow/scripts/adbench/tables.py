"""Every table of report_spec.TABLES from aggregated statistics: tidy CSV, Markdown and LaTeX.

Nothing here lists frameworks, modes, models or tables.  Layout "columns" (the study's):
rows are a table's models x tasks present in the data (in device/threads blocks when
several), columns every (framework, mode) of the spec that is present, is one of
TableInfo.frameworks, keeps TableInfo.compiled and records the table's quantity.  Layout
"rows": a row per (framework, mode) under each model, a column per task, so any number of
frameworks fits.  Numbers are in the table's own unit (the study's), so they sit beside the
study's published ones.

Tidy CSV columns (TIDY_COLUMNS), one row per condition (a cell over its seeds):
    mean, mean_sd   mean over seeds of each seed's mean time, and its sd over seeds
    std, std_sd     mean over seeds of each seed's std, and its sd over seeds
    improvement     TableInfo.improvement only: eager step / compiled step (like for like)
    improvement_backward      eager backward / compiled backward (like for like; where the
                    compiled mode times its backward pass)
    improvement_study_style   eager backward / compiled step (the study's Table 2 ratio)
    first_step, first_step_sd TableInfo.first_step only: time to first step (ahead-of-time
                    compile + first iteration), mean over seeds and its sd
    task_ratio      tables of exactly two tasks, on the second task's rows: its mean over the
                    same condition's mean on the first task (H0: loss_jacobian / backward)
    Every ratio is the comparisons product's (adbench.comparisons): of means over the seeds
    both sides ran (paired by seed), with
    <ratio>_low, <ratio>_high   its interval, <ratio>_basis what it resamples (processes,
                    or the iterations of one process: then it is no conclusion), and
    <ratio>_n       the processes (seeds) per side behind it,
    <ratio>_numerator_s, <ratio>_denominator_s   each side's mean over those seeds, in the
                    table's unit: the operands the ratio was computed from
    median, iqr     median over seeds of each seed's median, and of its IQR
    n_noisy         seeds whose step IQR / median is above the noise threshold
    warmup_dropped  measured iterations dropped by the warm-up rule (stats.steady_rows), over
                    the condition's seeds; n_no_steady_state: seeds that never settled
    n_busy          seeds measured while other processes kept the machine busy, after their
                    re-timings (aggregate's `busy`); busy_other_cores: the most cores other
                    processes took in one of them (their numbers are marked BUSY_MARK)
    status, note    ok | partial | n/a, and why (a cell that is not ok is never dropped)
    flags           what the reader should know of an ok condition (noisy, no steady state)
"""

from __future__ import annotations

import math

import pandas as pd

from adbench import comparisons as cmp
from adbench import formatting as fmt
from adbench import stats
from adbench.report_spec import (
    TABLES,
    TableInfo,
    framework_label,
    mode_label,
    model_label,
    task_label,
)
from adbench.sections import figures as declared_figures
from adbench.selection import table_modes
from adbench.spec import FRAMEWORKS, MODELS, TASKS, eager_mode_of, timed_quantities

STATISTICS = ("mean", "mean_sd", "std", "std_sd", "median", "iqr")
RATIOS = (*stats.IMPROVEMENTS, "task_ratio")
# A table's blocks: its rows on one machine, device and thread count (each a column of the
# Markdown where the table has several).
BLOCK_COLUMNS = ("machine", "device", "threads")
# Each ratio's columns beside it (ratio_columns): interval, processes, operands.
RATIO_ENDS = ("_low", "_high", "_n", "_numerator_s", "_denominator_s")
TIDY_COLUMNS = [
    "table",
    "model",
    "model_label",
    "n_parameters",
    "task",
    "task_label",
    "framework",
    "framework_label",
    "mode",
    "mode_label",
    "compiled",
    "quantity",
    "unit",
    "machine",
    "device",
    "threads",
    "n_seeds",
    "n_iterations",
    *STATISTICS,
    "first_step",
    "first_step_sd",
    *(f"{r}{end}" for r in RATIOS for end in ("", *RATIO_ENDS, "_basis")),
    "n_noisy",
    "warmup_dropped",
    "n_no_steady_state",
    "n_busy",
    "busy_other_cores",
    "status",
    "note",
    "flags",
]
EMPTY_NOTE = "Not measured in this run: no cell of this table is in the config."
# Beside the mean of a condition measured on a busy machine (n_busy), in the Markdown table.
BUSY_MARK = " (busy)"


# ----------------------------------------------------------------------------- spec facts
def column_label(framework: str, mode: str) -> str:
    """'PyTorch (TorchScript)': how a (framework, mode) column is headed."""
    return f"{framework_label(framework)} ({mode_label(framework, mode)})"


def records(table: TableInfo, framework: str, mode: str, task: str) -> bool:
    """Whether a cell records the table's quantity (a whole-step mode has no backward_s)."""
    return table.quantity in timed_quantities(framework, mode, task)


def at_fewest_threads(tidy: pd.DataFrame) -> pd.Series:
    """Whether each tidy row is at its (machine, device)'s fewest threads: the rows the
    paper's main text shows of a study's table (the thread count comparable with the study's,
    which states one thread where it states any); its rows at other thread counts are an
    appendix's.  The tidy tables themselves keep every row."""
    if tidy.empty:
        return pd.Series(True, index=tidy.index, dtype=bool)
    threads = pd.to_numeric(tidy["threads"])
    fewest = threads.groupby([tidy["machine"], tidy["device"]], dropna=False).transform("min")
    return threads == fewest


def ratio_tasks(table: TableInfo) -> tuple[str, str] | None:
    """(first, second) task of a two-task table, whose ratio the table reports."""
    return tuple(table.tasks) if len(table.tasks) == 2 else None


def figures_of_tables() -> tuple[str, ...]:
    """The figures that draw the spec's tables (adbench/sections/figures.py declares each and
    the tables it draws; the paper cites each beside them)."""
    return tuple(f.name for f in declared_figures.of_tables())


FIGURES_OF_TABLES = figures_of_tables()


def figure_of(table: TableInfo) -> str | None:
    """The declared figure that draws a table (its `draws` rule), else None."""
    return next((f.name for f in declared_figures.of_tables() if f.draws(table)), None)


def tables_drawn_in(figure: str) -> list[TableInfo]:
    return [t for t in TABLES if figure_of(t) == figure]


def spec_order(column: pd.Series) -> pd.Series:
    """Sort key: models, tasks, frameworks and modes in spec order, not alphabetically."""
    order = {"model": list(MODELS), "task": list(TASKS), "framework": list(FRAMEWORKS)}
    if column.name in order:
        return column.map(
            lambda v: (
                order[column.name].index(v) if v in order[column.name] else len(order[column.name])
            )
        )
    if column.name == "pair":
        pairs = [(f, m) for f, info in FRAMEWORKS.items() for m in info.modes]
        return column.map(pairs.index)
    return column


# ----------------------------------------------------------------------------- selection
def table_cells(table: TableInfo, cells: pd.DataFrame) -> pd.DataFrame:
    """The cells (every status) that belong to a table."""
    allowed = set(table_modes(table))
    keep = [
        model in table.models
        and task in table.tasks
        and (f, m) in allowed
        and records(table, f, m, task)
        for f, m, model, task in zip(
            cells["framework"], cells["mode"], cells["model"], cells["task"]
        )
    ]
    return cells[keep]


def condition_status(cells: pd.DataFrame) -> pd.DataFrame:
    """Per condition (all seeds of a cell): 'ok', or how many seeds were not ok and why."""

    def summarise(group: pd.DataFrame) -> pd.Series:
        bad = group[group["status"] != "ok"]
        if bad.empty:
            return pd.Series({"status": "ok", "note": ""})
        status = "n/a" if len(bad) == len(group) else "partial"
        reasons = "; ".join(sorted(set(bad.apply(reason, axis=1))))
        return pd.Series(
            {"status": status, "note": f"{len(bad)} of {len(group)} seeds not ok ({reasons})"}
        )

    keys = list(stats.CONDITION_FIELDS)
    columns = ["status", "message"] + (["log"] if "log" in cells else [])
    return cells.groupby(keys, observed=True)[columns].apply(summarise).reset_index()


def reason(cell: pd.Series) -> str:
    """'failed: <message> (log: <path>)'; an unsupported cell's reason needs no log."""
    text = f"{cell['status']}: {'' if pd.isna(cell['message']) else cell['message']}"
    if cell["status"] in ("failed", "timeout") and isinstance(cell.get("log"), str):
        text += f" (log: {cell['log']})"
    return text


# ----------------------------------------------------------------------------- derived numbers
def ratio_sides(table: TableInfo, r) -> dict[str, tuple[str, str, tuple, tuple]]:
    """Per ratio a row of the table prints: its comparison's (kind, name, numerator,
    denominator) in the comparisons product (adbench.comparisons), sides as (framework,
    mode, model, task, quantity)."""
    here = (r["framework"], r["mode"], r["model"], r["task"])
    sides = {}
    eager = eager_mode_of(r["framework"])
    if table.improvement and FRAMEWORKS[r["framework"]].modes[r["mode"]].compiled and eager:
        for name, (eager_quantity, quantity) in stats.IMPROVEMENTS.items():
            sides[name] = ("improvement", name, (r["framework"], eager, *here[2:], eager_quantity),
                           (*here, quantity))
    tasks = ratio_tasks(table)
    if tasks and r["task"] == tasks[1]:
        sides["task_ratio"] = ("task_ratio", f"{tasks[1]}/{tasks[0]}",
                               (*here, table.quantity), (*here[:3], tasks[0], table.quantity))
    return sides


def comparison_index(made: pd.DataFrame | None) -> dict[tuple, dict]:
    """The comparisons product's rows (level "comparison") by (kind, name, machine, device,
    threads, numerator side, denominator side)."""
    if made is None or made.empty:
        return {}
    rows = made[made["level"] == "comparison"].to_dict("records")
    side = lambda r, end: tuple(r[f"{end}_{f}"] for f in cmp.SIDE_FIELDS)  # noqa: E731
    return {(r["kind"], r["name"], *(r[f] for f in cmp.BLOCK_FIELDS), side(r, "numerator"),
             side(r, "denominator")): r for r in rows}


def ratio_columns(tidy: pd.DataFrame, table: TableInfo,
                  made: pd.DataFrame | None) -> pd.DataFrame:
    """Every ratio of every row, as the comparisons product made it (paired by seed, the
    study's statistic, the mean): <ratio>, _low, _high, _n (processes per side), _basis,
    and the operands it was computed from (_numerator_s, _denominator_s: each side's mean over
    the paired seeds, so that a ratio is never printed beside operands of other seeds)."""
    index = comparison_index(made)
    for name in RATIOS:
        tidy[[name, *(f"{name}{end}" for end in RATIO_ENDS)]] = math.nan
        tidy[f"{name}_basis"] = ""
    for i, r in tidy.iterrows():
        block = tuple(r[f] for f in cmp.BLOCK_FIELDS)
        for name, (kind, which, numerator, denominator) in ratio_sides(table, r).items():
            found = index.get((kind, which, *block, numerator, denominator))
            if found is not None:
                tidy.loc[i, [name, *(f"{name}{end}" for end in RATIO_ENDS)]] = (
                    found["ratio"], found["low"], found["high"], found["n_processes"],
                    found["numerator_point"], found["denominator_point"])
                tidy.loc[i, f"{name}_basis"] = found["basis"]
    return tidy


def first_step_columns(mine: pd.DataFrame) -> pd.DataFrame:
    """Time to first step per condition: mean and sd over the seeds that ran."""
    keys = list(stats.CONDITION_FIELDS)
    if "time_to_first_step_s" not in mine:  # cells aggregated before the column existed
        return pd.DataFrame(columns=keys + ["first_step_s", "first_step_sd_s"])
    ok = mine[mine["status"] == "ok"]
    grouped = ok.groupby(keys, observed=True)["time_to_first_step_s"]
    return grouped.agg(first_step_s="mean", first_step_sd_s="std").reset_index()


def flag_columns(mine: pd.DataFrame, noise_threshold: float | None) -> pd.DataFrame:
    """Per condition: seeds flagged noisy, warm-up iterations dropped by the rule
    (stats.steady_rows) and seeds whose steady state was never reached, in words."""
    keys = list(stats.CONDITION_FIELDS)
    columns = keys + ["n_noisy", "warmup_dropped", "n_no_steady_state", "flags"]
    if "noisy" not in mine or mine.empty:  # cells aggregated before the flags existed
        return pd.DataFrame(columns=columns)
    ok = mine[mine["status"] == "ok"]
    counts = (
        ok.groupby(keys, observed=True)
        .agg(
            n_noisy=("noisy", "sum"),
            warmup_dropped=("warmup_dropped", "sum"),
            n_no_steady_state=("no_steady_state", "sum"),
            n_ok=("status", "size"),
        )
        .reset_index()
    )
    above = "" if noise_threshold is None else f" above {fmt.percent(noise_threshold)}"

    def words(r) -> str:
        said = []
        if r.n_noisy:
            said.append(f"noisy in {r.n_noisy} of {r.n_ok} seeds (step IQR / median{above})")
        if r.n_no_steady_state:
            said.append(f"no steady state found in {r.n_no_steady_state} of {r.n_ok} seeds "
                        "(every measured iteration kept)")
        return "; ".join(said)

    counts["flags"] = [words(r) for r in counts.itertuples()]
    return counts[columns]


def busy_columns(mine: pd.DataFrame) -> pd.DataFrame:
    """Per condition: its ok seeds measured while other processes kept the machine busy
    (after their re-timings: aggregate's `busy`), and the most cores other processes took
    during one of them; none where the cells predate the reading."""
    keys = list(stats.CONDITION_FIELDS)
    columns = keys + ["n_busy", "busy_other_cores"]
    if "busy" not in mine or mine.empty:
        return pd.DataFrame(columns=columns)
    ok = mine[mine["status"] == "ok"]
    busy = ok["busy"].astype("boolean").fillna(False).astype(bool)
    other = pd.to_numeric(ok["load_other_cores"], errors="coerce").where(busy) \
        if "load_other_cores" in ok else pd.Series(math.nan, index=ok.index)
    found = (ok.assign(n_busy=busy.astype(int), busy_other_cores=other)
             .groupby(keys, observed=True)
             .agg(n_busy=("n_busy", "sum"), busy_other_cores=("busy_other_cores", "max"))
             .reset_index())
    return found[columns]


def busy_words(r) -> str:
    """'measured while the machine was busy in 1 of 3 seeds (other processes took up to 0.72
    cores)'; '' for a condition measured on a quiet machine."""
    n, seeds, most = (getattr(r, k, None) for k in ("n_busy", "n_seeds", "busy_other_cores"))
    if fmt.missing(n) or not n:
        return ""
    of = "" if fmt.missing(seeds) else f" of {int(seeds)}"
    took = "" if fmt.missing(most) else f" (other processes took up to {fmt.cores(most)} cores)"
    return f"measured while the machine was busy in {int(n)}{of} seeds{took}"


def add_labels(tidy: pd.DataFrame, table: TableInfo) -> pd.DataFrame:
    tidy["table"] = table.name
    tidy["quantity"] = table.quantity
    tidy["unit"] = table.unit
    tidy["model_label"] = [model_label(m) for m in tidy["model"]]
    tidy["n_parameters"] = [MODELS[m].n_parameters for m in tidy["model"]]
    tidy["task_label"] = [task_label(t) for t in tidy["task"]]
    tidy["framework_label"] = [framework_label(f) for f in tidy["framework"]]
    tidy["mode_label"] = [mode_label(f, m) for f, m in zip(tidy["framework"], tidy["mode"])]
    tidy["compiled"] = [
        FRAMEWORKS[f].modes[m].compiled for f, m in zip(tidy["framework"], tidy["mode"])
    ]
    return tidy


def sort_rows(tidy: pd.DataFrame) -> pd.DataFrame:
    tidy = tidy.assign(pair=list(zip(tidy["framework"], tidy["mode"])))
    tidy = tidy.sort_values(
        ["machine", "device", "threads", "model", "task", "pair"], key=spec_order,
        kind="stable"
    )
    return tidy.drop(columns="pair").reset_index(drop=True)


def tidy_table(
    table: TableInfo,
    summary: pd.DataFrame,
    cells: pd.DataFrame,
    comparisons: pd.DataFrame | None = None,
    noise_threshold: float | None = None,
) -> pd.DataFrame:
    """One row per condition of the table, n/a rows included; numbers in the table's unit;
    every ratio as the comparisons product made it (none without it)."""
    mine = table_cells(table, cells)
    if mine.empty:  # e.g. a config without this table's models: empty, not a crash
        return pd.DataFrame(columns=TIDY_COLUMNS)
    keys = list(stats.CONDITION_FIELDS)
    numbers = summary[summary["quantity"] == table.quantity].drop(columns="quantity")
    tidy = condition_status(mine).merge(numbers, on=keys, how="left")
    tidy = tidy.merge(first_step_columns(mine), on=keys, how="left")
    tidy = tidy.merge(flag_columns(mine, noise_threshold), on=keys, how="left")
    tidy = tidy.merge(busy_columns(mine), on=keys, how="left")
    tidy["flags"] = tidy["flags"].fillna("")
    counted = ["n_noisy", "warmup_dropped", "n_no_steady_state", "n_busy"]
    tidy[counted] = tidy[counted].fillna(0)
    for name in STATISTICS + ("first_step", "first_step_sd"):
        tidy[name] = pd.to_numeric(tidy[f"{name}_s"], errors="coerce") * fmt.unit_scale(table.unit)
    if not table.first_step:
        tidy[["first_step", "first_step_sd"]] = math.nan
    tidy = add_labels(tidy, table)
    tidy = ratio_columns(tidy, table, comparisons)
    for name in RATIOS:
        for end in ("_numerator_s", "_denominator_s"):
            tidy[f"{name}{end}"] = tidy[f"{name}{end}"] * fmt.unit_scale(table.unit)
    return sort_rows(tidy)[TIDY_COLUMNS]


# ----------------------------------------------------------------------------- layouts
def title_with_unit(table: TableInfo) -> str:
    return f"{table.title} ({fmt.unit_text(table.unit)})"


def row_key(r, index: list[str]) -> tuple:
    return tuple(r[c] for c in index) + (r["model_label"], r["n_parameters"], r["task_label"])


def wide_table(tidy: pd.DataFrame, table: TableInfo) -> pd.DataFrame:
    return (rows_table if table.layout == "rows" else columns_table)(tidy, table)


def rows_table(tidy: pd.DataFrame, table: TableInfo) -> pd.DataFrame:
    """Rows: model x (framework, mode) (in device/threads blocks when several); columns: the
    tasks' means, then time to first step, improvement and task ratio where the table has them."""
    index = [c for c in BLOCK_COLUMNS if tidy[c].nunique() > 1]
    tasks = ratio_tasks(table)
    rows: dict[tuple, dict] = {}
    for _, r in tidy.iterrows():
        key = (
            *(r[c] for c in index),
            r["model_label"],
            r["n_parameters"],
            column_label(r["framework"], r["mode"]),
        )
        row = rows.setdefault(key, {})
        row[f"{r['task_label']} mean"] = fmt.pm(r["mean"], r["mean_sd"]) + busy_mark(r)
        if table.first_step:
            row[f"{r['task_label']} first step"] = fmt.pm(r["first_step"], r["first_step_sd"])
        if table.improvement:
            row[f"{r['task_label']} step/step"] = (
                fmt.ratio_of(r, "improvement") if r["compiled"] else ""
            )
        if tasks and r["task"] == tasks[1]:
            row[f"{tasks[1]}/{tasks[0]}"] = fmt.ratio_of(r, "task_ratio")
    wide = pd.DataFrame.from_dict(rows, orient="index").fillna("n/a")
    wide.index = pd.MultiIndex.from_tuples(
        wide.index, names=index + ["model", "# parameters", "framework (mode)"]
    )
    return wide.reset_index()


def columns_table(tidy: pd.DataFrame, table: TableInfo) -> pd.DataFrame:
    """Rows: model x task (in device/threads blocks when several); columns: mode x statistic."""
    index = [c for c in BLOCK_COLUMNS if tidy[c].nunique() > 1]
    tasks = ratio_tasks(table)
    rows: dict[tuple, dict] = {}
    for _, r in tidy.iterrows():
        label = column_label(r["framework"], r["mode"])
        row = rows.setdefault(row_key(r, index), {})
        row[f"{label} mean"] = fmt.pm(r["mean"], r["mean_sd"]) + busy_mark(r)
        row[f"{label} std"] = fmt.pm(r["std"], r["std_sd"])
        if table.improvement and r["compiled"]:
            row[f"{label} step/step"] = fmt.ratio_of(r, "improvement")
            row[f"{label} bwd/step"] = fmt.ratio_of(r, "improvement_study_style")
        if tasks:
            row[f"{label} {tasks[1]}/{tasks[0]}"] = (
                fmt.ratio_of(r, "task_ratio") if r["task"] == tasks[1] else ""
            )
    wide = pd.DataFrame.from_dict(rows, orient="index").fillna("n/a")
    wide.index = pd.MultiIndex.from_tuples(
        wide.index, names=index + ["model", "# parameters", "task"]
    )
    wide = wide.reset_index()
    return wide if len(table.tasks) > 1 else wide.drop(columns="task")


def busy_mark(r) -> str:
    """BUSY_MARK where any of the condition's seeds was measured on a busy machine."""
    n = r.get("n_busy")
    return BUSY_MARK if not fmt.missing(n) and n > 0 else ""


def notes_of(tidy: pd.DataFrame) -> list[str]:
    """What is not ok (note) or worth knowing (flags, a busy machine), per condition."""
    return [
        f"{column_label(r.framework, r.mode)}, {r.model_label}, {r.task_label}, "
        f"{fmt.block(r.device, r.threads)}: {text}"
        for r in tidy.itertuples()
        for text in (r.note, getattr(r, "flags", ""), busy_words(r))
        if isinstance(text, str) and text
    ]


def busy_count(tidy: pd.DataFrame) -> str | None:
    """How many of the table's cells were measured on a busy machine, and in how many
    conditions (their means marked BUSY_MARK); None where none was."""
    n = pd.to_numeric(tidy.get("n_busy", pd.Series(dtype=float)), errors="coerce").fillna(0)
    if not n.sum():
        return None
    return (f"Measured while other processes kept the machine busy (after their re-timings): "
            f"{fmt.counted(int(n.sum()), 'cell')} of {fmt.counted(int((n > 0).sum()), 'condition')}, "
            f"their means marked{BUSY_MARK}.")


def to_markdown(tidy: pd.DataFrame, table: TableInfo) -> str:
    title = f"**{title_with_unit(table)}**"
    if tidy.empty:
        return f"{title}\n\n{EMPTY_NOTE}\n"
    busy = busy_count(tidy)
    notes = [f"- {n}" for n in ([busy] if busy else []) + notes_of(tidy)]
    body = wide_table(tidy, table).to_markdown(index=False, disable_numparse=True)
    return "\n".join([title, "", body, *([""] + notes if notes else []), ""])


def to_latex(tidy: pd.DataFrame, table: TableInfo) -> str:
    if tidy.empty:
        return f"% {table.title}: {EMPTY_NOTE}\n"
    wide = wide_table(tidy, table)
    # Braced: a cell starting with "[" right after \\ or \midrule is read as an optional argument.
    wide = wide.map(lambda v: "{" + fmt.latex(v) + "}")
    wide.columns = [fmt.latex(c) for c in wide.columns]
    return wide.style.hide(axis="index").to_latex(hrules=True, column_format="l" * wide.shape[1])


def write_table(table: TableInfo, tidy: pd.DataFrame, stem: str) -> None:
    tidy.to_csv(f"{stem}.csv", index=False)
    with open(f"{stem}.md", "w") as f:
        f.write(to_markdown(tidy, table))
    with open(f"{stem}.tex", "w") as f:
        f.write(to_latex(tidy, table))


# ----------------------------------------------------------------------------- memory
# The memory a step needs (issues 26 and 38), one row per condition (a cell without its
# seed), the medians over its ok processes of aggregate's cells.parquet memory fields
# (schema.MEMORY_FIELDS), bytes; every baseline is read after freed memory was returned to
# the system (files before issue 38: without):
#     peak_over_baseline_bytes   rss_peak_bytes - rss_baseline_bytes: what the measured phase
#                                added at its peak over what the process held before it
#     held_after_step_bytes      rss_after_step_bytes: resident once the last step returned
#     held_over_baseline_bytes   rss_after_step_bytes - rss_baseline_bytes
#     heap_after_step_bytes      the C heap's bytes in use once the last step returned
#     kept_by_step_bytes         the bytes a step keeps past its return, read as its backend
#                                declares valid for the device (NaN: not measurable there)
#     saved_activations_bytes    the bytes its saved activations should take by the model's
#                                shapes at the cell's batch (adbench.activation_memory; NaN
#                                where no expectation is stated): what graph_freed sets a
#                                retained graph's kept bytes against
#     kept_over_saved            kept_by_step_bytes / saved_activations_bytes
#     device_peak_allocated_bytes, device_peak_reserved_bytes, device_held_after_step_bytes
#                                a cuda cell's, where recorded
#     device_process_bytes       a cuda cell's GPU memory held by its process (nvidia-smi)
#     n_processes                ok processes with a resident-memory record
#     n_peak_from_start          of them, those whose peak could not be reset (it counts from
#                                the process's start: peak_over_baseline_bytes is then larger)
#     n_not_measurable           of them, those whose kept bytes are not measurable on the
#                                device (kept_by_step_reading says why)
MEMORY_KEYS = ["machine", "device", "framework", "mode", "model", "task", "threads"]
MEMORY_COLUMNS = [
    *MEMORY_KEYS,
    "n_processes",
    "n_peak_from_start",
    "n_not_measurable",
    "peak_over_baseline_bytes",
    "held_after_step_bytes",
    "held_over_baseline_bytes",
    "heap_after_step_bytes",
    "kept_by_step_bytes",
    "saved_activations_bytes",
    "kept_over_saved",
    "device_peak_allocated_bytes",
    "device_peak_reserved_bytes",
    "device_held_after_step_bytes",
    "device_process_bytes",
]
# Medians over processes (the n_ counts are sums): the byte columns and the ratio.
MEMORY_MEDIANS = [c for c in MEMORY_COLUMNS if c.endswith("_bytes")] + ["kept_over_saved"]


def memory_table(cells: pd.DataFrame) -> pd.DataFrame:
    """The tidy memory table (MEMORY_COLUMNS) of cells.parquet's ok cells; empty, with its
    header, where no cell recorded its memory (cells aggregated before it was measured)."""
    from adbench.backends import NOT_MEASURABLE

    needed = {"rss_baseline_bytes", "rss_peak_bytes", "rss_after_step_bytes", "rss_peak_scope"}
    if not needed <= set(cells.columns):
        return pd.DataFrame(columns=MEMORY_COLUMNS)
    ok = cells[(cells["status"] == "ok") & cells["rss_peak_bytes"].notna()].copy()
    if ok.empty:
        return pd.DataFrame(columns=MEMORY_COLUMNS)
    ok["peak_over_baseline_bytes"] = ok["rss_peak_bytes"] - ok["rss_baseline_bytes"]
    ok["held_after_step_bytes"] = ok["rss_after_step_bytes"]
    ok["held_over_baseline_bytes"] = ok["rss_after_step_bytes"] - ok["rss_baseline_bytes"]
    ok["from_start"] = ~ok["rss_peak_scope"].fillna("").str.startswith("measured phase")
    reading = ok.get("kept_by_step_reading", pd.Series("", index=ok.index))
    ok["not_measurable"] = reading.fillna("").str.startswith(NOT_MEASURABLE)
    for mine, theirs in (("heap_after_step_bytes", "heap_after_step_bytes"),
                         ("kept_by_step_bytes", "kept_by_step_bytes"),
                         ("device_peak_allocated_bytes", "peak_device_memory_bytes"),
                         ("device_peak_reserved_bytes", "peak_device_reserved_bytes"),
                         ("device_held_after_step_bytes", "device_after_step_bytes"),
                         ("device_process_bytes", "device_process_bytes")):
        ok[mine] = pd.to_numeric(ok[theirs], errors="coerce") if theirs in ok else math.nan
    ok["saved_activations_bytes"] = stats.saved_activations(ok)
    ok["kept_over_saved"] = ok["kept_by_step_bytes"] / ok["saved_activations_bytes"]
    grouped = ok.groupby(MEMORY_KEYS, sort=False)
    table = grouped[MEMORY_MEDIANS].median().join(
        grouped.agg(n_processes=("seed", "size"), n_peak_from_start=("from_start", "sum"),
                    n_not_measurable=("not_measurable", "sum")))
    table = table.reset_index()
    table["pair"] = list(zip(table["framework"], table["mode"]))  # modes in spec order
    table = table.sort_values(["machine", "device", "pair", "model", "task", "threads"],
                              key=spec_order, kind="stable")
    return table[MEMORY_COLUMNS].reset_index(drop=True)

