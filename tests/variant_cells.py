"""The tasks beyond the study's fixed-shape ones in a backend's own environment: the variant
tasks (spec.TaskInfo.variant_of, issue 26: a frozen part, a retained graph) and the forward
alone (spec.FORWARD_TASK, issue 27: the cheap-gradient ratio's denominator).  One small model
in every mode given, appended to the study tasks' cells of tests/isolated.py's BackendCells
(checked against the float64 reference the same way: a frozen task's restricted to the
trained parameters, the forward's loss)."""

from __future__ import annotations

from adbench import spec
from isolated import tiny

VARIANT_MODEL = "mlp294x3"  # four dense layers: its frozen part is the first two
VARIANT_TASKS = tuple(t for t, info in spec.TASKS.items()
                      if info.variant_of and info.sequence is None and "cpu" in info.devices)


def variant_cells(framework: str, modes=None) -> list[dict]:
    modes = modes or list(spec.FRAMEWORKS[framework].modes)
    return [tiny(VARIANT_MODEL, task, mode) for mode in modes
            for task in (*VARIANT_TASKS, spec.FORWARD_TASK)]
