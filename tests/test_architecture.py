"""The architecture of workflow/scripts as DESIGN.md draws it: layers whose imports only point
down, no import cycle, and timing jobs that load nothing of the report.

Every project module is given a layer here (a new module fails until it is given one): this
table is the architecture, checked against the import statements themselves (lazy imports
inside functions included: adbench.code_inputs reads them as the rules' code inputs do).
"""

from __future__ import annotations

import fnmatch
from pathlib import Path

import pytest

from adbench import code_inputs

SCRIPTS = Path(code_inputs.SCRIPTS)

# Bottom to top. A module may import its own layer's modules and those below; the scripts
# (entry points) import any library module and no other script.
LAYERS = {
    "experiment spec and contracts": [
        "adbench", "adbench.spec", "adbench.schema", "adbench.derivatives", "adbench.clock",
        "adbench.provenance", "adbench.code_inputs", "adbench.sweeps"],
    "backends": ["adbench.backends", "adbench.backends.*"],
    "timing": ["adbench.timing", "adbench.cell_record", "adbench.reference", "adbench.config",
               "adbench.cluster"],
    "analysis": ["adbench.stats", "adbench.inference", "adbench.flops",
                 "adbench.activation_memory", "adbench.claims",
                 "adbench.verdicts", "adbench.scaling", "adbench.comparisons"],
    "presentation": ["adbench.report_spec", "adbench.formatting", "adbench.selection",
                     "adbench.tables", "adbench.paper_tables", "adbench.report_stats",
                     "adbench.findings", "adbench.hypotheses", "adbench.variants",
                     "adbench.varlen", "adbench.paper_context", "adbench.graphs",
                     "adbench.plotting", "adbench.scaling_section", "adbench.machines_section",
                     "adbench.sections", "adbench.sections.*", "adbench.disagreements",
                     "adbench.paper_framing"],
    "scripts": ["*"],
}
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
    raise AssertionError(f"{module}: no layer in tests/test_architecture.py LAYERS: give it one")


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
