"""A rule's code inputs: its script and every project module that script imports, found by
reading the import statements (transitively), so that editing any of them re-runs exactly
the jobs that run it.  Snakemake tracks a rule's shell line, not the files it executes.

A module loaded by name at run time (a framework's backend, `backends.load`) is invisible to
this reading; the rule that loads one names it (`extra`), as the spec does.  Standard-library
and third-party imports are not project files and are left out.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[1]  # workflow/scripts: the scripts and adbench/


def module_file(name: str, scripts: Path = SCRIPTS) -> Path | None:
    """The project file of a dotted module name (a module or a package's __init__), or None
    when the name is not the project's."""
    base = scripts.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def module_name(path: Path, scripts: Path = SCRIPTS) -> str:
    parts = path.relative_to(scripts).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_names(path: Path, scripts: Path = SCRIPTS) -> set[str]:
    """Every dotted name an import statement of `path` may load, wherever the statement
    stands (a lazy import inside a function counts): `from a import b` may load module a.b."""
    package = module_name(path, scripts)
    if path.name != "__init__.py":
        package = package.rpartition(".")[0]
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from the file's own package upwards
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            else:
                base = node.module or ""
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def with_packages(name: str) -> list[str]:
    """Importing a.b.c runs a/__init__.py and a/b/__init__.py first."""
    parts = name.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


@functools.cache
def closure(start: tuple[Path, ...], scripts: Path = SCRIPTS) -> tuple[Path, ...]:
    """The project files reached from `start` through import statements, sorted."""
    seen, todo = set(), list(start)
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for name in imported_names(path, scripts):
            for part in with_packages(name):
                found = module_file(part, scripts)
                if found is not None and found not in seen:
                    todo.append(found)
    return tuple(sorted(seen))


def rule_code(script: str, *extra: str, scripts: Path = SCRIPTS) -> list[str]:
    """A rule's code inputs: `script` first (the rules run input.code[0]), then every
    project file it, or an `extra` script or dotted module it loads by name, imports."""
    first = scripts / script
    starts = [first]
    for item in extra:
        found = ([scripts / item] if item.endswith(".py")
                 else [module_file(name, scripts) for name in with_packages(item)])
        if None in found or not found[-1].is_file():
            raise FileNotFoundError(f"{item}: no such project script or module under {scripts}")
        starts += found
    files = closure(tuple(starts), scripts)
    return [str(first), *(str(f) for f in files if f != first)]
