"""benchmarks/dryrun_cost.py on a small grid: what it compares plans the same jobs.

Its times are the benchmark's business (docs/costs.md); here only that each
Snakefile it times plans what it says: the pipeline the grid's cells, the trivial ones as many
jobs, the same-shape and floor Snakefiles one timing job per cell (plus a harness per
framework and the target), each timing job with the pipeline's resources; and that the
pipeline's setting of its planning process (workflow/rules/planning.smk) takes effect.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import dryrun_cost  # noqa: E402
import pipeline_cost  # noqa: E402  (its fresh copy of the checkout)

pytestmark = pytest.mark.e2e


@pytest.mark.extended  # dry runs of a campaign-sized grid: the extended tier
def test_each_snakefile_compared_plans_the_grids_jobs(tmp_path):
    out = tmp_path / "dryrun_cost.json"
    models = ["mlp512", "cnn"]  # a small grid: the test is of the comparison, not its size
    assert dryrun_cost.main(["--seeds", "1", "--repeats", "1", "--models", *models, "--out",
                             str(out), "--profile", str(tmp_path / "profile")]) == 0
    report = json.loads(out.read_text())
    cells, planned = report["cells"], report["jobs_planned"]
    study_modes = sum(len(dryrun_cost.spec.FRAMEWORKS[f].modes)
                      for f in dryrun_cost.spec.STUDY_FRAMEWORKS)
    # every mode of the study's frameworks x the models x the study's tasks, one seed
    assert cells == study_modes * len(models) * len(dryrun_cost.spec.STUDY_TASKS)
    assert planned["pipeline"] == report["jobs"] > cells
    assert planned["trivial"] == planned["trivial_tuned"] == report["jobs"]
    harnesses = len(dryrun_cost.spec.STUDY_FRAMEWORKS)
    assert planned["same_shape"] == planned["floor"] == cells + harnesses + 1
    # The compared timing jobs declare the pipeline's resources (their lists are written by
    # hand in dryrun_cost.py: a resource added to rule measure fails this until they follow).
    resources = report["timing_job_resources"]
    assert "runtime" in resources["pipeline"]
    assert resources["same_shape"] == resources["floor"] == resources["pipeline"]
    for name in ("ratio", "like_for_like_ratio", "same_shape_ratio", "floor_ratio"):
        assert report[name] > 0, name
    assert report["within_target"] == (report["ratio"] <= dryrun_cost.TARGET)
    # --profile: every phase found in each Snakefile's stats, with the pipeline's own extra
    # work visible in exact call counts (the analysis rules take every cell's two files, and
    # the reference jobs' inputs are looked up too: more lookups than the cells alone need).
    profile = report["profile"]
    assert set(profile) == {"pipeline", "trivial", "trivial_tuned", "same_shape", "floor"}
    for name, phases in profile.items():
        assert (tmp_path / "profile" / f"{name}.prof").is_file()
        assert set(phases) == {"total", *dryrun_cost.PHASES}, name
        assert all(calls > 0 for _, calls in phases.values()), (name, phases)
    lookups = {name: phases["find the job making each input"][1]
               for name, phases in profile.items()}
    assert lookups["same_shape"] == cells
    assert lookups["pipeline"] > 2 * cells


# Parses the Snakefile in this process as `snakemake --dry-run` does, then prints what its
# garbage collector was left with.
PROBE = """\
import gc, runpy, sys
sys.argv = ["snakemake", "--dry-run", "--cores", "1"]
try:
    runpy.run_module("snakemake", run_name="__main__")
except SystemExit as done:
    print(done.code, gc.get_freeze_count(), gc.get_threshold()[2])
"""


def test_the_pipelines_planning_process_freezes_what_parsing_made(tmp_path):
    """planning.smk acts on the process that parses the pipeline (the same probe on a bare
    Snakefile shows Python's defaults: nothing frozen, full collections more often)."""
    planning = (dryrun_cost.REPO / dryrun_cost.PLANNING_RULES).read_text()
    after = int(re.search(r"^FULL_COLLECTION_AFTER = (\d+)$", planning, re.M).group(1))
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "Snakefile").write_text(dryrun_cost.EMPTY_SNAKEFILE)
    pipeline = tmp_path / "pipeline"
    pipeline.mkdir()
    pipeline_cost.fresh_copy(pipeline, cold=True)
    left = {}
    for name, folder in (("bare", bare), ("pipeline", pipeline)):
        done = subprocess.run([sys.executable, "-c", PROBE], cwd=folder, capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        code, frozen, full_after = done.stdout.split()[-3:]
        assert code == "0", done.stderr[-3000:]
        left[name] = int(frozen), int(full_after)
    bare_frozen, bare_full_after = left["bare"]
    frozen, full_after = left["pipeline"]
    assert bare_frozen == 0 and frozen > 100_000
    assert bare_full_after < full_after == after
