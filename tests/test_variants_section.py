"""The paper's section on the backward pass's variants (adbench/variants.py,
report/sections/variants.tex.j2): fabricated cells and verdicts, the paper's jinja2."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pandas as pd
import pytest

from adbench import claims, report_spec, spec, variants
from test_verdicts import evaluate, frame, processes

REPO = Path(__file__).resolve().parents[1]
PUBLISHED = json.loads((REPO / "report/published/claims.json").read_text())


def render_section(context: dict) -> str:
    loaded = importlib.util.spec_from_file_location(
        "render_paper", REPO / "workflow/scripts/render_paper.py")
    module = sys.modules[loaded.name] = importlib.util.module_from_spec(loaded)  # dataclasses
    loaded.loader.exec_module(module)
    env = module.make_environment(REPO / "report")
    return env.get_template("sections/variants.tex.j2").render(variants=context)


def cells_of(*tasks):
    return pd.DataFrame([{"framework": "torch", "mode": "eager", "model": "mlp512", "task": t,
                          "seed": 0, "status": "ok"} for t in tasks])


def test_no_variant_cell_no_section():
    empty = pd.DataFrame(columns=["claim"])
    assert variants.variants_context(cells_of("backward"), empty, empty, PUBLISHED) is None


def test_the_section_gives_each_variant_its_claim_and_comparisons():
    # a planted saving: the frozen step's backward 4x cheaper, five processes
    quantity = claims.quantity_of("torch", "eager", "backward", "backward_s")
    data = frame(processes("torch", "eager", "mlp512", "backward", quantity, 4e-3),
                 processes("torch", "eager", "mlp512", "backward_frozen", quantity, 1e-3))
    found, _, comparisons = evaluate(data)
    context = variants.variants_context(
        cells_of("backward", "backward_frozen", "backward_retained"), found, comparisons,
        PUBLISHED)
    assert [t["label"] for t in context["tasks"]] == [
        report_spec.task_label(t).replace("_", r"\_")
        for t in ("backward_frozen", "backward_retained")]
    # the frozen part in words (its parameter names are the code's): its first layer's
    frozen = [p for p in spec.MODELS["mlp512"].params if p.name in spec.MODELS["mlp512"].frozen]
    assert context["frozen_parts"] == [{
        "model": report_spec.model_label("mlp512"),
        "part": f"{sum(p.size for p in frozen)} of its {spec.MODELS['mlp512'].n_parameters} "
                "parameters (2 arrays, its first layers)"}]
    by_claim = {c["name"]: c for c in context["claims"]}
    frozen = by_claim[PUBLISHED["claims"]["frozen_subgraphs"]["name"]]
    assert frozen["verdict"] == "supported" and len(frozen["rows"]) == 1  # five processes
    assert frozen["rows"][0]["processes"] == 5
    assert float(frozen["rows"][0]["ratio"].split()[0]) == pytest.approx(4, rel=0.05)
    freed = by_claim[PUBLISHED["claims"]["graph_freed"]["name"]]
    assert freed["rows"] == [] and freed["verdict"] == "not measured"
    grab = by_claim[PUBLISHED["claims"]["memory_grab"]["name"]]  # 004's, on a GPU only
    assert grab["only_on"] == "cuda" and freed["only_on"] is None
    tex = render_section(context)
    assert "its cells run on cuda only" in tex
    assert r"\label{sec:variants}" in tex and "supported" in tex
    assert "No comparison of this claim was measured in this run." in tex
