"""Which cells a table, a figure or the paper's text shows: the spec's (framework, mode) pairs
in order, a table's pairs, the first (device, threads) block and the figures' focus.

Shared by the tables, the claims, the figures and the paper, so that each says the same.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from adbench.report_spec import TABLES, TableInfo
from adbench.spec import pairs

if TYPE_CHECKING:
    import pandas as pd


def table_modes(table: TableInfo) -> list[tuple[str, str]]:
    """The (framework, mode) pairs a table may show, in spec order."""
    return pairs(table.frameworks, table.compiled)


def first_condition(data: pd.DataFrame) -> tuple | None:
    """The first (device, threads) block, in sort order: one block stands for all where
    several would multiply a figure's panels or the abstract's numbers."""
    if data.empty:
        return None
    return min(zip(data["device"], data["threads"]))


def first_block(data: pd.DataFrame) -> pd.DataFrame:
    """The rows of the first (device, threads) block."""
    condition = first_condition(data)
    if condition is None:
        return data
    device, threads = condition
    return data[(data["device"] == device) & (data["threads"] == threads)]


def focus_rows(data: pd.DataFrame) -> pd.DataFrame:
    """Rows of the first spec table whose models and tasks are present (the study's MLP
    backward passes when measured), else all: what the first-iterations figure draws."""
    for table in TABLES:
        rows = data[data["model"].isin(table.models) & data["task"].isin(table.tasks)]
        if len(rows):
            return rows
    return data
