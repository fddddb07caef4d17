"""End to end, faults and interruptions, each test on its own copy of the finished run
(tests/e2e.py): Ctrl-C during a timing job, a killed cell, an environment that cannot be
built, a budget too short, a cell that raises, a second config beside the first, a machine
without latexmk. Every cell ends recorded, the rest of the run goes on, and the next run
re-times exactly what must be; a host so noisy and busy that every cell is flagged still
prints a paper that passes every check."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from adbench import paper_tables, schema, spec
from e2e import (
    OUT,
    TEST_CONFIG,
    TINY,
    planned_jobs,
    private_copy,
    provenance,
    snakemake,
    tiny_cells,
)
import paper_checks

# Each test here runs the workflow again on its own copy (faults planted, an interrupted run,
# no latexmk, a second config): minutes of both cores, so in the extended tier (.ci/run).
pytestmark = [pytest.mark.e2e, pytest.mark.extended]


@pytest.fixture
def run(e2e_copy):
    """A copy of the finished run, this test's own to change."""
    return e2e_copy


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




def test_a_run_whose_every_cell_is_noisy_and_busy_prints_a_paper_that_passes_every_check(run):
    """Which cells a run flags is the host's doing: every ok cell flagged noisy and measured on
    a busy machine, each table carries the same notes under it, and two tables on one page
    carry them twice (a CI run's paper did, for one noisy cell in two tables). The tables and
    the paper made again from those cells pass every print check, the notes under every
    table that shows a flagged cell."""
    path = run / OUT / "aggregate/cells.parquet"
    cells = pd.read_parquet(path)
    ok = cells["status"] == "ok"
    cells.loc[ok, ["noisy", "busy"]] = True
    cells.loc[ok, "noise"] = cells.loc[ok, "noise"].clip(lower=0.5)
    cells.to_parquet(path)
    done = snakemake(run, "--allowed-rules", "tables", "paper", "--config", "environments=venv",
                     "--cores", "2", f"{OUT}/paper/paper.pdf")
    assert done.returncode == 0, done.log[-4000:]
    assert sorted(planned_jobs(done.log)) == ["paper", "tables"], done.log
    tex = (run / OUT / "paper/paper.tex").read_text()
    assert tex.count(paper_tables.BUSY) >= 2 and tex.count("noisy in") >= 2
    assert paper_checks.problems(paper_checks.Paper.read(run / OUT / "paper/paper.pdf")) == {}


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


def test_faults_of_every_kind_are_recorded_and_the_next_run_retimes_only_theirs(e2e_run,
                                                                                tmp_path):
    """Three faults in one run, each confined to its cells: a timing job killed by SIGKILL, an
    environment that cannot be built (a pin naming a wheel that does not exist: no index is
    asked), and a budget (0.05 s, a per-model override from the command line) shorter than
    Python takes to start. The run and the paper finish, each cell is recorded with what
    happened, the tables say so; once the causes are gone, the failed cells are re-timed
    and nothing else, and a timeout is kept until it is re-timed on request (docs/outputs.md)."""
    run = private_copy(e2e_run, tmp_path / "run", own_envs=("autograd",))  # rebuilt below
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


