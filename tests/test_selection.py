"""adbench.selection: the spec's pairs, a table's modes and the first (device, threads) block."""

from __future__ import annotations

import pandas as pd

from adbench import selection, spec
from adbench.report_spec import TABLES
from adbench.spec import FRAMEWORKS, STUDY_FRAMEWORKS


def test_pairs_follow_the_spec_and_its_filters():
    every = spec.pairs()
    assert every == [(f, m) for f, info in FRAMEWORKS.items() for m in info.modes]
    compiled = spec.pairs(compiled=True)
    assert compiled and all(FRAMEWORKS[f].modes[m].compiled for f, m in compiled)
    study = spec.pairs(STUDY_FRAMEWORKS, compiled=False)
    assert study and {f for f, _ in study} <= set(STUDY_FRAMEWORKS)
    assert [p for p in every if p in set(study)] == study  # spec order kept


def test_a_tables_modes_are_the_pairs_its_filters_select():
    for table in TABLES:
        assert selection.table_modes(table) == spec.pairs(table.frameworks, table.compiled)


def test_the_first_block_is_the_first_device_and_thread_count_in_sort_order():
    data = pd.DataFrame(
        {"device": ["cuda", "cpu", "cpu", "cpu"], "threads": [1, 4, 2, 2], "x": [0, 1, 2, 3]}
    )
    assert selection.first_condition(data) == ("cpu", 2)
    assert list(selection.first_block(data)["x"]) == [2, 3]
    assert selection.first_condition(data.iloc[0:0]) is None
    assert selection.first_block(data.iloc[0:0]).empty
