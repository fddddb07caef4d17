"""Cluster tier: the workflow submitted through profiles/slurm to a real SLURM on localhost.

tests/slurm/localhost.sh starts slurmctld, slurmd and munged from Debian's packages (./setup.sh
--test installs them, as root): one node in two partitions, `cpu` and `gpu`, with one GPU
declared for scheduling only (a gres gpu:fake:1 backed by /dev/null: it proves the request and
the scheduling, not CUDA). tests/slurm/profile is that cluster's site profile, passed with
--profile as a user passes theirs (profiles/slurm/site-example). One run of a small mixed
config covers: every cell run in a SLURM job (its id in the Parquet provenance), the cells of
one (framework, device) packed into one job (profiles/slurm), the tables and the PDF built on
the submit host; every submitted job (packed timing and reference) with the site's settings,
by device: CPU jobs in `cpu` asking for no GPU, the CUDA job in `gpu` asking for one GPU of
the site's model, its constraint and its cores, the account, the QoS and a key of the site's
own default-resources on every job; each packed job's time limit the sum of its cells'
estimates (adbench.config.Walltimes), not their budgets; a cell that fails recorded `failed`
with its log while the rest run; and the CUDA cell, whose framework (torch's CPU build) sees
no GPU on the fake one, recorded `failed` with the framework's words and planned again,
alone, by the next run (a dry run after the first). What SLURM recorded is read with
`scontrol show job` (no accounting database here, so no sacct); the QoS, which SLURM drops
without one, from the sbatch calls themselves (an `sbatch` first on PATH records each call
and passes it on). A second run has its packed job of three cells cancelled by SLURM after
the first cell finished: the finished cell is kept, the job fails with SLURM's log, and the
next run submits only the other two, the one cut off asking for its budget's walltime. The
daemons are stopped by PID afterwards, also when a test fails.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from adbench import config as run_config
from adbench import schema, spec

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import pipeline_cost  # noqa: E402  (a fresh copy of the checkout)
import plan_campaign  # noqa: E402  (workflow/scripts: the config as the workflow reads it)

pytestmark = [pytest.mark.e2e, pytest.mark.slurm]
REPO = Path(__file__).resolve().parents[1]
CLUSTER = REPO / "tests" / "slurm" / "localhost.sh"
OUT = "results-slurm"
CONFIG = {
    # The test's Python has torch (setup.sh --test); SLURM jobs on this node use it too.
    "environments": "current",
    "results": OUT,
    "grid": [
        {"frameworks": {"torch": ["eager", "script"]}, "models": ["mlp512"],
         "tasks": ["backward"], "seeds": [0, 1]},
        # No CUDA here: the cell asks SLURM for the fake GPU and its framework (torch's CPU
        # build) sees none: failed, and re-timed by the next run.
        {"frameworks": {"torch": ["eager"]}, "models": ["mlp512"], "tasks": ["backward"],
         "devices": ["cuda"], "seeds": [0]},
        # Asks for 2 threads; the run grants measure jobs 1 (--set-threads): it fails.
        {"frameworks": {"torch": ["eager"]}, "models": ["mlp512"], "tasks": ["backward"],
         "threads": [2], "seeds": [0]},
    ],
    "workload": {"warmup": 2, "iterations": 10, "models": {"mlp512": {"n_samples": 1280}}},
}
# The cluster's site profile (tests/slurm/profile/config.yaml: its partitions, GPU model,
# account, QoS, constraint and polling); outputs show up at once on one machine.
SITE = ["--profile", "tests/slurm/profile", "--latency-wait", "5"]
SITE_CLUSTER = yaml.safe_load((REPO / "tests" / "slurm" / "profile" / "config.yaml")
                              .read_text())["config"]["cluster"]
# Records each sbatch call (arguments and the job id SLURM returns) and passes it on.
SBATCH_SHIM = """#!{python}
import json, os, subprocess, sys
done = subprocess.run([{sbatch!r}, *sys.argv[1:]], stdout=subprocess.PIPE, text=True)
with open(os.environ["ADBENCH_SBATCH_CALLS"], "a") as calls:
    calls.write(json.dumps({{"job_id": done.stdout.strip(), "args": sys.argv[1:]}}) + "\\n")
sys.stdout.write(done.stdout)
sys.exit(done.returncode)
"""


def cluster(command: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(CLUSTER), command], capture_output=True, text=True,
                          timeout=120)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture(scope="module")
def slurm():
    """A running cluster; afterwards its daemons are stopped by PID and must be gone, and
    so must the config files its start wrote."""
    if os.geteuid() != 0:
        pytest.fail("the SLURM tests start daemons as root (CI runs as root); "
                    "deselect them with -m 'not slurm'")
    started = cluster("start")
    pids = [int(p) for p in cluster("pids").stdout.split()]
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        assert len(pids) == 3, pids  # munged, slurmctld, slurmd
        yield pids
    finally:
        cluster("stop")
        left = [pid for pid in pids if alive(pid)]
        assert not left, f"SLURM daemons still running after stop: {left}"
        # A slurm.conf left behind naming a controller that is down costs every later
        # snakemake command 9 s (tests/slurm/localhost.sh).
        configs = [f for f in ("/etc/slurm/slurm.conf", "/etc/slurm/gres.conf")
                   if os.path.exists(f)]
        assert not configs, f"left behind after stop: {configs}"


def recording_sbatch(folder: Path) -> dict:
    """An environment whose `sbatch` records its calls in folder/sbatch.jsonl."""
    (folder / "bin").mkdir()
    shim = folder / "bin" / "sbatch"
    shim.write_text(SBATCH_SHIM.format(python=sys.executable, sbatch=shutil.which("sbatch")))
    shim.chmod(0o755)
    return {**os.environ, "PATH": f"{shim.parent}{os.pathsep}{os.environ['PATH']}",
            "ADBENCH_SBATCH_CALLS": str(folder / "sbatch.jsonl")}


@pytest.fixture(scope="module")
def run(slurm, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("slurm-checkout")
    pipeline_cost.fresh_copy(workdir, cold=True)
    (workdir / "slurm.yaml").write_text(yaml.safe_dump(CONFIG))
    env = recording_sbatch(tmp_path_factory.mktemp("sbatch"))
    cmd = ["timeout", "-k", "30", "900", sys.executable, "-m", "snakemake",
           "--workflow-profile", "profiles/slurm", "--configfile", "slurm.yaml",
           *SITE, "--set-threads", "measure=1"]
    result = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, timeout=1000,
                            env=env)
    log = f"$ {' '.join(cmd)}\n{result.stdout}\n{result.stderr}"
    assert result.returncode == 0, log[-8000:]
    calls = [json.loads(line) for line in
             Path(env["ADBENCH_SBATCH_CALLS"]).read_text().splitlines()]
    # What the next run would submit: a dry run (it plans, submits nothing).
    again = subprocess.run([*cmd[4:], "-n"], cwd=workdir, capture_output=True, text=True,
                           timeout=300)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    return workdir, log, calls, again.stdout + again.stderr


def cells_of(workdir: Path) -> pd.DataFrame:
    return pd.read_parquet(workdir / OUT / "aggregate" / "cells.parquet")


def provenance(workdir: Path) -> list[dict]:
    return [schema.read_provenance(str(p)) for p in sorted((workdir / OUT / "raw").rglob(
        "*.parquet"))]


def test_every_cell_ran_as_a_slurm_job_and_the_paper_was_built(run):
    workdir, log, _, _ = run
    infos = provenance(workdir)
    assert len(infos) == 6, log[-8000:]
    assert all(info["allocation"]["scheduler"] == "slurm" for info in infos), infos
    # packed (profiles/slurm): the cells of one (framework, device) share one SLURM job
    job_ids = {device: {info["allocation"]["job_id"] for info in infos
                        if info["cell"]["device"] == device} for device in ("cpu", "cuda")}
    assert all(len(ids) == 1 and all(ids) for ids in job_ids.values()), job_ids
    assert job_ids["cpu"] != job_ids["cuda"], job_ids
    for path in ("tables/table1_eager.csv", "verdicts/claims.csv", "paper/paper.pdf"):
        assert (workdir / OUT / path).stat().st_size > 0, path
    # the analysis ran on the submit host (localrules): Snakemake says so for each local job
    assert "localrule aggregate:" in log and "localrule paper:" in log, log[-3000:]


def scontrol(job_id: str) -> dict[str, str]:
    """What SLURM recorded of a job (it keeps a finished one MinJobAge, 600 s): KEY=VALUE."""
    out = subprocess.run(["scontrol", "-o", "show", "job", str(job_id)], capture_output=True,
                         text=True, timeout=30).stdout
    return dict(item.split("=", 1) for item in out.split() if "=" in item)


def options(args: list[str]) -> list[str]:
    """An sbatch call's options, without --wrap's command (the job's own snakemake line)."""
    return [a for a in args if not a.startswith("--wrap")]


def measure_blocks(log: str) -> list[dict[str, str]]:
    """Each timing job Snakemake printed (alone, or indented in a packed job's listing):
    its wildcards and resources, as printed."""
    return [dict(re.findall(r"^\s+(wildcards|resources): (.*)$", block, re.M))
            for block in re.findall(r"rule measure:\n((?:[ \t]+\S.*\n?)+)", log)]


def minutes_of(resources: str) -> int:
    return int(re.search(r"\bruntime=(\d+)", resources).group(1))


def walltimes_before(workdir: Path, config: str = "slurm.yaml") -> run_config.Walltimes:
    """The walltimes the run was submitted with: its results tree was empty then (the cost
    model's estimates, with the config's margin and floor)."""
    run = plan_campaign.load_run([str(workdir / config)],
                                 str(workdir / "tests" / "slurm" / "profile"), working_dir=workdir)
    return run_config.Walltimes(run.workloads, run.config["cluster"], workdir / "empty")


def test_every_job_carries_the_sites_settings_by_device(run):
    workdir, log, calls, _ = run
    walltimes = walltimes_before(workdir)
    jobs = {}
    for call in calls:
        args = options(call["args"])
        comment = args[args.index("--comment") + 1]
        jobs[call["job_id"]] = (comment, args, scontrol(call["job_id"]))
    rules = sorted(comment.split("_wildcards_")[0] for comment, _, _ in jobs.values())
    # 6 cells in 2 packed jobs (profiles/slurm: a job for each (framework, device), here one
    # CPU and one CUDA), 2 references (mlp512's gradients, seeds 0 and 1), the matmul peaks
    # where the CPU cells and the CUDA cell run: nothing else
    assert rules == ["rule_cells_cpu_torch_measure", "rule_cells_cuda_torch_measure",
                     "rule_matmul_peak", "rule_matmul_peak_cuda", "rule_reference",
                     "rule_reference"], (rules, log[-3000:])
    cells_in = {}
    for info in provenance(workdir):
        cells_in.setdefault(info["allocation"]["job_id"], []).append(spec.Cell(**info["cell"]))
    for job_id, (comment, args, job) in jobs.items():
        cuda = comment.startswith(("rule_cells_cuda_", "rule_matmul_peak_cuda"))
        # by device: the partition, the GPU (of the site's model) and the constraint
        assert job["Partition"] == ("gpu" if cuda else "cpu"), (comment, job)
        if cuda:
            assert job.get("TresPerJob") == f"gres:gpu:{SITE_CLUSTER['gpu_model']}:1", job
            assert job["Features"] == SITE_CLUSTER["gpu_constraint"], job
            # cuda_cpus cores, though the run grants the cell's 1 thread (--set-threads)
            assert job["NumCPUs"] == str(SITE_CLUSTER["cuda_cpus"]), job
        else:
            assert "gpu" not in job.get("TresPerJob", ""), (comment, job)
            assert not any(a.startswith(("--gpus", "--gres")) for a in args), args
            assert job["Features"] == "(null)", job
        # every job: the account (recorded, not validated: no accounting database here)...
        assert job["Account"] == SITE_CLUSTER["account"], job
        # ... the QoS (SLURM drops a QoS without an accounting database: its sbatch call)
        assert f"--qos={SITE_CLUSTER['qos']}" in args, args
        # ... and the site's own default-resources key (slurm_extra: --nice=7)
        assert "--nice=7" in args and job["Nice"] == "7", (args, job)
        # a packed job's time limit: the sum of its cells' estimates, each far below the 61
        # minutes of its budget
        if comment.startswith("rule_cells_"):
            each = [walltimes.of(cell).minutes for cell in cells_in[job_id]]
            total = sum(each)
            assert max(each) < 61 and job["TimeLimit"] == (
                f"{total // 60:02d}:{total % 60:02d}:00"), (each, job)
        else:  # a reference job (one float64 iteration's estimate) or the peak: the floor
            assert job["TimeLimit"] == f"00:{walltimes.floor_min:02d}:00", job
    # the CUDA cell was given the (fake) GPU
    infos = {info["cell"]["device"]: info for info in provenance(workdir)}
    assert infos["cuda"]["allocation"]["gpus"], infos["cuda"]["allocation"]


def test_the_cuda_cell_that_sees_no_gpu_fails_and_the_next_run_resubmits_it(run):
    """The fake GPU is no CUDA device, and this Python's torch a CPU build: the cell is
    `failed` with torch's own words (never `unsupported`), and the next run plans it again,
    alone: no ok cell, no cell failed for another reason."""
    workdir, _, _, again = run
    cells = cells_of(workdir)
    cuda = cells[cells["device"] == "cuda"]
    assert list(cuda["status"]) == ["failed"], cuda[["status", "message"]]
    assert "Torch not compiled with CUDA enabled" in cuda["message"].iloc[0]
    planned = [block["wildcards"] for block in measure_blocks(again)]
    assert len(planned) == 1 and "device=cuda" in planned[0], (planned, again[-3000:])


def test_a_failed_cell_is_recorded_with_its_log_and_the_rest_ran(run):
    workdir, _, _, _ = run
    cells = cells_of(workdir)
    failed = cells[(cells["status"] == "failed") & (cells["device"] == "cpu")]
    assert list(failed["threads"]) == [2]
    log = workdir / failed["log"].iloc[0]
    assert log.exists() and "core" in failed["message"].iloc[0]
    assert (cells.loc[cells["device"] == "cpu", "status"] == "ok").sum() == 4
    table = (workdir / OUT / "tables" / "table1_eager.md").read_text()
    assert str(failed["log"].iloc[0]) in table


# A packed job SLURM itself ends midway (scancel here; a node failure or a time limit alike):
# its three cells are long enough (a few seconds each) to be caught between two of them.
LOST_OUT = "results-slurm-lost"
LOST_CONFIG = {
    "environments": "current",
    "results": LOST_OUT,
    "grid": [{"frameworks": {"torch": ["eager"]}, "models": ["mlp512"], "tasks": ["backward"],
              "seeds": [0, 1, 2]}],
    "workload": {"warmup": 2, "iterations": 1500, "models": {"mlp512": {"n_samples": 1280}}},
}


def running_packed_jobs() -> list[tuple[str, str]]:
    """(job id, comment) of the RUNNING packed timing jobs; the plugin's comment names the
    group."""
    out = subprocess.run(["squeue", "-h", "-t", "RUNNING", "-o", "%i|%k"], capture_output=True,
                         text=True, timeout=30).stdout
    return [tuple(line.split("|", 1)) for line in out.splitlines() if "|rule_cells_" in line]


def cell_files(workdir: Path, folder: str, suffix: str) -> set[str]:
    """The seeds of the cells with a file in `folder` of the lost run's tree (a log: one with
    a line, since Snakemake leaves an empty one for a cell that never started)."""
    return {p.stem for p in (workdir / LOST_OUT / folder).rglob(f"*{suffix}")
            if suffix != ".log" or p.stat().st_size}


@pytest.fixture(scope="module")
def lost_job(slurm, tmp_path_factory):
    """A run whose packed timing job (its 3 cells) is cancelled by SLURM once one cell has
    finished and the next has started, then the run that resumes."""
    workdir = tmp_path_factory.mktemp("slurm-lost")
    pipeline_cost.fresh_copy(workdir, cold=True)
    (workdir / "lost.yaml").write_text(yaml.safe_dump(LOST_CONFIG))
    cmd = [sys.executable, "-m", "snakemake", "--workflow-profile", "profiles/slurm",
           "--configfile", "lost.yaml", *SITE]
    job = subprocess.Popen(cmd, cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)
    cancelled, deadline = None, time.monotonic() + 600
    while job.poll() is None and cancelled is None and time.monotonic() < deadline:
        running = running_packed_jobs()
        finished = cell_files(workdir, "raw", ".parquet")
        started = cell_files(workdir, "logs/measure", ".log")
        if running and finished and started - finished:
            subprocess.run(["scancel", running[0][0]], check=True, timeout=30)
            cancelled = running[0]
        time.sleep(0.2)
    log = job.communicate(timeout=900)[0]
    files = {folder: cell_files(workdir, folder, suffix) for folder, suffix in (
        ("raw", ".parquet"), ("gradients", ".npz"), ("logs/measure", ".log"))}
    # Only the timing jobs: what the resumed run submits is the point, the paper is the main
    # run's test.
    resumed = subprocess.run(cmd + ["--until", "measure"], cwd=workdir, capture_output=True,
                             text=True, timeout=900)
    return workdir, cancelled, job.returncode, log, files, resumed


def test_a_packed_job_slurm_ends_keeps_its_finished_cells_and_the_next_run_submits_the_rest(
        lost_job):
    workdir, cancelled, returncode, log, files, resumed = lost_job
    finished, started = files["raw"], files["logs/measure"]
    assert cancelled, log[-6000:]
    job_id, comment = cancelled
    # Reported as failed, with SLURM's log of the job; --keep-going (the profile) ran the rest.
    assert returncode != 0, log[-6000:]
    assert "Error in group cells_cpu_torch" in log and f"{job_id}.log" in log, log[-6000:]
    # The cells it finished are kept (keep-incomplete in profiles/slurm), with both files.
    assert 1 <= len(finished) < 3, (finished, log[-6000:])
    assert files["gradients"] == finished and len(started) == len(finished) + 1, files
    # The next run submits only the others (one packed job). The cell
    # the job was running asks for its budget's walltime (3600 s: 61 min), since its job was
    # ended (adbench.config.Walltimes); one that had not started, for its estimate.
    resumed_log = resumed.stdout + resumed.stderr
    assert resumed.returncode == 0, resumed_log[-6000:]
    blocks = measure_blocks(resumed_log)
    seeds = {re.search(r"seed=(\d+)", b["wildcards"]).group(1) for b in blocks}
    assert len(blocks) == 3 - len(finished), resumed_log[-6000:]
    assert {f"seed{s}" for s in seeds} == {"seed0", "seed1", "seed2"} - finished, blocks
    estimate = walltimes_before(workdir, "lost.yaml").of(spec.Cell(
        "torch", "eager", "mlp512", "backward", "cpu", 1, 0)).minutes
    for block in blocks:
        seed = re.search(r"seed=(\d+)", block["wildcards"]).group(1)
        expected = 61 if f"seed{seed}" in started else estimate
        assert minutes_of(block["resources"]) == expected, (block, started)
    assert len(cell_files(workdir, "raw", ".parquet")) == 3  # every cell measured now
