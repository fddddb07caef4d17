"""The variant tasks (spec.TaskInfo.variant_of, issue 26: a frozen part, a retained graph) in
a backend's own environment: one small model in every mode given, appended to the study
tasks' cells of tests/isolated.py's BackendCells (checked against the float64 reference the
same way: a frozen task's restricted to the trained parameters)."""

from __future__ import annotations

from adbench import spec
from isolated import tiny

VARIANT_MODEL = "mlp294x3"  # four dense layers: its frozen part is the first two
VARIANT_TASKS = tuple(t for t in spec.TASKS
                      if t not in spec.STUDY_TASKS and spec.TASKS[t].sequence is None)


def variant_cells(framework: str, modes=None) -> list[dict]:
    modes = modes or list(spec.FRAMEWORKS[framework].modes)
    return [tiny(VARIANT_MODEL, task, mode) for mode in modes for task in VARIANT_TASKS]
