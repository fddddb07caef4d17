"""workflow/scripts/plan_campaign.py: the packs a config goes to SLURM in and what they ask for,
on fabricated configs and on config/gpu.yaml seeded from the example trees."""

from __future__ import annotations

import dataclasses
import datetime
import math
import re
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "workflow" / "scripts"))
import plan_campaign  # noqa: E402
from adbench import config as run_config  # noqa: E402
from adbench import schema  # noqa: E402

# torch on both devices, 2 modes x 2 thread counts x 2 seeds each: 8 CPU cells, 8 CUDA cells;
# jax jit on CUDA, one cell. References: 3, on the submit host.
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
SITE = {"account": "proj42", "cpu_partition": "c", "gpu_partition": "g", "gpu_model": "h100",
        "cuda_cpus": 3}


@pytest.fixture(autouse=True)
def no_site(monkeypatch):
    monkeypatch.delenv(run_config.SITE_VARIABLE, raising=False)


def plan(tmp_path: Path, config: dict, site: dict | None = None, entries=None):
    (tmp_path / "campaign.yaml").write_text(yaml.safe_dump(config))
    path = None
    if site is not None:
        path = tmp_path / "site.yaml"
        path.write_text(yaml.safe_dump(site))
    run = plan_campaign.load_run([str(tmp_path / "campaign.yaml")], None, entries,
                                 working_dir=tmp_path, site=str(path) if path else None)
    return run, plan_campaign.slurm_jobs(run, tmp_path)


def test_one_pack_per_framework_and_device_with_one_floor_each(tmp_path):
    run, jobs = plan(tmp_path, CONFIG, SITE)
    packs = [j for j in jobs if j.rule == "pack"]
    assert sorted((j.framework, j.device, j.cells) for j in packs) == [
        ("jax", "cuda", 1), ("torch", "cpu", 8), ("torch", "cuda", 8)]
    w = run.walltimes
    for job in packs:
        cells = [c for c in run.cells if (c.framework, c.device) == (job.framework, job.device)]
        asked = sum(w.asked_s(c) for c in cells)
        assert job.runtime_min == max(w.floor_min, math.ceil((30 + asked) / 60))
    # the peaks: the CPU's and the GPU's, at the floor
    assert sorted(j.rule for j in jobs if j.rule != "pack") == ["matmul_peak",
                                                                "matmul_peak_cuda"]


def test_the_site_file_routes_jobs_by_device(tmp_path):
    _, jobs = plan(tmp_path, CONFIG, SITE)
    cuda = [j for j in jobs if j.device == "cuda"]
    cpu = [j for j in jobs if j.device == "cpu"]
    assert {(j.partition, j.gpu, j.gpus) for j in cuda} == {("g", "h100", 1)}
    assert {(j.partition, j.gpu, j.gpus) for j in cpu} == {("c", None, 0)}
    # cuda_cpus 3, at least the cells' threads (2); a CPU pack the most threads of its cells
    assert {j.cpus for j in cuda} == {3}
    assert {j.cpus for j in cpu} == {2}


def test_a_command_line_config_keeps_the_sites_settings(tmp_path):
    """What --config used to drop (issue 39): the site file is read apart from it."""
    _, jobs = plan(tmp_path, CONFIG, SITE, ["cluster={walltime_margin: 1.5}", "results=mine"])
    assert {j.partition for j in jobs if j.device == "cuda"} == {"g"}
    assert {j.partition for j in jobs if j.device == "cpu"} == {"c"}
    assert {j.gpu for j in jobs if j.device == "cuda"} == {"h100"}


def test_the_report_prints_the_submissions_and_hours(tmp_path, capsys):
    (tmp_path / "campaign.yaml").write_text(yaml.safe_dump(CONFIG))
    (tmp_path / "site.yaml").write_text(yaml.safe_dump(SITE))
    assert plan_campaign.main(["--configfile", str(tmp_path / "campaign.yaml"),
                               "--site", str(tmp_path / "site.yaml")]) == 0
    out = capsys.readouterr().out
    text = " ".join(out.split())
    assert "17 cells to time in 3 packs, and 2 matmul peak job(s): 5 submissions" in text
    assert "The 3 float64 reference jobs run on the submit host" in text
    assert "account proj42" in text and "gpu_partition g" in text
    total = next(line.split() for line in out.splitlines() if line.startswith("total"))
    assert total[1:3] == ["17", "5"]


def test_a_bad_config_is_named_not_planned(tmp_path, capsys):
    bad = {**CONFIG, "cluster": {"gpu_model": "a100:1"}}
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(bad))
    assert plan_campaign.main(["--configfile", str(tmp_path / "bad.yaml")]) == 2
    assert "gpu_model" in capsys.readouterr().err


def test_cuda_cells_without_a_gpu_partition_are_refused(tmp_path, capsys):
    (tmp_path / "campaign.yaml").write_text(yaml.safe_dump(CONFIG))
    (tmp_path / "site.yaml").write_text(yaml.safe_dump({"account": "proj42"}))
    assert plan_campaign.main(["--configfile", str(tmp_path / "campaign.yaml"),
                               "--site", str(tmp_path / "site.yaml")]) == 2
    assert "cluster.gpu_partition: not set" in capsys.readouterr().err


def test_a_cell_measured_on_another_seed_is_planned_at_its_time(tmp_path):
    """The jax cell's class ran before in the tree (results-campaign/), on seed 7: 100 s."""
    run, _ = plan(tmp_path, CONFIG, SITE)
    cell = next(c for c in run.cells if c.framework == "jax")
    other = dataclasses.replace(cell, seed=7)
    start = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
    info = {"status": "ok", "cell": dataclasses.asdict(other),
            "workload": run.workloads.sizes(cell.model, cell.task),
            "started_at": start.isoformat(),
            "ended_at": (start + datetime.timedelta(seconds=100)).isoformat()}
    schema.write_raw(str(tmp_path / run.results / other.raw_path), dataclasses.asdict(other),
                     [], info)
    run, jobs = plan(tmp_path, CONFIG, SITE)
    (jax,) = [j for j in jobs if j.framework == "jax"]
    assert jax.walltime_from == ("measured",)
    assert jax.runtime_min == max(5, math.ceil((30 + 2 * 105) / 60))


def measured(tmp_path: Path, run, cell, description: dict | None = None) -> None:
    """The cell's raw file as its timing job writes it: its description whole (or the
    record of `description`'s parts alone)."""
    schema.write_raw(str(tmp_path / run.results / cell.raw_path), dataclasses.asdict(cell),
                     [], {"status": "ok", **(description if description is not None
                                             else run.workloads.description(cell).as_dict())})


def test_cells_already_measured_are_not_planned(tmp_path):
    run, _ = plan(tmp_path, CONFIG, SITE)
    cell = next(c for c in run.cells if c.framework == "jax")
    measured(tmp_path, run, cell)
    _, jobs = plan(tmp_path, CONFIG, SITE)
    assert not [j for j in jobs if j.framework == "jax"]


def test_a_measured_cell_whose_workload_the_config_changed_is_planned_again(tmp_path):
    """Its timing job's params change (Snakemake re-times it): it goes in a pack again, not
    in a job of its own. A record without the workload (a tree of before) is taken as it."""
    run, _ = plan(tmp_path, CONFIG, SITE)
    cell = next(c for c in run.cells if c.framework == "jax")
    measured(tmp_path, run, cell)
    more = {**CONFIG, "workload": {**CONFIG["workload"], "iterations": 7}}
    _, jobs = plan(tmp_path, more, SITE)
    assert [(j.rule, j.cells) for j in jobs if j.framework == "jax"] == [("pack", 1)]
    measured(tmp_path, run, cell, {"cell": dataclasses.asdict(cell)})
    _, jobs = plan(tmp_path, more, SITE)
    assert not [j for j in jobs if j.framework == "jax"]


# ------------------------------------------------------------------ config/gpu.yaml
@pytest.mark.parametrize("config", ["gpu", "gpu-smoke"])
@pytest.mark.parametrize("gpu_model", ["nvidia_h100-80gb-hbm3", "nvidia_h200"])
def test_the_gpu_campaigns_ask_at_most_three_times_their_expected_use(tmp_path, capsys,
                                                                      config, gpu_model):
    """config/gpu.yaml and gpu-smoke.yaml on a site of the H100's or the H200's model: every
    cell priced from a measurement or the model fitted on measured cells (none by the
    unfitted model), the packs' walltime at most 3x the cells' expected use in all and for
    every class, and the plan says so; every submission a pack or a peak."""
    (tmp_path / "site.yaml").write_text(yaml.safe_dump({**SITE, "gpu_model": gpu_model}))
    run = plan_campaign.load_run([str(ROOT / "config" / f"{config}.yaml")],
                                 working_dir=tmp_path, site=str(tmp_path / "site.yaml"))
    found = plan_campaign.packs(run, tmp_path)
    classes = plan_campaign.priced(run, found)
    whole = plan_campaign.total(classes)
    assert whole.cells == len(run.cells) and 1 < whole.ratio <= 3, whole
    assert all(one.ratio <= plan_campaign.FLAG_RATIO for one in classes.values())
    jobs = plan_campaign.slurm_jobs(run, tmp_path)
    assert not [s for j in jobs for s in j.walltime_from if s == "model"]
    assert all(run.walltimes.floor_min <= j.runtime_min <= 120 for j in jobs)
    print(plan_campaign.report(run, jobs, f"config/{config}.yaml", classes))
    text = " ".join(capsys.readouterr().out.split())
    ratio = re.search(r"Requested over expected use: .*?: ([\d.]+)x\.", text)
    assert ratio and float(ratio.group(1)) == pytest.approx(whole.ratio, abs=0.01)
    assert "No class of cells asks for more than 3x its expected use" in text
    assert f"{len(jobs)} submissions (sbatch calls)" in text


def test_a_class_above_three_times_its_use_is_named(tmp_path, capsys):
    """A site's 30-minute floor on a pack of seconds: the plan names the class."""
    config = {**CONFIG, "grid": [CONFIG["grid"][1]]}
    run, jobs = plan(tmp_path, config, {**SITE, "walltime_floor_min": 30})
    classes = plan_campaign.priced(run, plan_campaign.packs(run, tmp_path))
    print(plan_campaign.report(run, jobs, "campaign.yaml", classes))
    text = " ".join(capsys.readouterr().out.split())
    assert "Above 3x: cuda jax jit cnn jacobian_rows 1: 1 cell ask 1,800 s" in text
