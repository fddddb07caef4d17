#!/usr/bin/env python
"""Cross-check the gradients of every (framework, mode) for the same seed and settings.

    python workflow/scripts/check_gradients.py --tolerance 1e-5 --csv X.csv --md X.md NPZ...

Each .npz holds a cell's loss and gradients at its initial weights on the first batch.
Within each group (same model, task, device, threads, seed) every ok cell is compared with
the group's first ok cell: relative error ||a - b||_2 / ||b||_2, the largest over tensors.
Exits 1, naming the cells, when any error exceeds the tolerance.
"""

from __future__ import annotations

import argparse
import os
import dataclasses
import sys

import numpy as np
import pandas as pd

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from adbench.spec import GRADIENT_PATTERN, cell_from_path  # noqa: E402

GROUP = ["model", "task", "device", "threads", "seed"]


def relative_error(grads: list[np.ndarray], reference: list[np.ndarray]) -> float:
    if len(grads) != len(reference):
        return float("inf")
    return max(float(np.linalg.norm(a.astype(np.float64) - b) / max(np.linalg.norm(b), 1e-30))
               for a, b in zip(grads, reference))


def load(path: str) -> tuple[str, list[np.ndarray]]:
    with np.load(path) as data:
        n = sum(1 for k in data.files if k.startswith("g"))
        return str(data["status"]), [data[f"g{i}"] for i in range(n)]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("files", nargs="+")
    p.add_argument("--tolerance", type=float, required=True)
    p.add_argument("--csv", required=True)
    p.add_argument("--md", required=True)
    args = p.parse_args(argv)

    records = []
    for path in args.files:
        status, grads = load(path)
        cell = cell_from_path(path, GRADIENT_PATTERN)
        records.append({**dataclasses.asdict(cell), "path": path, "status": status, "grads": grads})
    df = pd.DataFrame(records)
    rows = []
    for _, group in df.groupby(GROUP, sort=True):
        ok = group[group["status"] == "ok"]
        reference = ok.iloc[0] if len(ok) else None
        for r in group.itertuples():
            compared = reference is not None and r.status == "ok"
            error = relative_error(r.grads, reference["grads"]) if compared else float("nan")
            rows.append({
                **{k: getattr(r, k) for k in GROUP}, "framework": r.framework, "mode": r.mode,
                "reference": f"{reference['framework']}/{reference['mode']}" if compared else "",
                "max_rel_error": error, "status": r.status,
                "passed": bool(compared and error <= args.tolerance),
            })
    out = pd.DataFrame(rows)
    for path in (args.csv, args.md):
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    out.to_csv(args.csv, index=False)
    with open(args.md, "w") as f:
        f.write(f"Gradient cross-check, tolerance {args.tolerance:g} (relative, L2)\n\n")
        f.write(out.to_markdown(index=False) + "\n")

    failed = out[(out["status"] == "ok") & ~out["passed"]]
    skipped = out[out["status"] != "ok"]
    print(f"gradient check: {len(out) - len(skipped)} cells compared, max relative error "
          f"{out['max_rel_error'].max():.3g} (tolerance {args.tolerance:g}); "
          f"{len(skipped)} cells not ok and skipped")
    if len(failed):
        print("gradient mismatch above tolerance:", file=sys.stderr)
        for r in failed.itertuples():
            print(f"  {r.framework}/{r.mode} vs {r.reference}: {r.max_rel_error:.3g} "
                  f"({r.model}, {r.task}, {r.device}, t{r.threads}, seed {r.seed})",
                  file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
