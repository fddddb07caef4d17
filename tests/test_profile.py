"""profiles/default, the workflow profile every local run loads."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e  # runs Snakemake

REPO = Path(__file__).resolve().parents[1]


def one_job_run_seconds(workdir: Path, *options: str) -> float:
    (workdir / "done.txt").unlink(missing_ok=True)
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", *options],
                          cwd=workdir, capture_output=True, text=True, timeout=300)
    took = time.monotonic() - start
    assert done.returncode == 0, done.stderr[-3000:]
    assert (workdir / "done.txt").is_file()
    return took


@pytest.mark.e2e
def test_a_run_ends_soon_after_its_last_job(tmp_path):
    """Snakemake's process waits for its last re-evaluation timer (the profile's
    max-jobs-per-timespan) before it exits: at 100/60s a one-job run took 63 s here, at
    100/10s 13 s. What the profile adds is compared with the same run without it, so a
    slow machine slows both; a wait of most of a minute fails it."""
    (tmp_path / "Snakefile").write_text(
        'rule done:\n    output: "done.txt"\n    shell: "touch {output}"\n')
    without = one_job_run_seconds(tmp_path, "--workflow-profile", "none")
    with_profile = one_job_run_seconds(tmp_path, "--workflow-profile",
                                       str(REPO / "profiles" / "default"))
    added = with_profile - without
    assert added < 30, f"the profile added {added:.0f} s to a one-job run ({without:.0f} s)"


# The jobs a cluster runs: the timing packs and the GPU's and CPU's matmul peaks. Every
# other rule runs on the submit host, where the site's settings need not reach it.
SUBMITTED_RULES = {"measure", "pack", "matmul_peak", "matmul_peak_cuda"}


def workflow_rules() -> tuple[set[str], set[str]]:
    """Every rule of the workflow, and those a `localrules:` block names."""
    rules, local = set(), set()
    for path in [REPO / "Snakefile", *sorted((REPO / "workflow" / "rules").glob("*.smk"))]:
        in_block = False
        for line in path.read_text().splitlines():
            if line.startswith("rule "):
                rules.add(line.split()[1].rstrip(":"))
            in_block = line.startswith("localrules:") or (in_block and line.startswith("    "))
            if in_block and line.startswith("    "):
                local.add(line.strip().rstrip(","))
    return rules, local


def test_only_the_timing_and_peak_jobs_are_submitted_to_a_cluster():
    rules, local = workflow_rules()
    assert SUBMITTED_RULES <= rules and local <= rules
    assert rules - local == SUBMITTED_RULES
