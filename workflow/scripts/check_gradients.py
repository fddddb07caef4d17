#!/usr/bin/env python
"""Check every cell's derivatives: against the float64 reference and against each other.

    python workflow/scripts/check_gradients.py --tolerance 1e-5 [--model-tolerance cnn=1e-4] \
        --csv X.csv --md X.md --references REF.npz... --cells CELL.npz...

A cell's .npz holds its loss and derivative at the first batch, of its task's kind
(spec.TaskInfo.derivative): the loss gradients (backward, loss_jacobian, backward_retained),
those of the trained parameters only (backward_frozen: trainable_gradients, whose reference
is the whole gradient restricted to them) or the output Jacobian (jacobian_rows,
jacobian_vectorized).  Cells computing the same derivative (same model, derivative kind,
device, threads, seed) are compared with the float64 reference of that model and seed
(`ref_rel_error`) and with the group's first ok cell (`max_rel_error`); relative L2 error,
largest over arrays (adbench.reference.relative_error).  Exits 1, naming the cells, when
either exceeds the model's tolerance.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys

import pandas as pd

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from adbench import derivatives, reference, schema, spec  # noqa: E402

GROUP = ["model", "derivative", "device", "threads", "seed"]


def reference_key(path: str) -> tuple[str, str, int]:
    """The (model, derivative, seed) a reference file is of, as it says (never its path)."""
    about = derivatives.read_about(path)
    if not {"model", "derivative", "seed"} <= set(about):
        raise ValueError(f"{path}: a reference file that does not say what it is of (written "
                         "before make_reference.py recorded it: delete it to remake it)")
    return about["model"], about["derivative"], int(about["seed"])


def cell_of(path: str) -> spec.Cell:
    """The cell a derivative file is of, from its description (never its path). A file written
    before measure.py stored the description in it (the committed example trees) is of the
    cell its raw file's metadata names: the raw file of the same cell path in its tree."""
    about = derivatives.read_about(path)
    try:
        return spec.CellDescription.from_dict(about).cell
    except ValueError as exc:
        missing = str(exc)
    raw = raw_file_beside(path)
    if raw is None:
        raise ValueError(f"{path}: no cell description in the file ({missing}) and no raw "
                         "file of the cell beside it: delete it to re-time the cell")
    return spec.Cell(**schema.read_provenance(raw)["cell"])


def raw_file_beside(path: str) -> str | None:
    """<tree>/raw/<cell>.parquet for <tree>/gradients/<cell>.npz, where it exists."""
    head, sep, tail = path.rpartition("gradients/")
    raw = f"{head}raw/{tail.removesuffix('.npz')}.parquet" if sep else ""
    return raw if raw and os.path.exists(raw) else None


def parse_tolerances(default: float, overrides: list[str]) -> dict:
    tolerances = {}
    for item in overrides:
        model, _, value = item.partition("=")
        if model not in spec.MODELS or not value:
            raise SystemExit(f"--model-tolerance {item!r}: expected MODEL=VALUE with a model "
                             f"of {', '.join(spec.MODELS)}")
        tolerances[model] = float(value)
    return {m: tolerances.get(m, default) for m in spec.MODELS}


def compare(cells: pd.DataFrame, references: dict, tolerances: dict,
            kink_margins: dict | None = None) -> pd.DataFrame:
    """Each ok cell against the float64 reference and its group's first ok cell. A group whose
    reference point is within float32 rounding of a ReLU kink (kink_margins, by group) is
    held to reference.KINK_TOLERANCE at least (its tolerance column says so)."""
    kink_margins = kink_margins or {}
    rows = []
    for _, group in cells.groupby(GROUP, sort=True):
        ok = group[group["status"] == "ok"]
        first = ok.iloc[0] if len(ok) else None
        for r in group.itertuples():
            key = (r.model, r.derivative, r.seed)  # the reference's, shared by the group
            near_kink = kink_margins.get(key, float("inf")) < reference.KINK_MARGIN
            tol = max(tolerances[r.model], reference.KINK_TOLERANCE if near_kink else 0.0)
            truth = references.get(key)
            checked = r.status == "ok"
            ref_error = (reference.relative_error(r.arrays, truth) if checked and truth
                         is not None else float("nan"))
            peer_error = (reference.relative_error(r.arrays, first["arrays"]) if checked
                          else float("nan"))
            rows.append({
                **{k: getattr(r, k) for k in GROUP}, "task": r.task,
                "framework": r.framework, "mode": r.mode,
                "reference": f"{first['framework']}/{first['mode']}/{first['task']}"
                if checked else "",
                "max_rel_error": peer_error, "ref_rel_error": ref_error, "tolerance": tol,
                "status": r.status,
                "passed": bool(checked and truth is not None and ref_error <= tol
                               and peer_error <= tol),
            })
    return pd.DataFrame(rows, columns=CHECK_COLUMNS)


CHECK_COLUMNS = [*GROUP, "task", "framework", "mode", "reference", "max_rel_error",
                 "ref_rel_error", "tolerance", "status", "passed"]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                fromfile_prefix_chars="@")
    p.add_argument("--cells", nargs="*", required=True,
                   help="cells' derivative files, or @FILE with one per line (none: a tree "
                   "that measures nothing of its own)")
    p.add_argument("--references", nargs="*", required=True)
    p.add_argument("--tolerance", type=float, required=True)
    p.add_argument("--model-tolerance", action="append", default=[], metavar="MODEL=TOL")
    p.add_argument("--csv", required=True)
    p.add_argument("--md", required=True)
    args = p.parse_args(argv)
    # An empty list file holds one empty line (printf '%s\n' with no paths).
    args.cells = [path for path in args.cells if path]
    tolerances = parse_tolerances(args.tolerance, args.model_tolerance)

    references, kink_margins = {}, {}
    for path in args.references:
        _, _, arrays = derivatives.read_derivatives(path)
        references[reference_key(path)] = arrays
        kink_margins[reference_key(path)] = derivatives.read_kink_margin(path)
    records = []
    for path in args.cells:
        status, _, arrays = derivatives.read_derivatives(path)
        cell = cell_of(path)
        records.append({**dataclasses.asdict(cell), "status": status, "arrays": arrays,
                        "derivative": spec.TASKS[cell.task].derivative})
    cells = pd.DataFrame(records, columns=[*spec.CELL_FIELDS, "status", "arrays", "derivative"])
    out = compare(cells, references, tolerances, kink_margins)
    for path in (args.csv, args.md):
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    out.to_csv(args.csv, index=False)
    with open(args.md, "w") as f:
        f.write("Derivative check: every cell against the float64 reference (ref_rel_error) "
                "and the first ok cell of its group (max_rel_error); relative L2 error, "
                "per-model tolerance\n\n" + out.to_markdown(index=False) + "\n")

    failed = out[(out["status"] == "ok") & ~out["passed"]]
    skipped = out[out["status"] != "ok"]
    print(f"derivative check: {len(out) - len(skipped)} cells compared; largest error vs "
          f"reference {out['ref_rel_error'].max():.3g}, vs peers "
          f"{out['max_rel_error'].max():.3g}; {len(skipped)} cells not ok and skipped")
    if len(failed):
        print("derivatives disagree beyond the model's tolerance:", file=sys.stderr)
        for r in failed.itertuples():
            print(f"  {r.framework}/{r.mode} {r.model} {r.task} ({r.device}, t{r.threads}, "
                  f"seed {r.seed}): {r.ref_rel_error:.3g} vs float64 reference, "
                  f"{r.max_rel_error:.3g} vs {r.reference}; tolerance {r.tolerance:g}",
                  file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
