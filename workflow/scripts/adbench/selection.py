"""Which cells a table, a figure or the paper's text shows: the spec's (framework, mode) pairs
in order, a table's pairs, the first (device, threads) block and the figures' focus.

Shared by the tables, the claims, the figures and the paper, so that each says the same.
"""

from __future__ import annotations

import pandas as pd

from adbench.report_spec import TABLES, TableInfo
from adbench.spec import pairs


def table_modes(table: TableInfo) -> list[tuple[str, str]]:
    """The (framework, mode) pairs a table may show, in spec order."""
    return pairs(table.frameworks, table.compiled)


BLOCK_COLUMNS = ("machine", "device", "threads")


def block_columns(data: pd.DataFrame) -> list[str]:
    """The columns of a block the data have (the machine where they record it)."""
    return [c for c in BLOCK_COLUMNS if c in data]


def first_condition(data: pd.DataFrame) -> tuple | None:
    """The first (machine, device, threads) block, in sort order: one block stands for all
    where several would multiply a figure's panels or the abstract's numbers."""
    if data.empty:
        return None
    return min(zip(*(data[c] for c in block_columns(data))))


def first_block_key(data: pd.DataFrame) -> dict:
    """The first block as {column: value} (first_condition), {} for no data."""
    condition = first_condition(data)
    return {} if condition is None else dict(zip(block_columns(data), condition))


def in_block(data: pd.DataFrame, block: dict) -> pd.DataFrame:
    """The rows of `data` in a block (first_block_key); its columns `data` lacks are not
    asked of it."""
    mine = pd.Series(True, index=data.index)
    for column, value in block.items():
        if column in data:
            mine &= data[column] == value
    return data[mine]


def first_block(data: pd.DataFrame) -> pd.DataFrame:
    """The rows of the first (machine, device, threads) block."""
    return in_block(data, first_block_key(data)) if not data.empty else data


def focus_rows(data: pd.DataFrame) -> pd.DataFrame:
    """Rows of the first spec table whose models and tasks are present (the study's MLP
    backward passes when measured), else all: what the first-iterations figure draws."""
    for table in TABLES:
        rows = data[data["model"].isin(table.models) & data["task"].isin(table.tasks)]
        if len(rows):
            return rows
    return data
