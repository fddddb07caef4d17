"""Each rule's code inputs are its script and every project module the script imports
(adbench/code_inputs.py), so editing one re-runs exactly the jobs that run it.

The workflow's declared inputs (as a dry run prints them) are checked against what Python
itself loads when it imports each script: an import the reading misses fails here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from adbench import code_inputs, spec

pytestmark = pytest.mark.e2e  # runs Snakemake

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "workflow" / "scripts"


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_the_closure_follows_every_kind_of_import_and_only_the_projects(tmp_path):
    write(tmp_path / "main.py", "import os\nimport numpy\nfrom pkg import a\n")
    write(tmp_path / "pkg/__init__.py", "")
    write(tmp_path / "pkg/a.py", "from . import b\nfrom .sub.c import thing\n")
    write(tmp_path / "pkg/b.py", "def lazy():\n    import pkg.d\n")
    write(tmp_path / "pkg/d.py", "from . import a\n")  # a cycle
    write(tmp_path / "pkg/sub/__init__.py", "")
    write(tmp_path / "pkg/sub/c.py", "thing = 1\n")
    write(tmp_path / "pkg/unused.py", "")
    files = code_inputs.rule_code("main.py", scripts=tmp_path)
    assert files[0] == str(tmp_path / "main.py")
    assert {Path(f).relative_to(tmp_path).as_posix() for f in files[1:]} == {
        "pkg/__init__.py", "pkg/a.py", "pkg/b.py", "pkg/d.py", "pkg/sub/__init__.py",
        "pkg/sub/c.py"}


def test_a_module_loaded_by_name_is_named_by_the_rule(tmp_path):
    write(tmp_path / "main.py", "")
    write(tmp_path / "plugins/__init__.py", "")
    write(tmp_path / "plugins/one.py", "import shared\n")
    write(tmp_path / "shared.py", "")
    files = code_inputs.rule_code("main.py", "plugins.one", scripts=tmp_path)
    assert {Path(f).name for f in files} == {"main.py", "__init__.py", "one.py", "shared.py"}
    with pytest.raises(FileNotFoundError, match="plugins.two"):
        code_inputs.rule_code("main.py", "plugins.two", scripts=tmp_path)


def planned_inputs(workdir: Path = ROOT, *args: str) -> dict[str, list[tuple[dict, list[str]]]]:
    """{rule: [(wildcards, inputs)]} of every job a forced dry run plans (of the default
    config unless `args` say otherwise), as Snakemake prints them."""
    done = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--forceall", "--cores",
                           "2", *args], cwd=workdir, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    jobs = {}
    for block in done.stdout.split("\n\n"):
        lines = [line.strip() for line in block.splitlines()]
        rule = next((line.split()[1].rstrip(":") for line in lines
                     if line.startswith(("rule ", "localrule "))), None)
        fields = dict(line.split(": ", 1) for line in lines if ": " in line)
        if rule and "input" in fields:
            wildcards = dict(kv.split("=", 1) for kv in fields.get("wildcards", "").split(", ")
                             if "=" in kv)
            # the rules name the checkout's files relative to the working directory
            inputs = [os.path.normpath(workdir / f) for f in fields["input"].split(", ")]
            jobs.setdefault(rule, []).append((wildcards, inputs))
    return jobs


LOADED = """
import importlib.util, json, sys
sys.path.insert(0, {scripts!r})
found = importlib.util.spec_from_file_location("script_under_test", {script!r})
module = sys.modules["script_under_test"] = importlib.util.module_from_spec(found)
found.loader.exec_module(module)
for framework in {frameworks!r}:
    importlib.import_module("adbench.backends").load(framework)
print(json.dumps(sorted(m.__file__ for m in list(sys.modules.values())
                        if (getattr(m, "__file__", None) or "").startswith({scripts!r}))))
"""


def files_python_loads(script: str, frameworks: list[str]) -> set[str]:
    """The project files Python loads to import `script` and the named backends."""
    code = LOADED.format(scripts=str(SCRIPTS), script=script, frameworks=frameworks)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    return set(json.loads(done.stdout.splitlines()[-1]))


def loads_by_name(rule: str, wildcards: dict) -> list[str]:
    """The backend a job's script loads by name, as the spec says."""
    if rule == "harness":
        return [wildcards["framework"]]
    if rule == "reference":
        how = spec.MODELS[wildcards["model"]].reference
        return [] if how == "numpy" else [how]
    return []


def test_every_rules_code_inputs_hold_what_its_script_imports():
    """Every job of the default config (its frameworks are this Python's) against what
    Python loads for it: a module missing from the inputs is a stale result waiting."""
    checked = {}
    for rule, jobs in planned_inputs().items():
        for wildcards, inputs in jobs:
            scripts = [f for f in inputs if f.endswith(".py")]
            if not scripts:
                continue
            key = (scripts[0], tuple(loads_by_name(rule, wildcards)))
            if key not in checked:
                checked[key] = files_python_loads(*key[:1], list(key[1]))
            missing = checked[key] - set(inputs)
            assert not missing, f"{rule} {wildcards}: its inputs lack {sorted(missing)}"
    assert {Path(script).name for script, _ in checked} >= {
        "measure.py", "aggregate.py", "make_tables.py", "make_verdicts.py", "figures.py",
        "render_paper.py", "check_gradients.py", "make_reference.py"}
