"""End to end, what a run asks for and refuses before any job, on a fresh checkout (no run
needed): a bad config or command-line override named, the schema reading --config, each
timing job's resources, the analysis reading its cells from a list, lint and format."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from e2e import OUT, REPO, TEST_CONFIG, fresh_checkout, snakemake, tiny_cells

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import plan_campaign  # noqa: E402  (the walltimes the rule asks for, as the plan computes them)

from adbench import spec  # noqa: E402

pytestmark = pytest.mark.e2e


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
        assert job["threads"] == int(cell["threads"]), job
        assert given["gpu"] == str(int(cell["device"] == "cuda")), job
        assert float(given["budget_s"]) == budget, job
        assert int(given["runtime"]) == walltimes.runtime_min(cell, attempt), job
        assert int(given["runtime"]) <= (math.ceil(budget / 60) + 1) * attempt, job
        # the config's mem_mb, or a measured peak with its margin (Walltimes.mem_mb)
        measured_cell = spec.Cell(**{k: int(v) if k in ("threads", "seed") else v
                                     for k, v in cell.items()})
        assert int(given["mem_mb"]) == walltimes.mem_mb(measured_cell) * attempt, job


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
    assert '"iterations":7,' in result.log  # the cell's description, handed whole


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
