"""Cluster tier: the workflow submitted through profiles/slurm to a real SLURM on localhost.

tests/slurm/localhost.sh starts slurmctld, slurmd and munged from Debian's packages (./setup.sh
--test installs them, as root): one node in two partitions, `cpu` and `gpu`, with two GPUs
declared for scheduling only (gres gpu:fake:1 and gpu:fake-sxm4_1g:1, backed by /dev/null and
/dev/zero: they prove the request and the scheduling, not CUDA). tests/slurm/site.yaml is that
cluster's site file (ADBENCH_SITE) and tests/slurm/profile its site profile, as a user passes
theirs (profiles/slurm/site-example). A run of a small CPU config covers: every cell run in a
SLURM job (its id in the Parquet provenance), the cells of one (framework, device) in one
pack, the float64 references, the tables and the PDF built on the submit host; every
submitted job with the site's settings (partition, account, QoS, sbatch extras, an explicit
memory request) and each pack's time limit its cells' estimates with one floor
(adbench.cluster.Packs), not their budgets; a cell that fails recorded `failed` with its log
while the rest run. A run of CUDA cells on the fake GPU of the hyphenated type (asked for as
--gpus-per-node), in the GPU partition with the site's constraint and cores: torch's CPU build
sees no GPU, the job exits non-zero after writing that cell's record, SLURM records it failed,
its log is kept, and the next run plans its cells again. Each GPU request style (gpus, gres)
goes to SLURM as the site writes its type. A run whose packed job SLURM cancels keeps its
finished cells and submits only the rest; a controller killed while its job runs, restarted,
submits no cell twice; one sent SIGTERM cancels its pack and resumes. The cluster has a site's
accounting (slurmdbd on MariaDB; the plugin polls squeue) and memory enforcement (a step above
its job's --mem is killed): a pack killed for memory is recorded so by sacct, and the next run
times its cell. What SLURM recorded is read with `scontrol show job` and `sacct`; the QoS
also from the sbatch calls themselves (an `sbatch` first on PATH records each call and passes
it on). The daemons are stopped by PID afterwards, also when a test fails.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
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

# A single-node cluster and several full runs through it: minutes of both cores, so in the
# extended tier (.ci/run runs it; `pytest -m slurm` runs these alone).
pytestmark = [pytest.mark.e2e, pytest.mark.slurm, pytest.mark.extended]
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
        # Asks for 2 threads; the run grants measure jobs 1 (--set-threads): it fails.
        {"frameworks": {"torch": ["eager"]}, "models": ["mlp512"], "tasks": ["backward"],
         "threads": [2], "seeds": [0]},
    ],
    "workload": {"warmup": 2, "iterations": 10, "models": {"mlp512": {"n_samples": 1280}}},
}
# No CUDA here: the cells ask SLURM for the fake GPU and their framework (torch's CPU build)
# sees none.
CUDA_OUT = "results-slurm-cuda"
CUDA_CONFIG = {**CONFIG, "results": CUDA_OUT, "grid": [
    {"frameworks": {"torch": ["eager"]}, "models": ["mlp512"], "tasks": ["backward"],
     "devices": ["cuda"], "seeds": [0, 1]}]}
# The cluster's site file (its partitions, GPU, account, QoS, constraint, sbatch extras) and
# site profile (polling, tmpdir); outputs show up at once on one machine.
SITE_FILE = REPO / "tests" / "slurm" / "site.yaml"
SITE = ["--profile", "tests/slurm/profile", "--latency-wait", "5"]
SITE_CLUSTER = yaml.safe_load(SITE_FILE.read_text())
# A run with CUDA cells on a site naming its GPU type writes to that type's own tree.
CUDA_TREE = run_config.cluster_settings.machine_tree(CUDA_OUT, SITE_CLUSTER, cuda=True)
# Records each sbatch call (arguments and the job id SLURM returns) and passes it on.
SBATCH_SHIM = """#!{python}
import json, os, subprocess, sys
done = subprocess.run([{sbatch!r}, *sys.argv[1:]], stdout=subprocess.PIPE, text=True)
with open(os.environ["ADBENCH_SBATCH_CALLS"], "a") as calls:
    calls.write(json.dumps({{"job_id": done.stdout.strip(), "args": sys.argv[1:]}}) + "\\n")
sys.stdout.write(done.stdout)
sys.exit(done.returncode)
"""


def site_env(workdir: Path, **extra) -> dict:
    return {**os.environ, "ADBENCH_SITE": str(workdir / "tests" / "slurm" / "site.yaml"),
            **extra}


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
        assert len(pids) == 5, pids  # munged, mariadbd, slurmdbd, slurmctld, slurmd
        yield pids
    finally:
        cluster("stop")
        left = [pid for pid in pids if alive(pid)]
        assert not left, f"SLURM daemons still running after stop: {left}"
        # A slurm.conf left behind naming a controller that is down costs every later
        # snakemake command 9 s (tests/slurm/localhost.sh).
        configs = [f for f in ("/etc/slurm/slurm.conf", "/etc/slurm/gres.conf",
                               "/etc/slurm/slurmdbd.conf") if os.path.exists(f)]
        assert not configs, f"left behind after stop: {configs}"


def recording_sbatch(folder: Path, env: dict) -> dict:
    """An environment whose `sbatch` records its calls in folder/sbatch.jsonl."""
    (folder / "bin").mkdir(parents=True)
    shim = folder / "bin" / "sbatch"
    shim.write_text(SBATCH_SHIM.format(python=sys.executable, sbatch=shutil.which("sbatch")))
    shim.chmod(0o755)
    return {**env, "PATH": f"{shim.parent}{os.pathsep}{env['PATH']}",
            "ADBENCH_SBATCH_CALLS": str(folder / "sbatch.jsonl")}


def sbatch_calls(env: dict) -> list[dict]:
    path = Path(env["ADBENCH_SBATCH_CALLS"])
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def snakemake_cmd(config: str, *extra: str) -> list[str]:
    return ["timeout", "-k", "30", "900", sys.executable, "-m", "snakemake",
            "--workflow-profile", "profiles/slurm", "--configfile", config, *SITE, *extra]


def checkout(tmp_path_factory, name: str, config: dict) -> Path:
    workdir = tmp_path_factory.mktemp(name)
    pipeline_cost.fresh_copy(workdir, cold=True)
    (workdir / f"{name}.yaml").write_text(yaml.safe_dump(config))
    return workdir


@pytest.fixture(scope="module")
def run(slurm, tmp_path_factory):
    workdir = checkout(tmp_path_factory, "slurm", CONFIG)
    env = recording_sbatch(tmp_path_factory.mktemp("sbatch"), site_env(workdir))
    cmd = snakemake_cmd("slurm.yaml", "--set-threads", "measure=1")
    result = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, timeout=1000,
                            env=env)
    log = f"$ {' '.join(cmd)}\n{result.stdout}\n{result.stderr}"
    assert result.returncode == 0, log[-8000:]
    return workdir, log, sbatch_calls(env)


def cells_of(workdir: Path, out: str = OUT) -> pd.DataFrame:
    return pd.read_parquet(workdir / out / "aggregate" / "cells.parquet")


def provenance(workdir: Path, out: str = OUT) -> list[dict]:
    return [schema.read_provenance(str(p)) for p in sorted((workdir / out / "raw").rglob(
        "*.parquet"))]


def test_every_cell_ran_as_a_slurm_job_and_the_paper_was_built(run):
    workdir, log, _ = run
    infos = provenance(workdir)
    assert len(infos) == 5, log[-8000:]
    assert all(info["allocation"]["scheduler"] == "slurm" for info in infos), infos
    # packed: the cells of one (framework, device) share one SLURM job
    assert len({info["allocation"]["job_id"] for info in infos}) == 1, infos
    for path in ("tables/table1_eager.csv", "verdicts/claims.csv", "paper/paper.pdf"):
        assert (workdir / OUT / path).stat().st_size > 0, path
    # the references and the analysis ran on the submit host (localrules): Snakemake says so
    for rule in ("reference", "aggregate", "paper"):
        assert f"localrule {rule}:" in log, (rule, log[-3000:])


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


def resource(resources: str, name: str) -> str | None:
    found = re.search(rf"\b{name}=([^,]*)", resources)
    return found.group(1) if found else None


def minutes_of(resources: str) -> int:
    return int(resource(resources, "runtime"))


def packs_before(workdir: Path, config: str) -> run_config.Packs:
    """The packs the run was submitted with: its results tree was empty then."""
    run = plan_campaign.load_run([str(workdir / config)], working_dir=workdir,
                                 site=str(workdir / "tests" / "slurm" / "site.yaml"))
    walltimes = run_config.Walltimes(run.workloads, run.config["cluster"], workdir / "empty",
                                     workdir / "no-examples")
    return run_config.Packs(walltimes, run.cells, lambda cell: True, 120, "x")


def sbatch_jobs(calls: list[dict]) -> dict[str, tuple[str, list[str], dict]]:
    jobs = {}
    for call in calls:
        args = options(call["args"])
        jobs[call["job_id"]] = (args[args.index("--comment") + 1], args, scontrol(call["job_id"]))
    return jobs


def assert_site_settings(comment: str, args: list[str], job: dict) -> None:
    """What every submitted job carries: the account and the QoS (the accounting database's,
    as SLURM records them), the site's sbatch extras (slurm_extra: --nice=7) and an explicit
    memory request."""
    assert job["Account"] == SITE_CLUSTER["account"], job
    assert f"--qos={SITE_CLUSTER['qos']}" in args and job["QOS"] == SITE_CLUSTER["qos"], job
    assert "--nice=7" in " ".join(args) and job["Nice"] == "7", (args, job)
    assert "--mem" in args, (comment, args)


def test_every_job_carries_the_sites_settings(run):
    workdir, log, calls = run
    # (the timing and peak jobs: the rules this test's subject sets resources for)
    jobs = {i: job for i, job in sbatch_jobs(calls).items()
            if job[0].startswith(("rule_pack_", "rule_matmul_peak", "rule_measure"))}
    comments = sorted(comment for comment, _, _ in jobs.values())
    # 5 cells in one pack (a CPU pack for torch, the config's cells 0 to 4) and the CPU's
    # matmul peak: nothing else
    assert len(comments) == 2 and comments[0].startswith("rule_matmul_peak"), comments
    assert comments[1].startswith("rule_pack_resultsslurm_cpu_torch_0_4"), comments
    (pack,) = packs_before(workdir, "slurm.yaml").packs
    for comment, args, job in jobs.values():
        assert job["Partition"] == "cpu", (comment, job)
        assert "gpu" not in job.get("TresPerJob", "") + job.get("TresPerNode", ""), job
        assert not any(a.startswith(("--gpus", "--gres")) for a in args), args
        assert_site_settings(comment, args, job)
        # a pack's time limit: its cells' estimates and one floor, far below their budgets
        expected = pack.minutes if comment.startswith("rule_pack_") else 5
        assert job["TimeLimit"] == f"{expected // 60:02d}:{expected % 60:02d}:00", job
    assert pack.minutes < 5 * len(pack.cells) < 61


def test_a_failed_cell_is_recorded_with_its_log_and_the_rest_ran(run):
    workdir, _, _ = run
    cells = cells_of(workdir)
    failed = cells[(cells["status"] == "failed") & (cells["device"] == "cpu")]
    assert list(failed["threads"]) == [2]
    log = workdir / failed["log"].iloc[0]
    assert log.exists() and "core" in failed["message"].iloc[0]
    assert (cells.loc[cells["device"] == "cpu", "status"] == "ok").sum() == 4
    table = (workdir / OUT / "tables" / "table1_eager.md").read_text()
    assert str(failed["log"].iloc[0]) in table


def test_a_dry_run_with_a_command_line_config_keeps_the_sites_settings(run):
    """What --config used to drop (issue 39): every job of a dry run still carries the site's
    partition, account and GPU, with cuda cells, a --config and the site profile."""
    workdir, _, _ = run
    mixed = {**CONFIG, "results": "results-mixed", "grid": CONFIG["grid"] + CUDA_CONFIG["grid"]}
    (workdir / "mixed.yaml").write_text(yaml.safe_dump(mixed))
    cmd = snakemake_cmd("mixed.yaml", "-n", "--config", "cuda_builds={torch: cu126}",
                        "workload={iterations: 12}")
    done = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, timeout=600,
                          env=site_env(workdir))
    text = done.stdout + done.stderr
    assert done.returncode == 0, text[-4000:]
    blocks = measure_blocks(text)
    assert len(blocks) == 7, text[-4000:]
    for block in blocks:
        given, cuda = block["resources"], "device=cuda" in block["wildcards"]
        assert resource(given, "slurm_partition") == ("gpu" if cuda else "cpu"), block
        assert resource(given, "slurm_account") == SITE_CLUSTER["account"], block
        assert ("--gpus-per-node=fake-sxm4_1g:1" in given) == cuda, block
    mixed_tree = run_config.cluster_settings.machine_tree("results-mixed", SITE_CLUSTER, True)
    assert mixed_tree == "results-mixed-sxm4"  # the site's GPU type names its tree
    tag = run_config.cluster_settings.tree_tag(mixed_tree)
    assert f"Group job pack_{tag}_cuda_torch_5_6" in text


# ------------------------------------------------------------------ a node with no usable GPU
@pytest.fixture(scope="module")
def cuda_run(slurm, tmp_path_factory):
    """CUDA cells on a node whose GPU their framework cannot use, then a dry run."""
    workdir = checkout(tmp_path_factory, "cuda", CUDA_CONFIG)
    env = recording_sbatch(tmp_path_factory.mktemp("sbatch-cuda"), site_env(workdir))
    cmd = snakemake_cmd("cuda.yaml", "--until", "pack")
    result = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, timeout=1000,
                            env=env)
    again = subprocess.run([*cmd[4:], "-n"], cwd=workdir, capture_output=True, text=True,
                           timeout=300, env=site_env(workdir))
    return workdir, result, sbatch_calls(env), again.stdout + again.stderr


def test_a_cuda_job_asks_for_the_sites_gpu_partition_and_type(cuda_run):
    workdir, result, calls, _ = cuda_run
    (call,) = [c for c in calls if "rule_pack_" in " ".join(c["args"])]
    comment, args, job = sbatch_jobs([call])[call["job_id"]]
    assert job["Partition"] == "gpu", job
    # a type with a hyphen, which the plugin refuses in gpu_model and gres: --gpus-per-node,
    # which SLURM records as the request --gres=gpu:<type>:1 makes
    assert f"--gpus-per-node={SITE_CLUSTER['gpu_model']}:1" in " ".join(args), args
    assert job.get("TresPerNode") == f"gres:gpu:{SITE_CLUSTER['gpu_model']}:1", job
    assert job["Features"] == SITE_CLUSTER["gpu_constraint"], job
    assert job["NumCPUs"] == str(SITE_CLUSTER["cuda_cpus"]), job
    assert_site_settings(comment, args, job)


def test_a_job_whose_gpu_cannot_be_used_fails_after_writing_the_record(cuda_run):
    """torch's CPU build on the fake GPU: the cell is `failed` with torch's words, to be
    re-timed; the job exits non-zero once that record is written, so SLURM records a failed
    job, Snakemake reports it with SLURM's log, which is kept, and the next run plans the
    pack's cells again."""
    workdir, result, calls, again = cuda_run
    log = result.stdout + result.stderr
    assert result.returncode != 0, log[-6000:]
    (job_id,) = [c["job_id"] for c in calls if "rule_pack_" in " ".join(c["args"])]
    assert scontrol(job_id)["JobState"] == "FAILED"
    slurm_logs = list((workdir / ".snakemake" / "slurm_logs").rglob(f"{job_id}.log"))
    assert slurm_logs and f"{job_id}.log" in log, log[-6000:]
    infos = provenance(workdir, CUDA_TREE)
    assert infos and all(i["status"] == "failed" and i["retime"] for i in infos), infos
    assert "Torch not compiled with CUDA enabled" in infos[0]["message"]
    cell = spec.Cell(**infos[0]["cell"])
    cell_log = (workdir / CUDA_TREE / cell.log_path).read_text()
    assert f"SLURM job {job_id}" in cell_log and "exiting 3" in cell_log, cell_log
    planned = [block["wildcards"] for block in measure_blocks(again)]
    assert len(planned) == 2 and all("device=cuda" in w for w in planned), again[-3000:]


def test_cuda_cells_without_a_gpu_partition_are_not_submitted(slurm, tmp_path):
    """A site file without gpu_partition: the run stops before its first sbatch, naming the
    key; a dry run says so too."""
    pipeline_cost.fresh_copy(tmp_path, cold=True)
    (tmp_path / "cuda.yaml").write_text(yaml.safe_dump(CUDA_CONFIG))
    site = {k: v for k, v in SITE_CLUSTER.items() if k != "gpu_partition"}
    (tmp_path / "nogpu.yaml").write_text(yaml.safe_dump(site))
    env = recording_sbatch(tmp_path / "calls", {**os.environ,
                                                "ADBENCH_SITE": str(tmp_path / "nogpu.yaml")})
    done = subprocess.run(snakemake_cmd("cuda.yaml", "--until", "pack"), cwd=tmp_path,
                          capture_output=True, text=True, timeout=600, env=env)
    text = done.stdout + done.stderr
    assert done.returncode != 0 and "cluster.gpu_partition: not set" in text, text[-3000:]
    assert sbatch_calls(env) == []
    dry = subprocess.run([*snakemake_cmd("cuda.yaml", "-n")[4:]], cwd=tmp_path,
                         capture_output=True, text=True, timeout=600, env=env)
    assert "cluster.gpu_partition: not set" in dry.stdout + dry.stderr


@pytest.mark.parametrize("style, model, extra, request_args, recorded", [
    ("gpus", "fake", None, "--gpus=fake:1", ("TresPerJob", "gres:gpu:fake:1")),
    ("gres", "fake", None, "--gres=gpu:fake:1", ("TresPerNode", "gres:gpu:fake:1")),
    ("gres", "fake-sxm4_1g", None, "--gpus-per-node=fake-sxm4_1g:1",
     ("TresPerNode", "gres:gpu:fake-sxm4_1g:1")),
    # the docs' node to each timing job alone, with a hyphenated type: both reach sbatch
    ("gpus", "fake-sxm4_1g", "--nice=7 --exclusive",
     "--nice=7 --exclusive --gpus-per-node=fake-sxm4_1g:1",
     ("TresPerNode", "gres:gpu:fake-sxm4_1g:1")),
])
def test_each_gpu_request_style_reaches_slurm(slurm, tmp_path, style, model, extra,
                                              request_args, recorded):
    """The GPU's matmul peak, one CUDA job, submitted with each style the site may choose."""
    pipeline_cost.fresh_copy(tmp_path, cold=True)
    (tmp_path / "cuda.yaml").write_text(yaml.safe_dump(CUDA_CONFIG))
    site = {**SITE_CLUSTER, "gpu_request": style, "gpu_model": model,
            **({"slurm_extra": extra} if extra else {})}
    (tmp_path / "style.yaml").write_text(yaml.safe_dump(site))
    env = recording_sbatch(tmp_path / "calls", {**os.environ,
                                                "ADBENCH_SITE": str(tmp_path / "style.yaml")})
    done = subprocess.run(snakemake_cmd("cuda.yaml", "--until", "matmul_peak_cuda"),
                          cwd=tmp_path, capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    (call,) = sbatch_calls(env)
    assert request_args in " ".join(call["args"]), call["args"]
    job = scontrol(call["job_id"])
    assert job.get(recorded[0]) == recorded[1] and job["JobState"] == "COMPLETED", job
    if extra and "--exclusive" in extra:
        assert job.get("OverSubscribe") == "NO", job  # SLURM's word for --exclusive


def test_a_set_resources_that_drops_the_gpu_is_refused_before_any_sbatch(slurm, tmp_path):
    """The site profile's `set-resources: measure: slurm_extra: --exclusive` with the
    hyphenated type would replace the CUDA cells' --gpus-per-node: refused, naming it."""
    pipeline_cost.fresh_copy(tmp_path, cold=True)
    (tmp_path / "cuda.yaml").write_text(yaml.safe_dump(CUDA_CONFIG))
    env = recording_sbatch(tmp_path / "calls", site_env(tmp_path))
    done = subprocess.run(snakemake_cmd("cuda.yaml", "--until", "pack", "--set-resources",
                                        "measure:slurm_extra='--exclusive'"),
                          cwd=tmp_path, capture_output=True, text=True, timeout=600, env=env)
    text = done.stdout + done.stderr
    assert done.returncode != 0 and "set-resources measure:slurm_extra" in text, text[-3000:]
    assert "--gpus-per-node=fake-sxm4_1g:1" in text and sbatch_calls(env) == []


# A packed job SLURM itself ends midway (scancel here; a node failure or a time limit alike):
# its three cells are long enough (a few seconds each) to be caught between two of them.
LOST_OUT = "results-slurm-lost"
LOST_CONFIG = {
    "environments": "current",
    "results": LOST_OUT,
    "grid": [{"frameworks": {"torch": ["eager"]}, "models": ["mlp512"], "tasks": ["backward"],
              "seeds": [0, 1, 2]}],
    # A fixed count: the cells' lengths are what the kills and restarts below are timed by
    # (a precision stop could end them after a few iterations).
    "workload": {"warmup": 2, "iterations": 1500, "stop": "fixed",
                 "models": {"mlp512": {"n_samples": 1280}}},
}


def running_packed_jobs() -> list[tuple[str, str]]:
    """(job id, comment) of the RUNNING packs; the plugin's comment names the group."""
    out = subprocess.run(["squeue", "-h", "-t", "RUNNING", "-o", "%i|%k"], capture_output=True,
                         text=True, timeout=30).stdout
    return [tuple(line.split("|", 1)) for line in out.splitlines() if "|rule_pack_" in line]


def cell_files(workdir: Path, out: str, folder: str, suffix: str) -> set[str]:
    """The seeds of the cells with a file in `folder` of a run's tree (a log: one with a line,
    since Snakemake leaves an empty one for a cell that never started)."""
    return {p.stem for p in (workdir / out / folder).rglob(f"*{suffix}")
            if suffix != ".log" or p.stat().st_size}


def cut_when_one_cell_is_done(job: subprocess.Popen, workdir: Path, out: str, act) -> bool:
    """Calls act(job id) once a pack runs, one of its cells is done and another started."""
    deadline = time.monotonic() + 600
    while job.poll() is None and time.monotonic() < deadline:
        running = running_packed_jobs()
        finished = cell_files(workdir, out, "raw", ".parquet")
        started = cell_files(workdir, out, "logs/measure", ".log")
        if running and finished and started - finished:
            act(running[0][0])
            return running[0]
        time.sleep(0.2)
    return None


def lost_cells(seeds) -> list[spec.Cell]:
    return [spec.Cell("torch", "eager", "mlp512", "backward", "cpu", 1, s) for s in seeds]


@pytest.fixture(scope="module")
def lost_job(slurm, tmp_path_factory):
    """A run whose pack (its 3 cells) is cancelled by SLURM once one cell has finished and
    the next has started, then the run that resumes."""
    workdir = checkout(tmp_path_factory, "lost", LOST_CONFIG)
    cmd = snakemake_cmd("lost.yaml")
    job = subprocess.Popen(cmd, cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, env=site_env(workdir))
    cancelled = cut_when_one_cell_is_done(
        job, workdir, LOST_OUT,
        lambda job_id: subprocess.run(["scancel", job_id], check=True, timeout=30))
    log = job.communicate(timeout=900)[0]
    files = {folder: cell_files(workdir, LOST_OUT, folder, suffix) for folder, suffix in (
        ("raw", ".parquet"), ("gradients", ".npz"), ("logs/measure", ".log"))}
    walltimes = plan_campaign.load_run([str(workdir / "lost.yaml")], working_dir=workdir,
                                       site=str(SITE_FILE)).walltimes
    sources = {f"seed{c.seed}": walltimes.of(c).source for c in lost_cells(range(3))}
    # Only the timing jobs: what the resumed run submits is the point, the paper is the main
    # run's test.
    resumed = subprocess.run([*cmd, "--until", "pack"], cwd=workdir, capture_output=True,
                             text=True, timeout=900, env=site_env(workdir))
    return workdir, cancelled, job.returncode, log, files, sources, resumed


def test_a_packed_job_slurm_ends_keeps_its_finished_cells_and_the_next_run_submits_the_rest(
        lost_job):
    workdir, cancelled, returncode, log, files, sources, resumed = lost_job
    finished, started = files["raw"], files["logs/measure"]
    assert cancelled, log[-6000:]
    job_id, comment = cancelled
    # Reported as failed, with SLURM's log of the job; --keep-going (the profile) ran the rest.
    assert returncode != 0, log[-6000:]
    assert "Error in group pack_resultsslurmlost_cpu_torch_0_2" in log, log[-6000:]
    assert f"{job_id}.log" in log, log[-6000:]
    # The cells it finished are kept (keep-incomplete in profiles/slurm), with both files.
    assert 1 <= len(finished) < 3, (finished, log[-6000:])
    assert files["gradients"] == finished and len(started) == len(finished) + 1, files
    # The next run submits only the others (one pack). The cell the job was running asks for
    # its budget's walltime (3600 s: 61 min), since its job was ended; one that had not
    # started, for the time of the seed that finished (adbench.cluster.Walltimes).
    resumed_log = resumed.stdout + resumed.stderr
    assert resumed.returncode == 0, resumed_log[-6000:]
    blocks = measure_blocks(resumed_log)
    seeds = {"seed" + re.search(r"seed=(\d+)", b["wildcards"]).group(1) for b in blocks}
    assert seeds == {"seed0", "seed1", "seed2"} - finished, blocks
    for seed in seeds:
        assert sources[seed] == ("budget" if seed in started else "measured"), (seed, sources)
    assert sum(minutes_of(b["resources"]) for b in blocks) > 61, blocks
    assert len(cell_files(workdir, LOST_OUT, "raw", ".parquet")) == 3  # every cell measured


# A controller killed while its pack runs (a closed terminal, a lost login node), restarted at
# once and again after the pack ended: no cell may be submitted twice.
RESTART_OUT = "results-slurm-restart"
# Its cells take long enough (tens of seconds each) for two restarts while the pack runs, and
# their budget keeps the three in one pack (the cost model prices them above it).
RESTART_CONFIG = {**LOST_CONFIG, "results": RESTART_OUT,
                  "workload": {**LOST_CONFIG["workload"], "iterations": 25000, "budget_s": 600}}


def submitted_cells(calls: list[dict]) -> list[str]:
    """The cells each sbatch call submitted: the timing jobs its job's command targets."""
    return [cell for call in calls for cell in re.findall(
        r"measure:(device=\S*?seed=\d+)", " ".join(call["args"]))]


@pytest.fixture(scope="module")
def restarted(slurm, tmp_path_factory):
    workdir = checkout(tmp_path_factory, "restart", RESTART_CONFIG)
    env = recording_sbatch(tmp_path_factory.mktemp("sbatch-restart"), site_env(workdir))
    cmd = snakemake_cmd("restart.yaml", "--until", "pack")
    # Snakemake itself, not `timeout` around it: the kill is the controller's death
    controller = subprocess.Popen(cmd[4:], cwd=workdir, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, env=env)
    killed = cut_when_one_cell_is_done(controller, workdir, RESTART_OUT,
                                       lambda job_id: controller.kill())
    controller.communicate(timeout=120)
    attempts, still_running = [], False
    for extra in ([], ["--unlock"], ["--rerun-incomplete"]):
        still_running = bool(killed) and any(j[0] == killed[0] for j in running_packed_jobs())
        done = subprocess.run([*cmd, *extra], cwd=workdir, capture_output=True, text=True,
                              timeout=600, env=env)
        attempts.append((extra, done.returncode, done.stdout + done.stderr))
    deadline = time.monotonic() + 600
    while running_packed_jobs() and time.monotonic() < deadline:
        time.sleep(1)
    final = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, timeout=900,
                           env=env)
    return workdir, killed, attempts, still_running, final, sbatch_calls(env)


def test_a_restarted_controller_submits_no_cell_twice(restarted):
    workdir, killed, attempts, still_running, final, calls = restarted
    assert killed, attempts
    (_, locked, lock_log), (_, unlocked, _), (_, refused, refused_log) = attempts
    # Snakemake's lock outlives a killed controller: --unlock, as docs/cluster.md says
    assert locked != 0 and "unlock" in lock_log, lock_log[-3000:]
    assert unlocked == 0
    # started again while the pack still ran: it stops before submitting, naming the job
    assert still_running, ("the pack ended before the restart: make its cells longer",
                           attempts[-1][2][-3000:])
    assert refused != 0, refused_log[-3000:]
    assert f"{killed[0]} RUNNING" in refused_log and "scancel" in refused_log, refused_log[-3000:]
    # after the pack ended: the cells it had not finished, if any, and no other
    assert final.returncode == 0, (final.stdout + final.stderr)[-4000:]
    cells = submitted_cells(calls)
    assert len(cells) == len(set(cells)) and len(set(cells)) == 3, cells
    logs = [(workdir / RESTART_OUT / c.log_path).read_text() for c in lost_cells(range(3))]
    assert all(log.count("[run_cell") and log.count("started") == 1 for log in logs), logs


# A controller sent SIGTERM while its pack runs (scancel of a controller's job, its time
# limit): it cancels what it submitted, and started again resumes without re-timing a cell.
TERM_OUT = "results-slurm-term"
TERM_CONFIG = {**RESTART_CONFIG, "results": TERM_OUT}


@pytest.fixture(scope="module")
def terminated(slurm, tmp_path_factory):
    workdir = checkout(tmp_path_factory, "term", TERM_CONFIG)
    env = recording_sbatch(tmp_path_factory.mktemp("sbatch-term"), site_env(workdir))
    cmd = snakemake_cmd("term.yaml", "--until", "pack")
    controller = subprocess.Popen(cmd[4:], cwd=workdir, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, env=env)
    sent = cut_when_one_cell_is_done(controller, workdir, TERM_OUT,
                                     lambda job_id: controller.send_signal(signal.SIGTERM))
    log = controller.communicate(timeout=300)[0]
    state = scontrol(sent[0])["JobState"] if sent else None
    raw = {p: p.stat().st_mtime_ns for p in (workdir / TERM_OUT / "raw").rglob("*.parquet")}
    again = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, timeout=900,
                           env=env)
    kept = all(p.stat().st_mtime_ns == mtime for p, mtime in raw.items())
    finished = {p.stem for p in raw}
    return (workdir, sent, controller.returncode, log, state, finished, kept, again,
            sbatch_calls(env))


def test_sigterm_to_the_controller_cancels_its_jobs_and_a_restart_resumes(terminated):
    workdir, sent, returncode, log, state, finished, kept, again, calls = terminated
    assert sent, log[-4000:]
    # cancelled by the controller (scancel), not left running for the next one to refuse
    assert state == "CANCELLED", (state, log[-4000:])
    assert returncode != 0 and "Terminating processes on user request" in log, log[-4000:]
    assert 1 <= len(finished) < 3, finished
    # started again (no --unlock: it stopped cleanly), it times only the cells not finished,
    # and those it finished keep their raw files untouched
    assert again.returncode == 0, (again.stdout + again.stderr)[-4000:]
    assert len(calls) == 2, calls
    resumed = {"seed" + re.search(r"seed=(\d+)", c).group(1)
               for c in submitted_cells(calls[1:])}
    assert resumed == {"seed0", "seed1", "seed2"} - finished and kept, (resumed, finished)
    assert len(cell_files(workdir, TERM_OUT, "raw", ".parquet")) == 3


# A pack killed by SLURM for memory (its step above the job's --mem: OverMemoryKill, as a
# site's cgroup would), then the same command again: the cell is timed, asking for its own.
OOM_OUT = "results-slurm-oom"
OOM_CONFIG = {**LOST_CONFIG, "results": OOM_OUT, "grid": [
    {"frameworks": {"torch": ["eager"]}, "models": ["mlp512"], "tasks": ["backward"],
     "seeds": [0]}]}


def sacct(job_id: str) -> list[dict[str, str]]:
    out = subprocess.run(["sacct", "-j", str(job_id), "-P", "-o",
                          "JobID,State,ExitCode,MaxRSS,ReqMem"], capture_output=True,
                         text=True, timeout=30).stdout.splitlines()
    return [dict(zip(out[0].split("|"), line.split("|"))) for line in out[1:]]


def test_a_pack_killed_for_memory_is_accounted_and_the_next_run_times_it(slurm,
                                                                          tmp_path_factory):
    workdir = checkout(tmp_path_factory, "oom", OOM_CONFIG)
    env = recording_sbatch(tmp_path_factory.mktemp("sbatch-oom"), site_env(workdir))
    cmd = snakemake_cmd("oom.yaml", "--until", "pack")
    # 150 MB: below what importing torch alone holds
    killed = subprocess.run([*cmd, "--set-resources", "measure:mem_mb=150"], cwd=workdir,
                            capture_output=True, text=True, timeout=900, env=env)
    assert killed.returncode != 0, (killed.stdout + killed.stderr)[-3000:]
    (first,) = sbatch_calls(env)
    steps = sacct(first["job_id"])
    assert steps[0]["State"] == "FAILED" and steps[0]["ReqMem"] == "150M", steps
    assert any(s["ExitCode"] == "0:9" and s["MaxRSS"] for s in steps[1:]), steps
    slurm_logs = list((workdir / ".snakemake" / "slurm_logs").rglob(f"{first['job_id']}.log"))
    assert slurm_logs and "exceeded memory limit" in slurm_logs[0].read_text()
    again = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, timeout=900,
                           env=env)
    assert again.returncode == 0, (again.stdout + again.stderr)[-3000:]
    second = sbatch_calls(env)[-1]
    memory = int(re.search(r"--mem (\d+)", " ".join(second["args"])).group(1))
    assert memory > 150 and sacct(second["job_id"])[0]["State"] == "COMPLETED"
    assert len(cell_files(workdir, OOM_OUT, "raw", ".parquet")) == 1
