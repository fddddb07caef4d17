"""Where our numbers and the study's disagree: every number of the study's tables that ours
differs from by more than a factor of two, each with the explanation the data support.

A published number is set against our condition of the same framework, mode and model only
(never another framework's), in every block measured: for a Jacobian table, whose method the
study never stated, against the nearer of our two Jacobian tasks; for the study's printed
improvement column, against our same construction of it (our eager backward pass over our
compiled step).  An explanation is given only where this run's own numbers support it, in
this order:

input size    the model's input or Jacobian is smaller than the study's: ours scaled up by
              the factor (rows, input elements) comes within a factor of two;
first steps   the study's mean kept its first iterations (its Tables 1-2: claims.json's
              n_batches per trial): our first step averaged into as many iterations comes
              within a factor of two;
threads       another thread count of ours comes within a factor of two;
hardware      every number of the study's table differs from ours by one factor (all within
              FACTOR_BAND of each other): a machine-wide factor;
versions      every number of the framework and mode in the table differs by one factor, while
              the table's others do not: the framework's implementation in the versions
              compared;
unexplained   none of these.
Text escaped for LaTeX.
"""

from __future__ import annotations

import math

import pandas as pd

from adbench import formatting as fmt
from adbench.formatting import latex
from adbench.machines_section import block_namer
from adbench.report_spec import TABLES, TableInfo, cited, model_label, task_label
from adbench.spec import MODELS, TASKS
from adbench.tables import column_label

FACTOR = 2.0  # a disagreement: ours and the study's differ by more than this factor
FACTOR_BAND = 1.5  # numbers "differ by one factor" when their ratios are within this band
BLOCK = ["machine", "device", "threads"]
UNEXPLAINED = "unexplained"


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
    number with a condition of ours; the printed improvements against our same construction."""
    found = []
    for _, r in published.iterrows():
        study = number(r["mean"])
        mine = our_rows(ours, r, table)
        for _, block in (mine.groupby(BLOCK, sort=False) if len(mine) and study > 0 else []):
            found.append({"table": table, "published": r, "ours": nearest(block, study),
                          "what": "mean", "study": study})
        improvement = number(r.get("improvement"))
        for _, block in (mine.groupby(BLOCK, sort=False) if improvement > 0 else []):
            row = block.iloc[0]
            if not fmt.missing(row.get("improvement_study_style")):
                found.append({"table": table, "published": r, "ours": row,
                              "what": "improvement", "study": improvement})
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


# ----------------------------------------------------------------------------- explanations
def scale_factor(model: str, study: dict, cells: pd.DataFrame | None) -> tuple[float, str]:
    """How much larger the study's Jacobian was than ours (rows, input elements), and in
    words; 1 where nothing was scaled down."""
    spec = MODELS[model]
    factor, words = 1.0, []
    rows = rows_used(model, cells)
    if rows < spec.n_outputs:
        factor *= spec.n_outputs / rows
        words.append(f"{rows} of {spec.n_outputs} Jacobian rows")
    shape = study.get("study_input_shape", {}).get(model)
    if shape and math.prod(shape) != math.prod(spec.input_shape):
        factor *= math.prod(shape) / math.prod(spec.input_shape)
        words.append(f"a {fmt.shape_text(spec.input_shape)} input, the study's presumably "
                     f"{fmt.shape_text(shape)}")
    return factor, "; ".join(words)


def rows_used(model: str, cells: pd.DataFrame | None) -> int:
    default = MODELS[model].n_jacobian_rows
    if cells is None or "jacobian_rows" not in cells:
        return default
    mine = cells[(cells["model"] == model)
                 & cells["task"].map(lambda t: TASKS[t].derivative == "jacobian")]
    used = set(mine["jacobian_rows"].dropna().astype(int))
    return used.pop() if len(used) == 1 else default


def by_input_size(pair, study: dict, cells) -> str | None:
    r = pair["ours"]
    if pair["what"] != "mean" or TASKS[r["task"]].derivative != "jacobian":
        return None
    factor, words = scale_factor(r["model"], study, cells)
    if factor <= 1 or not close(pair["ratio"] * factor):
        return None
    return (f"input size: ours computes {words}; scaled up by {fmt.factor(factor)}, ours is "
            f"{fmt.ratio(pair['ratio'] * factor)} times the study's number")


def by_first_steps(pair, study: dict, cells) -> str | None:
    """The study averaged its first iterations into its means (Tables 1-2)."""
    n = number(study.get("n_batches"))
    r = pair["ours"]
    first = number(r.get("first_step"))
    if pair["what"] != "mean" or pair["table"].name not in FIRST_STEP_TABLES or not n > 1 \
            or not first > 0:
        return None
    with_first = (first + (n - 1) * float(r["mean"])) / n
    ratio = with_first / pair["study"]
    if not close(ratio):
        return None
    return (f"first steps: with its first step averaged into {int(n)} iterations, as the "
            f"study's means were, ours is {fmt.ratio(ratio)} times the study's number")


# The study's tables whose means averaged a trial's batches, its first included (claims.json
# n_batches: 469 batches per trial, 000 §3.1).
FIRST_STEP_TABLES = ("table1_eager", "table2_compiled")


def by_threads(pair, data: dict) -> str | None:
    r, table = pair["ours"], pair["table"]
    if pair["what"] != "mean":
        return None
    ours = data[table.name]["ours"]
    others = ours[(ours["framework"] == r["framework"]) & (ours["mode"] == r["mode"])
                  & (ours["model"] == r["model"]) & (ours["task"] == r["task"])
                  & (ours["machine"] == r["machine"]) & (ours["device"] == r["device"])
                  & (ours["threads"] != r["threads"]) & ours["mean"].notna()]
    fits = [o for _, o in others.iterrows() if close(o["mean"] / pair["study"])]
    if not fits:
        return None
    o = fits[0]
    return (f"threads (the study's unstated): ours on {fmt.threads_text(o['threads'])} is "
            f"{fmt.ratio(o['mean'] / pair['study'])} times the study's number")


def one_factor(ratios: list[float]) -> bool:
    return len(ratios) >= 2 and max(ratios) / min(ratios) <= FACTOR_BAND


def by_hardware(pair, pairs: list) -> str | None:
    same = [p["ratio"] for p in pairs if p["table"] is pair["table"] and p["what"] == "mean"
            and same_block(p, pair)]
    if pair["what"] != "mean" or not one_factor(same):
        return None
    return (f"hardware: one factor for the whole table ({fmt.span(same)}), as a faster or "
            "slower machine gives")


def by_versions(pair, pairs: list) -> str | None:
    r = pair["ours"]
    table = [p for p in pairs if p["table"] is pair["table"] and p["what"] == "mean"
             and same_block(p, pair)]
    mine = lambda p: (p["ours"]["framework"], p["ours"]["mode"]) == (r["framework"],  # noqa
                                                                     r["mode"])
    mode = [p["ratio"] for p in table if mine(p)]
    others = [p["ratio"] for p in table if not mine(p)]
    if pair["what"] != "mean" or not one_factor(mode) or one_factor(mode + others):
        return None
    return (f"versions: one factor for this mode's numbers only ({fmt.span(mode)}), its "
            "implementation in the versions compared")


def same_block(a, b) -> bool:
    return all(a["ours"][k] == b["ours"][k] for k in BLOCK)


def explanation(pair, pairs: list, data: dict, study: dict, cells) -> str:
    for found in (by_input_size(pair, study, cells), by_first_steps(pair, study, cells),
                  by_threads(pair, data), by_hardware(pair, pairs), by_versions(pair, pairs)):
        if found:
            return found
    return UNEXPLAINED


# ----------------------------------------------------------------------------- the section
def unit_text(pair) -> str:
    return "" if pair["what"] == "improvement" else fmt.unit_text(pair["table"].unit)


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
        "explanation": latex(pair["explanation"]),
    }


def disagreements_context(data: dict, study: dict, cells: pd.DataFrame | None) -> dict:
    """Every published number ours differs from by more than FACTOR, with its explanation;
    and how many were compared."""
    pairs = all_pairs(data)
    found = [p for p in pairs if far(p["ratio"])]
    for p in found:
        p["explanation"] = explanation(p, pairs, data, study, cells)
    block = block_namer(pd.DataFrame([p["ours"] for p in pairs])) if pairs else None
    found.sort(key=lambda p: ([t.name for t in TABLES].index(p["table"].name),
                              p["what"] == "improvement"))
    counts = pd.Series([p["explanation"].split(":")[0] for p in found], dtype=str)
    return {
        "n_compared": len(pairs),
        "n_study": len({(id(p["table"]), p["published"].name, p["what"]) for p in pairs}),
        "factor": fmt.factor(FACTOR),
        "rows": [row_text(p, block) for p in found],
        "n_unexplained": int((counts == UNEXPLAINED).sum()),
        "kinds": [{"kind": latex(k), "n": int(n)} for k, n in counts.value_counts().items()],
        "any_one_process": any(int(p["ours"]["n_seeds"]) < 2 for p in found
                               if not fmt.missing(p["ours"].get("n_seeds"))),
    }
