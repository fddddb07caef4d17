"""The study's tables from aggregated statistics: tidy CSV, Markdown and LaTeX.

Table 1: eager modes, the backward pass alone (what the study timed in eager mode).
Table 2: compiled modes, the whole compiled step, with the eager→compiled improvement.
"""

from __future__ import annotations

import dataclasses
import math

import pandas as pd

from adbench import stats
from adbench.spec import FRAMEWORKS, MODELS, TABLE_NAMES

US = 1e6


@dataclasses.dataclass(frozen=True)
class TableSpec:
    name: str
    title: str
    compiled: bool  # which modes: the compiled ones, or eager
    quantity: str  # what is timed, a column of the raw schema


TABLES = (
    TableSpec(TABLE_NAMES[0], "Eager mode: backward pass (µs)", compiled=False,
              quantity="backward_s"),
    TableSpec(TABLE_NAMES[1], "Compiled mode: whole step, forward + backward (µs)",
              compiled=True, quantity="step_s"),
)

TIDY_COLUMNS = [
    "table", "model", "model_label", "n_parameters", "framework", "framework_label", "mode",
    "mode_label", "quantity", "task", "device", "threads", "n_seeds", "n_iterations",
    "mean_us", "mean_sd_us", "std_us", "std_sd_us", "median_us", "improvement",
    "improvement_study_style", "status", "note",
]


def condition_status(cells: pd.DataFrame) -> pd.DataFrame:
    """Per condition (all seeds of a cell): 'ok', or how many seeds failed and why."""
    def summarise(group: pd.DataFrame) -> pd.Series:
        bad = group[group["status"] != "ok"]
        if bad.empty:
            return pd.Series({"status": "ok", "note": ""})
        status = "n/a" if len(bad) == len(group) else "partial"
        reasons = "; ".join(sorted(set(bad["status"] + ": " + bad["message"].fillna(""))))
        return pd.Series({"status": status,
                          "note": f"{len(bad)} of {len(group)} seeds not ok ({reasons})"})
    keys = list(stats.CONDITION_FIELDS)
    return cells.groupby(keys, observed=True)[["status", "message"]].apply(summarise).reset_index()


def tidy_table(spec: TableSpec, summary: pd.DataFrame, cells: pd.DataFrame) -> pd.DataFrame:
    """One row per condition of the table's modes, n/a rows included."""
    wanted = cells[[FRAMEWORKS[f].modes[m].compiled == spec.compiled
                    for f, m in zip(cells["framework"], cells["mode"])]]
    if wanted.empty:  # e.g. a config with eager modes only: an empty table, not a crash
        return pd.DataFrame(columns=TIDY_COLUMNS)
    status = condition_status(wanted)
    keys = list(stats.CONDITION_FIELDS)
    numbers = summary[summary["quantity"] == spec.quantity]
    table = status.merge(numbers, on=keys, how="left")
    table["quantity"] = spec.quantity
    if spec.compiled:
        gains = [stats.improvements(summary, "eager", mode, fw)
                 for fw, info in FRAMEWORKS.items() for mode, m in info.modes.items()
                 if m.compiled]
        table = table.merge(pd.concat(gains), on=keys, how="left")
    else:
        table["improvement"] = math.nan
        table["improvement_study_style"] = math.nan
    for col in ("mean", "mean_sd", "std", "std_sd", "median"):
        table[f"{col}_us"] = table[f"{col}_s"] * US
    table["table"] = spec.name
    table["model_label"] = [MODELS[m].label for m in table["model"]]
    table["n_parameters"] = [MODELS[m].n_parameters for m in table["model"]]
    table["framework_label"] = [FRAMEWORKS[f].label for f in table["framework"]]
    table["mode_label"] = [FRAMEWORKS[f].modes[m].label
                           for f, m in zip(table["framework"], table["mode"])]
    table = table.sort_values(["device", "threads", "task", "model", "framework", "mode"],
                              key=_registry_order)
    return table[TIDY_COLUMNS].reset_index(drop=True)


def _registry_order(column: pd.Series) -> pd.Series:
    """Models and frameworks in the order of the spec's tables, not alphabetically."""
    registry = {"model": list(MODELS), "framework": list(FRAMEWORKS)}.get(column.name)
    return column.map(registry.index) if registry else column


def fmt_pm(mean: float, sd: float, pm: str = "±") -> str:
    """'686 ± 21' in the study's style; just the mean with one trial; 'n/a' when missing."""
    if mean is None or math.isnan(mean):
        return "n/a"
    return f"{mean:.0f}" if sd is None or math.isnan(sd) else f"{mean:.0f} {pm} {sd:.0f}"


def fmt_ratio(value: float) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{value:.2f}"


def wide_table(tidy: pd.DataFrame, pm: str = "±") -> pd.DataFrame:
    """Rows: models (and device/threads where they vary); columns: framework × statistic."""
    index = [c for c in ("device", "threads", "task") if tidy[c].nunique() > 1]
    rows = {}
    for _, r in tidy.iterrows():
        key = tuple(r[c] for c in index) + (r["model_label"], r["n_parameters"])
        label = r["framework_label"] + (f" ({r['mode_label']})" if r["mode"] != "eager" else "")
        row = rows.setdefault(key, {})
        row[f"{label} mean"] = fmt_pm(r["mean_us"], r["mean_sd_us"], pm)
        row[f"{label} std"] = fmt_pm(r["std_us"], r["std_sd_us"], pm)
        if r["table"] == TABLE_NAMES[1]:
            row[f"{label} improvement"] = fmt_ratio(r["improvement"])
            row[f"{label} study-style ratio"] = fmt_ratio(r["improvement_study_style"])
    wide = pd.DataFrame.from_dict(rows, orient="index")
    wide.index = pd.MultiIndex.from_tuples(wide.index, names=index + ["hidden layers",
                                                                       "# parameters"])
    return wide.reset_index()


EMPTY_NOTE = "No cell of this table's modes is in the config."


def to_markdown(tidy: pd.DataFrame, spec: TableSpec) -> str:
    if tidy.empty:
        return f"**{spec.title}**\n\n{EMPTY_NOTE}\n"
    notes = [f"- {r.framework_label} {r.mode_label}, {r.model_label}: {r.note}"
             for r in tidy.itertuples() if r.note]
    body = wide_table(tidy).to_markdown(index=False, disable_numparse=True)
    return "\n".join([f"**{spec.title}**", "", body, *([""] + notes if notes else []), ""])


def to_latex(tidy: pd.DataFrame) -> str:
    if tidy.empty:
        return f"% {EMPTY_NOTE}\n"
    wide = wide_table(tidy, pm=r"$\pm$")
    # Braced: a cell starting with "[" right after \\ or \midrule is read as an optional argument.
    wide["hidden layers"] = "{" + wide["hidden layers"] + "}"
    wide.columns = [str(c).replace("#", r"\#").replace("_", r"\_") for c in wide.columns]
    return wide.style.hide(axis="index").to_latex(hrules=True, column_format="l" * wide.shape[1])


def write_table(spec: TableSpec, tidy: pd.DataFrame, stem: str) -> None:
    tidy.to_csv(f"{stem}.csv", index=False)
    with open(f"{stem}.md", "w") as f:
        f.write(to_markdown(tidy, spec))
    with open(f"{stem}.tex", "w") as f:
        f.write(to_latex(tidy))
