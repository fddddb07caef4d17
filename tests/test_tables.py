"""adbench.tables: formatting, one tidy row per condition (n/a rows too), order, outputs."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from adbench import stats, tables
from adbench.spec import FRAMEWORKS, MODELS

NAN = math.nan
BASE = {"mlp512": 0.001, "mlp354x2": 0.002, "mlp294x3": 0.003}
# Not ok: tensorflow eager mlp354x2 on every seed (n/a); torch script mlp512 on seed 1 (partial).
NOT_OK = {("tensorflow", "eager", "mlp354x2", 0): ("failed", "RuntimeError: boom"),
          ("tensorflow", "eager", "mlp354x2", 1): ("failed", "RuntimeError: boom"),
          ("torch", "script", "mlp512", 1): ("unsupported", "no GPU")}


def fake_aggregate():
    """cells and summary as aggregate.py writes them, for every model, framework and mode."""
    iterations, cells = [], []
    for framework, info in FRAMEWORKS.items():
        for mode, mode_info in info.modes.items():
            for model in MODELS:
                for seed in (0, 1):
                    cell = {"framework": framework, "mode": mode, "model": model,
                            "task": "backward", "device": "cpu", "threads": 1, "seed": seed}
                    status, message = NOT_OK.get((framework, mode, model, seed), ("ok", ""))
                    cells.append({**cell, "status": status, "message": message})
                    if status != "ok":
                        continue
                    step = BASE[model] * (0.5 if mode_info.compiled else 1.0) * (1 + 0.1 * seed)
                    for i, s in enumerate(step * (1 + 0.01 * i) for i in range(3)):
                        iterations.append({
                            **cell, "iteration": i, "phase": "measured",
                            "forward_s": NAN if mode_info.compiled else s / 4,
                            "backward_s": NAN if mode_info.compiled else 3 * s / 4,
                            "step_s": s})
    summary = stats.across_seeds(stats.trial_stats(pd.DataFrame(iterations)))
    return summary, pd.DataFrame(cells)


@pytest.fixture(scope="module")
def tidy():
    summary, cells = fake_aggregate()
    return {spec.name: tables.tidy_table(spec, summary, cells) for spec in tables.TABLES}


def test_fmt_pm():
    assert tables.fmt_pm(686.2, 21.4) == "686 ± 21"
    assert tables.fmt_pm(686.2, NAN) == "686"  # one trial: no spread
    assert tables.fmt_pm(NAN, NAN) == "n/a"
    assert tables.fmt_pm(686.2, 21.4, pm=r"$\pm$") == r"686 $\pm$ 21"


def test_one_row_per_condition_in_registry_order(tidy):
    for spec in tables.TABLES:
        table = tidy[spec.name]
        assert list(table.columns) == tables.TIDY_COLUMNS
        expected = [(model, framework) for model in MODELS for framework in FRAMEWORKS]
        assert list(zip(table["model"], table["framework"])) == expected
        assert {FRAMEWORKS[f].modes[m].compiled for f, m in zip(table["framework"],
                                                               table["mode"])} == {spec.compiled}
        assert set(table["quantity"]) == {spec.quantity}


def test_failed_and_partial_cells_get_status_and_note(tidy):
    eager = tidy["table1_eager"].set_index(["framework", "model"])
    na = eager.loc[("tensorflow", "mlp354x2")]
    assert na["status"] == "n/a" and math.isnan(na["mean_us"])
    assert "2 of 2 seeds" in na["note"] and "RuntimeError: boom" in na["note"]
    ok = eager.loc[("torch", "mlp512")]
    assert (ok["status"], ok["note"], ok["n_seeds"]) == ("ok", "", 2)
    # Backward is 3/4 of the step; seeds 0 and 1 scale it by 1 and 1.1; µs.
    assert ok["mean_us"] == pytest.approx(0.75 * 1000 * 1.01 * 1.05)

    compiled = tidy["table2_compiled"].set_index(["framework", "model"])
    partial = compiled.loc[("torch", "mlp512")]
    assert partial["status"] == "partial" and partial["n_seeds"] == 1
    assert "1 of 2 seeds" in partial["note"] and "unsupported: no GPU" in partial["note"]
    assert math.isnan(partial["mean_sd_us"]) and not math.isnan(partial["mean_us"])


def test_improvements_only_in_the_compiled_table(tidy):
    assert tidy["table1_eager"]["improvement"].isna().all()
    compiled = tidy["table2_compiled"].set_index(["framework", "model"])
    # Eager step / compiled step: 2x, as both seeds of both modes scale alike.
    assert compiled.loc[("tensorflow", "mlp512"), "improvement"] == pytest.approx(2.0)
    assert compiled.loc[("tensorflow", "mlp512"), "improvement_study_style"] == pytest.approx(1.5)
    # Eager tensorflow mlp354x2 failed: no improvement can be computed.
    assert math.isnan(compiled.loc[("tensorflow", "mlp354x2"), "improvement"])


def test_markdown_and_latex_name_every_model_and_framework(tidy):
    for spec in tables.TABLES:
        table = tidy[spec.name]
        markdown, latex = tables.to_markdown(table, spec), tables.to_latex(table)
        assert spec.title in markdown
        for text in (markdown, latex):
            for mlp in MODELS.values():
                assert mlp.label in text and str(mlp.n_parameters) in text
            for info in FRAMEWORKS.values():
                assert info.label in text
        assert "n/a" in markdown and r"$\pm$" in latex and "±" not in latex
    assert "RuntimeError: boom" in tables.to_markdown(tidy["table1_eager"], tables.TABLES[0])


def test_write_table_writes_csv_md_and_tex(tidy, tmp_path):
    spec = tables.TABLES[1]
    tables.write_table(spec, tidy[spec.name], str(tmp_path / spec.name))
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        f"{spec.name}.{ext}" for ext in ("csv", "md", "tex")]
    back = pd.read_csv(tmp_path / f"{spec.name}.csv")
    assert list(back.columns) == tables.TIDY_COLUMNS and len(back) == len(tidy[spec.name])
    assert (tmp_path / f"{spec.name}.md").read_text() == tables.to_markdown(tidy[spec.name], spec)
    assert r"\begin{tabular}" in (tmp_path / f"{spec.name}.tex").read_text()


def test_a_table_with_no_cells_of_its_modes_is_empty_not_a_crash(tmp_path):
    summary, cells = fake_aggregate()
    eager = cells[cells["mode"] == "eager"].reset_index(drop=True)
    table = tables.tidy_table(tables.TABLES[1], summary[summary["mode"] == "eager"], eager)
    assert list(table.columns) == tables.TIDY_COLUMNS and table.empty
    tables.write_table(tables.TABLES[1], table, str(tmp_path / "t2"))
    assert tables.EMPTY_NOTE in (tmp_path / "t2.md").read_text()
