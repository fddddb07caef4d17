"""render_paper.py on small fake inputs that follow the pipeline's file contracts."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "workflow" / "scripts" / "render_paper.py"
sys.path.insert(0, str(SCRIPT.parent))
import render_paper  # noqa: E402

NAN = math.nan
LABELS = {"mlp512": "[512]", "mlp354x2": "[354, 354]", "mlp294x3": "[294, 294, 294]"}
PARAMS = {"mlp512": 407050, "mlp354x2": 407110, "mlp294x3": 407200}
FAILED_NOTE = "1 of 1 seeds not ok (failed: RuntimeError: 50% of x_y)"


def table_rows(table, quantity, modes, base):
    """Block cpu/1 thread with 5 seeds; block cpu/4 threads with one seed (no sd) and one n/a."""
    rows = []
    for threads, n_seeds in ((1, 5), (4, 1)):
        for i, model in enumerate(LABELS):
            for framework, mode in modes:
                mean = base[framework] + 100 * i + (0.2 if threads == 1 else 111.0)
                sd = NAN if n_seeds == 1 else 12.3
                status, note = "ok", ""
                compiled_gain = 1.23 if mode != "eager" else NAN
                if threads == 4 and framework == "tensorflow" and model == "mlp294x3":
                    status, note, mean = "n/a", FAILED_NOTE, NAN
                    compiled_gain = NAN
                rows.append({
                    "table": table, "model": model, "model_label": LABELS[model],
                    "n_parameters": PARAMS[model], "framework": framework,
                    "framework_label": render_paper.FRAMEWORK_LABELS[framework], "mode": mode,
                    "mode_label": render_paper.MODE_LABELS[mode], "quantity": quantity,
                    "task": "backward", "device": "cpu", "threads": threads, "n_seeds": n_seeds,
                    "n_iterations": 469, "mean_us": mean, "mean_sd_us": sd,
                    "std_us": NAN if math.isnan(mean) else 43.0, "std_sd_us": sd,
                    "median_us": mean, "improvement": compiled_gain,
                    "improvement_study_style": compiled_gain - 0.25,
                    "status": status, "note": note,
                })
    return pd.DataFrame(rows)


def make_inputs(tmp_path: Path, figure: Path | None = None) -> list[str]:
    tables = tmp_path / "tables"
    tables.mkdir()
    table_rows("table1_eager", "backward_s", render_paper.EAGER_COLUMNS,
               {"torch": 701, "tensorflow": 3001}).to_csv(tables / "table1_eager.csv", index=False)
    table_rows("table2_compiled", "step_s", render_paper.COMPILED_COLUMNS,
               {"torch": 501, "tensorflow": 601}).to_csv(tables / "table2_compiled.csv",
                                                         index=False)
    gradients = pd.DataFrame([
        {"model": "mlp512", "task": "backward", "device": "cpu", "threads": 1, "seed": 0,
         "framework": fw, "mode": mode, "reference": "torch/eager", "max_rel_error": err,
         "status": status, "passed": passed}
        for fw, mode, err, status, passed in [
            ("torch", "script", 3.4e-7, "ok", True), ("tensorflow", "eager", 2.5e-6, "ok", True),
            ("tensorflow", "graph", NAN, "failed", False)]
    ])
    gradients.to_csv(tmp_path / "gradients.csv", index=False)
    env = {
        "cpu_model": "Fake CPU(R) 9000 @ 3.0GHz", "cpu_count": 16, "hostname": "test_host",
        "platform": "Linux-6.0-x86_64", "python": "3.11.7",
        "versions": {"torch": "2.13.0+cpu", "tensorflow": "2.21.0", "numpy": "2.1.0"},
        "device_names": ["cpu"], "git_commit": "0123456789abcdef", "git_dirty": True,
        "seeds": [0, 1, 2, 3, 4], "threads": [1, 4], "devices": ["cpu"],
        "workload": {"n_samples": 60000, "batch_size": 128, "warmup": 5, "iterations": 469},
        "n_cells": 60, "n_ok": 58, "gradient_tolerance": 1e-4,
        "started_at": "2025-01-02T03:04:05Z", "ended_at": "2025-01-02T04:05:06Z",
    }
    (tmp_path / "environment.json").write_text(json.dumps(env))
    pd.DataFrame([
        {"framework": fw, "mode": mode, "model": "mlp512", "task": "backward", "device": "cpu",
         "threads": 1, "seed": 0, "first_step_s": first, "median_step_s": 0.0005,
         "first_over_median": first / 0.0005}
        for fw, mode, first in [("torch", "script", 0.0375), ("tensorflow", "graph", 0.05),
                                ("torch", "eager", 0.0007), ("tensorflow", "eager", 0.003)]
    ]).to_csv(tmp_path / "first_iterations.csv", index=False)
    if figure is None:
        figure = tmp_path / "first_iterations.pdf"
        figure.write_bytes(b"%PDF-1.4 stand-in, never compiled\n")
    return [
        "--template", str(ROOT / "report" / "paper.tex.j2"),
        "--bib", str(ROOT / "report" / "references.bib"),
        "--published", str(ROOT / "report" / "published"),
        "--tables", str(tables), "--figure", str(figure),
        "--gradients", str(tmp_path / "gradients.csv"),
        "--environment", str(tmp_path / "environment.json"),
        "--first-iterations", str(tmp_path / "first_iterations.csv"),
        "--out", str(tmp_path / "paper" / "paper.pdf"),
    ]


def test_tex_has_ours_published_na_and_what_is_timed(tmp_path):
    render_paper.main(make_inputs(tmp_path) + ["--tex-only"])
    tex = (tmp_path / "paper" / "paper.tex").read_text()
    assert r"701 $\pm$ 12" in tex  # ours, five seeds
    assert r"686 $\pm$ 21" in tex and r"2889 $\pm$ 49" in tex  # study's Table 1
    assert r"465 $\pm$ 14" in tex and "5.36" in tex  # study's Table 2 and improvement
    assert "812 &" in tex and r"812 $\pm$" not in tex  # one seed: the mean alone
    assert "1.23" in tex and "0.98" in tex  # our two improvement ratios
    assert "n/a" in tex and r"50\% of x\_y" in tex  # the n/a cell keeps its note
    assert "this work" in tex and "study (published)" in tex
    assert "What is timed" in tex and "backward pass alone" in tex and "whole step" in tex
    assert "Fake CPU(R) 9000" in tex and "2.13.0+cpu" in tex and r"test\_host" in tex
    assert "tensorflow/graph vs torch/eager" in tex  # the failed gradient comparison
    assert r"\VAR" not in tex and r"\BLOCK" not in tex
    assert (tmp_path / "paper" / "first_iterations.pdf").exists()
    assert (tmp_path / "paper" / "references.bib").exists()
    assert not (tmp_path / "paper" / "paper.pdf").exists()


def test_missing_latexmk_fails_first_with_install_hint(tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    env = {**os.environ, "PATH": str(empty)}
    done = subprocess.run([sys.executable, str(SCRIPT), *make_inputs(tmp_path)],
                          env=env, capture_output=True, text=True)
    assert done.returncode != 0
    assert "latexmk" in done.stderr and "texlive-science" in done.stderr
    assert "apt-get install" in done.stderr and "./setup.sh" in done.stderr
    assert not (tmp_path / "paper").exists()  # nothing was done before the check


@pytest.mark.latex
def test_compiles_a_pdf(tmp_path):
    if shutil.which("latexmk") is None:
        pytest.skip("latexmk not installed")
    plt = pytest.importorskip("matplotlib.pyplot")
    figure = tmp_path / "stand_in.pdf"
    fig, ax = plt.subplots(figsize=(4, 2))
    ax.plot([1, 2, 3], [50, 2, 1])
    fig.savefig(figure)
    plt.close(fig)
    args = make_inputs(tmp_path, figure)
    render_paper.main(args)
    pdf = tmp_path / "paper" / "paper.pdf"
    assert pdf.read_bytes().startswith(b"%PDF")
    log = (tmp_path / "paper" / "paper.log").read_text(errors="replace")
    assert "There were undefined references" not in log  # bibtex resolved the citations
    assert r"\bibitem{wang_hung_autodiff}" in (tmp_path / "paper" / "paper.bbl").read_text()
