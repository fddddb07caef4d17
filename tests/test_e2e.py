"""End-to-end tier: the real Snakemake on a fresh copy of the checkout, with the tiny config
.test/config.yaml, real frameworks in environments the pipeline builds, real latexmk.

Checks structure and contracts, never absolute timings.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml

from adbench import reference, report_spec, schema, spec, tables

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import pipeline_cost  # noqa: E402  (its fresh copy of the checkout, shared)
import plan_campaign  # noqa: E402  (the walltimes the rule asks for, as the plan computes them)
from test_code_inputs import planned_inputs  # noqa: E402  (a dry run's inputs per job)

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[1]
TEST_CONFIG = ".test/config.yaml"
TINY = yaml.safe_load((REPO / TEST_CONFIG).read_text())
OUT = TINY["results"]  # the tiny config's results tree


def fresh_checkout(dest: Path) -> Path:
    """The files a clone has (plus uncommitted work), no environments: a newcomer's tree."""
    pipeline_cost.fresh_copy(dest, cold=True)
    return dest


def snakemake(workdir: Path, *args: str, env: dict | None = None, timeout: int = 1500):
    cmd = [sys.executable, "-m", "snakemake", "--configfile", TEST_CONFIG, *args]
    result = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, timeout=timeout,
                            env=env)
    result.log = f"$ {' '.join(cmd)}\n{result.stdout}\n{result.stderr}"  # for assertion messages
    return result


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """One full run in the default environment mode a user gets here: venvs built from envs/."""
    workdir = fresh_checkout(tmp_path_factory.mktemp("checkout"))
    result = snakemake(workdir, "--cores", "2", "--config", "environments=venv")
    assert result.returncode == 0, result.log[-6000:]
    return workdir


def tiny_cells():
    return spec.config_cells(TINY)


def provenance(run, cell):
    return schema.read_provenance(run / OUT / cell.raw_path)


def test_every_output_is_produced(run):
    for cell in tiny_cells():
        assert (run / OUT / cell.raw_path).is_file() and (run / OUT / cell.gradient_path).is_file()
    for name in report_spec.TABLE_NAMES:
        for ext in ("csv", "md", "tex"):
            assert (run / OUT / f"tables/{name}.{ext}").stat().st_size > 0
    for name in ("first_iterations", "jacobians", "frameworks", "mlp_backward", "hypothesis0",
                 "memory_per_cell"):
        for ext in ("pdf", "png"):
            assert (run / OUT / f"figures/{name}.{ext}").stat().st_size > 0
    # The study's Figures 4-5 and the graphs' node counts, of the run's models.
    for framework in ("torch", "tensorflow"):
        for ext in ("dot", "pdf", "png"):
            assert (run / OUT / f"graphs/graph_mlp512_{framework}.{ext}").stat().st_size > 0
    nodes = pd.read_csv(run / OUT / "graphs/nodes.csv")
    assert set(nodes["model"]) == {c.model for c in tiny_cells()}
    assert (pd.to_numeric(nodes["nodes"], errors="coerce") > 0).all(), nodes
    assert (run / OUT / "checks/gradients.csv").is_file()
    assert (run / OUT / "paper/paper.pdf").read_bytes()[:4] == b"%PDF"
    # What the analysis read: every cell's file, listed (no program's command line holds a
    # campaign's).
    assert (run / OUT / "aggregate/raw_files.txt").read_text().split("\n")[:-1] == [
        f"{OUT}/{cell.raw_path}" for cell in tiny_cells()]
    assert (run / OUT / "checks/gradient_files.txt").read_text().split("\n")[:-1] == [
        f"{OUT}/{cell.gradient_path}" for cell in tiny_cells()]


def test_statistics_and_verdicts_come_from_the_runs_data(run):
    cells = pd.read_parquet(run / OUT / "aggregate/cells.parquet")
    ok = cells[cells["status"] == "ok"]
    assert ok["noise"].notna().all() and ok["warmup_detected"].notna().any()
    bootstrap = pd.read_parquet(run / OUT / "aggregate/bootstrap.parquet")
    assert len(bootstrap) and all(len(r) == 2000 for r in bootstrap["replicates"])
    # one row per process (seed), quantity and statistic
    assert set(bootstrap["seed"]) == set(ok["seed"])
    claims = pd.read_csv(run / OUT / "verdicts/claims.csv")
    assert set(claims["verdict"]) <= {"supported", "contradicted", "equivalent",
                                      "inconclusive", "one process", "not measured"}
    # The tiny grid has the MLP in both torch modes over two seeds: the JIT claim is judged
    # on two processes; the other tasks ran one seed, so their comparisons are not judged.
    jit = claims.set_index("claim").loc["jit_outperforms"]
    assert jit["verdict"] not in ("not measured", "one process") and jit["n_processes"] == 2
    comparisons = pd.read_csv(run / OUT / "verdicts/comparisons.csv")
    single = comparisons[comparisons["n_processes"] == 1]
    assert len(single) and set(single["verdict"]) == {"one process"}
    groups = pd.read_csv(run / OUT / "verdicts/groups.csv")
    assert set(groups["claim"]) == set(claims["claim"])
    table2 = pd.read_csv(run / OUT / "tables/table2_compiled.csv")
    printed = table2[table2["improvement"].notna()]
    assert len(printed) and printed["improvement_low"].notna().all()
    tex = (run / OUT / "paper/paper.tex").read_text()
    assert r"\label{sec:verdicts}" in tex and "was not run for this results tree" in tex
    for figure in ("mlp_backward", "jacobians", "hypothesis0", "frameworks"):
        assert rf"\label{{fig:{figure}}}" in tex and rf"Figure~\ref{{fig:{figure}}} draws it" in tex
    assert r"\label{sec:memory}" in tex and r"\label{fig:memory}" in tex
    assert "No GPU ran in this run" in tex
    assert r"\scriptsize\setlength" not in tex and r"\footnotesize\setlength" not in tex
    memory = pd.read_csv(run / OUT / "tables/memory.csv")
    assert len(memory) and (memory["held_after_step_bytes"] > 0).all()
    # The extensions: how a gradient's cost grows, the graphs, the variant tasks' claims
    # (one process each here: printed, not judged), the cheap gradient on two processes.
    assert r"\label{sec:scaling}" in tex and r"\label{sec:graphs}" in tex
    assert r"\label{sec:variants}" in tex
    scaling = pd.read_csv(run / OUT / "tables/scaling.csv")
    eager = scaling[(scaling["framework"] == "torch") & (scaling["mode"] == "eager")
                    & (scaling["model"] == "mlp512") & (scaling["task"] == "backward")]
    assert 1 < eager["cheap_gradient_ratio"].iloc[0] < 50 and eager["gflops"].iloc[0] > 0
    # tf.function's step is one call: its forward is the forward task's, paired by seed
    graph = scaling.set_index(["framework", "mode", "model", "task"]).loc[
        ("tensorflow", "graph", "mlp512", "backward")]
    assert graph["forward_from"] == "forward task" and 1 < graph["cheap_gradient_ratio"] < 50
    by_claim = claims.set_index("claim")
    assert by_claim.loc["cheap_gradient", "verdict"] not in ("not measured", "one process")
    for key in ("frozen_subgraphs", "graph_freed", "varying_lengths"):
        assert by_claim.loc[key, "verdict"] == "one process", by_claim.loc[key]
    # Varying lengths: an epoch per cell, define-by-run tracing nothing (the compiled modes'
    # retraces: tests/test_varlen_<framework>.py).
    assert r"\label{sec:varlen}" in tex
    varlen = pd.read_csv(run / OUT / "tables/varlen.csv").set_index("strategy")
    assert (varlen["epoch_s"] > 0).all() and (varlen["n_traces"] == 0).all()
    assert sorted(varlen.index) == ["padded", "true"]


def test_snakemakes_report_holds_every_result_with_its_caption(run, tmp_path):
    result = snakemake(run, "--report", str(tmp_path / "report.zip"))
    assert result.returncode == 0, result.log[-4000:]
    with zipfile.ZipFile(tmp_path / "report.zip") as archive:
        names = {Path(n).name for n in archive.namelist()}
        page = archive.read("report/report.html").decode()
    tree = run / OUT
    expected = {p.name for pattern in ("tables/*.csv", "tables/*.md", "figures/*.png",
                                       "verdicts/*.csv", "checks/gradients.*", "paper/paper.pdf")
                for p in tree.glob(pattern)}
    assert len(expected) > 2 * len(report_spec.TABLE_NAMES) and expected <= names
    # the page holds each caption as HTML inside a script string: line breaks as '\n'
    text = re.sub(r"(?:\\n|\s)+", " ", page)
    swept = list(tree.glob("figures/scaling_*.png"))  # the tiny grid sweeps no axis
    for caption in (REPO / "report" / "captions").glob("*.rst"):
        if caption.stem == "scaling_figure" and not swept:
            continue
        assert caption_phrase(caption.read_text()) in text, caption.name


def caption_phrase(text: str) -> str:
    """The first four words in a row that the rst-to-HTML step leaves as they are."""
    words = text.split()
    clean = [bool(re.fullmatch(r"[\w,.:;()-]+", w)) for w in words]
    start = next(i for i in range(len(words)) if all(clean[i:i + 4]))
    return " ".join(words[start:start + 4])


def test_the_paper_reads_in_sequence_and_names_the_studys_documents(run):
    text = subprocess.run(["pdftotext", str(run / OUT / "paper/paper.pdf"), "-"],
                          capture_output=True, text=True, check=True).stdout
    numbers = sorted({int(n) for n in re.findall(r"^\f?Table\s(\d+):", text, re.M)})
    assert numbers == list(range(1, len(numbers) + 1)) and len(numbers) > 5
    # the study's documents by name (report_spec.DOCUMENTS), never by their file numbers
    assert not re.findall(r"(?<![\w.])00[0-4](?![\w.])", text)
    assert "Limitations of this run" in text
    words = " ".join(text.split())  # pdftotext breaks lines and curls apostrophes
    assert not re.search(r"the study.s the study|\)and\b", words)  # stitched sentences
    # every mode the paper lists as run has cells, and only those are listed
    listed = re.split(r"The spec.s other modes", words.split("The modes this run measured:")[1])[0]
    cells = pd.read_parquet(run / OUT / "aggregate/cells.parquet")
    ran = set(zip(cells["framework"], cells["mode"]))
    for framework, info in spec.FRAMEWORKS.items():
        for mode in info.modes:
            label = tables.column_label(framework, mode)
            assert (label in listed) == ((framework, mode) in ran), (label, listed[:800])


def test_raw_files_follow_the_contract(run):
    workload = TINY["workload"]
    for cell in tiny_cells():
        table = pq.read_table(run / OUT / cell.raw_path)
        assert table.schema.remove_metadata() == schema.RAW_SCHEMA
        rows = table.to_pandas()
        info = provenance(run, cell)
        assert info["cell"]["framework"] == cell.framework
        if info["status"] == "unsupported":  # recorded with its reason, never dropped
            assert info["message"] and rows.empty, cell
            continue
        assert info["status"] == "ok", (cell, info["message"])
        assert len(rows) == workload["warmup"] + workload["iterations"]
        assert (rows["phase"] == "warmup").sum() == workload["warmup"]
        assert (rows["step_s"] > 0).all()
        quantities = spec.timed_quantities(cell.framework, cell.mode, cell.task)
        assert info["timed_quantities"] == list(quantities)
        assert rows[list(quantities)].notna().all().all()
        # Isolation: the job ran in its framework's own venv and loaded that framework alone.
        assert info["frameworks_loaded"] == [cell.framework]
        assert f"/.venvs/{spec.FRAMEWORKS[cell.framework].env}/" in info["python_executable"]
        assert info["env"]["OMP_NUM_THREADS"] == str(cell.threads)
        for key in ("versions", "cpu_model", "git_commit", "config_hash", "started_at",
                    "ended_at", "phases", "timed_quantities", "choices", "threads_reported"):
            assert key in info


def test_every_model_and_task_of_the_tiny_config_ran_somewhere(run):
    """At least one (framework, mode) computes each model and task; the rest say why not."""
    ok = {(c.model, c.task) for c in tiny_cells() if provenance(run, c)["status"] == "ok"}
    assert ok == {(c.model, c.task) for c in tiny_cells()}


def table_cells(table):
    """The tiny config's cells that a table of report_spec.TABLES shows."""
    return {c for c in tiny_cells() if c.model in table.models and c.task in table.tasks
            and table.compiled in (None, spec.FRAMEWORKS[c.framework].modes[c.mode].compiled)
            and (table.frameworks is None or c.framework in table.frameworks)
            and table.quantity in spec.timed_quantities(c.framework, c.mode, c.task)}


def test_tables_have_every_cell(run):
    for table in report_spec.TABLES:
        tidy = pd.read_csv(run / OUT / f"tables/{table.name}.csv", keep_default_na=False,
                           na_values=[""])
        cells = table_cells(table)
        assert set(zip(tidy["framework"], tidy["mode"], tidy["model"], tidy["task"])) == {
            (c.framework, c.mode, c.model, c.task) for c in cells}, table.name
        for r in tidy.itertuples():
            seeds = {c.seed for c in cells if (c.framework, c.mode, c.model, c.task) == (
                r.framework, r.mode, r.model, r.task)}
            status = {provenance(run, c)["status"] for c in cells if (
                c.framework, c.mode, c.model, c.task) == (r.framework, r.mode, r.model, r.task)}
            if status == {"ok"}:
                assert r.status == "ok" and r.n_seeds == len(seeds), (table.name, r)
                assert pd.notna(r.mean) and (len(seeds) == 1 or pd.notna(r.mean_sd))
            else:  # n/a with the reason, never dropped
                assert r.status == "n/a" and r.note, (table.name, r)
        if table.improvement and not tidy.empty:
            compiled_ok = (tidy["status"] == "ok") & tidy["compiled"].astype(bool)
            assert tidy.loc[compiled_ok, "improvement"].notna().all()


def test_derivatives_agree_with_the_reference_and_across_frameworks(run):
    check = pd.read_csv(run / OUT / "checks/gradients.csv", keep_default_na=False,
                        na_values=[""])
    assert len(check) == len(tiny_cells())
    ok = check[check["status"] == "ok"]
    assert ok["passed"].all()
    # 1e-5, or reference.KINK_TOLERANCE where the check point is within float32 rounding of
    # a ReLU kink (mlp512 seed 0 here; its cells may land on either side)
    assert set(ok["tolerance"]) <= {1e-5, reference.KINK_TOLERANCE}, ok
    assert (ok["ref_rel_error"] <= ok["tolerance"]).all()
    assert (ok["max_rel_error"] <= ok["tolerance"]).all()
    assert ok.loc[ok["tolerance"] == 1e-5, "ref_rel_error"].max() < 1e-5
    assert (check.loc[check["status"] != "ok", "passed"] == False).all()  # noqa: E712
    references = sorted((run / OUT / "reference").rglob("*.npz"))
    assert {(p.parent.parent.name, p.parent.name) for p in references} == {
        (c.model, spec.TASKS[c.task].derivative) for c in tiny_cells()}


def test_the_papers_protocol_is_the_measured_cells(run):
    """Each row of the paper's protocol table (seeds, processes per cell, warm-up, measured
    iterations per task and models) is what cells.parquet records for those cells."""
    cells = pd.read_parquet(run / OUT / "aggregate/cells.parquet")
    ok = cells[cells["status"] == "ok"]
    tex = (run / OUT / "paper/paper.tex").read_text()
    table = tex.split("\\label{tab:protocol}", 1)[1].split("\\bottomrule", 1)[0]
    rows = [line.replace("\\_", "_").split(" & ")
            for line in table.split("\\midrule", 1)[1].splitlines() if " & " in line]
    labels = {report_spec.task_label(t): t for t in spec.TASKS}
    covered = set()
    for task_label, models, seeds, processes, warmup, iterations in rows:
        for model in models.split(", "):
            mine = ok[(ok["task"] == labels[task_label]) & (ok["model"] == model)]
            per_cell = mine.groupby(["framework", "mode", "device", "threads"]).size()
            assert seeds == ", ".join(str(s) for s in sorted(set(mine["seed"]))), (model, seeds)
            assert processes.replace("--", "-").split("-") == [
                str(n) for n in sorted({per_cell.min(), per_cell.max()})], (model, processes)
            assert warmup == str(mine["warmup"].iloc[0]) and mine["warmup"].nunique() == 1
            assert iterations.split(" ")[0] == str(mine["iterations"].iloc[0])
            covered.add((labels[task_label], model))
    assert covered == set(zip(ok["task"], ok["model"]))


def test_timing_jobs_never_overlap(run):
    cells = pd.read_parquet(run / OUT / "aggregate/cells.parquet")
    spans = sorted(zip(pd.to_datetime(cells["started_at"]), pd.to_datetime(cells["ended_at"])))
    for (_, end), (start, _) in zip(spans, spans[1:]):
        assert start >= end, "two timing jobs ran at the same time"


def planned_jobs(log: str) -> list[str]:
    """The rules of the jobs a Snakemake run (or dry run) scheduled, in order."""
    return [line.split()[1].rstrip(":") for line in log.splitlines()
            if line.startswith(("rule ", "localrule "))]


def test_an_interrupted_run_resumes_without_redoing_finished_cells(run):
    """Ctrl-C (SIGINT to Snakemake's process group) while a timing job runs: no half-written
    file is left, and the next run times only the cells that were not finished, leaving
    every other cell's file as it was."""
    assert "Nothing to be done" in snakemake(run, "-n", "--config", "environments=venv").log
    mine = [c for c in tiny_cells() if c.framework == "autograd"]
    for cell in mine:
        (run / OUT / cell.raw_path).unlink()
    for downstream in ("aggregate", "tables", "checks", "figures", "paper"):
        shutil.rmtree(run / OUT / downstream)
    others = {c.raw_path: (run / OUT / c.raw_path).stat().st_mtime_ns
              for c in tiny_cells() if c not in mine}
    cmd = [sys.executable, "-m", "snakemake", "--configfile", TEST_CONFIG, "--cores", "2",
           "--config", "environments=venv"]
    # Ctrl-C as in a terminal: SIGINT's default action restored, since a test runner started
    # in the background (`cmd &` in a script) ignores SIGINT, and so would Snakemake.
    job = subprocess.Popen(cmd, cwd=run, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, start_new_session=True,
                           preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline, first_done = time.monotonic() + 600, None
    while job.poll() is None and time.monotonic() < deadline:  # the second cell's job
        if first_done is None and any((run / OUT / c.raw_path).exists() for c in mine):
            first_done = time.monotonic()
        # Ctrl-C as the next cell's measure.py runs; a loaded machine can hide a process
        # that lives a second from this scan, so a second after the first cell will do too.
        if first_done is not None and (time.monotonic() - first_done > 1 or any(
                measure_pid(c) for c in mine if not (run / OUT / c.raw_path).exists())):
            os.killpg(job.pid, signal.SIGINT)
            break
        time.sleep(0.02)
    log = job.communicate(timeout=600)[0]
    assert job.returncode != 0, log[-4000:]  # interrupted, not finished
    assert not list((run / OUT).rglob("*.tmp")), "a temporary file was left behind"
    done = [c for c in mine if (run / OUT / c.raw_path).exists()]
    for cell in done:  # every file present is whole
        assert provenance(run, cell)["status"] == "ok"
    assert 1 <= len(done) < len(mine), log[-4000:]
    result = snakemake(run, "--cores", "2", "--config", "environments=venv")
    assert result.returncode == 0, result.log[-4000:]
    assert planned_jobs(result.log).count("measure") == len(mine) - len(done), result.log
    retimed = [line.split("output: ", 1)[1].split(",")[0] for line in result.log.splitlines()
               if line.strip().startswith(f"output: {OUT}/raw/")]
    assert sorted(retimed) == sorted(f"{OUT}/{c.raw_path}" for c in mine if c not in done), \
        result.log  # in Snakemake's order
    assert all((run / OUT / p).stat().st_mtime_ns == t for p, t in others.items())
    assert "Nothing to be done" in snakemake(run, "-n", "--config", "environments=venv").log


def test_template_edit_rebuilds_only_the_paper(run):
    template = run / "report/paper.tex.j2"
    template.write_text(template.read_text() + "\n% edited\n")
    plan = snakemake(run, "-n", "--config", "environments=venv").log
    assert [job for job in planned_jobs(plan) if job != "all"] == ["paper"], plan


def test_editing_one_pin_file_rebuilds_that_environment_alone(run):
    """Environments are cached: a pin edit rebuilds its env and re-measures its cells only."""
    assert "build_venv" not in planned_jobs(snakemake(run, "-n", "--config",
                                                      "environments=venv").log)
    counts = {f: sum(c.framework == f for c in tiny_cells())
              for f in dict.fromkeys(c.framework for c in tiny_cells())}
    framework = min(counts, key=counts.get)
    pins = run / "envs" / f"{spec.FRAMEWORKS[framework].env}.yaml"
    before, text = pins.stat(), pins.read_text()
    # A real edit: Snakemake records the checksum of small inputs, so a touch alone (same
    # content, newer mtime) rebuilds nothing.
    pins.write_text(text + "# edited\n")
    try:
        plan = snakemake(run, "-n", "--config", "environments=venv").log
    finally:  # the later tests run on a tree whose environments are up to date
        pins.write_text(text)
        os.utime(pins, ns=(before.st_atime_ns, before.st_mtime_ns))
    jobs = planned_jobs(plan)
    assert jobs.count("build_venv") == 1 and jobs.count("measure") == counts[framework], plan
    measured = [line.split(f"{OUT}/raw/", 1)[1] for line in plan.splitlines()
                if line.strip().startswith(f"output: {OUT}/raw/")]
    assert measured and all(path.split("/")[1] == framework for path in measured), measured


def test_editing_a_backend_re_times_its_framework_alone(run):
    """The timing jobs' one input is their harness file (common.smk): its code digests make
    an edit re-time exactly the cells that ran the edited file, and a touch nothing."""
    framework = tiny_cells()[0].framework
    backend = (run / "workflow/scripts/adbench/backends"
               / f"{spec.FRAMEWORKS[framework].backend}.py")
    before, text = backend.stat(), backend.read_text()
    harness = json.loads((run / OUT / f"harness/cpu/{framework}.json").read_text())
    assert harness["code"][str(backend.relative_to(run))] == hashlib.sha256(
        text.encode()).hexdigest()
    try:
        backend.touch()
        touched = planned_jobs(snakemake(run, "-n", "--config", "environments=venv").log)
        backend.write_text(text + "# edited\n")
        edited = snakemake(run, "-n", "--config", "environments=venv").log
    finally:
        backend.write_text(text)
        os.utime(backend, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert "measure" not in touched, touched
    ours = [c for c in tiny_cells() if c.framework == framework]
    assert planned_jobs(edited).count("measure") == len(ours), edited
    measured = [line.split(f"{OUT}/raw/", 1)[1] for line in edited.splitlines()
                if line.strip().startswith(f"output: {OUT}/raw/")]
    assert measured and all(path.split("/")[1] == framework for path in measured), measured


def test_editing_a_module_no_timing_job_imports_re_runs_its_users_alone(run):
    """Code inputs are derived from the scripts' imports (adbench/code_inputs.py): editing a
    module the figures import, and no timing job does, re-draws the figures, re-runs the
    other jobs whose scripts import it and the paper after them, and re-times nothing."""
    jobs = planned_inputs(run, "--configfile", TEST_CONFIG, "--config", "environments=venv")
    users = {}
    for rule, planned in jobs.items():
        for _, inputs in planned:
            for path in inputs:
                users.setdefault(path, set()).add(rule)
    timed = {"harness", "measure", "reference"}
    candidates = [p for p in users if p.endswith(".py") and "figures" in users[p]
                  and not users[p] & timed and not p.endswith("figures.py")]
    module = Path(min(candidates, key=lambda p: (len(users[p]), p)))
    before, text = module.stat(), module.read_text()
    try:
        module.write_text(text + "# edited\n")
        plan = snakemake(run, "-n", "--config", "environments=venv").log
    finally:
        module.write_text(text)
        os.utime(module, ns=(before.st_atime_ns, before.st_mtime_ns))
    planned = set(planned_jobs(plan)) - {"all"}
    assert planned == users[str(module)] | {"paper"}, (module, plan[-3000:])


def test_missing_latexmk_fails_only_the_paper_with_a_hint(run, tmp_path):
    # A PATH with every tool of the real one except the TeX programs.
    shadow = tmp_path / "bin"
    shadow.mkdir()
    tex = {"latexmk", "pdflatex", "bibtex"}
    for directory in os.environ["PATH"].split(os.pathsep):
        if os.path.isdir(directory):
            for tool in os.listdir(directory):
                if tool not in tex and not (shadow / tool).exists():
                    (shadow / tool).symlink_to(os.path.join(directory, tool))
    for output in (f"{OUT}/paper", f"{OUT}/tables"):
        shutil.rmtree(run / output)
    env = {**os.environ, "PATH": str(shadow)}
    result = snakemake(run, "--cores", "2", "--config", "environments=venv", env=env)
    assert result.returncode != 0
    assert "apt-get install" in result.log and "latexmk" in result.log
    assert (run / OUT / "tables/table1_eager.csv").is_file()
    assert not (run / OUT / "paper/paper.pdf").exists()


def measure_pid(cell) -> int | None:
    """The pid of the cell's timing process (measure.py, not its run_cell.py parent)."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if (len(argv) > 1 and argv[1].endswith(b"measure.py")
                and f"{OUT}/{cell.raw_path}".encode() in argv):
            return int(pid)
    return None


def cell_note(run, cell) -> str:
    """What the tables say about a cell's condition (status and reason)."""
    notes = pd.concat(pd.read_csv(f) for f in (run / OUT / "tables").glob("*.csv"))
    mine = notes[(notes["model"] == cell.model) & (notes["task"] == cell.task)
                 & (notes["framework"] == cell.framework) & (notes["mode"] == cell.mode)]
    return " ".join(mine["note"].fillna("").astype(str))


def run_killing(run, cell, *args: str) -> tuple[str, int, bool]:
    """A Snakemake run that sends SIGKILL (as the OOM killer does) to the cell's timing
    process as soon as it starts: the run's log, its exit status, whether it was killed."""
    cmd = [sys.executable, "-m", "snakemake", "--configfile", TEST_CONFIG, "--cores", "2",
           "--config", "environments=venv", *args]
    job = subprocess.Popen(cmd, cwd=run, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)
    killed = False
    deadline = time.monotonic() + 600
    while job.poll() is None and not killed and time.monotonic() < deadline:
        pid = measure_pid(cell)
        if pid is not None:
            os.kill(pid, signal.SIGKILL)
            killed = True
        time.sleep(0.02)
    log = job.communicate(timeout=1500)[0]
    return log, job.returncode, killed


def test_faults_of_every_kind_are_recorded_and_the_next_run_retimes_only_theirs(run):
    """Three faults in one run, each confined to its cells: a timing job killed by SIGKILL, an
    environment that cannot be built (a pin naming a wheel that does not exist: no index is
    asked), and a budget (0.05 s, a per-model override from the command line) shorter than
    Python takes to start. The run and the paper finish, each cell is recorded with what
    happened, the tables say so; once the causes are gone, the failed cells are re-timed
    and nothing else, and a timeout is kept until it is re-timed on request (README)."""
    killed_cell = next(c for c in tiny_cells() if c.framework == "torch" and c.seed == 1)
    broken_env = [c for c in tiny_cells() if c.framework == "autograd"]
    over_budget = [c for c in tiny_cells() if c.model == "rnn_cell" and c.framework == "torch"
                   and c.mode == "eager" and c.task in spec.STUDY_TASKS][:1]
    pins = run / "envs" / "autograd.yaml"
    good = pins.read_text()
    missing = "adbench-missing @ file:///nonexistent/adbench_missing-1.0-py3-none-any.whl"
    pins.write_text(good.replace("      - autograd==", f"      - {missing}\n      - autograd=="))
    forced = [f"{OUT}/{c.raw_path}" for c in [killed_cell, *over_budget]]
    try:
        log, returncode, killed = run_killing(
            run, killed_cell, "workload={models: {rnn_cell: {budget_s: 0.05}}}",
            "--forcerun", *forced)
        assert killed and returncode == 0, log[-6000:]
        info = provenance(run, killed_cell)
        assert info["status"] == "failed" and "killed by SIGKILL" in info["message"], info
        assert "killed by SIGKILL" in cell_note(run, killed_cell)
        for cell in broken_env:
            info = provenance(run, cell)
            assert info["status"] == "failed", info
            assert "envs/autograd.yaml" in info["message"], info["message"]
            assert "adbench_missing" in info["message"], info["message"]
        assert "could not be built" in cell_note(run, broken_env[0])
        for cell in over_budget:
            info = provenance(run, cell)
            assert info["status"] == "timeout" and "budget of 0.05 s" in info["message"], info
            assert "timeout" in cell_note(run, cell)
        faulty = {killed_cell, *broken_env, *over_budget}
        others = [c for c in tiny_cells() if c not in faulty]
        assert all(provenance(run, c)["status"] in ("ok", "unsupported") for c in others)
        assert (run / OUT / "paper/paper.pdf").read_bytes()[:4] == b"%PDF"
    finally:
        pins.write_text(good)
    # The killed cell and the environment's cells, never the timeout (raising the budget is
    # not a reason to re-time anything by itself).
    plan = planned_jobs(snakemake(run, "-n", "--config", "environments=venv").log)
    assert plan.count("measure") == 1 + len(broken_env), plan
    result = snakemake(run, "--cores", "2", "--config", "environments=venv",
                       "--forcerun", *(f"{OUT}/{c.raw_path}" for c in over_budget))
    assert result.returncode == 0, result.log[-6000:]
    assert all(provenance(run, c)["status"] == "ok" for c in faulty)
    assert "Nothing to be done" in snakemake(run, "-n", "--config", "environments=venv").log


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs a 2-thread cell to be valid")
def test_a_second_config_keeps_its_own_results_and_a_cell_that_raises_is_retimed_on_request(
        run):
    """A second config (its file has no `results` key: results-<name>/) measures a cell the
    tiny config also has, with other settings, and a cell that raises (given 1 core for its
    2 threads, which measure.py refuses rather than mislabel its numbers). Neither tree
    overwrites the other; the raise is recorded failed with the error, the run and its paper
    finish, a rerun keeps it, and --forcerun re-times it once the cause is gone."""
    other = {**TINY, "grid": [{"frameworks": {"torch": ["eager"]}, "models": ["mlp512"],
                               "seeds": [0], "threads": [1, 2]}],
             "workload": {**TINY["workload"], "iterations": 5}}
    del other["results"]
    (run / "other.yaml").write_text(yaml.safe_dump(other))
    tree = run / "results-other"
    cell = next(c for c in tiny_cells() if (c.framework, c.mode, c.model, c.seed, c.threads)
                == ("torch", "eager", "mlp512", 0, 1))
    raises = spec.Cell("torch", "eager", "mlp512", "backward", "cpu", 2, 0)
    before = (run / OUT / cell.raw_path).stat().st_mtime_ns

    def pipeline(*args):
        return subprocess.run(
            [sys.executable, "-m", "snakemake", "--configfile", "other.yaml",
             "--config", "environments=venv", *args],
            cwd=run, capture_output=True, text=True, timeout=1500)

    result = pipeline("--cores", "1")
    assert result.returncode == 0, (result.stdout + result.stderr)[-6000:]
    mine = schema.read_provenance(tree / cell.raw_path)
    assert mine["status"] == "ok" and mine["workload"]["iterations"] == 5
    info = schema.read_provenance(tree / raises.raw_path)
    assert info["status"] == "failed"
    assert "RuntimeError: the job was given 1 core(s) for 2 threads" in info["message"]
    table = pd.read_csv(tree / "tables/table1_eager.csv")
    assert table["note"].str.contains("given 1 core").any()
    assert (tree / "paper/paper.pdf").read_bytes()[:4] == b"%PDF"
    assert (run / OUT / cell.raw_path).stat().st_mtime_ns == before
    assert provenance(run, cell)["workload"]["iterations"] == TINY["workload"]["iterations"]
    assert "Nothing to be done" in pipeline("--cores", "2", "-n").stdout  # a raise is kept
    # The timing job alone: the tables and the paper of a failed cell were checked above.
    result = pipeline("--cores", "2", "--forcerun", f"results-other/{raises.raw_path}",
                      "--until", "measure")
    assert result.returncode == 0, (result.stdout + result.stderr)[-6000:]
    assert schema.read_provenance(tree / raises.raw_path)["status"] == "ok"
    assert "Nothing to be done" in snakemake(run, "-n", "--config", "environments=venv").log


# One fault of each kind of check, to show that common.smk makes them before any job;
# tests/test_run_config.py checks every fault of adbench/config.py without Snakemake.
@pytest.mark.parametrize(
    "override, named",
    [
        ({"environments": "docker"}, "'docker' is not one of"),  # the schema
        ({"grid": {"frameworks": {"caffe": ["eager"]}}}, "unknown framework 'caffe'"),  # spec
        ({"grid": {"threads": [1, 64]}}, "grid[0].threads: 64 exceeds the"),  # the machine
        ({"results": "report/published"}, "results: 'report/published' lies inside report/"),
        # This Python has PyTorch and TensorFlow only.
        ({"environments": "current", "grid": {"frameworks": {"mxnet": ["eager"]}}},
         "environments: current, but this Python"),
    ],
)
def test_bad_config_stops_before_any_job_naming_the_fault(tmp_path, override, named):
    workdir = fresh_checkout(tmp_path)
    config = yaml.safe_load((workdir / TEST_CONFIG).read_text())
    for key, value in override.items():
        target = config.get(key)
        if isinstance(target, list):  # a list of grids: the first one gets the fault
            target = target[0]
        if isinstance(value, dict) and isinstance(target, dict):
            target.update(value)
        else:
            config[key] = value
    (workdir / "bad.yaml").write_text(yaml.safe_dump(config))
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--configfile", "bad.yaml"],
        cwd=workdir, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode != 0
    assert named in result.stdout + result.stderr
    assert not any(workdir.glob("results*"))


def printed_items(text: str) -> dict:
    """'a=1, b=x' as Snakemake prints a job's wildcards and resources."""
    return dict(kv.split("=", 1) for kv in text.split(", "))


def planned_measure_jobs(log: str) -> list[dict]:
    """A dry run's timing jobs: their wildcards, resources and threads as printed."""
    jobs = []
    for block in log.split("\nrule measure:")[1:]:
        fields = dict(line.strip().split(": ", 1) for line in block.split("\n\n")[0].splitlines()
                      if ": " in line and line.startswith("    "))
        jobs.append({"cell": printed_items(fields["wildcards"]),
                     "resources": printed_items(fields["resources"]),
                     "threads": int(fields.get("threads", 1))})
    return jobs


@pytest.mark.parametrize("attempt", [1, 2])
@pytest.mark.parametrize(
    "devices, threads, per_model",
    [(["cpu", "cuda"], [1, 2], {"rnn_cell": {"budget_s": 150, "mem_mb": 6000}}),
     (["cuda"], [2], {})],
    ids=["mixed", "uniform"])
def test_each_timing_job_asks_for_what_its_cell_needs(tmp_path, devices, threads, per_model,
                                                      attempt):
    """Threads, GPU, memory, runtime and budget per cell, from the config, whether cells
    differ in them or not (a function per job, or one value); memory and runtime times the
    attempt on retries (--attempt is the retry number Snakemake gives a job), the budget not:
    a retry gets more from the scheduler, the experiment stays the same. A GPU only for cuda
    cells."""
    workdir = fresh_checkout(tmp_path)
    grid = {"devices": devices, "threads": threads}
    result = snakemake(workdir, "-n", "--cores", "2", "--attempt", str(attempt), "--config",
                       f"every_grid={json.dumps(grid)}",
                       f"workload={{models: {json.dumps(per_model)}}}")
    assert result.returncode == 0, result.log[-3000:]
    jobs = planned_measure_jobs(result.log)
    assert {(j["cell"]["device"], j["cell"]["threads"]) for j in jobs} == {
        (d, str(t)) for d in devices for t in threads}, jobs
    # the walltime asked for is the cell's estimate (adbench.config.Walltimes), as the plan
    # command computes it, scaled by the attempt
    walltimes = plan_campaign.load_run(
        [str(workdir / TEST_CONFIG)], working_dir=workdir,
        config_entries=[f"every_grid={json.dumps(grid)}",
                        f"workload={{models: {json.dumps(per_model)}}}"]).walltimes
    for job in jobs:
        cell, given = job["cell"], job["resources"]
        budget = per_model.get(cell["model"], {}).get("budget_s", 3600)
        mem = per_model.get(cell["model"], {}).get("mem_mb", 4000)
        assert job["threads"] == int(cell["threads"]), job
        assert given["gpu"] == str(int(cell["device"] == "cuda")), job
        assert float(given["budget_s"]) == budget, job
        assert int(given["runtime"]) == walltimes.runtime_min(cell, attempt), job
        assert int(given["runtime"]) <= (math.ceil(budget / 60) + 1) * attempt, job
        assert int(given["mem_mb"]) == mem * attempt, job


@pytest.mark.parametrize(
    "override, named",
    [
        # A grid on the command line replaces the file's grids: the message shows the way.
        ("grid={seeds: [0, 1]}", "--config 'every_grid={seeds: [0, 1, 2]}'"),
        ("every_grid={seeds: [zero]}", "'zero' is not of type 'integer'"),
        ("workload={models: {mlp512: {iterations: -3}}}", "-3 is less than the minimum"),
    ],
)
def test_bad_command_line_overrides_name_the_fault(tmp_path, override, named):
    workdir = fresh_checkout(tmp_path)
    result = snakemake(workdir, "-n", "--config", override)
    assert result.returncode != 0
    assert named in result.log, result.log[-3000:]
    assert not any(workdir.glob("results*"))


def test_command_line_overrides_are_read_by_the_schema(tmp_path):
    """--config values arrive as strings; numbers where the schema wants numbers."""
    workdir = fresh_checkout(tmp_path)
    result = snakemake(workdir, "-n", "--config", "environments=venv",
                       "every_grid={seeds: [0, 2]}", "workload={iterations: 7}")
    assert result.returncode == 0, result.log[-3000:]
    assert "seed=2" in result.log and not re.search(r"seed=1\b", result.log)
    assert "--iterations 7 " in result.log


def shell_commands(log: str) -> dict[str, list[str]]:
    """Each rule's shell commands in a dry run's log (the profile prints them)."""
    commands, rule = {}, None
    for line in log.splitlines():
        if found := re.match(r"(?:local)?rule (\w+):", line):
            rule = found.group(1)
        elif line.startswith("Shell command: ") and rule:
            commands.setdefault(rule, []).append(line.removeprefix("Shell command: "))
    return commands


def test_the_analysis_reads_every_cell_from_a_list_not_from_its_command_line(tmp_path):
    """A program's command line holds 2 MB (execve: "Argument list too long"), 25,000 cells'
    paths at 75 bytes each: the shell's own printf (no program, no limit) writes the paths to
    a list the program reads (@FILE)."""
    workdir = fresh_checkout(tmp_path)
    result = snakemake(workdir, "-n", "--cores", "2")
    assert result.returncode == 0, result.log[-3000:]
    commands = shell_commands(result.log)
    for rule, path_of in (("aggregate", "raw_path"), ("check_gradients", "gradient_path")):
        [command] = commands[rule]
        listing, program = command.split(" && ", 1)
        assert listing.startswith("printf '%s\\n' "), command
        for cell in tiny_cells():
            path = f"{OUT}/{getattr(cell, path_of)}"
            assert path in listing.split() and path not in program, (rule, path)


def test_lint_and_format_are_clean():
    lint = subprocess.run([sys.executable, "-m", "snakemake", "--lint"], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    fmt = subprocess.run(["snakefmt", "--check", "Snakefile", "workflow"], cwd=REPO,
                         capture_output=True, text=True, timeout=300)
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr
