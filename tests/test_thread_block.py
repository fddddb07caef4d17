"""The study's tables at another thread count (issue 47, item 1): the disagreements' thread-count
test (T) needs the study's MLP conditions (its Tables 1-2) at a second thread count, which
the quick default measures; the main text keeps each study's table at its fewest threads
(the thread count comparable with the study's) and puts the rows at other counts in an
appendix, so the main text does not grow a thread block, while T still reads every row.

On the quick default's paper from fabricated measurements of its own cells
(tests/fabricated.py: the pipeline's analysis and renderer on made-up timings)."""

from __future__ import annotations

import json
import types
from pathlib import Path

import pandas as pd
import pytest

import fabricated
from adbench import disagreements, spec
from adbench import formatting as fmt
from adbench import tables as tbl
from adbench.formatting import latex
from adbench.report_spec import TABLES, cited
from adbench.sections import contexts
from adbench.sections import results as results_section

ROOT = Path(__file__).resolve().parents[1]
QUICK = ROOT / "config" / "config.yaml"
PUBLISHED = ROOT / "report" / "published"
# The study's MLP tables (its Tables 1-2): the study states no thread count for them, so the
# thread-count test is asked of their every number.
MLP_TABLES = [t for t in TABLES if t.published and t.models == spec.MLPS]


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory) -> dict:
    """The quick default's fabricated tree and its paper's LaTeX, split at the appendices."""
    tree = tmp_path_factory.mktemp("quick")
    tex = fabricated.fabricated_paper(QUICK, tree, tex_only=True).read_text()
    main, appendix = tex.split("\\appendix", 1)
    data = {t.name: {"ours": contexts.read_tidy(tree / "tables", t),
                     "published": contexts.read_published(PUBLISHED, t)} for t in TABLES}
    return {"tree": tree, "main": main, "appendix": appendix, "data": data}


def longtable(tex: str, label: str) -> str:
    """The longtable labelled tab:<label> (caption, rows, notes up to its end)."""
    at = tex.index(f"\\label{{tab:{label}}}")
    start = tex.rindex("\\begin{longtable}", 0, at)
    return tex[start:tex.index("\\end{longtable}", at)]


def printed_means(tidy: pd.DataFrame, table) -> dict[int, list[str]]:
    """Our means of the study's columns as the paper prints them, by thread count."""
    published = contexts.read_published(PUBLISHED, table)
    shown = set(zip(published["framework"], published["mode"]))
    columns = pd.Series([p in shown for p in zip(tidy["framework"], tidy["mode"])],
                        index=tidy.index, dtype=bool)
    ok = tidy[(tidy["status"] == "ok") & columns]
    return {int(t): [fmt.pm(r["mean"], r["mean_sd"], tex=True) for _, r in rows.iterrows()]
            for t, rows in ok.groupby("threads")}


def study_text() -> dict:
    found = json.loads((PUBLISHED / "claims.json").read_text())
    return {k: v for k, v in found.items() if not k.startswith("_")}


# ----------------------------------------------------------------------------- the config
def test_the_quick_default_measures_the_studys_mlp_conditions_at_a_second_thread_count():
    """Every condition of the study's Tables 1-2 (as published) has cells of the quick
    default on at least two thread counts of one device: what T compares."""
    cells = fabricated.load_run(QUICK).cells
    threads: dict[tuple, set] = {}
    for c in cells:
        threads.setdefault((c.framework, c.mode, c.model, c.task, c.device), set()).add(
            c.threads)
    assert MLP_TABLES
    for table in MLP_TABLES:
        published = contexts.read_published(PUBLISHED, table)
        assert len(published)
        for r in published.itertuples():
            counts = threads.get((r.framework, r.mode, r.model, r.task, "cpu"), set())
            assert len(counts) >= 2, (table.name, r.framework, r.mode, r.model, counts)


# ----------------------------------------------------------------------------- the paper
def test_the_main_texts_study_tables_hold_their_fewest_threads_alone(quick_run):
    for table in MLP_TABLES:
        means = printed_means(quick_run["data"][table.name]["ours"], table)
        fewest, *others = sorted(means)
        assert others, table.name  # the quick run measures a second thread count
        printed = longtable(quick_run["main"], table.name)
        assert all(m in printed for m in means[fewest]), table.name
        assert not any(m in printed for t in others for m in means[t]), table.name
        # its caption names the appendix's table of the others
        assert f"\\ref{{tab:{results_section.other_threads_name(table.name)}}}" in printed


def test_the_other_thread_counts_are_in_an_appendix_beside_the_studys(quick_run):
    for table in MLP_TABLES:
        means = printed_means(quick_run["data"][table.name]["ours"], table)
        fewest, *others = sorted(means)
        name = results_section.other_threads_name(table.name)
        assert f"\\label{{tab:{name}}}" not in quick_run["main"]
        printed = longtable(quick_run["appendix"], name)
        assert all(m in printed for t in others for m in means[t]), table.name
        assert not any(m in printed for m in means[fewest]), table.name
        assert "study (published)" in printed  # the study's row beside ours
        assert f"\\ref{{tab:{table.name}}}" in printed
    assert "\\label{app:other-threads}" in quick_run["appendix"]


def test_the_thread_count_test_reads_the_other_thread_count(quick_run):
    """T on every disagreement with the study's Tables 1-2: tested (explains or refuted),
    never 'not testable' for want of another thread count."""
    found = disagreements.disagreements_context(
        quick_run["data"], study_text(), pd.read_parquet(
            quick_run["tree"] / "aggregate" / "cells.parquet"))
    heads = tuple(latex(cited(t.study_table)) for t in MLP_TABLES)
    # the study's means (its printed improvements are no thread count's: T leaves them)
    means = [r for r in found["rows"]
             if r["table"].startswith(heads) and "improvement" not in r["where"]]
    assert means  # fabricated timings are far from the study's
    name = disagreements.TEST_NAMES["threads"]
    for r in means:
        (verdict,) = [t["verdict"] for t in r["tests"] if t["name"] == name]
        assert verdict in (disagreements.EXPLAINS, disagreements.REFUTED), r["where"]


# ----------------------------------------------------------------------------- one thread count
def test_a_run_of_one_thread_count_has_no_appendix_of_other_counts(quick_run):
    data = {name: {**d, "ours": d["ours"][d["ours"]["threads"] == 1]}
            for name, d in quick_run["data"].items()}
    found = contexts.other_threads(types.SimpleNamespace(data=data, waiting=frozenset()))
    assert found == {"other_threads": None}
    for table in MLP_TABLES:
        caption = results_section.main_table(table, data[table.name], frozenset())["caption"]
        assert results_section.other_threads_name(table.name) not in caption


def test_the_fewest_threads_are_each_machines_and_devices_own():
    tidy = pd.DataFrame({"machine": ["a", "a", "b", "b", "a"],
                         "device": ["cpu", "cpu", "cpu", "cpu", "cuda"],
                         "threads": [1, 2, 4, 8, 2]})
    assert tbl.at_fewest_threads(tidy).tolist() == [True, False, True, False, True]
    assert tbl.at_fewest_threads(tidy.iloc[0:0]).empty
