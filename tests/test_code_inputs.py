"""Each rule's code inputs are its script and every project module the script imports
(adbench/code_inputs.py), so editing one re-runs exactly the jobs that run it; what a timing
or reference job executes is digested (comments, docstrings and formatting dropped; of the
spec, its own model's and task's entries).

The workflow's declared inputs (as a dry run prints them) are checked against what Python
itself loads when it imports each script: an import the reading misses fails here (e2e)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from adbench import code_inputs, spec

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


CODE = '''"""A module."""

import os


def f(x):
    """Twice x."""
    return 2 * x  # doubled
'''


@pytest.mark.parametrize("same", [
    CODE + "# a comment at the end\n",
    CODE.replace('"""Twice x."""', '"""Twice x, said otherwise."""'),
    CODE.replace('"""A module."""\n', ""),
    CODE.replace("return 2 * x  # doubled", "return (2\n            * x)"),
])
def test_what_a_file_executes_ignores_comments_docstrings_and_formatting(tmp_path, same):
    (tmp_path / "a.py").write_text(CODE)
    (tmp_path / "b.py").write_text(same)
    digest = code_inputs.code_digest
    assert digest(str(tmp_path / "a.py"), tmp_path) == digest(str(tmp_path / "b.py"), tmp_path)


@pytest.mark.parametrize("other", [
    CODE.replace("2 * x", "3 * x"),
    CODE + "EDITED = True\n",
    CODE.replace("import os", "import sys"),
])
def test_a_change_of_what_runs_changes_the_digest(tmp_path, other):
    (tmp_path / "a.py").write_text(CODE)
    (tmp_path / "b.py").write_text(other)
    digest = code_inputs.code_digest
    assert digest(str(tmp_path / "a.py"), tmp_path) != digest(str(tmp_path / "b.py"), tmp_path)


def test_the_specs_per_cell_entries_are_digested_per_cell_not_per_file(tmp_path, monkeypatch):
    """Editing one model's entry of spec.py leaves the file's digest (the harness's) as it is
    and changes the digest of that model's cells alone; an edit elsewhere in the file
    changes the file's."""
    text = (SCRIPTS / "adbench/spec.py").read_text()
    entry = '"mlp512": _mlp((512,)),'
    assert entry in text
    edited = tmp_path / "adbench/spec.py"
    write(tmp_path / "adbench/__init__.py", "")
    for new_text, same_file in ((text.replace(entry, '"mlp512": _mlp((520,)),'), True),
                                (text + "EDITED = True\n", False)):
        write(edited, new_text)
        digest = code_inputs.code_digest.__wrapped__(str(edited), tmp_path)
        assert (digest == code_inputs.code_digest(str(SCRIPTS / "adbench/spec.py"))) is same_file

    def cell(model, task):
        return code_inputs.cell_digest.__wrapped__(model, task)

    before = {(m, t): cell(m, t) for m in ("mlp512", "cnn") for t in ("backward", "forward")}
    monkeypatch.setitem(spec.MODELS, "mlp512", spec._mlp((520,)))
    monkeypatch.setitem(spec.TASKS, "forward", spec.TaskInfo("loss", separable=True))
    changed = {key for key, digest in before.items() if cell(*key) != digest}
    assert changed == {("mlp512", "backward"), ("mlp512", "forward"), ("cnn", "forward")}


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


@pytest.mark.e2e  # runs Snakemake
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
