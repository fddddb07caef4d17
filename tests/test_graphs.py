"""The computation graphs (the study's Figures 4-5) and their node counts: the autograd walk
and the traced graph of a tiny known model, the pipeline's own 512-MLP graphs, the DOT text
Graphviz reads, the node-count table's n/a rows and the paper's section."""

from __future__ import annotations

import collections
import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tensorflow as tf  # noqa: F401  (installed in the test Python: missing is a failure)
import torch

from adbench import graphs, spec

pytestmark = pytest.mark.backend  # imports a framework

SCRIPTS = Path(__file__).resolve().parents[1] / "workflow" / "scripts"
REPORT = Path(__file__).resolve().parents[1] / "report"


def load_script(name: str):
    found = importlib.util.spec_from_file_location(f"{name}_script", SCRIPTS / f"{name}.py")
    module = sys.modules[found.name] = importlib.util.module_from_spec(found)  # dataclasses
    found.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def script():
    return load_script("graphs")


def tiny_torch_graph() -> graphs.Graph:
    """Linear(4, 3), ReLU, Linear(3, 2), squared error summed: 8 autograd nodes behind the
    loss, and one AccumulateGrad per parameter."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
    x, y = torch.randn(5, 4), torch.randn(5, 2)
    loss = (net(x) - y).pow(2).sum()
    names = {id(p): name for name, p in net.named_parameters()}
    return graphs.autograd_graph(loss, names)


def test_the_autograd_walk_finds_every_backward_node_of_a_tiny_mlp():
    graph = tiny_torch_graph()
    assert collections.Counter(graph.ops()) == {
        "SumBackward0": 1, "PowBackward0": 1, "SubBackward0": 1, "AddmmBackward0": 2,
        "ReluBackward0": 1, "TBackward0": 2, "AccumulateGrad": 4}
    assert graph.n_nodes == 12
    assert graph.n_edges == 11  # a tree: every node but the root has one consumer
    # The parameters are drawn beside their AccumulateGrad, named, and not counted.
    drawn = {n.label.split("\n")[0] for n in graph.nodes.values() if n.kind == "parameter"}
    assert drawn == {"0.weight", "0.bias", "2.weight", "2.bias"}


def tiny_traced_graph() -> graphs.Graph:
    w1, b1 = tf.Variable(tf.ones([4, 3])), tf.Variable(tf.zeros([3]))
    w2 = tf.Variable(tf.ones([3, 2]))

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum((tf.nn.relu(x @ w1 + b1) @ w2 - y) ** 2)
        return loss, tape.gradient(loss, [w1, b1, w2])

    concrete = step.get_concrete_function(tf.ones([5, 4]), tf.ones([5, 2]))
    return graphs.traced_graph(concrete.graph)


def test_the_traced_graph_holds_the_forward_and_the_gradients_matmuls():
    graph = tiny_traced_graph()
    ops = graph.ops()
    assert graph.n_nodes > 0 and ops["MatMul"] >= 2 + 3  # two forward, three in the gradient
    assert {"ReluGrad", "Placeholder"} <= set(ops)
    kinds = collections.Counter(n.kind for n in graph.nodes.values())
    assert kinds["gradient"] > 0 and kinds["forward"] > 0


def test_the_pipelines_mlp512_graphs_are_the_studys_figures(script):
    """The backends' 512-MLP: PyTorch's 11 autograd nodes (two addmm, a ReLU, two transposes,
    the subtraction and the norm of the study's loss, four AccumulateGrad); TensorFlow's
    traced step holds both layers' matmuls and their gradients."""
    torch_graph = script.torch_graph(graphs.FIGURE_MODEL)
    assert torch_graph.ops() == {
        "LinalgVectorNormBackward0": 1, "SubBackward0": 1, "AddmmBackward0": 2,
        "ReluBackward0": 1, "TBackward0": 2, "AccumulateGrad": 4}
    tf_ops = script.tensorflow_graph(graphs.FIGURE_MODEL).ops()
    assert tf_ops["MatMul"] == 2 + 3 and tf_ops["BiasAddGrad"] == 2  # no input gradient


def dot_or_skip() -> str:
    found = shutil.which("dot")
    if found is None:
        pytest.skip("Graphviz's dot is not installed (./setup.sh installs it, as root)")
    return found


@pytest.mark.parametrize("build", [tiny_torch_graph, tiny_traced_graph])
def test_graphviz_reads_the_dot_text(build):
    dot = dot_or_skip()
    text = graphs.to_dot(build(), 'a "quoted" title\nover two lines')
    done = subprocess.run([dot, "-Tsvg"], input=text, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "<svg" in done.stdout


def test_a_failed_walk_reads_n_a_with_its_reason_for_every_model():
    walked = {"torch": {"framework": "torch", "models": {
        m: {"nodes": 3, "edges": 2, "function_nodes": None, "ops": {}} for m in spec.MODELS}},
        "tensorflow": {"framework": "tensorflow", "reason": "the walk exited 1: no TF"}}
    walked["torch"]["models"]["cnn"] = {"reason": "RuntimeError: boom"}
    rows = graphs.node_rows(walked)
    assert len(rows) == len(spec.MODELS) * len(graphs.GRAPH_FRAMEWORKS)
    by = {(r["model"], r["framework"]): r for r in rows}
    assert by["cnn", "torch"]["nodes"] == "n/a" and by["cnn", "torch"]["reason"] == \
        "RuntimeError: boom"
    assert by["mlp512", "torch"]["nodes"] == 3 and by["mlp512", "torch"]["reason"] == ""
    assert {by[m, "tensorflow"]["reason"] for m in spec.MODELS} == {"the walk exited 1: no TF"}


def test_the_section_renders_the_figures_the_study_captions_and_the_table(tmp_path):
    """The context from a graphs folder, through the paper's own jinja2 environment."""
    walked = {f: {"framework": f, "models": {m: {"nodes": 7, "edges": 6, "function_nodes": 2,
                                                  "ops": {}} for m in spec.MODELS}}
              for f in graphs.GRAPH_FRAMEWORKS}
    walked["tensorflow"]["models"]["ctc"] = {"reason": "ValueError: 100% & more_text"}
    graphs.write_nodes_csv(graphs.node_rows(walked), tmp_path / graphs.NODES_CSV)
    (tmp_path / graphs.GRAPHVIZ_JSON).write_text(json.dumps({"version": "dot - graphviz 9"}))
    context = graphs.graphs_context(tmp_path)
    render_paper = load_script("render_paper")
    template = render_paper.make_environment(REPORT).get_template("sections/graphs.tex.j2")
    tex = template.render(graphs=context)
    for framework in graphs.GRAPH_FRAMEWORKS:
        number, caption = graphs.STUDY_FIGURES[framework]
        assert f"{graphs.figure_name(framework)}.pdf" in tex and number in tex
        assert caption.split()[-2] in tex  # "torchviz" / "TensorFlow"
    assert "n/a: TensorFlow: ValueError: 100\\% \\& more\\_text" in tex
    assert "7 (+2)" in tex and "dot - graphviz 9" in tex
    assert [p.name for p in graphs.figure_files(tmp_path)] == [
        f"{graphs.figure_name(f)}.pdf" for f in graphs.GRAPH_FRAMEWORKS]
