"""`./setup.sh` alone suffices (issue 48): in a fresh copy of the checkout, a fresh virtual
environment (no system site-packages, so nothing of the test suite's Python) set up by plain
`./setup.sh` runs each command of the README and docs/ that needs nothing more: every shipped
config plans as its documented command gives it, the analysis-only configs (this Python,
measuring nothing) run through their paper, and the other commands (checks, plans,
fabricated papers) run. The commands that need more say what, in BEYOND_SETUP."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import paper_checks
import pytest
import yaml

from adbench import spec
from adbench.config import default_results_tree
from adbench.sections.paper import SECTIONS
from e2e import REPO as ROOT
from e2e import fresh_checkout
from test_shipped_dryruns import CONFIGS, SITE

# Set-up (a venv and the driver's and analysis' pins, a minute from uv's cache), a dry run of
# every shipped config and documented command, one analysis and paper: the extended tier.
pytestmark = pytest.mark.extended

DOCS = [ROOT / "README.md", *sorted(ROOT.glob("docs/*.md")),
        *sorted(ROOT.glob("example-results/*/README.md"))]
# A documented command that needs more than plain ./setup.sh: a pattern of it, and what.
BEYOND_SETUP = {
    r"environments=current": "the frameworks in the driver's Python: ./setup.sh --test "
                             "(docs/environments.md)",
    r"^python3 -m pytest": "the test suite: ./setup.sh --test (README)",
    r"^python3 benchmarks/": "the benchmarks: ./setup.sh --test (docs/costs.md)",
    r"--profile ~/": "a SLURM site's own profile and site file (docs/cluster.md)",
    r"--until measure": "a GPU: it measures the example tree's cells",
    r"--report": "a finished run of the same config (run below after an analysis-only "
                 "config's paper)",
    r"\.\.\.|<\w+>|\bDIR\b": "a template to fill in, not a command",
}
# Where the docs put a site file before a command (README, docs/cluster.md: `export
# ADBENCH_SITE=...`), the example site file stands in for the reader's.
NEEDS_A_SITE = ("plan_campaign.py",)


# ------------------------------------------------------------------ the documented commands
def code_lines(text: str) -> list[str]:
    """A Markdown page's commands: its indented code lines (a trailing backslash joins the
    next) and inline code spans, each `&&` part, comments dropped; one word is no command."""
    lines, found, i = text.splitlines(), [], 0
    while i < len(lines):
        command = lines[i].strip() if lines[i].startswith("    ") else ""
        while command.endswith("\\") and i + 1 < len(lines):
            i += 1
            command = command[:-1].rstrip() + " " + lines[i].strip()
        found += [command] if command else []
        i += 1
    # a span within a paragraph of prose (a code block's backticks are no span)
    prose = "\n".join("" if line.startswith("    ") else line for line in lines)
    found += [span.replace("\n", " ") for paragraph in re.split(r"\n\s*\n", prose)
              for span in re.findall(r"`([^`]+)`", paragraph)]
    parts = [part.split(" # ")[0].strip() for command in found for part in command.split("&&")]
    return [p for p in parts if re.match(r"(snakemake|snakefmt|python3) \S", p)]


def documented_commands() -> list[str]:
    return list(dict.fromkeys(c for page in DOCS for c in code_lines(page.read_text())))


def beyond_setup(command: str) -> str | None:
    return next((why for pattern, why in BEYOND_SETUP.items() if re.search(pattern, command)),
                None)


RUNNABLE = [c for c in documented_commands() if beyond_setup(c) is None]


def as_dry_run(command: str) -> str:
    """A Snakemake command that would run jobs, planned only (`-n`)."""
    words = command.split()
    if words[0] != "snakemake" or {"-n", "--lint"} & set(words):
        return command
    return "snakemake -n " + command.removeprefix("snakemake ")


def config_commands(config: str) -> list[str]:
    """The docs' Snakemake commands of a config, else the README's form (an example tree's
    rebuilt in the pipeline's own environments, as the H100 tree's README gives it)."""
    named = [c for c in RUNNABLE if c.startswith("snakemake") and f"--configfile {config}" in c]
    if named:
        return list(dict.fromkeys(as_dry_run(c) for c in named))
    extra = " --config environments=venv" if config.startswith("example-results") else ""
    return [f"snakemake -n --cores 8 --configfile {config}{extra}"]


CONFIG_COMMANDS = {c for config in CONFIGS for c in config_commands(config)}
OTHER_COMMANDS = [c for c in RUNNABLE if as_dry_run(c) not in CONFIG_COMMANDS]


def analysis_only(config: str) -> bool:
    """A config that runs everything in the driver's Python and measures nothing."""
    loaded = yaml.safe_load((ROOT / config).read_text())
    return loaded.get("environments") == "current" and not spec.config_cells(loaded)


ANALYSIS_ONLY = [c for c in CONFIGS if analysis_only(c)]


# ------------------------------------------------------------------ the environment
@dataclass(frozen=True)
class SetUp:
    checkout: Path
    venv: Path
    env: dict  # the venv activated: its bin first on PATH, nothing of the test's Python

    def run(self, command: str, timeout: int = 600, **extra_env) -> subprocess.CompletedProcess:
        done = subprocess.run(["bash", "-c", command], cwd=self.checkout, capture_output=True,
                              text=True, timeout=timeout, env={**self.env, **extra_env})
        done.log = f"$ {command}\n{done.stdout}\n{done.stderr}"[-6000:]
        return done


def activated(venv: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    return {**env, "VIRTUAL_ENV": str(venv), "PATH": f"{venv / 'bin'}{os.pathsep}{env['PATH']}"}


@pytest.fixture(scope="module")
def setup_alone(tmp_path_factory) -> SetUp:
    """A fresh checkout and a fresh venv, set up by `./setup.sh` (no --test) with that venv's
    Python; PIP_FIND_LINKS and pip's own settings pass on as a reader's would."""
    base = tmp_path_factory.mktemp("setup-alone")
    checkout, venv = base / "checkout", base / "venv"
    fresh_checkout(checkout)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    env = activated(venv)
    done = subprocess.run(["bash", "setup.sh"], cwd=checkout, capture_output=True, text=True,
                          timeout=1800, env={**env, "PYTHON": str(venv / "bin/python")})
    assert done.returncode == 0, (done.stdout + done.stderr)[-6000:]
    return SetUp(checkout, venv, env)


def importable(setup: SetUp, modules) -> list[str]:
    probe = ("import importlib.util, sys; "
             "print(' '.join(m for m in sys.argv[1:] if importlib.util.find_spec(m)))")
    done = subprocess.run([str(setup.venv / "bin/python"), "-c", probe, *modules],
                          capture_output=True, text=True, check=True, env=setup.env)
    return done.stdout.split()


def test_the_venv_has_the_driver_and_no_framework(setup_alone):
    """What runs below runs on what plain ./setup.sh installed, not on the test's Python."""
    assert importable(setup_alone, spec.FRAMEWORKS) == []
    assert importable(setup_alone, ["snakemake", "uv", "matplotlib"]) == [
        "snakemake", "uv", "matplotlib"]
    found = setup_alone.run("command -v snakemake python3").stdout.split()
    assert found and all(Path(p).parent == setup_alone.venv / "bin" for p in found)


# ------------------------------------------------------------------ the commands, run
def test_a_page_s_commands_are_read_as_a_reader_types_them():
    page = "\n".join([
        "Run:", "",
        "    ./setup.sh && snakemake --cores 8",
        "    snakemake --workflow-profile p \\",
        "        --configfile c.yaml",
        "    python3 x.py --check    # why", "",
        "Then `snakemake --report", "report.html` or `python3`.",
        "    Snakefile   the rules"])
    assert code_lines(page) == ["snakemake --cores 8",
                                "snakemake --workflow-profile p --configfile c.yaml",
                                "python3 x.py --check", "snakemake --report report.html"]
    assert as_dry_run("snakemake --cores 8") == "snakemake -n --cores 8"
    assert as_dry_run("snakemake --lint") == "snakemake --lint"


def test_each_analysis_only_config_has_its_documented_command():
    assert ANALYSIS_ONLY
    for config in ANALYSIS_ONLY:
        assert any(f"--configfile {config}" in c for c in documented_commands())


@pytest.mark.parametrize("config", CONFIGS)
def test_a_shipped_config_plans_after_setup_alone(setup_alone, config):
    for command in config_commands(config):
        done = setup_alone.run(command)
        assert done.returncode == 0, done.log
        # (an analysis-only config whose paper a test below made has nothing to plan)
        assert re.search("This was a dry-run|Nothing to be done", done.stdout + done.stderr), \
            done.log


@pytest.mark.parametrize("command", OTHER_COMMANDS)
def test_a_documented_command_runs_after_setup_alone(setup_alone, command, tmp_path):
    # a path the docs give under /tmp lands in this test's own folder
    command = as_dry_run(command).replace(" /tmp/", f" {tmp_path}/")
    site = {"ADBENCH_SITE": str(setup_alone.checkout / SITE)} if any(
        name in command for name in NEEDS_A_SITE) else {}
    done = setup_alone.run(command, timeout=1200, **site)
    assert done.returncode == 0, done.log


def section_heading(name: str) -> str:
    """A section's heading, from the template its declaration names."""
    (section,) = [s for s in SECTIONS if s.name == name]
    return re.search(r"\\section\{([^}]*)\}", (ROOT / "report" / section.template)
                     .read_text())[1]


@pytest.mark.parametrize("config", ANALYSIS_ONLY)
def test_an_analysis_only_config_makes_its_paper_after_setup_alone(setup_alone, config):
    """Its documented command, for real: every job in the venv (no environment built, no
    cell measured), the paper with every section it declares printed (the machines section
    among them for several trees), and the report the README gives after a run."""
    if shutil.which("pdftotext") is None:
        pytest.fail("pdftotext is missing: ./setup.sh --test installs it")
    (command,) = [c.replace("snakemake -n ", "snakemake ", 1) for c in config_commands(config)]
    done = setup_alone.run(command, timeout=1800)
    assert done.returncode == 0, done.log
    ran = set(re.findall(r"^(?:local)?rule (\w+):", done.stdout + done.stderr, re.M))
    assert "paper" in ran and not ran & {"build_venv", "measure"}, ran
    assert not (setup_alone.checkout / ".venvs").exists()

    loaded = yaml.safe_load((ROOT / config).read_text())
    tree = setup_alone.checkout / (loaded.get("results") or default_results_tree(
        [ROOT / config], root=ROOT))
    paper = paper_checks.Paper.read(tree / "paper/paper.pdf")
    headings = re.findall(r"(?m)^[^%\n]*\\section\{([^}]*)\}", paper.tex)
    assert headings and paper_checks.headings_not_printed(paper) == []
    if len(loaded.get("raw_trees", [])) > 1:  # several machines' trees, set side by side
        assert section_heading("machines") in headings

    report = tree / "report.html"
    done = setup_alone.run(f"snakemake --report {report} --configfile {config}")
    assert done.returncode == 0 and report.stat().st_size > 0, done.log
