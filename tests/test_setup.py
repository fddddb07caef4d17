"""setup.sh: what each mode installs into the Python that runs Snakemake, read from the
installers' own calls (a stand-in Python and apt-get record them; nothing is installed).
tests/test_setup_alone.py installs for real, and runs the documented commands there."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Records `-m pip ...` and `-m uv ...` with the requirement files they name; runs the rest
# (the project's own scripts) in the real Python.
FAKE_PYTHON = """#!/usr/bin/env bash
if [ "$1" = "-m" ]; then
  echo "CALL $*" >> "$SETUP_LOG"
  prev=""
  for arg in "$@"; do [ "$prev" = "-r" ] && cat "$arg" >> "$SETUP_LOG"; prev=$arg; done
  exit 0
fi
[ "$1" = "-c" ] && { echo /fake/python; exit 0; }
exec PYTHON_EXE "$@"
"""


def installed(tmp_path: Path, *args: str) -> list[str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    python = bin_dir / "python"
    python.write_text(FAKE_PYTHON.replace("PYTHON_EXE", sys.executable))
    (bin_dir / "apt-get").write_text("#!/bin/sh\necho \"CALL apt-get $*\" >> \"$SETUP_LOG\"\n")
    for tool in (python, bin_dir / "apt-get"):
        tool.chmod(0o755)
    log = tmp_path / "setup.log"
    env = {**os.environ, "PYTHON": str(python), "SETUP_LOG": str(log),
           "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(["bash", str(ROOT / "setup.sh"), *args], capture_output=True,
                          text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    return log.read_text().splitlines()


def pinned(lines: list[str]) -> set[str]:
    return {line.split("==")[0] for line in lines if "==" in line and not line.startswith("CALL")}


def test_setup_alone_installs_what_an_analysis_only_config_runs(tmp_path):
    """config/machines-example.yaml and the example trees' configs run their analysis,
    figures and paper in this Python (environments: current): ./setup.sh installs the
    analysis pins (matplotlib, pandas, scipy, jinja2) beside the driver, no framework."""
    names = pinned(installed(tmp_path))
    assert {"snakemake", "matplotlib", "pandas", "scipy", "jinja2", "pyarrow"} <= names
    assert not names & {"torch", "tensorflow-cpu", "jax"}


def test_setup_for_the_tests_adds_the_frameworks(tmp_path):
    names = pinned(installed(tmp_path, "--test"))
    assert {"matplotlib", "torch", "tensorflow-cpu"} <= names
