"""The study's scaled-down models against ours (adbench.findings.scaled_down, the appendix's
table of the study's ResNet50 numbers; issue 47): each published row is set against our
nearest condition of its own framework and mode, and that same condition is extrapolated to
the study's size, by its rows alone and by its rows and input, each Jacobian task by its own
time and never by the other task's."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from adbench import findings
from adbench.report_spec import TABLES

SHAPE = [3, 224, 224]  # the study's presumed input (claims.json's study_input_shape)
REPORT = Path(__file__).resolve().parents[1] / "report"


def tidy(rows: list[tuple]) -> pd.DataFrame:
    """Our ResNet50 Jacobian conditions (framework, mode, task, mean in s), one block."""
    return pd.DataFrame([{"framework": f, "mode": m, "model": "resnet50", "task": task,
                          "mean": mean, "machine": "x86", "device": "cpu", "threads": 1}
                         for f, m, task, mean in rows])


def published(rows: list[tuple]) -> pd.DataFrame:
    return pd.DataFrame([{"framework": f, "mode": m, "model": "resnet50", "task": "jacobian",
                          "study_label": label, "mean": str(mean)}
                         for f, m, label, mean in rows])


def data_of(ours: pd.DataFrame, theirs: pd.DataFrame) -> dict:
    empty = {"ours": pd.DataFrame(columns=ours.columns),
             "published": pd.DataFrame(columns=theirs.columns)}
    return {t.name: {"ours": ours, "published": theirs} if t.name == "table4_resnet50"
            else dict(empty) for t in TABLES}


# The two Jacobian tasks' times differ, so a row that took the other task's number shows.
# tf.function: row by row 0.870 s is nearer the study's 0.9339 s than vectorised 0.850 s, but
# vectorised x4900 (4165 s) is the nearer extrapolation: the row must print row by row's.
# PyTorch eager: vectorised 0.5 s is the nearer to the study's 44.88 s; row by row 0.2 s.
OURS = tidy([("tensorflow", "graph", "jacobian_rows", 0.870),
             ("tensorflow", "graph", "jacobian_vectorized", 0.850),
             ("torch", "eager", "jacobian_rows", 0.2),
             ("torch", "eager", "jacobian_vectorized", 0.5)])
THEIRS = published([("tensorflow", "graph", "Tensorflow (graph)", 0.9339),
                    ("torch", "eager", "PyTorch (naive)", 44.8822),
                    ("torch", "script", "PyTorch (script)", 45.0729)])
CELLS = pd.DataFrame({"model": ["resnet50"] * 2,
                      "task": ["jacobian_rows", "jacobian_vectorized"],
                      "jacobian_rows": [10, 10]})


@pytest.fixture(scope="module")
def scaled() -> dict:
    (found,) = findings.scaled_down("resnet50", SHAPE, data_of(OURS, THEIRS), CELLS)
    return found


def row(scaled: dict, study_label: str) -> dict:
    (hit,) = [c for c in scaled["closest"] if c["study"] == study_label]
    return hit


def test_the_scalings_are_the_rows_alone_then_the_rows_and_the_input():
    rows, both = findings.jacobian_scalings("resnet50", SHAPE, CELLS)
    assert (rows.what, rows.sizes, rows.factor) == ("rows", "10 of 1000", 100.0)
    assert both.what == "rows and input" and both.factor == pytest.approx(4900.0)
    assert both.words == "rows and input (3×224×224 for 3×32×32)"
    assert both.of(0.870) == pytest.approx(4263.0)


def test_no_scaling_where_ours_is_the_studys_size():
    """All 1000 rows and no larger input given: nothing to scale; the rows alone where the
    study's input is not given."""
    every_row = pd.DataFrame({"model": ["resnet50"], "task": ["jacobian_rows"],
                              "jacobian_rows": [1000]})
    assert findings.jacobian_scalings("resnet50", None, every_row) == []
    assert findings.jacobian_scalings("resnet50", [3, 32, 32], every_row) == []
    assert [k.what for k in findings.jacobian_scalings("resnet50", None, CELLS)] == ["rows"]


def test_a_row_extrapolates_its_own_measured_task_not_the_nearer_extrapolation(scaled):
    graph = row(scaled, "Tensorflow (graph)")
    assert graph["measured"]["label"] == "TensorFlow (tf.function), Jacobian, row by row"
    assert graph["measured"]["s"] == "0.870"
    assert [e["s"] for e in graph["scaled"]] == ["87.0", "4263"]  # 0.870 x 100, x 4900
    assert graph["scaled"][1]["ratio"] == "4565"  # 4263 / 0.9339
    assert "4165" not in str(graph)  # vectorised 0.850 x 4900: the other task's


def test_each_row_scales_the_task_it_names(scaled):
    eager = row(scaled, "PyTorch (naive)")
    assert eager["measured"]["label"] == "PyTorch (eager), Jacobian, vectorised"
    assert [e["s"] for e in eager["scaled"]] == ["50.0", "2450"]  # 0.5 x 100, x 4900
    assert "20.0" not in str(eager) and "980" not in str(eager)  # row by row's 0.2 s


def test_a_row_without_a_condition_of_its_mode_has_no_extrapolation(scaled):
    script = row(scaled, "PyTorch (script)")
    assert script["measured"]["label"] == "n/a"
    assert [e["s"] for e in script["scaled"]] == ["n/a", "n/a"]


def test_every_jacobian_is_listed_under_each_scaling_with_its_own_time(scaled):
    assert [(k["what"], k["factor"]) for k in scaled["scalings"]] == [
        ("rows", "100"), ("rows and input", "4900")]
    by_rows, both = ({c["label"]: c["s"] for c in k["cells"]} for k in scaled["extrapolated"])
    assert by_rows["PyTorch (eager), Jacobian, row by row"] == "20.0"
    assert by_rows["PyTorch (eager), Jacobian, vectorised"] == "50.0"
    assert both["TensorFlow (tf.function), Jacobian, row by row"] == "4263"
    assert both["TensorFlow (tf.function), Jacobian, vectorised"] == "4165"


def test_the_appendix_table_prints_both_scalings_per_row(scaled):
    """Rendered through the paper's own environment: a column pair per scaling, labelled
    with its factor and what it scales, and each row's numbers from its own task."""
    import render_paper

    env = render_paper.make_environment(REPORT)
    tex = env.get_template("sections/appendix_every.tex.j2").render(
        appendix_tables=[], tables_of=lambda runs: "", appendix_runs=[], findings=[],
        hypotheses=[], machines=[], scaled=[scaled])
    tex = " ".join(tex.split())
    table = tex.split(r"\label{tab:closest-table4_resnet50}")[1].split(r"\end{longtable}")[0]
    assert r"$\times$100\\ rows" in table and r"$\times$4900\\ rows and input" in table
    assert ("Tensorflow (graph) & 0.9339 & TensorFlow (tf.function), Jacobian, row by row & "
            "0.870 & 0.932 & 87.0 & 93.2 & 4263 & 4565") in table
    assert ("PyTorch (naive) & 44.8822 & PyTorch (eager), Jacobian, vectorised & 0.500 & "
            "0.0111 & 50.0 & 1.11 & 2450 & 54.6") in table
    assert r"rows, $\times$100 (10 of 1000)" in tex
