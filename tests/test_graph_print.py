"""The computation graphs as printed (issue 40 item 2): a graph whose labels the paper could
not print at 7 pt or more is cropped in the paper's PDF, and says so in its caption; the HTML
report's picture (the PNG) is the whole graph.  Graphviz's dot runs; no framework does (the
graph is a stand-in of a traced step's size and names)."""

from __future__ import annotations

import json
import shutil

import pytest

import fabricated
import graphs as graph_script
from adbench import graphs, plotting

pytestmark = pytest.mark.skipif(shutil.which("dot") is None,
                                reason="Graphviz's dot (./setup.sh installs it)")


def walked(tmp_path, layers: int) -> list[str]:
    files = []
    for framework in graphs.GRAPH_FRAMEWORKS:
        graph = fabricated.stand_in_graph(layers)
        found = {"framework": framework, "models": {graphs.FIGURE_MODEL: graphs.walk_record(
            graph)}, "dot": {graphs.FIGURE_MODEL: graphs.to_dot(graph, "[512] MLP")}}
        path = tmp_path / f"{framework}.json"
        path.write_text(json.dumps(found))
        files.append(f"--walked={path}")
    return files


def test_a_graph_too_large_to_read_is_cropped_in_the_paper_and_whole_in_the_report(tmp_path):
    out = tmp_path / "graphs"
    graph_script.main(["draw", *walked(tmp_path, 8), "--out-dir", str(out)])
    shown = json.loads((out / graphs.GRAPHVIZ_JSON).read_text())["shown"]
    for framework in graphs.GRAPH_FRAMEWORKS:
        name = graphs.figure_name(framework)
        n, total = shown[framework]
        assert 1 < n < total  # cropped, to as many nodes as print at 7 pt
        assert graphs.fits(out / f"{name}.pdf")
        scale = float(plotting.width_option(out / f"{name}.pdf").removesuffix("bp")) / \
            plotting.pdf_size_bp(out / f"{name}.pdf")[0]
        assert graphs.NODE_FONT_PT * scale >= plotting.MIN_FONT_PT - 0.05
        # the report's picture and the DOT source keep every node
        assert len(graphs.dot_nodes((out / f"{name}.dot").read_text())) == total
        assert (out / f"{name}.png").stat().st_size > (out / f"{name}.pdf").stat().st_size / 10
    context = graphs.graphs_context(out)
    assert all(f["cropped"]["shown"] < f["cropped"]["of"] for f in context["figures"])


def test_a_graph_that_fits_is_printed_whole(tmp_path):
    out = tmp_path / "graphs"
    graph_script.main(["draw", *walked(tmp_path, 1), "--out-dir", str(out)])
    shown = json.loads((out / graphs.GRAPHVIZ_JSON).read_text())["shown"]
    assert all(n == total for n, total in shown.values())
    assert all(f["cropped"] is None for f in graphs.graphs_context(out)["figures"])


def test_print_labels_keep_the_last_scopes_and_the_op():
    assert graphs.short_label(r"sequential_1/dense_1/BiasAdd/ReadVariableOp\nReadVariableOp") \
        == "BiasAdd/ReadVariableOp"
    assert graphs.short_label(r"gradient_tape/sequential_1/dense_1/MatMul_1\nMatMul") == \
        r"dense_1/MatMul_1\nMatMul"
    assert graphs.short_label(r"fc0.weight\n(512, 784)") == r"fc0.weight\n(512, 784)"
