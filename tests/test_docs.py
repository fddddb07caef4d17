"""docs/spec.md is what spec_docs.py writes now, and the links of the README and docs resolve."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
import yaml

import spec_docs
from adbench import report_spec, spec

from conftest import REPO

SCRIPT = REPO / "workflow" / "scripts" / "spec_docs.py"


def test_the_committed_spec_page_is_current():
    """After editing spec.py or a config in config/, run workflow/scripts/spec_docs.py."""
    assert (REPO / "docs" / "spec.md").read_text() == spec_docs.render()


def test_check_fails_on_a_stale_page_and_passes_once_rewritten(tmp_path):
    page = tmp_path / "spec.md"
    page.write_text(spec_docs.render().replace("| `torch` (PyTorch) | `eager` |", "", 1))

    def check():
        return subprocess.run(
            [sys.executable, SCRIPT, "--check", "--out", page], capture_output=True, text=True
        )

    stale = check()
    assert stale.returncode == 1 and "stale" in stale.stderr
    assert subprocess.run([sys.executable, SCRIPT, "--out", page]).returncode == 0
    assert check().returncode == 0
    assert page.read_text() == spec_docs.render()


def rows(section: str) -> list[list[str]]:
    """The body rows of the first Markdown table under `## <section>` of the generated page."""
    text = spec_docs.render().split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    table = next(block for block in text.split("\n\n") if block.startswith("| "))
    lines = table.splitlines()
    return [[c.strip() for c in line.strip("|").split(" | ")] for line in lines[2:]]


def test_every_framework_and_mode_has_a_row():
    pairs = [(r[0], r[1]) for r in rows("Frameworks and modes")]
    assert pairs == [
        (f"`{name}` ({report_spec.framework_label(name)})", f"`{mode}`")
        for name, info in spec.FRAMEWORKS.items()
        for mode in info.modes
    ]


def test_every_task_and_model_has_a_row_with_its_derivative_and_parameter_count():
    assert [r[0] for r in rows("Tasks: what one iteration times")] == [
        f"`{t}`" for t in spec.TASKS
    ]
    models = {r[0]: r for r in rows("Models")}
    assert list(models) == [f"`{m}`" for m in spec.MODELS]
    for name, model in spec.MODELS.items():
        row = models[f"`{name}`"]
        assert int(row[5].replace(",", "")) == model.n_parameters, name
        assert row[6] == "×".join(map(str, model.jacobian_shape())), name
        assert int(row[7]) == model.batch_size, name


def test_each_shipped_config_has_its_cell_count():
    counts = {r[0]: int(r[2].replace(",", "")) for r in rows("Shipped configs")}
    paths = sorted((REPO / "config").glob("*.yaml"))
    assert set(counts) == {f"`{p.relative_to(REPO).as_posix()}`" for p in paths}
    for path in paths:
        cells = spec.config_cells(yaml.safe_load(path.read_text()))
        assert counts[f"`{path.relative_to(REPO).as_posix()}`"] == len(cells), path


DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


@pytest.mark.parametrize("page", DOCS, ids=lambda p: p.relative_to(REPO).as_posix())
def test_relative_links_resolve(page):
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
        if "://" not in target:
            assert (page.parent / target).exists(), f"{page.name} links {target}"


# A backquoted name of the harness in docs/design.md: `adbench.x.y`, `x.y` (x a module of
# adbench), not a file name.
CODE_NAME = re.compile(r"`((?:adbench\.)?([a-z_]+)((?:\.[A-Za-z_]+)+))`")
FILE_SUFFIXES = (".py", ".json", ".md", ".yaml", ".smk", ".tex", ".csv", ".j2", ".parquet")


def design_names() -> list[str]:
    modules = {p.stem for p in (REPO / "workflow/scripts/adbench").iterdir()}
    return [m.group(1) for m in CODE_NAME.finditer((REPO / "docs/design.md").read_text())
            if m.group(2) in modules and not m.group(1).endswith(FILE_SUFFIXES)]


def test_every_name_the_design_cites_exists():
    """docs/design.md's walks name modules, functions and registries: each resolves, so the
    page follows the code when a name is changed or removed."""
    import importlib

    names = design_names()
    assert "spec.TASKS" in names and "backends.load" in names
    missing = []
    for name in dict.fromkeys(names):
        parts = name.removeprefix("adbench.").split(".")
        found, rest = importlib.import_module(f"adbench.{parts[0]}"), parts[1:]
        for attribute in rest:
            if not hasattr(found, attribute) and hasattr(found, "__path__"):  # a subpackage
                importlib.import_module(f"{found.__name__}.{attribute}")
            found = getattr(found, attribute, None)
            if found is None:
                missing.append(name)
                break
    assert not missing, missing
