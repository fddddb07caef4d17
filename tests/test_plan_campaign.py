"""workflow/scripts/plan_campaign.py: the SLURM jobs a config becomes and what they ask for,
on fabricated configs whose counts and hours are worked out by hand below."""

from __future__ import annotations

import dataclasses
import datetime
import math
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "workflow" / "scripts"))
import plan_campaign  # noqa: E402
from adbench import config as run_config  # noqa: E402
from adbench import schema  # noqa: E402

# torch on both devices, 2 modes x 2 thread counts x 2 seeds each: 8 CPU cells, 8 CUDA cells,
# budget 120 s -> walltime at most ceil(120/60) + 1 = 3 min, below the estimate's floor of 5.
# jax jit on CUDA, one cell of a model whose budget stays the config's 600 s (at most 11 min):
# the cost model's estimate (adbench.config.Walltimes; tests/test_walltime.py), x 3 -> 9 min.
# References: mlp512's gradients for seeds 0 and 1, cnn's Jacobian for seed 0: 3 jobs of one
# float64 iteration each, at the walltimes' floor of 5 min, on 1 CPU.
CONFIG = {
    "environments": "venv",
    "grid": [
        {"frameworks": {"torch": ["eager", "script"]}, "models": ["mlp512"],
         "devices": ["cpu", "cuda"], "threads": [1, 2], "seeds": [0, 1]},
        {"frameworks": {"jax": ["jit"]}, "models": ["cnn"], "tasks": ["jacobian_rows"],
         "devices": ["cuda"], "seeds": [0]},
    ],
    "workload": {"budget_s": 600, "models": {"mlp512": {"budget_s": 120}}},
}
SITE = {"config": {"cluster": {"account": "proj42", "cpu_partition": "c", "gpu_partition": "g",
                               "gpu_model": "h100", "cuda_cpus": 3}}}


def plan(tmp_path: Path, config: dict, site: dict | None = None, entries=None):
    (tmp_path / "campaign.yaml").write_text(yaml.safe_dump(config))
    profile = None
    if site is not None:
        (tmp_path / "site").mkdir()
        (tmp_path / "site" / "config.yaml").write_text(yaml.safe_dump(site))
        profile = str(tmp_path / "site")
    run = plan_campaign.load_run([str(tmp_path / "campaign.yaml")], profile, entries,
                                 working_dir=tmp_path)
    return run, plan_campaign.slurm_jobs(run)


JAX_MIN = 9


def test_the_jax_cells_walltime_is_the_models_estimate(tmp_path):
    run, _ = plan(tmp_path, CONFIG)
    cell = next(c for c in run.cells if c.framework == "jax")
    seconds = run_config.modelled_cell_s(run.workloads, cell)
    assert run.walltimes.of(cell) == run_config.Walltime(JAX_MIN, seconds, "model")
    assert JAX_MIN == math.ceil(seconds * 3 / 60) < 11


def test_one_job_per_cell_and_per_reference_with_the_rules_walltime(tmp_path):
    run, jobs = plan(tmp_path, CONFIG)
    assert len(run.cells) == 17
    by = {}
    for job in jobs:
        by.setdefault((job.rule, job.framework, job.device), []).append(job)
    assert {k: len(v) for k, v in by.items()} == {
        ("measure", "torch", "cpu"): 8, ("measure", "torch", "cuda"): 8,
        ("measure", "jax", "cuda"): 1, ("reference", "reference", "cpu"): 3,
        ("matmul_peak", "(matmul peak)", "cpu"): 1,
        ("matmul_peak_cuda", "(matmul peak)", "cuda"): 1}
    assert {j.runtime_min for j in by[("measure", "torch", "cpu")]} == {3}
    assert [j.runtime_min for j in by[("measure", "jax", "cuda")]] == [JAX_MIN]
    # A reference job: one float64 iteration, far below an hour: the walltimes' floor.
    assert {j.runtime_min for j in by[("reference", "reference", "cpu")]} == {
        run.walltimes.floor_min}
    # No site: no partition, any GPU; a CUDA cell asks for the default 4 cores, a CPU cell
    # for its threads.
    assert {j.partition for j in jobs} == {None}
    assert {j.cpus for j in by[("measure", "torch", "cuda")]} == {4}
    assert sorted(j.cpus for j in by[("measure", "torch", "cpu")]) == [1] * 4 + [2] * 4
    assert {j.gpus for j in by[("measure", "torch", "cpu")]} == {0}
    assert {j.gpus for j in by[("measure", "jax", "cuda")]} == {1}
    # GPU-h: 8 x 3 min + 1 x 9 min = 33 min, and the GPU's matmul peak 5 min. CPU-h: CPU
    # cells (4x1 + 4x2) x 3 = 36 min, CUDA cells 9 x 4 cores: 8 x 3 + 1 x 9 = 33 min x 4 =
    # 132 min, references 3 x 5 min, the matmul peak 5 min on the CPU cells' most threads
    # (2), the GPU's 5 min on a CUDA job's 4 cores.
    assert sum(j.gpu_hours for j in jobs) == pytest.approx((33 + 5) / 60)
    assert sum(j.cpu_hours for j in jobs) == pytest.approx((36 + 132 + 15 + 10 + 20) / 60)
    (gpu_peak,) = by[("matmul_peak_cuda", "(matmul peak)", "cuda")]
    assert (gpu_peak.gpus, gpu_peak.cpus, gpu_peak.runtime_min) == (
        1, 4, run.walltimes.floor_min)
    # each timing job's walltime is the rule's runtime for that cell (the same function)
    for cell, job in zip(run.cells, jobs):
        wildcards = {k: str(v) for k, v in dataclasses.asdict(cell).items()}
        assert job.runtime_min == run.walltimes.runtime_min(wildcards), (cell, job)


def test_the_site_profile_routes_jobs_by_device(tmp_path):
    _, jobs = plan(tmp_path, CONFIG, SITE)
    cuda = [j for j in jobs if j.device == "cuda"]
    cpu = [j for j in jobs if j.device == "cpu"]
    assert {(j.partition, j.gpu_model, j.gpus) for j in cuda} == {("g", "h100", 1)}
    assert {(j.partition, j.gpu_model, j.gpus) for j in cpu} == {("c", None, 0)}
    # cuda_cpus 3, at least the cell's threads (2): 3 cores each, 33 min -> 99 min, and the
    # GPU's matmul peak 5 min -> 15
    assert {j.cpus for j in cuda} == {3}
    assert sum(j.cpu_hours for j in jobs) == pytest.approx((36 + 99 + 15 + 10 + 15) / 60)


def test_command_line_config_replaces_the_profiles_as_snakemake_does(tmp_path):
    _, jobs = plan(tmp_path, CONFIG, SITE, ["cluster={gpu_partition: other}"])
    assert {j.partition for j in jobs if j.device == "cuda"} == {"other"}
    assert {j.partition for j in jobs if j.device == "cpu"} == {None}  # the profile's: gone


def test_the_report_prints_the_counts_and_hours(tmp_path, capsys):
    (tmp_path / "campaign.yaml").write_text(yaml.safe_dump(CONFIG))
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "config.yaml").write_text(yaml.safe_dump(SITE))
    assert plan_campaign.main(["--configfile", str(tmp_path / "campaign.yaml"),
                               "--profile", str(tmp_path / "site"),
                               "--group-components", "cells_{device}_{framework}=1"]) == 0
    out = capsys.readouterr().out
    text = " ".join(out.split())
    assert "22 SLURM jobs, 17 timing jobs for 17 cells (rule measure, one per cell)" in text
    assert "2 matmul peak jobs (rule matmul_peak, matmul_peak_cuda)" in text
    assert "3 reference jobs" in text
    rows = {line.split()[0] + " " + line.split()[1]: line.split() for line in out.splitlines()
            if line.split()[:1] and line.split()[0] in ("torch", "jax", "(reference)")}
    assert rows["torch cpu"][2:5] == ["8", "8", "c"]
    assert "1 GPU (h100), 3 CPUs" in " ".join(rows["torch cuda"])
    assert rows["jax cuda"][-4:-2] == [str(JAX_MIN), "min"]
    total = next(line.split() for line in out.splitlines() if line.startswith("total"))
    assert total[1:3] == ["17", "22"]
    assert [float(h) for h in total[3:]] == pytest.approx(
        [38 / 60, (36 + 99 + 15 + 10 + 15) / 60], abs=0.051)  # printed to 0.1 h
    assert f"(minutes x jobs): 3 x 16, 5 x 5, {JAX_MIN} x 1." in text
    assert ("Estimated from the cell's measured time in results-campaign/: 0 cells; from the "
            "cost model") in text and "compilation): 17;" in text


def test_a_bad_config_is_named_not_planned(tmp_path, capsys):
    bad = {**CONFIG, "cluster": {"gpu_model": "a100:1"}}
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(bad))
    assert plan_campaign.main(["--configfile", str(tmp_path / "bad.yaml")]) == 2
    assert "gpu_model" in capsys.readouterr().err


def test_a_cell_measured_by_an_earlier_run_of_the_tree_is_planned_at_its_time(tmp_path, capsys):
    """The jax cell ran before in the config's results tree (results-campaign/): 100 s. Its
    job asks for (30 s of Snakemake's start + 100 s) x 3 = 390 s -> 7 min, not the model's."""
    run, _ = plan(tmp_path, CONFIG)
    cell = next(c for c in run.cells if c.framework == "jax")
    start = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
    info = {"status": "ok", "cell": dataclasses.asdict(cell),
            "workload": run.workloads.sizes(cell.model, cell.task),
            "started_at": start.isoformat(),
            "ended_at": (start + datetime.timedelta(seconds=100)).isoformat()}
    schema.write_raw(str(tmp_path / run.results / cell.raw_path), dataclasses.asdict(cell),
                     [], info)
    run = plan_campaign.load_run([str(tmp_path / "campaign.yaml")], working_dir=tmp_path)
    jax = [j for j in plan_campaign.slurm_jobs(run) if j.framework == "jax"]
    assert [(j.runtime_min, j.walltime_from) for j in jax] == [(7, ("measured",))]
    print(plan_campaign.report(run, plan_campaign.slurm_jobs(run), "campaign.yaml"))
    text = " ".join(capsys.readouterr().out.split())
    assert "measured time in results-campaign/: 1 cell;" in text


# ------------------------------------------------------------------ packed jobs
def test_packed_jobs_run_their_cells_in_series(tmp_path):
    """3 cells of one (framework, device) a job, in the config's order. torch cpu: eager t1
    s0, t1 s1, t2 s0 | eager t2 s1, script t1 s0, t1 s1 | script t2 s0, t2 s1: 3 + 3 + 2 cells
    of 3 min -> 9, 9, 6 min, each asking for the most CPUs of its cells (2). torch cuda the
    same, 4 CPUs and 1 GPU each; jax's one cell alone, 9 min."""
    run, _ = plan(tmp_path, CONFIG)
    jobs = plan_campaign.slurm_jobs(run, pack=3)
    timing = [j for j in jobs if j.rule == "measure"]
    assert [(j.framework, j.device, j.cells, j.runtime_min, j.cpus, j.gpus) for j in timing] == [
        ("torch", "cpu", 3, 9, 2, 0), ("torch", "cpu", 3, 9, 2, 0), ("torch", "cpu", 2, 6, 2, 0),
        ("torch", "cuda", 3, 9, 4, 1), ("torch", "cuda", 3, 9, 4, 1),
        ("torch", "cuda", 2, 6, 4, 1), ("jax", "cuda", 1, JAX_MIN, 4, 1)]
    assert len(jobs) == 7 + 3 + 2
    # GPU-hours as unpacked (8 x 3 + 9 min) and the GPU's peak (5); CPU-hours more where a
    # pack mixes thread counts: CPU cells (9 + 9 + 6) x 2 = 48 min, CUDA (24 + 9) x 4 = 132,
    # references 3 x 5, peaks 10 and 20.
    assert sum(j.gpu_hours for j in jobs) == pytest.approx(38 / 60)
    assert sum(j.cpu_hours for j in jobs) == pytest.approx((48 + 132 + 15 + 10 + 20) / 60)
    report = " ".join(plan_campaign.report(run, jobs, "campaign.yaml", 3).split())
    assert ("12 SLURM jobs, 7 timing jobs for 17 cells (rule measure, up to 3 cells of one "
            "framework and device each, run one after another)") in report
    assert "(minutes x jobs): 5 x 5, 6 x 2, 9 x 5." in report


def write_profile(folder: Path, keys: dict) -> str:
    folder.mkdir(parents=True)
    (folder / "config.yaml").write_text(yaml.safe_dump(keys))
    return str(folder)


def test_cells_per_job_are_read_as_snakemake_reads_the_profiles(tmp_path):
    workflow = plan_campaign.WORKFLOW_PROFILE
    assert plan_campaign.cells_per_job(workflow) == 10  # profiles/slurm
    site = write_profile(tmp_path / "site", {
        "groups": ["measure=mine"], "group-components": ["mine=5"]})
    # the workflow profile comes last: its keys replace the site's whole
    assert plan_campaign.cells_per_job(workflow, site) == 10
    assert plan_campaign.cells_per_job(None, site) == 5
    # the command line beats both
    assert plan_campaign.cells_per_job(workflow, site, ["cells_{device}_{framework}=2"]) == 2
    # no group for rule measure (or none of that group's size): a job per cell
    assert plan_campaign.cells_per_job(None) == 1
    other = write_profile(tmp_path / "other", {"groups": ["reference=refs"]})
    assert plan_campaign.cells_per_job(None, other) == 1
