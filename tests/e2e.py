"""What the end-to-end tests share: the real Snakemake on a fresh copy of the checkout, with
the tiny config .test/config.yaml, real frameworks in environments the pipeline builds, real
latexmk; and one finished run of it for every test file that reads or changes one.

The run is made once per test session, whichever worker asks first (pytest-xdist: the
others wait for it, under a file lock), in the session's shared temporary folder.  A test
that only reads it takes `e2e_run`; a test that changes anything (edits a file, deletes
outputs, runs Snakemake again) takes `e2e_copy`, its own copy of the finished run (the
environments linked, not copied, unless it rebuilds one), so that tests on other workers
never see its changes.  Structure and contracts are checked, never absolute timings.
"""

from __future__ import annotations

import fcntl
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from adbench import schema, spec

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import pipeline_cost  # noqa: E402  (its fresh copy of the checkout, shared)

REPO = Path(__file__).resolve().parents[1]
TEST_CONFIG = ".test/config.yaml"
TINY = yaml.safe_load((REPO / TEST_CONFIG).read_text())
OUT = TINY["results"]  # the tiny config's results tree


def fresh_checkout(dest: Path) -> Path:
    """The files a clone has (plus uncommitted work), no environments: a newcomer's tree."""
    pipeline_cost.fresh_copy(dest, cold=True)
    return dest


def snakemake(workdir: Path, *args: str, env: dict | None = None, timeout: int = 1500,
              configfile: str = TEST_CONFIG):
    cmd = [sys.executable, "-m", "snakemake", "--configfile", configfile, *args]
    result = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, timeout=timeout,
                            env=env)
    result.log = f"$ {' '.join(cmd)}\n{result.stdout}\n{result.stderr}"  # for assertion messages
    return result


def tiny_cells():
    return spec.config_cells(TINY)


def provenance(run: Path, cell) -> dict:
    return schema.read_provenance(run / OUT / cell.raw_path)


def planned_jobs(log: str) -> list[str]:
    """The rules of the jobs a Snakemake run (or dry run) scheduled, in order."""
    return [line.split()[1].rstrip(":") for line in log.splitlines()
            if line.startswith(("rule ", "localrule "))]


def planned_outputs(log: str, folder: str) -> list[str]:
    """The outputs under OUT/<folder>/ of the jobs a run planned, in its order."""
    return [line.split(f"{OUT}/{folder}/", 1)[1].split(",")[0] for line in log.splitlines()
            if line.strip().startswith(f"output: {OUT}/{folder}/")]


# ------------------------------------------------------------------ the one shared run
def shared_run(root: Path) -> Path:
    """The finished run under `root` (a folder every worker of the session sees), made by the
    first worker that asks; the others wait for it."""
    workdir, ready = root / "e2e-run", root / "e2e-run.ready"
    with open(root / "e2e-run.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not ready.exists():
            if workdir.exists():  # a run an earlier worker did not finish
                shutil.rmtree(workdir)
            fresh_checkout(workdir)
            # The default environment mode a user gets here: venvs built from envs/.
            result = snakemake(workdir, "--cores", "2", "--config", "environments=venv")
            (root / "e2e-run.log").write_text(result.log)
            assert result.returncode == 0, result.log[-6000:]
            ready.touch()
    return workdir


def private_copy(run: Path, dest: Path, own_envs: tuple[str, ...] = ()) -> Path:
    """A copy of the finished run a test may change: every file of the tree, Snakemake's
    records of what ran; each environment linked to the shared run's (they are large and
    read-only here), except those in `own_envs` (a test that rebuilds one), copied."""
    shutil.copytree(run, dest, symlinks=True, ignore=shutil.ignore_patterns(".venvs"))
    venvs = dest / ".venvs"
    venvs.mkdir()
    for entry in (run / ".venvs").iterdir():
        if entry.name in own_envs or entry.suffix:  # receipts, locks: small files
            if entry.is_dir():
                shutil.copytree(entry, venvs / entry.name, symlinks=True)
            else:
                shutil.copy2(entry, venvs / entry.name)
        else:
            (venvs / entry.name).symlink_to(entry)
    return dest
