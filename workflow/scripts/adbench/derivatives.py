"""The derivative-file contract (.npz): a cell's loss and derivatives at its first batch,
or the float64 reference's, for the correctness check (check_gradients.py).

The one place for that format, as adbench.schema is for the raw Parquet files: timing jobs
write with it, the reference job writes with it, the check reads with it.  No project
imports: every timing job loads it.
"""

from __future__ import annotations

import json
import os

import numpy as np


def loss_as_array(loss: float, dtype="float64") -> tuple[float, list[np.ndarray]]:
    """What a forward task checks (derivative kind "loss"): the loss itself, as one array of
    the cell's dtype, so that it is compared like any derivative."""
    return loss, [np.array([loss], dtype=dtype)]


def write_derivatives(path: str, status: str, loss: float | None,
                      arrays: list[np.ndarray], kink: float = float("inf"),
                      about: dict | None = None) -> None:
    """A cell's (or the reference's, with its kink margin) loss and derivative arrays, and
    what they are of (`about`: a cell's description, spec.CellDescription.as_dict, or the
    reference's model, derivative and seed); written atomically."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = path + ".tmp.npz"
    np.savez(tmp, status=np.array(status), loss=np.array(np.nan if loss is None else loss),
             kink_margin=np.array(kink), about=np.array(json.dumps(about or {})),
             **{f"g{i}": a for i, a in enumerate(arrays)})
    os.replace(tmp, path)


def read_about(path: str) -> dict:
    """What a derivative file is of (write_derivatives' `about`; {} where it says nothing)."""
    with np.load(path) as data:
        return json.loads(str(data["about"])) if "about" in data.files else {}


def read_kink_margin(path: str) -> float:
    with np.load(path) as data:
        return float(data["kink_margin"]) if "kink_margin" in data.files else float("inf")


def read_derivatives(path: str) -> tuple[str, float, list[np.ndarray]]:
    with np.load(path) as data:
        n = sum(1 for k in data.files if k.startswith("g"))
        return str(data["status"]), float(data["loss"]), [data[f"g{i}"] for i in range(n)]
