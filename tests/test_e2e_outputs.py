"""End to end, reading one finished run of the tiny config (tests/e2e.py, shared by the
test workers): every output, the statistics and verdicts from the run's own data, Snakemake's
report, the paper, the raw contract, the tables, the derivative check, the protocol table.
Nothing here changes the run."""

from __future__ import annotations

import re
import subprocess
import zipfile
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from adbench import reference, report_spec, schema, spec, tables
from e2e import OUT, REPO, TINY, provenance, snakemake, tiny_cells
import paper_checks

pytestmark = pytest.mark.e2e


@pytest.fixture
def run(e2e_run):
    """The shared finished run: read, never changed."""
    return e2e_run


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
    assert set(claims["verdict"]) <= {"supported", "contradicted", "mixed", "equivalent",
                                      "inconclusive", "one process", "not measured"}
    # The tiny grid has the MLP in both torch modes over two seeds: the JIT claim is judged
    # on two processes; the other tasks ran one seed, so their comparisons are not judged.
    jit = claims.set_index("claim").loc["jit_outperforms"]
    assert jit["verdict"] not in ("not measured", "one process") and jit["n_processes"] == 2
    comparisons = pd.read_csv(run / OUT / "verdicts/comparisons.csv")
    single = comparisons[comparisons["n_processes"] == 1]
    assert len(single) and set(single["verdict"]) == {"one process"}
    groups = pd.read_csv(run / OUT / "verdicts/groups.csv")
    # a group per measured (machine, device, threads, pair) of a claim: none for a claim whose
    # conditions this grid did not run
    measured = claims[claims["verdict"] != "not measured"]
    assert set(groups["claim"]) == set(measured["claim"])
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
    listed = words.split("The modes this run measured:")[1].split("The tasks")[0]
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
        assert (rows["phase"] == "warmup").sum() == workload["warmup"]
        # A precision stop may end before the most iterations, never before its fewest.
        measured, rule = (rows["phase"] != "warmup").sum(), info["workload"]
        if info["stop_reason"] in ("precision", "budget"):
            assert rule["min_iterations"] <= measured <= workload["iterations"], (cell, info)
        else:
            assert info["stop_reason"] in ("max_count", "fixed"), (cell, info["stop_reason"])
            assert measured == workload["iterations"], cell
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
    """Each row of the paper's protocol table (seeds, processes per condition, warm-up,
    measured iterations per task and models, by the models' labels) is what cells.parquet
    records for those cells."""
    cells = pd.read_parquet(run / OUT / "aggregate/cells.parquet")
    ok = cells[cells["status"] == "ok"]
    tex = (run / OUT / "paper/paper.tex").read_text()
    table = tex.split("\\label{tab:protocol}", 1)[1].split("\\endfoot", 1)[1].split(
        "\\end{longtable}", 1)[0]
    rows = [line.replace("\\tabularnewline", "").strip().split(" & ")
            for line in table.splitlines() if " & " in line]
    labels = {report_spec.task_label(t): t for t in spec.TASKS}
    models_by_label = {report_spec.model_label(m): m for m in spec.MODELS}
    covered = set()
    for task_label, models, seeds, processes, warmup, iterations, *_ in rows:
        for model in (models_by_label[m] for m in re.findall(r"\[[\d, ]+\]|[^,\s][^,]*",
                                                             models)):
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


def test_the_real_paper_passes_every_print_check(run):
    """Issue 40's checks of a compiled paper (tests/paper_checks.py), on the tiny config's
    real run: every check of paper_checks.all_checks, and commands that plan when copied."""
    paper = paper_checks.Paper.read(run / OUT / "paper/paper.pdf")
    assert paper_checks.problems(paper) == {}
    found = paper_checks.commands(paper)
    assert any("--configfile .test/config.yaml" in c for c in found)
    for command in (c for c in found if "--cores" in c and "paper.yaml" not in c):
        done = paper_checks.dry_run(command)
        assert done.returncode == 0, f"{command}\n{done.stderr[-2000:]}"


def test_pipeline_cost_splits_every_timing_job_of_the_run(run):
    """benchmarks/pipeline_cost.py on the finished run: every timing job has its wall time
    (run_cell.py's log line) and phases that fit inside it."""
    import pipeline_cost  # benchmarks/, on the path through e2e.py

    jobs = pipeline_cost.job_costs(run)
    assert len(jobs) == len(tiny_cells())
    assert (jobs["job_s"] > 0).all()
    inside = jobs[["startup_s", "import_s", "prepare_s", "timed_loop_s"]]
    assert (inside.fillna(0) >= 0).all().all()
    # The phases are parts of the job: what is left (the supervisor, writing) is not negative
    # beyond the /proc clock's 10 ms ticks.
    assert (jobs["rest_s"] > -0.05).all(), jobs[["job_s", "rest_s"]]
    summary = pipeline_cost.report(run, wall_s=None)
    assert summary["timing_jobs"] == len(jobs)
    assert sum(summary["timing_jobs_by_status"].values()) == len(jobs)
