"""The derivative kinds and the derivative-file contract (.npz): what a task's derivative is
(KINDS, spec.TaskInfo.derivative names one), the shape a backend's `Prepared.derivatives`
gives it (`checked`), and the file a cell's or the float64 reference's loss and derivatives
at the first batch go to, for the correctness check (check_gradients.py).

The one place for both, as adbench.schema is for the raw Parquet files: every backend
shapes its derivatives with `checked`, timing jobs and the reference job write with
`write_derivatives`, the check reads with `read_derivatives`; pricing (adbench.flops,
adbench.cluster) asks `kind`, which refuses a kind nobody declared.  No project imports:
every timing job loads it.
"""

from __future__ import annotations

import dataclasses
import json
import os

import numpy as np


@dataclasses.dataclass(frozen=True)
class Kind:
    """A derivative kind: what its arrays are taken with respect to.

    `wrt` "parameters": one array per differentiated spec parameter, in the spec's order and
    canonical layout, beside the loss; "input": the output Jacobian of one example,
    d output.flatten()[:rows] / d x, of shape spec.ModelSpec.jacobian_shape(rows), and no
    loss (nan); None: no derivative, the loss itself is checked (loss_as_array)."""

    wrt: str | None

    @property
    def has_loss(self) -> bool:
        """The step computes the loss (every kind but an output Jacobian)."""
        return self.wrt != "input"


KINDS = {
    "gradients": Kind("parameters"),  # of the loss, w.r.t. every spec parameter
    # the same w.r.t. the parameters a frozen task trains (spec.ModelSpec.trained)
    "trainable_gradients": Kind("parameters"),
    "sequence_gradients": Kind("parameters"),  # a variable-length batch's, at true lengths
    "jacobian": Kind("input"),
    "loss": Kind(None),  # the forward task (spec.FORWARD_TASK)
}


def kind(name: str) -> Kind:
    """The declared kind `name`; a kind nobody declared is an error, never a guess."""
    if name not in KINDS:
        raise ValueError(f"unknown derivative kind {name!r}: adbench.derivatives.KINDS "
                         f"declares {', '.join(KINDS)}")
    return KINDS[name]


def checked(name: str, loss, arrays, dtype: str,
            canonical=None) -> tuple[float, list[np.ndarray]]:
    """What `Prepared.derivatives(i)` returns for a task of derivative kind `name`, from
    the step's loss (None where the kind has none) and derivative arrays: (loss, arrays)
    for parameters, (nan, [J]) for an output Jacobian, the loss alone as one array of the
    cell's dtype for "loss".  `canonical(wrt, arrays)` converts the framework's arrays to
    numpy in the spec's layouts (default: numpy arrays as they are)."""
    found = kind(name)
    if found.wrt is None:
        return loss_as_array(float(loss), dtype)
    arrays = (canonical(found.wrt, arrays) if canonical is not None
              else [np.asarray(a) for a in arrays])
    return (float(loss) if found.has_loss else float("nan")), list(arrays)


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
