"""render_paper.py on synthetic inputs built from the spec, following the pipeline's contracts.

The tables come from tests/test_tables.py's synthetic aggregate through make_tables.py:
several models and tasks, a failed, a partial and an unsupported cell, and one table
(table5_dense) with no cell at all.
"""

from __future__ import annotations

import atexit
import functools
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd
import pytest

import aggregate
import compare
import make_tables
import make_verdicts
from adbench import report_spec, stats
from adbench.formatting import latex
from adbench.paper_tables import BUSY, NOT_IN_GRID, WAITING
from adbench.tables import FIGURES_OF_TABLES
from adbench.report_spec import TABLES
from adbench.spec import FRAMEWORKS, MODELS, STUDY_MODELS, STUDY_TASKS, TASKS
from test_tables import MISSING_TABLE, fake_iterations_and_cells, with_memory

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "workflow" / "scripts" / "render_paper.py"
sys.path.insert(0, str(SCRIPT.parent))
import render_paper  # noqa: E402
from adbench.sections import contexts  # noqa: E402

NAN = math.nan
WAITED_CORES = 0.58  # on one thread: the loop waited (paper_context.CORES_UNDER_THREADS)


def write_gradients(path: Path, with_new_columns: bool = True) -> None:
    rows = [
        {
            "model": "mlp512",
            "task": "backward",
            "device": "cpu",
            "threads": 1,
            "seed": 0,
            "framework": fw,
            "mode": mode,
            "reference": "torch/eager",
            "max_rel_error": err,
            "ref_rel_error": ref,
            "tolerance": 1e-4,
            "status": status,
            "passed": passed,
        }
        for fw, mode, err, ref, status, passed in [
            ("torch", "eager", 0.0, 1.1e-7, "ok", True),
            ("torch", "script", 3.4e-7, 2.2e-7, "ok", True),
            ("tensorflow", "eager", 2.5e-6, 2.0e-6, "ok", True),
            ("tensorflow", "graph", NAN, NAN, "failed", False),
        ]
    ] + [
        {
            "model": "resnet50",
            "task": "jacobian_rows",
            "device": "cpu",
            "threads": 1,
            "seed": 0,
            "framework": "torch",
            "mode": "eager",
            "reference": "torch/eager",
            "max_rel_error": 0.0,
            "ref_rel_error": 3e-4,
            "tolerance": 1e-3,
            "status": "ok",
            "passed": True,
        }
    ]
    frame = pd.DataFrame(rows)
    if not with_new_columns:
        frame = frame.drop(columns=["ref_rel_error", "tolerance"])
    frame.to_csv(path, index=False)


def write_environment(path: Path, cells: pd.DataFrame | None = None) -> None:
    """environment.json; with `cells` (planted stops and busy readings) the workload's stop
    and busy keys and what aggregate counts of them (aggregate.measuring_facts)."""
    measuring = {} if cells is None else {
        "workload": {"warmup": 2, "iterations": 3, **MEASURING_WORKLOAD},
        **aggregate.measuring_facts(cells)}
    path.write_text(
        json.dumps(
            {
                "cpu_model": "Fake CPU(R) 9000 @ 3.0GHz",
                "cpu_count": 16,
                "hostname": "test_host",
                "platform": "Linux-6.0-x86_64",
                "python": "3.11.7",
                "versions": {"torch": "2.13.0+cpu", "tensorflow": "2.21.0", "numpy": "2.1.0"},
                "device_names": ["cpu"],
                "git_commit": "0123456789abcdef",
                "git_dirty": True,
                "seeds": [0, 1],
                "threads": [1],
                "devices": ["cpu"],
                "workload": {"warmup": 2, "iterations": 3},
                "n_cells": 60,
                "n_ok": 55,
                "gradient_tolerance": 1e-4,
                "statistics": {
                    "confidence": 0.95,
                    "bootstrap_replicates": 200,
                    "noise_threshold": 0.1,
                    "warmup_window": 5,
                    "warmup_tolerance": 0.05,
                    "bootstrap_seed": 0,
                },
                "n_noisy": 3,
                "n_warmup_dropped": 2,
                "iterations_dropped": 7,
                "n_no_steady_state": 1,
                "machines": [{"machine": "x86 CPU", "cpu_model": "x86 CPU"}],
                "started_at": "2025-01-02T03:04:05Z",
                "ended_at": "2025-01-02T04:05:06Z",
                **measuring,
            }
        )
    )


# The stop and busy keys of a planted run (config.schema.yaml's defaults).
MEASURING_WORKLOAD = {"stop": "precision", "precision": 0.02, "min_iterations": 10,
                      "measure_s": 5, "busy_share": 0.25, "busy_retimes": 1}
BUSY_CELL = ("torch", "eager", "mlp512", "backward", 0)  # busy after its re-timing
RETIMED_QUIET = ("tensorflow", "eager", "mlp512", "backward", 1)  # quiet the second time
BUSY_CORES = 0.66


def with_measuring(cells: pd.DataFrame) -> pd.DataFrame:
    """cells.parquet as measure.py's stop and busy fields make it: the study's backward pass
    of [512] a fixed count, every other cell a precision stop (seed 0 at its time cap, at
    3.4 %; seed 1 at its precision, 1.1 %); BUSY_CELL busy after a re-timing, RETIMED_QUIET
    quiet after one, every other cell quiet."""
    keys = ["framework", "mode", "model", "task", "seed"]
    fixed = (cells["model"] == "mlp512") & (cells["task"] == "backward")
    first = cells["seed"] == 0
    out = cells.assign(
        stop=["fixed" if f else "precision" for f in fixed],
        stop_reason=["fixed" if f else "budget" if s else "precision"
                     for f, s in zip(fixed, first)],
        precision_reached=[0.034 if s else 0.011 for s in first],
        busy=pd.Series(False, index=cells.index, dtype=object), busy_retimed=0,
        load_other_cores=0.02)
    out.loc[(out[keys] == BUSY_CELL).all(axis=1), ["busy", "busy_retimed",
                                                   "load_other_cores"]] = [True, 1, BUSY_CORES]
    out.loc[(out[keys] == RETIMED_QUIET).all(axis=1), "busy_retimed"] = 1
    not_ok = out["status"] != "ok"
    out.loc[not_ok, ["stop_reason", "precision_reached", "busy"]] = None
    return out


@functools.cache
def analysis(threads, without_mode, frameworks, waited, drop_choices, failed_message,
             measuring=False) -> Path:
    """The analysis of the synthetic cells (summary, bootstrap, comparisons, tables, verdicts,
    first iterations) in a folder of its own, made once per set of arguments: each test copies
    it (make_inputs), so a test that edits its copy changes no other test's."""
    tmp_path = Path(tempfile.mkdtemp(prefix="render-analysis-"))
    atexit.register(shutil.rmtree, tmp_path, ignore_errors=True)
    iterations, cells = fake_iterations_and_cells(threads)
    cells = with_memory(cells)
    if without_mode is not None:
        keep = lambda df: df[[p != without_mode for p in zip(df["framework"], df["mode"])]]  # noqa: E731
        iterations, cells = keep(iterations), keep(cells)
    if frameworks is not None:
        iterations = iterations[iterations["framework"].isin(frameworks)]
        cells = cells[cells["framework"].isin(frameworks)]
    if waited is not None:
        keys = ["framework", "mode", "model", "task", "seed"]
        cells.loc[(cells[keys] == waited).all(axis=1), "cpu_utilisation"] = WAITED_CORES
    if drop_choices:
        cells = cells.drop(columns="choices")
    if failed_message is not None:
        cells.loc[cells["status"] == "failed", "message"] = failed_message
    if measuring:
        cells = with_measuring(cells)
    summary = stats.across_seeds(stats.trial_stats(iterations))
    summary.to_parquet(tmp_path / "summary.parquet")
    cells.to_parquet(tmp_path / "cells.parquet")
    stats.bootstrap_replicates(iterations, 200).to_parquet(tmp_path / "bootstrap.parquet")
    compare.main(["--bootstrap", str(tmp_path / "bootstrap.parquet"),
                  "--outdir", str(tmp_path)])
    make_tables.main(
        [
            "--summary",
            str(tmp_path / "summary.parquet"),
            "--cells",
            str(tmp_path / "cells.parquet"),
            "--comparisons",
            str(tmp_path / "comparisons.parquet"),
            "--outdir",
            str(tmp_path / "tables"),
        ]
    )
    make_verdicts.main(
        [
            "--comparisons",
            str(tmp_path / "comparisons.parquet"),
            "--outdir",
            str(tmp_path / "verdicts"),
        ]
    )
    measured = iterations[iterations["phase"] == "measured"]
    stats.first_iteration_stats(iterations, measured).to_csv(tmp_path / "first_iterations.csv",
                                                             index=False)
    return tmp_path


def make_inputs(
    tmp_path: Path,
    figure: Path | None = None,
    gradients_v2: bool = True,
    drop_choices: bool = False,
    threads: tuple[int, ...] = (1,),
    failed_message: str | None = None,
    validation: dict | None = None,
    waited: tuple | None = None,
    without_mode: tuple[str, str] | None = None,
    frameworks: tuple[str, ...] | None = None,
    measuring: bool = False,
) -> list[str]:
    """The inputs of render_paper.py; `waited`: (framework, mode, model, task, seed) of a cell
    whose loop kept fewer cores busy than its thread (WAITED_CORES); `without_mode`: a
    (framework, mode) with no cell in the run; `measuring`: cells with their stop reasons and
    busy readings (with_measuring).  `figure` stands for every figure."""
    analysed = analysis(threads, without_mode, frameworks, waited, drop_choices, failed_message,
                        measuring)
    shutil.copytree(analysed, tmp_path, dirs_exist_ok=True)
    if validation is not None:
        (tmp_path / "harness.json").write_text(json.dumps(validation))
    write_gradients(tmp_path / "gradients.csv", gradients_v2)
    write_environment(tmp_path / "environment.json",
                      pd.read_parquet(tmp_path / "cells.parquet") if measuring else None)
    if figure is None:
        figure = tmp_path / "first_iterations.pdf"
        figure.write_bytes(b"%PDF-1.4 stand-in, never compiled\n")
    options = {
        "--template": ROOT / "report" / "paper.tex.j2",
        "--bib": ROOT / "report" / "references.bib",
        "--published": ROOT / "report" / "published",
        "--tables": tmp_path / "tables",
        "--figure": figure,
        **{f"--{name.replace('_', '-')}-figure": figure for name in FIGURES_OF_TABLES},
        "--memory-figure": figure,
        "--gradients": tmp_path / "gradients.csv",
        "--environment": tmp_path / "environment.json",
        "--first-iterations": tmp_path / "first_iterations.csv",
        "--cells": tmp_path / "cells.parquet",
        "--made": tmp_path / "comparisons.parquet",
        "--claims": tmp_path / "verdicts" / "claims.csv",
        "--groups": tmp_path / "verdicts" / "groups.csv",
        "--comparisons": tmp_path / "verdicts" / "comparisons.csv",
        "--out": tmp_path / "paper" / "paper.pdf",
    }
    if validation is not None:
        options["--validation"] = tmp_path / "harness.json"
    return [str(word) for option in options.items() for word in option]


@pytest.fixture(scope="module")
def tex(tmp_path_factory) -> str:
    tmp_path = tmp_path_factory.mktemp("render")
    render_paper.main(make_inputs(tmp_path) + ["--tex-only"])
    assert (tmp_path / "paper" / "first_iterations.pdf").exists()
    assert (tmp_path / "paper" / "references.bib").exists()
    assert not (tmp_path / "paper" / "paper.pdf").exists()
    # Whitespace-normalised: the template wraps lines wherever it likes.
    return " ".join((tmp_path / "paper" / "paper.tex").read_text().split())


def test_no_template_syntax_is_left(tex):
    assert r"\VAR" not in tex and r"\BLOCK" not in tex


def test_every_spec_table_is_in_the_paper(tex):
    for table in TABLES:
        assert latex(table.title) in tex
        assert (rf"\label{{tab:{table.name}}}" in tex) == (table.name != MISSING_TABLE)
    assert tex.count("Not measured in this run") == 1  # table5_dense: a sentence, no table


def test_ours_above_the_studys_published_numbers_verbatim(tex):
    assert "this work" in tex and "study (published)" in tex
    assert r"686 $\pm$ 21" in tex and r"2889 $\pm$ 49" in tex  # study's Table 1
    assert r"465 $\pm$ 14" in tex and "5.36" in tex  # study's Table 2 and improvement
    assert "& 11698 & 1079 &" in tex  # study's Table 3 "11698 / 1079": runtime, std, 1e-5 s
    assert "& 45.0729 & 0.6323 &" in tex  # study's Table 4, as printed
    # Ours: torch eager mlp512 backward = 3/4 of a 1 ms step, scaled 1.03 and 1.05, in µs.
    assert r"811 $\pm$ 55" in tex
    # One seed left (partial): the mean alone, with its footnote mark.
    assert "515$^{" in tex


def test_not_ok_cells_are_na_with_their_reasons(tex):
    assert "n/a$^{" in tex
    assert "failed: RuntimeError: boom" in tex and "unsupported: CTC: no XLA kernel" in tex
    assert "partial --- 1 of 2 seeds not ok (unsupported: no GPU)" in tex
    assert NOT_IN_GRID in tex  # cnn and lstm of Table 3: the study's rows only


def test_models_tasks_and_quantities_come_from_the_spec(tex):
    # The seeds' models; a sweep's own sizes are listed only where measured (not here).
    for name in STUDY_MODELS:
        words = report_spec.MODEL_TEXT[name]
        assert latex(words.label) in tex
        assert str(MODELS[name].n_parameters) in tex
        assert latex(words.choices) in tex
    assert all(latex(report_spec.model_label(m)) not in tex for m in MODELS
               if m not in STUDY_MODELS)
    # The tasks the fabricated run measured (the study's) are described; the others are not.
    for task in TASKS:
        assert (latex(report_spec.task_description(task)) in tex) == (task in STUDY_TASKS), task
    for framework, info in FRAMEWORKS.items():
        for mode in info.modes:
            assert latex(report_spec.mode_description(framework, mode)) in tex
    assert r"10 $\times$ 3$\times$32$\times$32 (of 1000 rows)" in tex  # ResNet50's Jacobian
    assert "f, b, s" in tex and "f: forward, b: backward, s: step" in tex  # four tasks


def test_hypothesis_0_is_answered_with_numbers(tex):
    assert r"\paragraph{Hypothesis 0.}" in tex
    assert "back propagation is equal to the computing time" in tex
    # Synthetic data: the loss Jacobian costs 1.5 backward passes; a partial cell (one seed
    # failed) is paired with its other side's same seed, so it too gives 1.50.
    assert "ranges from 1.50 to 1.50" in tex
    n_modes = sum(len(info.modes) for info in FRAMEWORKS.values())
    # mlp512 and fcn, every mode; the partial cell rests on one process and is not judged
    judged = 2 * n_modes - 1
    assert rf"Alone, 0 of {judged} judged ratios lie within 10\% of 1 and {judged} outside" in tex
    assert "on one process, and so without a verdict: 1." in tex
    # two seeds per side: provisional (fewer than three processes per side)
    assert r"the verdict on Hypothesis 0 is \textbf{contradicted (provisional)}" in tex
    section = tex.split(r"\label{tab:h-table6_hypothesis0}")[1].split(r"\end{longtable}")[0]
    assert section.count("contradicted") == n_modes  # one row per (framework, mode)
    assert "gives in its last column the ratio" in tex


def test_the_papers_hypothesis_0_verdict_is_the_verdicts_one_wherever_it_is_stated(tmp_path):
    """The claims table says 'inconclusive' against data that contradict H0: the paper has no
    judgment of its own, so the abstract, the H0 section and the verdicts table all say it."""
    args = make_inputs(tmp_path)
    claims_csv = tmp_path / "verdicts" / "claims.csv"
    claims = pd.read_csv(claims_csv)
    h0 = claims["claim"] == "hypothesis0"
    assert (claims.loc[h0, "verdict"] == "contradicted").all()  # what the data say
    claims.loc[h0, ["verdict", "n_contradicted", "n_inconclusive", "provisional"]] = [
        "inconclusive", 0, 7, False]
    claims.to_csv(claims_csv, index=False)
    groups_csv = tmp_path / "verdicts" / "groups.csv"
    groups = pd.read_csv(groups_csv)
    groups.loc[groups["claim"] == "hypothesis0", ["verdict", "provisional"]] = [
        "inconclusive", False]
    groups.to_csv(groups_csv, index=False)
    render_paper.main(args + ["--tex-only"])
    tex = " ".join((tmp_path / "paper" / "paper.tex").read_text().split())
    abstract, body = tex.split(r"\end{abstract}")
    section = body.split(r"\paragraph{Hypothesis 0.}")[1].split(r"\section")[0]
    verdicts = body.split(r"\label{tab:verdicts}")[1].split(r"\end{longtable}")[0]
    assert r"Hypothesis 0 (costs equal within 10\%): \emph{inconclusive}" in abstract
    assert r"the verdict on Hypothesis 0 is \textbf{inconclusive}" in section
    assert "lie within 10\\% of 1 and 0 outside it" in section
    assert "contradicted" not in section
    assert r"Hypothesis 0 & " in verdicts and r"\textbf{inconclusive}" in verdicts


def test_resnet50_discussion_scales_and_extrapolates(tex):
    # The study's slowest and fastest rows, verbatim (Table 4 is in seconds), and their ratio.
    assert r"45.0729\,s for PyTorch (script) against 0.9339\,s for Tensorflow (graph)" in " ".join(
        tex.split())
    assert "A factor of 48" in tex
    assert "rows 1000/10 = 100" in tex
    assert r"(3$\times$224$\times$224)/(3$\times$32$\times$32) = 49" in tex
    assert "4900" in tex
    # Ours: torch eager row-by-row 0.5 s x 2 x 1.03 x 1.05 = 1.08 s, extrapolated x 4900.
    assert r"PyTorch (eager), Jacobian, row by row: 5299\,s;" in tex
    assert "estimate, not a measurement" in tex
    assert r"\label{tab:closest-table4_resnet50}" in tex


def test_implementation_choices_per_mode(tex):
    assert r"\paragraph{Implementation choices.}" in tex
    assert "python loop of VJPs" in tex and "vmap" in tex
    assert "float32 (every cell)" in tex


def test_setup_gradients_and_first_iterations(tex):
    assert "Fake CPU(R) 9000" in tex and "2.13.0+cpu" in tex
    # the failed comparison, its reference cell named as the paper names it
    assert "TensorFlow (tf.function) against PyTorch (eager), [512]" in tex
    assert r"\num{3.0e-04}" in tex  # ResNet50's error against the float64 reference
    assert r"\label{tab:first}" in tex and r"\label{tab:gradients}" in tex
    assert "([512], [354, 354], [294, 294, 294]; task backward)" in tex  # the figure's lines
    assert "What is timed" in tex and "like for like" in tex


def test_old_gradient_csv_and_cells_without_choices_still_render(tmp_path):
    args = make_inputs(tmp_path, gradients_v2=False, drop_choices=True)
    render_paper.main(args + ["--tex-only"])
    tex = (tmp_path / "paper" / "paper.tex").read_text()
    assert "recorded no implementation choices" in tex
    assert r"\num{1.0e-04}" in tex  # the environment's single tolerance


def test_a_run_with_no_table_measured_renders(tmp_path):
    args = make_inputs(tmp_path)
    for csv in (tmp_path / "tables").glob("*.csv"):
        csv.write_text(csv.read_text().splitlines()[0] + "\n")  # header only
    render_paper.main(args + ["--tex-only"])
    tex = (tmp_path / "paper" / "paper.tex").read_text()
    assert tex.count("Not measured in this run") == len(TABLES)


def test_several_thread_counts_are_blocks(tmp_path):
    render_paper.main(make_inputs(tmp_path, threads=(1, 4)) + ["--tex-only"])
    tex = " ".join((tmp_path / "paper" / "paper.tex").read_text().split())
    assert r"\emph{cpu, 1 thread}" in tex and r"\emph{cpu, 4 threads}" in tex
    # The study's rows repeat in every block; ours run 4x faster with 4 threads.
    assert tex.count(r"686 $\pm$ 21") == 2 and r"203 $\pm$ 14" in tex
    n_modes = sum(len(info.modes) for info in FRAMEWORKS.values())
    assert f"Over {4 * n_modes} (model, mode) conditions" in tex  # H0 over both blocks


def test_missing_latexmk_fails_first_with_install_hint(tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    env = {**os.environ, "PATH": str(empty)}
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *make_inputs(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0
    assert "latexmk" in done.stderr and "texlive-science" in done.stderr
    assert "apt-get install" in done.stderr and "./setup.sh" in done.stderr
    assert not (tmp_path / "paper").exists()  # nothing was done before the check


def real_figure(tmp_path: Path) -> Path:
    """A PDF figure LaTeX can include (the stand-in of make_inputs is not one)."""
    plt = pytest.importorskip("matplotlib.pyplot")
    figure = tmp_path / "stand_in.pdf"
    fig, ax = plt.subplots(figsize=(4, 2))
    ax.plot([1, 2, 3], [50, 2, 1])
    fig.savefig(figure)
    plt.close(fig)
    return figure


@pytest.mark.latex
def test_compiles_a_pdf(tmp_path):
    if shutil.which("latexmk") is None:
        pytest.skip("latexmk not installed")
    figure = real_figure(tmp_path)
    args = make_inputs(tmp_path, figure, threads=(1, 4), measuring=True)
    render_paper.main(args + ["--jacobians-figure", str(figure)])
    pdf = tmp_path / "paper" / "paper.pdf"
    assert pdf.read_bytes().startswith(b"%PDF")
    log = (tmp_path / "paper" / "paper.log").read_text(errors="replace")
    assert "There were undefined references" not in log  # bibtex resolved the citations
    assert "Reference `tab:" not in log  # every table reference resolved
    assert r"\bibitem{wang_hung_autodiff}" in (tmp_path / "paper" / "paper.bbl").read_text()


# Every character LaTeX treats specially, in an error message as a backend might raise it.
SPECIALS = r"RuntimeError: x_1 at 100% & #2 costs $3 {a} C:\tmp ~user 2^10"


@pytest.mark.latex
def test_an_error_message_full_of_latex_specials_reaches_the_pdf_as_text(tmp_path):
    if shutil.which("latexmk") is None or shutil.which("pdftotext") is None:
        pytest.skip("latexmk or pdftotext not installed (./setup.sh --test installs both)")
    render_paper.main(make_inputs(tmp_path, real_figure(tmp_path), failed_message=SPECIALS))
    text = subprocess.run(
        ["pdftotext", str(tmp_path / "paper" / "paper.pdf"), "-"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    # pdftotext gives the accents of \textasciitilde and \textasciicircum (U+02DC, U+02C6).
    text = " ".join(text.replace("\u02dc", "~").replace("\u02c6", "^").split())
    assert SPECIALS in text


def test_threads_are_checked_against_the_cores_the_loops_used(tex):
    assert "Threads, checked" in tex and r"\label{tab:threads}" in tex
    # The fake JAX eager loops kept 1.8 cores busy at 1 thread: named, with the number.
    assert "JAX (eager) (1 thread: up to 1.80 cores)" in tex
    assert "PyTorch (eager) (1 thread" not in tex


def test_every_claim_gets_a_verdict_with_its_interval(tex):
    from adbench.claims import CLAIMS

    assert r"\label{tab:verdicts}" in tex and r"\label{tab:comparisons}" in tex
    for name in ("Hypothesis 0", "Hypothesis 1", "Depth", "The JIT"):
        assert name in tex
    table = tex.split(r"\label{tab:verdicts}")[1].split(r"\end{longtable}")[0]
    said = re.findall(r"\\textbf\{([a-z ]+?)(?: \(provisional\))?\}", table)
    assert len(said) == len(CLAIMS)
    assert set(said) <= {"supported", "contradicted", "mixed", "equivalent", "inconclusive",
                         "one process", "not measured"}
    assert "[" in tex.split(r"\label{tab:comparisons}")[1]


def test_statistics_and_an_unrun_validation_are_stated(tex):
    assert "3 had an interquartile range of the step over 10\\% of its median" in tex
    assert "2 cells needed it (7 measured iterations dropped in all)" in tex
    assert "in 1 cells no window reached the steady level" in tex
    assert "was not run for this results tree" in tex


def test_ratios_in_tables_carry_their_interval(tex):
    table2 = tex.split(r"\label{tab:table2_compiled}")[1].split(r"\end{longtable}")[0]
    # the synthetic step/step speed-up, with its interval in small type (formatting's size)
    assert re.search(r"2\.00\\,\{\\[a-z]+\[", table2)


def test_a_harness_validation_run_is_reported_with_its_numbers(tmp_path):
    validation = {
        "ended_at": "2026-11-22T12:00:00",
        "machine": {"cpu_model": "Fake CPU", "cpu_count": 2},
        "workload": {"repeats": 5},
        "comparisons": [
            {
                "framework": "torch",
                "quantity": "backward_s",
                "independent_timer": "torch.utils.benchmark.Timer",
                "ratios": [1.01, 0.99, 1.02],
                "ratio_median": 1.01,
                "target": 0.05,
                "within_target": True,
            }
        ],
        "null_overhead": {
            "split_timer_median_s": 1.5e-7,
            "whole_timer_median_s": 9e-8,
            "fraction_of_fastest": 0.002,
            "within_target": True,
        },
        "interference": {"ratio_median": 1.004, "within_noise": True, "cells": [{}, {}]},
    }
    render_paper.main(make_inputs(tmp_path, validation=validation) + ["--tex-only"])
    tex = " ".join((tmp_path / "paper" / "paper.tex").read_text().split())
    assert "torch backward against torch.utils.benchmark.Timer, 1.01" in tex
    assert "0.150~\\si{\\micro\\second}" in tex
    assert "differ by a median factor of 1.00, within the cells' noise" in tex
    assert "harness was validated against independent timers" in tex  # the method says so


def test_headline_speed_ups_are_like_for_like_geometric_means_with_intervals(tex):
    from adbench.selection import table_modes
    from adbench.spec import timed_quantities

    from adbench.findings import study_columns

    abstract = tex.split(r"\end{abstract}")[0]
    table = next(t for t in TABLES if t.improvement)
    published = contexts.read_published(ROOT / "report" / "published", table)
    # the study's own compiled columns (its Table 2's): our other modes are the appendix's
    compiled = [p for p in study_columns(table, published)
                if FRAMEWORKS[p[0]].modes[p[1]].compiled]
    assert len(compiled) < len([p for p in table_modes(table)
                                if FRAMEWORKS[p[0]].modes[p[1]].compiled])
    # synthetic: every compiled step and backward pass is half the eager one: per compiled
    # mode the step's speed-up, and the backward pass's where the mode times it apart
    expected = len(compiled) + sum("backward_s" in timed_quantities(*p, table.tasks[0])
                                   for p in compiled)
    assert abstract.count("geometric mean 2.00 [") == expected
    assert "(geometric mean" in abstract.split("takes", 1)[1]


def test_the_studys_construction_is_never_in_the_abstract(tmp_path, monkeypatch):
    """A sentinel in place of our study-style ratios: beside the study's table and in the
    discussion, never in the abstract."""
    from adbench import findings

    headline = findings.improvement_headline

    def marked(*args, **kwargs):
        return [{**g, "ours_study_style": "7.77"} for g in headline(*args, **kwargs)]

    monkeypatch.setattr(findings, "improvement_headline", marked)
    render_paper.main(make_inputs(tmp_path) + ["--tex-only"])
    tex = " ".join((tmp_path / "paper" / "paper.tex").read_text().split())
    abstract, body = tex.split(r"\end{abstract}")
    assert "7.77" not in abstract and "7.77" in body


def test_the_quick_configuration_says_so_in_its_title_and_abstract(tmp_path):
    """The study's frameworks, most of its tables, two seeds a condition (fewer than the full
    configuration's): a quick check of the pipeline, not the reproduction, in its title, its
    abstract and its introduction; the full configuration's command is in the last appendix
    only.  A grid of every framework is an extension instead."""
    from adbench import paper_context

    render_paper.main(make_inputs(tmp_path, frameworks=("torch", "tensorflow")) + ["--tex-only"])
    _, cells = fake_iterations_and_cells((1,))
    quick = paper_context.quick_configuration(cells[cells["framework"].isin(["torch",
                                                                            "tensorflow"])])
    tex = " ".join((tmp_path / "paper" / "paper.tex").read_text().split())
    title = tex.split(r"\title{")[1].split(r"\author")[0]
    abstract, body = tex.split(r"\end{abstract}")
    intro = body.split(r"\section{Introduction}")[1].split(r"\section")[0]
    assert "a quick check of the pipeline" in title and "reproduction" not in title
    assert "quick check of the pipeline" in abstract and "not the reproduction" in abstract
    assert f"{quick['n_fewer']} of the {quick['n_cells']} conditions" in abstract
    assert "quick check of the pipeline" in intro and "reproduces every one" not in intro
    assert "config/paper.yaml" not in abstract
    assert "config/paper.yaml" in tex.split(r"\label{app:reproduce}")[1]
    render_paper.main(make_inputs(tmp_path) + ["--tex-only"])  # every framework: an extension
    title = (tmp_path / "paper" / "paper.tex").read_text().split(r"\title{")[1].split("}")[0]
    assert "an extension" in title and "quick check" not in title


def test_the_studys_improvement_column_is_re_derived_from_its_own_means(tex):
    assert "686/465 = 1.475, printed 1.47" in tex
    assert "6 of its 6 printed improvements" in tex


def test_medians_stand_beside_means(tex):
    table1 = tex.split(r"\label{tab:table1_eager}")[1].split(r"\end{longtable}")[0]
    # torch eager [512] backward: seeds' medians 772.5 and 849.75 µs, their median 811
    assert r"& 811 $\pm$ 55 & 811 & 7.87 $\pm$ 0.53 &" in table1
    table3 = tex.split(r"\label{tab:table3_jacobian}")[1].split(r"\end{longtable}")[0]
    assert "median, IQR" in table3  # a wide table: a line of its own


def test_a_loop_that_waited_is_listed_and_marked_where_its_numbers_are_printed(tmp_path):
    waited = ("torch", "eager", "mlp512", "backward", 0)
    render_paper.main(make_inputs(tmp_path, waited=waited) + ["--tex-only"])
    tex = " ".join((tmp_path / "paper" / "paper.tex").read_text().split())
    threads = tex.split("Threads, checked")[1].split(r"\label{tab:threads}")[0]
    assert f"[512], backward, 1 thread, seed 0: {WAITED_CORES:.2f} cores" in threads
    table1 = tex.split(r"\label{tab:table1_eager}")[1].split(r"\end{longtable}")[0]
    assert r"811 $\pm$ 55$^{\mathrm{a}}$" in table1  # PyTorch (eager), [512]: marked
    notes = tex.split(r"\label{tab:table1_eager}")[1].split(r"\label{tab:")[0]
    assert WAITING in notes
    # the claims' comparisons with that side carry the mark too (Hypothesis 1, the JIT, ...)
    comparisons = tex.split(r"\label{tab:comparisons}")[1].split(r"\end{longtable}")[0]
    marked = [row for row in re.split(r"\\tabularnewline|\\\\", comparisons)
              if "waited" in row]
    assert marked and all("[512], PyTorch (eager), backward" in row for row in marked[:-1])


# ----------------------------------------------------------------------------- stops, busy cells
def test_the_stop_rule_its_reasons_and_a_busy_machine_are_printed_where_they_belong(tmp_path):
    """Planted cells: the backward pass of [512] a fixed count, every other cell a precision
    stop (seed 0 at its time cap, seed 1 at its precision); one cell busy after its
    re-timing, one quiet after it.  The protocol table gives each row's rule, reasons and
    precision reached; the method the rule, the setup's appendix the counts; the limitations
    how many cells were busy and how busy; the busy condition's mean is marked in its table."""
    render_paper.main(make_inputs(tmp_path, measuring=True) + ["--tex-only"])
    tex = " ".join((tmp_path / "paper" / "paper.tex").read_text().split())
    cells = pd.read_parquet(tmp_path / "cells.parquet")
    ok = cells[cells["status"] == "ok"]
    protocol = tex.split(r"\label{tab:protocol}")[1].split(r"\end{longtable}")[0]
    rows = [r.split(" & ") for r in protocol.split(r"\endfoot")[1].split(r"\tabularnewline")
            if " & " in r]
    fixed = [r for r in rows if r[6].strip() == "fixed"]
    assert len(fixed) == 1 and "[512]" in fixed[0][1]
    n_fixed = int(((ok["model"] == "mlp512") & (ok["task"] == "backward")).sum())
    assert fixed[0][7].strip() == f"fixed {n_fixed}"
    for r in (r for r in rows if r not in fixed):  # min_iterations 10 of 3 iterations: 3
        assert r[6].strip() == r"$\pm$2\% or 5 s, 3 at least"
        assert re.fullmatch(r"precision \d+, time \d+", r[7].strip()) and r[8].strip() == \
            r"1.1--3.4\%"
    method = tex.split(r"\paragraph{Protocol.}")[1].split(r"\paragraph{What is timed.}")[0]
    assert (r"measured until the 95\% interval of its median step lay within $\pm$2\% of it or "
            r"5 s were measured (3 iterations, or a fixed count where the configuration gave "
            r"one; Appendix~\ref{app:stop}, Table~\ref{tab:protocol})") in method
    stopping = tex.split(r"\label{app:stop}")[1].split(r"\paragraph{Models.}")[0]
    precise = ok[ok["stop"] == "precision"]
    n_time = int((precise["seed"] == 0).sum())
    assert (f"{len(precise) - n_time} stopped at their precision, {n_time} at the time cap, "
            f"{n_fixed} after a fixed count") in stopping
    assert r"reached 1.1--3.4\%" in stopping
    assert "2 cells were measured again and 1 stayed busy" in stopping
    limitations = tex.split(r"\label{sec:limitations}")[1].split(r"\section")[0]
    assert (f"Busy machine: 2 cells were measured again for a busy machine (other processes "
            f"took more than 0.25 of a core") in limitations
    assert (f"1 of the 55 completed cells stayed busy (other processes took {BUSY_CORES:.2f} "
            "cores of their CPUs") in limitations
    assert f"Precision: {n_time} of the {len(precise)} cells measured to a precision" in \
        limitations
    table1 = tex.split(r"\label{tab:table1_eager}")[1].split(r"\label{tab:")[0]
    assert r"811 $\pm$ 55$^{\mathrm{a}}$" in table1  # PyTorch (eager), [512]: the busy one
    assert table1.count(rf"$^{{\mathrm{{a}}}}$\,{BUSY}") == 1  # its note, once
    assert table1.count(r"$^{\mathrm{a}}$") == 2  # its mean and its note: no other mean


def test_a_quiet_run_marks_no_busy_cell(tex):
    """The default inputs: no cell busy, no busy reading at all."""
    assert BUSY not in tex and "Busy machine" not in tex and "(at most" not in tex


# ----------------------------------------------------------------------------- figures, memory
def caption_of(tex: str, table: str) -> str:
    """The caption of a table (the text before its label, from its \\caption)."""
    return tex.split(rf"\label{{tab:{table}}}")[0].rsplit(r"\caption{", 1)[1]


def test_each_tables_figure_is_cited_in_the_caption_of_every_table_it_draws(tex):
    from adbench.plotting import figure_tables

    for figure in FIGURES_OF_TABLES:
        measured = [t.name for t in figure_tables(figure) if t.name != MISSING_TABLE]
        assert tex.count(rf"\label{{fig:{figure}}}") == 1
        for table in measured:
            assert rf"Figure~\ref{{fig:{figure}}} draws it" in caption_of(tex, table), table
        # placed right after the tables it draws: no other table comes between
        after = tex.split(rf"\label{{tab:{measured[0]}}}")[1].split(rf"\label{{fig:{figure}}}")[0]
        assert set(re.findall(r"\\label\{tab:([^}]+)\}", after)) <= set(measured)
    assert r"\ref{tab:table5_dense}" not in tex.split(r"\label{fig:jacobians}")[0].rsplit(
        r"\begin{figure}", 1)[1]  # a table not measured is not cited


def test_wide_tables_go_on_landscape_pages_in_small_type(tex):
    for chunk in tex.split(r"\begin{landscape}")[1:]:
        table = chunk.split(r"\end{landscape}")[0]
        assert r"\begin{longtable}" in table and r"{\small" in table
    assert r"\scriptsize\setlength" not in tex and r"\footnotesize\setlength" not in tex
    # the study's tables show its own columns only: they fit the portrait page
    main = tex.split(r"\appendix")[0]
    assert r"\begin{landscape}" not in main


def test_the_memory_section_gives_a_row_per_condition_and_says_no_gpu_ran(tex):
    section = tex.split(r"\label{sec:memory}")[1].split(r"\section")[0]
    assert "its peak reset" in section and "resident memory" in section
    assert "No GPU ran in this run" in section and "no device memory was measured" in section
    assert r"\label{fig:memory}" in section
    _, cells = fake_iterations_and_cells()
    conditions = cells[cells["status"] == "ok"].drop_duplicates(
        ["framework", "mode", "model", "task", "device", "threads"])
    table = section.split(r"\label{tab:memory}")[1].split(r"\end{longtable}")[0]
    assert table.split(r"\endfoot")[1].count(r"\tabularnewline") == len(conditions)


def test_only_the_modes_with_cells_are_listed_as_run(tmp_path):
    gone = ("jax", "jit")
    render_paper.main(make_inputs(tmp_path, without_mode=gone) + ["--tex-only"])
    tex = (tmp_path / "paper" / "paper.tex").read_text()
    label = latex(f"{report_spec.framework_label(gone[0])} "
                  f"({report_spec.mode_label(gone[0], gone[1])})")
    ran = tex.split("The modes measured:")[1].split("The tasks:")[0]
    assert label not in ran and "PyTorch (eager)" in ran
    quantities = tex.split(r"\label{tab:quantities}")[1].split(r"\end{tabular}")[0]
    assert label not in quantities
