"""benchmarks/dryrun_cost.py on a small grid: what it compares plans the same jobs.

Its times are the benchmark's business (README, "What the pipeline costs"); here only that each
Snakefile it times plans what it says: the pipeline the grid's cells, the trivial one as many
jobs, the same-shape and floor Snakefiles one timing job per cell (plus a harness per
framework and the target), each timing job with the pipeline's resources.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import dryrun_cost  # noqa: E402

pytestmark = pytest.mark.e2e


def test_each_snakefile_compared_plans_the_grids_jobs(tmp_path):
    out = tmp_path / "dryrun_cost.json"
    assert dryrun_cost.main(["--seeds", "1", "--repeats", "1", "--out", str(out),
                             "--profile", str(tmp_path / "profile")]) == 0
    report = json.loads(out.read_text())
    cells, planned = report["cells"], report["jobs_planned"]
    assert cells == 336  # every mode of the study's frameworks x models x tasks, one seed
    assert planned["pipeline"] == report["jobs"] > cells
    assert planned["trivial"] == report["jobs"]
    harnesses = len(dryrun_cost.spec.STUDY_FRAMEWORKS)
    assert planned["same_shape"] == planned["floor"] == cells + harnesses + 1
    # The compared timing jobs declare the pipeline's resources (their lists are written by
    # hand in dryrun_cost.py: a resource added to rule measure fails this until they follow).
    resources = report["timing_job_resources"]
    assert "runtime" in resources["pipeline"]
    assert resources["same_shape"] == resources["floor"] == resources["pipeline"]
    for name in ("ratio", "same_shape_ratio", "floor_ratio"):
        assert report[name] > 0, name
    assert report["within_target"] == (report["ratio"] <= dryrun_cost.TARGET)
    # --profile: every phase found in each Snakefile's stats, with the pipeline's own extra
    # work visible in exact call counts (the analysis rules take every cell's two files, and
    # the reference jobs' inputs are looked up too: more lookups than the cells alone need).
    profile = report["profile"]
    assert set(profile) == {"pipeline", "trivial", "same_shape", "floor"}
    for name, phases in profile.items():
        assert (tmp_path / "profile" / f"{name}.prof").is_file()
        assert set(phases) == {"total", *dryrun_cost.PHASES}, name
        assert all(calls > 0 for _, calls in phases.values()), (name, phases)
    lookups = {name: phases["find the job making each input"][1]
               for name, phases in profile.items()}
    assert lookups["same_shape"] == cells
    assert lookups["pipeline"] > 2 * cells
