"""profiles/default, the workflow profile every local run loads."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.e2e
def test_a_run_ends_soon_after_its_last_job(tmp_path):
    """Snakemake's process waits for its last re-evaluation timer (the profile's
    max-jobs-per-timespan) before it exits: at 100/60s a one-job run took 63 s here, at
    100/10s 13 s. The bound is wide (a shared machine is slow at times); a minute's wait
    fails it."""
    (tmp_path / "Snakefile").write_text(
        'rule done:\n    output: "done.txt"\n    shell: "touch {output}"\n')
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "snakemake", "--cores", "1", "--workflow-profile",
         str(REPO / "profiles" / "default")],
        cwd=tmp_path, capture_output=True, text=True, timeout=300)
    took = time.monotonic() - start
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "done.txt").is_file()
    assert took < 40, f"a one-job run took {took:.0f} s"
