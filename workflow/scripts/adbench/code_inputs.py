"""A rule's code inputs: its script and every project module that script imports, found by
reading the import statements (transitively), so that editing any of them re-runs exactly
the jobs that run it.  Snakemake tracks a rule's shell line, not the files it executes.

A module loaded by name at run time (a framework's backend, `backends.load`) is invisible to
this reading; the rule that loads one names it (`extra`), as the spec does.  Standard-library
and third-party imports are not project files and are left out.

What a timing or reference job executes is digested rather than dated (code_digest,
cell_digest): its code's syntax tree without comments, docstrings and formatting, and, of
the experiment spec, only its own model's and task's entries, so that an edit that cannot
change what a job runs re-runs none, and an edit of one model re-runs that model's jobs.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import os
from pathlib import Path

from adbench import spec

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


def imported_names(path: Path, scripts: Path = SCRIPTS) -> frozenset[str]:
    """Every dotted name an import statement of `path` may load, wherever the statement
    stands (a lazy import inside a function counts): `from a import b` may load module a.b."""
    # Read once per version of the file: every rule's closure walks the same modules, and
    # parsing them again for each took a third of a dry run.
    stat = path.stat()
    return _imported_names(path, scripts, stat.st_mtime_ns, stat.st_size)


@functools.cache
def _imported_names(path: Path, scripts: Path, mtime_ns: int, size: int) -> frozenset[str]:
    package = module_name(path, scripts)
    if path.name != "__init__.py":
        package = package.rpartition(".")[0]
    names = set()
    for node in statements(ast.parse(path.read_text(), filename=str(path))):
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
    return frozenset(names)


def statements(tree: ast.AST):
    """Every statement of a module, however deeply nested (a function's, a branch's, a
    handler's), and none of the expressions: an import is a statement, and the
    expressions are most of a tree's nodes."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            children = getattr(node, field, None)
            if isinstance(children, list):
                todo.extend(children)


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


# ------------------------------------------------------------------ what a job executes
# The experiment spec's registries a job reads one entry of: its model's ModelSpec and its
# task's TaskInfo.  Their values are digested per job (cell_digest); their definitions are
# left out of spec.py's code digest, so editing one model re-runs that model's jobs alone.
SPEC_MODULE = "adbench.spec"
PER_CELL = ("MODELS", "TASKS")


def _assigned_names(node: ast.stmt) -> set[str]:
    targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
    return {t.id for t in targets if isinstance(t, ast.Name)}


def _drop_strings_and(tree: ast.AST, per_cell: tuple[str, ...]) -> None:
    """Remove every statement that is a bare string (docstrings: they execute nothing) and
    the module-level assignments of `per_cell`, in place."""
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            body = getattr(node, field, None)
            if not isinstance(body, list) or not body or not isinstance(body[0], ast.stmt):
                continue
            kept = [s for s in body
                    if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)
                            and isinstance(s.value.value, str))
                    and not (node is tree and _assigned_names(s) & set(per_cell))]
            setattr(node, field, kept or [ast.Pass()])


def normalised_source(path: Path, scripts: Path = SCRIPTS) -> str:
    """The code of a file as Python runs it, written one way: comments, docstrings and
    formatting dropped (ast.unparse), and the spec's per-cell registries left out."""
    tree = ast.parse(Path(path).read_text(), filename=str(path))
    in_spec = module_name(Path(path).resolve(), scripts) == SPEC_MODULE
    _drop_strings_and(tree, PER_CELL if in_spec else ())
    return ast.unparse(tree)


@functools.cache
def code_digest(path: str, scripts: Path = SCRIPTS) -> str:
    """sha256 of a file's normalised source: equal for two texts that run the same."""
    return hashlib.sha256(normalised_source(Path(path), scripts).encode()).hexdigest()


def code_digests(files: list[str], scripts: Path = SCRIPTS) -> str:
    """One digest of a job's code files (their paths relative to the working directory, as
    the rules name them, and each one's code_digest): a Snakemake params value."""
    joined = "\n".join(f"{os.path.relpath(f)} {code_digest(str(f), scripts)}"
                        for f in sorted(files))
    return hashlib.sha256(joined.encode()).hexdigest()


@functools.cache
def cell_digest(model: str, task: str) -> str:
    """sha256 of the spec's entries one job reads (PER_CELL): its model's and its task's
    values as the spec builds them, however they are written."""
    entries = tuple(getattr(spec, name)[key] for name, key in zip(PER_CELL, (model, task)))
    return hashlib.sha256(repr(entries).encode()).hexdigest()
