"""The architecture of workflow/scripts as docs/design.md draws it: layers whose imports only
point down, no import cycle, and timing jobs that load nothing of the report.

The layers are the table of docs/design.md, read here (LAYERS): every project module is given
a layer there (a new module fails until it is given one), checked against the import
statements themselves (lazy imports inside functions included: adbench.code_inputs reads them
as the rules' code inputs do).  adbench/__init__.py names the same layers in the same order.
"""

from __future__ import annotations

import ast
import fnmatch
import re
from pathlib import Path

import pytest

from adbench import code_inputs

SCRIPTS = Path(code_inputs.SCRIPTS)
DESIGN = SCRIPTS.parents[1] / "docs" / "design.md"
LAYER_TABLE = "<!-- layers:"  # the comment above the table


def read_layers(text: str) -> dict[str, list[str]]:
    """{layer: module patterns}, bottom to top, from the Markdown table after LAYER_TABLE:
    its first column is the layer, its last the patterns, each in backquotes."""
    lines = text.split(LAYER_TABLE, 1)[1].splitlines()[1:]
    rows = []
    for line in lines:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return {row[0]: re.findall(r"`([^`]+)`", row[-1]) for row in rows[2:]}


# Bottom to top. A module may import its own layer's modules and those below; the scripts
# (entry points) import any library module and no other script.
LAYERS = read_layers(DESIGN.read_text())
RANK = {name: rank for rank, name in enumerate(LAYERS)}
# What the report alone reads: no timing or reference job may load it.
REPORT_LAYERS = ("analysis", "presentation")


def all_modules() -> dict[str, Path]:
    found = {}
    for path in sorted(SCRIPTS.rglob("*.py")):
        found[code_inputs.module_name(path)] = path
    return found


def layer_of(module: str) -> str:
    for layer, patterns in LAYERS.items():
        if any(fnmatch.fnmatchcase(module, p) for p in patterns):
            if layer == "scripts" and module.startswith("adbench"):
                break
            return layer
    raise AssertionError(f"{module}: no layer in docs/design.md's layer table: give it one")


def project_imports(path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules a file's import statements load (packages on the way included)."""
    me = code_inputs.module_name(path)
    found = set()
    for name in code_inputs.imported_names(path):
        for part in code_inputs.with_packages(name):
            if part in modules and part != me:
                found.add(part)
    return found


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    modules = all_modules()
    return {m: project_imports(p, modules) for m, p in modules.items()}


def test_the_layer_table_is_read_as_written():
    table = ("<!-- layers: x -->\n| layer | what | modules |\n| --- | --- | --- |\n"
             "| low | the `spec` | `a`, `a.b.*` |\n| high | scripts | `*` |\n\nprose `c`\n")
    assert read_layers(table) == {"low": ["a", "a.b.*"], "high": ["*"]}
    assert list(LAYERS)[0] == "experiment spec and contracts" and list(LAYERS)[-1] == "scripts"
    assert "adbench.spec" in LAYERS["experiment spec and contracts"]


def test_the_package_docstring_names_the_layers_in_their_order():
    """adbench/__init__.py's docstring: 'Layers, bottom to top (docs/design.md): a -> b.'"""
    doc = " ".join(ast.get_docstring(ast.parse((SCRIPTS / "adbench/__init__.py")
                                               .read_text())).split())
    named = re.search(r"Layers, bottom to top \(docs/design\.md\): (.+?)\.(?: |$)", doc)
    assert named, doc
    assert [name.strip() for name in named.group(1).split("->")] == list(LAYERS)


def test_every_module_has_a_layer(graph):
    assert {m: layer_of(m) for m in graph}


def test_imports_point_down_or_across_only(graph):
    upward = [f"{m} ({layer_of(m)}) imports {d} ({layer_of(d)})"
              for m, deps in graph.items() for d in sorted(deps)
              if RANK[layer_of(d)] > RANK[layer_of(m)]]
    assert not upward, "\n".join(upward)


def test_scripts_import_no_other_script(graph):
    across = [f"{m} imports {d}" for m, deps in graph.items() if layer_of(m) == "scripts"
              for d in sorted(deps) if layer_of(d) == "scripts"]
    assert not across, "\n".join(across)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_there_is_no_import_cycle(graph):
    assert cycles(graph) == []


def test_a_planted_cycle_is_found():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


@pytest.mark.parametrize("script, loaded", [
    ("measure.py", ("run_cell.py",)),
    ("make_reference.py", ()),
])
def test_timing_and_reference_jobs_load_nothing_of_the_report(script, loaded):
    """What a timing or reference job runs (its rule's code inputs, every backend loaded by
    name) holds no analysis or presentation module: editing the report re-times nothing."""
    backends = [f"adbench.backends.{p.name}" for p in (SCRIPTS / "adbench/backends").iterdir()
                if p.is_dir() and (p / "__init__.py").exists()]
    files = code_inputs.rule_code(script, *loaded, *backends)
    report = [f for f in files if layer_of(code_inputs.module_name(Path(f))) in REPORT_LAYERS]
    assert not report, report


# What the analysis environment brings and the Snakemake driver need not have: planning a
# campaign of thousands of jobs imports the spec, the config and the backends' declarations.
ANALYSIS_PACKAGES = ("pandas", "scipy", "matplotlib", "pyarrow", "jinja2")


def test_the_snakemake_driver_loads_no_analysis_package():
    """Every project module a rule file imports, and what they import, in a fresh Python."""
    import re
    import subprocess
    import sys

    rule_files = [SCRIPTS.parents[1] / "Snakefile", *(SCRIPTS.parent / "rules").glob("*.smk")]
    modules = sorted({f"adbench.{name.strip()}" for path in rule_files
                      for line in path.read_text().splitlines()
                      if (m := re.match(r"from adbench import ([\w, ]+?)(?:\s+as \w+)?\s*(#|$)",
                                        line))
                      for name in m.group(1).split(",")})
    assert "adbench.spec" in modules and "adbench.sweeps" in modules
    code = ("import importlib, sys\n"
            f"for m in {modules!r}: importlib.import_module(m)\n"
            f"print(','.join(p for p in {ANALYSIS_PACKAGES!r} if p in sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", code], cwd=SCRIPTS, capture_output=True,
                            text=True, check=True).stdout.strip()
    assert loaded == "", f"the rule files' modules {modules} load {loaded}"
