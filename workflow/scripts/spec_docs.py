#!/usr/bin/env python
"""Write docs/spec.md: the frameworks and modes, tasks, models and tables of the spec.

The tables are generated from workflow/scripts/adbench/spec.py (what runs), its words and the
paper's tables from workflow/scripts/adbench/report_spec.py, and the shipped configs' cell
counts from config/*.yaml, so they are never typed twice.

    python3 workflow/scripts/spec_docs.py            # rewrite docs/spec.md
    python3 workflow/scripts/spec_docs.py --check    # exit 1 if docs/spec.md is stale
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from adbench import config as run_config  # noqa: E402
from adbench import formatting as fmt  # noqa: E402
from adbench import report_spec, spec  # noqa: E402
from adbench.report_spec import framework_label  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "docs" / "spec.md"
SCRIPT = "workflow/scripts/spec_docs.py"


def cell(value: object) -> str:
    """One Markdown table cell: pipes escaped, no line breaks."""
    return str(value).replace("|", "\\|").replace("\n", " ")


def table(header: list[str], rows: list[list[object]], right: tuple[int, ...] = ()) -> str:
    """A Markdown table; the columns numbered in `right` are right-aligned."""
    rule = ["---:" if i in right else "---" for i in range(len(header))]
    lines = [header, rule, *([cell(v) for v in row] for row in rows)]
    return "\n".join("| " + " | ".join(line) + " |" for line in lines)


def code(value: object) -> str:
    return f"`{value}`"


def frameworks_section() -> str:
    rows = [
        [
            f"{code(name)} ({framework_label(name)})",
            code(mode),
            report_spec.mode_label(name, mode),
            "yes" if m.compiled else "no",
            "whole step" if m.whole_step else "forward, backward, step",
            report_spec.mode_description(name, mode),
        ]
        for name, info in spec.FRAMEWORKS.items()
        for mode, m in info.modes.items()
    ]
    envs = [
        [
            code(name),
            code(f"envs/{info.env}.yaml"),
            code(f"envs/{info.cuda_env}.yaml") if info.cuda_env else "none (CPU only)",
            code(f"adbench.backends.{info.backend}"),
        ]
        for name, info in spec.FRAMEWORKS.items()
    ]
    numerics = ", ".join(f"`{k}`: {v}" for k, v in spec.CUDA_NUMERICS.items())
    default = ", ".join(code(t) for t, info in spec.TASKS.items() if info.default_allocator)
    policy = ", ".join(f"{f}'s {code(k)}" for f, k in spec.CUDA_MEMORY_POLICY.items())
    return "\n\n".join(
        [
            "## Frameworks and modes",
            "The valid (framework, mode) pairs of `spec.FRAMEWORKS`: a grid may name only "
            "these. Compiled modes are compared with the framework's eager mode where it has "
            "one. *Timed* says what the clock can separate on a separable task (see Tasks).",
            table(["framework", "mode", "label", "compiled", "timed", "how the model runs"], rows),
            "Each framework runs in the environment of its pin file; a `cuda` cell runs in its "
            "CUDA build's, and a grid expands no `cuda` cell of a framework without one.",
            table(["framework", "CPU pins", "CUDA pins", "backend"], envs),
            f"Every CUDA cell runs with the same numerics (`spec.CUDA_NUMERICS`): {numerics}; "
            f"a task with the framework's allocator as it comes ({default}) leaves out the "
            f"memory policy's settings ({policy}: `spec.CUDA_MEMORY_POLICY`).",
        ]
    )


def tasks_section() -> str:
    whole_step = [
        f"{framework_label(f)} {code(m)}"
        for f, info in spec.FRAMEWORKS.items()
        for m, mode in info.modes.items()
        if mode.whole_step
    ]
    rows = []
    for name, task in spec.TASKS.items():
        if task.separable:
            recorded = "`forward_s`, `backward_s`, `step_s`; `step_s` alone in whole-step modes"
        else:
            recorded = "`step_s`"
        words = report_spec.TASK_TEXT[name]
        rows.append([code(name), words.label, words.description, task.derivative, recorded])
    return "\n\n".join(
        [
            "## Tasks: what one iteration times",
            "`spec.TASKS`. *Checked* is the derivative the correctness check compares: the "
            "loss's gradients per parameter, or the output's Jacobian w.r.t. the input.",
            table(["task", "label", "what one iteration computes", "checked", "recorded"], rows),
            "Whole-step modes (one compiled call; the clock cannot split it): "
            + ", ".join(whole_step)
            + ".",
        ]
    )


def models_section() -> str:
    rows = [
        [
            code(name),
            report_spec.MODEL_TEXT[name].label,
            report_spec.MODEL_TEXT[name].choices,
            report_spec.MODEL_TEXT[name].source,
            report_spec.LOSS_TEXT[m.loss],
            f"{m.n_parameters:,}",
            fmt.shape_text(m.jacobian_shape()),
            m.batch_size,
            f"{m.n_samples:,}",
            "numpy" if m.reference == "numpy" else f"{m.reference} (float64)",
            ", ".join(code(p) for p in m.frozen) or "none (unsupported)",
        ]
        for name, m in spec.MODELS.items()
    ]
    header = [
        "model",
        "label",
        "what it is (our choices where the seeds are silent)",
        "source in the seeds",
        "loss",
        "parameters",
        "Jacobian (rows × input)",
        "batch",
        "samples",
        "float64 reference",
        "frozen part (backward_frozen)",
    ]
    study = [
        f"{code(name)} {m.study_parameters:,}"
        for name, m in report_spec.MODEL_TEXT.items()
        if m.study_parameters
    ]
    return "\n\n".join(
        [
            "## Models",
            "`spec.MODELS`. Sources name the seed documents (`000` the study, `001` its "
            "proposal, `002` the slides). Parameters count every array, biases included; "
            "the study's own counts, where it printed one, are of the weight matrices alone: "
            + ", ".join(study)
            + ". A config's `workload.models.<model>` may change `n_samples`, `batch_size` "
            "and `jacobian_rows`.",
            table(header, rows, right=(5, 7, 8)),
        ]
    )


def tables_section() -> str:
    rows = [
        [
            code(t.name),
            t.title,
            t.study_table,
            ", ".join(map(code, t.models)),
            ", ".join(map(code, t.tasks)),
            f"{code(t.quantity)} ({t.unit})",
            ", ".join(map(code, t.frameworks)) if t.frameworks else "every framework measured",
        ]
        for t in report_spec.TABLES
    ]
    return "\n\n".join(
        [
            "## Tables",
            "`report_spec.TABLES`: each is written to `<results tree>/tables/<name>.{csv,md,tex}` "
            "and printed in the paper, beside the study's numbers where it published some "
            "(`report/published/`).",
            table(
                [
                    "table",
                    "title",
                    "in the seeds",
                    "models",
                    "tasks",
                    "quantity (unit)",
                    "frameworks",
                ],
                rows,
            ),
        ]
    )


def configs_section() -> str:
    rows = []
    for path in sorted((REPO / "config").glob("*.yaml")):
        config = yaml.safe_load(path.read_text())
        cells = spec.config_cells(config)
        frameworks = dict.fromkeys(c.framework for c in cells)
        rows.append(
            [
                code(path.relative_to(REPO).as_posix()),
                code(config.get("results") or run_config.default_results_tree([path])),
                f"{len(cells):,}",
                ", ".join(map(code, frameworks)),
                ", ".join(map(code, config.get("raw_trees", []))),
            ]
        )
    return "\n\n".join(
        [
            "## Shipped configs",
            "The cells each config in `config/` expands to (`spec.config_cells`: the union of "
            "its grids). Each cell is one timing job; a run also builds environments and "
            "runs the reference, analysis and paper jobs (`snakemake -n` lists them all). "
            "A config's `raw_trees` are other trees whose raw files its analysis reads "
            "beside its own cells (measured elsewhere, never re-timed).",
            table(["config", "results tree", "cells", "frameworks", "also reads"], rows,
                  right=(2,)),
        ]
    )


def render() -> str:
    head = (
        "# The spec: frameworks, tasks, models, tables\n\n"
        f"Generated by `{SCRIPT}` from `workflow/scripts/adbench/spec.py` (what runs),"
        " `workflow/scripts/adbench/report_spec.py` (its words and the paper's tables) and"
        f" `config/*.yaml`; do not edit: after changing any of them, run `python3 {SCRIPT}`."
        " The tests fail while this file is stale."
    )
    sections = [
        head,
        frameworks_section(),
        tasks_section(),
        models_section(),
        tables_section(),
        configs_section(),
    ]
    return "\n\n".join(sections) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 if the file differs from what would be written",
    )
    parser.add_argument("--out", type=Path, default=OUT, help="default: docs/spec.md")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = args.out.read_text() if args.out.exists() else None
        if current != text:
            print(f"{args.out} is stale: run python3 {SCRIPT}", file=sys.stderr)
            return 1
        return 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
