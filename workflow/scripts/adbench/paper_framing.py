"""What the paper says it is, what the run could not show, and how to make it again.

identity     the kind of paper a run's cells make, read from the cells (no config key):
             "reproduction" (every table of the study measured on the CPU, every condition
             entering a verdict in paper_context.FULL_PROCESSES processes or more), "quick
             check" (most of the study's tables on the CPU in fewer processes: the default
             configuration, a check of the pipeline), else "extension" (a GPU, frameworks
             the study did not run, a sweep, inputs of varying length), with a title and the
             words the introduction uses;
limitations  generated from the run: processes behind the verdicts, the warm-up rule's
             drops, cells stopped before their precision, cells measured on a busy machine,
             input sizes changed from the study's, what was not measured;
reproduce    the commands that make this paper again, and the files it reads: printed only
             in the paper's last appendix, the one place that names commands and files.
Text escaped for LaTeX (commands: `command`).
"""

from __future__ import annotations

import math

import pandas as pd

from adbench import formatting as fmt
from adbench.formatting import latex
from adbench.paper_context import (STOP_REASON_WORDS, busy_context, quick_configuration,
                                   reached_text, with_stop_rule)
from adbench.report_spec import TABLES, cited, framework_label, model_label
from adbench.spec import FRAMEWORKS, MODELS, STUDY_FRAMEWORKS, TASKS

REPRODUCTION, QUICK, EXTENSION = "reproduction", "quick check", "extension"
STUDY = "Wang and Hung's study"
# A quick check measures most of the study's tables (the tiny test config: three of five),
# its cells mostly in the study's frameworks (more than STUDY_SHARE of them).
QUICK_SHARE = 0.5
STUDY_SHARE = 0.75


# ----------------------------------------------------------------------------- identity
def study_tables_measured(data: dict) -> list:
    return [t for t in TABLES if t.published and not data[t.name]["ours"].empty]


def frameworks_words(frameworks: list[str]) -> str:
    labels = [framework_label(f) for f in FRAMEWORKS if f in frameworks]
    if len(labels) <= 2:
        return " and ".join(labels) or "no framework"
    return f"{len(labels)} frameworks"


def extension_focus(cells: pd.DataFrame, axes: list[str]) -> str:
    """What an extension measures, in a few words."""
    parts = []
    if set(cells["device"]) == {"cuda"}:
        parts.append("the study's experiments on a GPU")
    if not cells["framework"].isin(STUDY_FRAMEWORKS).mean() > STUDY_SHARE:
        parts.append("every framework and mode")
    if cells["task"].map(lambda t: TASKS[t].sequence is not None).all():
        parts.append("inputs of varying length")
    if axes and not parts:
        parts.append("how a gradient's cost grows with the " + " and the ".join(axes))
    return ", ".join(parts) or "a part of the study's experiments"


def identity(cells: pd.DataFrame | None, data: dict, axes: list[str] = ()) -> dict:
    """The paper's kind, title and framing words (module docstring)."""
    if cells is None or cells.empty:
        return framing(EXTENSION, "no framework", "a run with no cell", False)
    study_tables = [t for t in TABLES if t.published]
    measured = study_tables_measured(data)
    full = quick_configuration(cells) is None
    frameworks = frameworks_words(sorted(set(cells["framework"])))
    cpu = "cuda" not in set(cells["device"])
    # the study's frameworks, or mostly (the tiny config adds one more to show its path)
    studys = cells["framework"].isin(STUDY_FRAMEWORKS).mean() > STUDY_SHARE
    if cpu and studys and len(measured) == len(study_tables) and full:
        kind = REPRODUCTION
    elif cpu and studys and len(measured) > QUICK_SHARE * len(study_tables) and not full:
        kind = QUICK
    else:
        kind = EXTENSION
    return framing(kind, frameworks, extension_focus(cells, list(axes)), full)


def framing(kind: str, frameworks: str, focus: str, full: bool) -> dict:
    titles = {
        REPRODUCTION: f"Autodiff in {frameworks}, revisited:\\\\ a reproduction and extension "
                      f"of {STUDY}",
        QUICK: f"Autodiff in {frameworks}:\\\\ a quick check of the pipeline that reproduces "
               f"{STUDY}",
        EXTENSION: f"Autodiff in {frameworks}:\\\\ {latex(focus)}, an extension of {STUDY}",
    }
    return {"kind": kind, "title": titles[kind], "focus": latex(focus), "full": full,
            "reproduction": kind == REPRODUCTION, "quick": kind == QUICK,
            "extension": kind == EXTENSION}


# ----------------------------------------------------------------------------- limitations
def processes_limit(claims: pd.DataFrame) -> str | None:
    """How many verdicts are provisional or rest on one process."""
    if claims is None or claims.empty:
        return None
    provisional = claims["provisional"].astype(str).str.lower().isin(["true", "1"])
    one = claims["verdict"] == "one process"
    unmeasured = claims["verdict"] == "not measured"
    judged = len(claims) - int(one.sum()) - int(unmeasured.sum())
    parts = []
    if provisional.any():
        parts.append(f"{int(provisional.sum())} of the {judged} verdicts given rest on fewer "
                     "than three processes per side and are provisional")
    if one.any():
        parts.append(f"{fmt.counted(int(one.sum()), 'claim')} rest on one process per side "
                     "and have no verdict")
    if not parts:
        return None
    return "Processes: " + "; ".join(parts) + "."


def warmup_limit(env: dict, cells: pd.DataFrame | None) -> str | None:
    dropped, iterations = env.get("n_warmup_dropped"), env.get("iterations_dropped")
    none = env.get("n_no_steady_state")
    if not dropped and not none:
        return None
    configured = (fmt.whole_span(cells.loc[cells["status"] == "ok", "warmup"])
                  if cells is not None and "warmup" in cells else fmt.NA)
    text = (f"Warm-up: the configured warm-up ({configured} iterations) was too short for "
            f"{dropped} cells, whose statistics start where their steady state does "
            f"({iterations} measured iterations dropped in all)")
    if none:
        text += f"; in {none} cells no steady state was found and every iteration was kept"
    return text + "."


# Why a precision stop ended before its precision (schema.MEASURING_FIELDS' stop_reason).
SHORT_OF_PRECISION = ("budget", "max_count", "timeout")


def precision_limit(cells: pd.DataFrame | None, env: dict) -> str | None:
    """The cells with a precision stop that ended before their median's interval was within
    the precision asked: how many, why, and the precision they reached."""
    if cells is None or "stop_reason" not in cells:
        return None
    ok = with_stop_rule(cells[cells["status"] == "ok"], env.get("workload"))
    precise = ok[ok["stop"] == "precision"]
    short = precise[precise["stop_reason"].isin(SHORT_OF_PRECISION)]
    if short.empty:
        return None
    counts = short["stop_reason"].value_counts()
    why = ", ".join(f"{int(counts[r])} {STOP_REASON_WORDS[r]}" for r in SHORT_OF_PRECISION
                    if r in counts)
    target = fmt.percent_span(precise["precision"].drop_duplicates())
    said = (f"Precision: {len(short)} of the {len(precise)} cells measured to a precision "
            f"stopped before the interval of their median step was within ±{target} of it "
            f"({why}); their medians reached ")
    return latex(said) + reached_text(short) + "."


def busy_limit(env: dict) -> str | None:
    """How many cells were measured while other processes kept the machine busy, how busy,
    and how many were measured again for it (paper_context.busy_context)."""
    busy = busy_context(env)
    if busy is None or not (busy["n_busy"] or busy["n_retimed"]):
        return None
    said = []
    if busy["n_retimed"]:
        said.append(f"{fmt.counted(busy['n_retimed'], 'cell was', 'cells were')} measured "
                    f"again for a busy machine (other processes took more than {busy['share']} "
                    "of a core beyond the CPUs the cell's threads left spare)")
    if busy["n_busy"]:
        said.append(f"{busy['n_busy']} of the {busy['n_ok']} completed cells "
                    f"{'stayed' if busy['retimed_at_all'] else 'were'} busy (other processes "
                    f"took {fmt.cores_span(env.get('busy_other_cores') or [])} cores of their "
                    "CPUs while they were measured):"
                    " they are kept, their numbers marked in the tables")
    else:
        said.append("none stayed busy")
    return "Busy machine: " + "; ".join(said) + "."


def size_limits(cells: pd.DataFrame | None, study: dict) -> list[str]:
    """Inputs and epochs smaller than the study's."""
    if cells is None or cells.empty:
        return []
    out = []
    measured = set(cells["model"])
    for model, shape in study.get("study_input_shape", {}).items():
        if model in measured and math.prod(shape) != math.prod(MODELS[model].input_shape):
            ours = fmt.shape_text(MODELS[model].input_shape)
            out.append(f"{model_label(model)}'s input is {ours}, the study's presumably "
                       f"{fmt.shape_text(shape)}")
    jacobians = cells[cells["task"].map(lambda t: TASKS[t].derivative == "jacobian")]
    if "jacobian_rows" in jacobians:
        for model, rows in jacobians.groupby("model", sort=False)["jacobian_rows"]:
            used = int(rows.max()) if rows.notna().any() else MODELS[model].n_outputs
            if used < MODELS[model].n_outputs:
                out.append(f"{model_label(model)}'s Jacobian has {used} of its "
                           f"{MODELS[model].n_outputs} rows")
    n_batches = study.get("n_batches")
    backward = cells[(cells["task"] == "backward") & cells["model"].isin(
        [m for t in TABLES if t.published for m in t.models])]
    if n_batches and "iterations" in backward and len(backward):
        most = int(backward["iterations"].max())
        if most < int(n_batches):
            out.append(f"a backward process times {most} iterations where the study's trial "
                       f"was an epoch of {n_batches} batches")
    return [f"Sizes changed from the study's: {'; '.join(out)}."] if out else []


def not_measured_limits(cells: pd.DataFrame | None, data: dict,
                        claims: pd.DataFrame | None) -> list[str]:
    out = []
    tables = [latex(cited(t.study_table)) for t in TABLES
              if t.published and data[t.name]["ours"].empty]
    if tables:
        out.append(f"Not measured: {'; '.join(tables)}.")
    if claims is not None and len(claims):
        names = claims.loc[claims["verdict"] == "not measured", "claim"]
        if len(names):
            out.append(f"{fmt.counted(len(names), 'claim')} of the study's documents had no "
                       "comparison in this run's grid.")
    if cells is not None and len(cells) and "cuda" not in set(cells["device"]):
        out.append("No GPU: every number is a CPU's; the GPU configuration measures the "
                   "study's experiments on one.")
    if cells is not None and len(cells) and set(cells["threads"]) == {1}:
        out.append("One thread: every CPU number is single-threaded; the study did not state "
                   "its threads for its Tables 1-2.")
    return out


def machine_limit(env: dict) -> str:
    machines = env.get("machines", [])
    if len(machines) > 1:
        return (f"{len(machines)} machines, each its own stratum: no number averages two "
                "machines.")
    return (f"One machine ({latex(env.get('cpu_model', fmt.NA))}, "
            f"{fmt.counted(env.get('cpu_count', fmt.NA), 'logical CPU')}).")


def cells_limit(cells: pd.DataFrame | None) -> str | None:
    if cells is None or cells.empty:
        return None
    bad = cells["status"].value_counts().drop("ok", errors="ignore")
    if not len(bad):
        return None
    return ("Cells without a measurement: " + ", ".join(f"{n} {s}" for s, n in bad.items())
            + " (why is in the tables' notes).")


def limitations(cells, env: dict, claims, data: dict, study: dict,
                validation_run: bool) -> list[str]:
    """The run's limitations, generated from what it was (LaTeX)."""
    found = [processes_limit(claims), warmup_limit(env, cells), precision_limit(cells, env),
             busy_limit(env), *size_limits(cells, study),
             *not_measured_limits(cells, data, claims), machine_limit(env), cells_limit(cells)]
    if env.get("n_noisy"):
        found.append(f"Noise: {env['n_noisy']} cells had an interquartile range over "
                     f"{fmt.percent(env.get('statistics', {}).get('noise_threshold'))} of their "
                     "median step (marked in the tables).")
    if not validation_run:
        found.append("The harness (our timers against independent ones, its own overhead) was "
                     "not validated for this run; the last appendix says how.")
    return [s if "\\" in s else latex(s) for s in found if s]


# ----------------------------------------------------------------------------- reproduce
def command(text: str) -> str:
    """A command as typeset: each hyphen apart, so that a double dash stays two hyphens in
    the PDF (T1 fonts join '--' into a dash) and the text copied runs."""
    return latex(text).replace("-", "-{}")


def config_option(configfile: str | None) -> str:
    """'--configfile X', nothing for the default config (the Snakefile's)."""
    if not configfile or configfile == DEFAULT_CONFIG:
        return ""
    return f" --configfile {configfile}"


DEFAULT_CONFIG = "config/config.yaml"
FULL_CONFIG = "config/paper.yaml"
CORES = 8


def reproduce(configfile: str | None, results: str | None) -> dict:
    """The commands that make this paper again (this run's, the paper alone, the full
    configuration's) and where its inputs lie."""
    option = config_option(configfile)
    tree = (results or "results").rstrip("/")
    commands = [{"what": "This run, measured again on this machine (what is already measured "
                         "is kept)", "text": command(f"snakemake --cores {CORES}{option}")},
                {"what": "This paper alone, from the measurements on disk",
                 "text": command(f"snakemake --cores {CORES}{option} --forcerun paper "
                                 f"{tree}/paper/paper.pdf")}]
    if (configfile or DEFAULT_CONFIG) != FULL_CONFIG:
        commands.append({"what": "The full reproduction of the study (hours)",
                         "text": command(f"snakemake --cores {CORES} --configfile "
                                         f"{FULL_CONFIG}")})
    files = [("the config", configfile or DEFAULT_CONFIG),
             ("the raw measurements, one file per cell", f"{tree}/raw/"),
             ("the tables as CSV, Markdown and LaTeX", f"{tree}/tables/"),
             ("the verdicts, their groups and comparisons", f"{tree}/verdicts/"),
             ("every condition's estimate and every comparison", f"{tree}/aggregate/"),
             ("the figures", f"{tree}/figures/"),
             ("the study's published numbers", "report/published/"),
             ("the statistics, explained", "docs/statistics.md")]
    return {"commands": commands,
            "report": command(f"snakemake --report report.html{option}"),
            "files": [{"what": latex(w), "path": command(p)} for w, p in files]}
