"""The computation graphs of every model (the study's Figures 4-5, and the node counts).

Three steps, as the timing jobs run (measure.smk): each framework's graphs are walked in its
own environment, supervised from the pipeline's, and drawn in the analysis environment.
    graphs.py walk --framework F --out F.json [--model M ...]
                                                    in F's environment: each model given
                                                    (and the 512-MLP of the figures) built
                                                    by F's backend, its graph walked
                                                    (adbench/graphs.py)
    graphs.py supervise --python PY --framework F --out F.json
                                                    runs `walk` with PY; a walk that cannot
                                                    run (an environment that failed to
                                                    build) is recorded, with why, not fatal
    graphs.py draw --walked F.json ... --out-dir D  the 512-MLP's graphs as DOT, PDF and PNG,
                                                    nodes.csv, graphviz.json (dot -V)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TensorFlow's start-up chatter

from adbench import backends, graphs, spec  # noqa: E402
from adbench.report_spec import framework_label, model_label  # noqa: E402

WALK_TIMEOUT_S = 600


def log(message: str) -> None:
    print(f"graphs: {message}", file=sys.stderr, flush=True)


def graph_workload(model: str) -> spec.Workload:
    """One training batch of the model (the backward task's), drawn from seed 0."""
    return spec.Workload(model, seed=0, task="backward", warmup=0, iterations=1)


# ------------------------------------------------------------------ walk (framework env)
def torch_graph(model: str) -> graphs.Graph:
    """The autograd graph of the model's loss on one batch, built by the torch backend."""
    import torch

    from adbench.backends.torch_backend import models

    workload, cpu = graph_workload(model), torch.device("cpu")
    net, _ = models.build(workload.spec, spec.make_params(workload), cpu, torch.float32)
    batch = spec.make_batches(workload)[0]
    # The backend's own pairing (torch_backend.tasks.prepare): the model's aux is h0 or the
    # targets.
    args = [models.as_tensor(batch[k], cpu, torch.float32)
            for k in ("x", "h0" if "h0" in batch else "y")]
    names = {id(p): name for name, p in net.model.named_parameters()}
    return graphs.autograd_graph(net(*args), names)


def tensorflow_graph(model: str) -> graphs.Graph:
    """The traced graph of the whole step (forward and tape.gradient) as the graph mode runs
    it: one tf.function of the backend's backward task, traced on one batch."""
    import tensorflow as tf

    from adbench.backends.tensorflow_backend import models, tasks

    workload = graph_workload(model)
    with tf.device("/CPU:0"):
        built = models.build_model(workload.spec)
        models.load_params(built, spec.make_params(workload))
        batch = models.device_batch(spec.make_batches(workload)[0], workload.spec, built,
                                    "float32")
        task = tasks.make_task(workload, built, "float32")

    def step(b):  # as the backend's graph mode (tensorflow_backend.tasks.prepare)
        return task.derive(task.forward(b))

    return graphs.traced_graph(tf.function(step).get_concrete_function(batch).graph)


WALKS = {"torch": torch_graph, "tensorflow": tensorflow_graph}


def walk(framework: str, out: Path, models: list[str]) -> None:
    """The models' graphs in one framework; a model that fails is recorded with why."""
    backend = backends.load(framework)
    backend.configure_threads(1)
    found = {"framework": framework, "versions": backend.versions(), "models": {}, "dot": {}}
    for model in models:
        start = time.perf_counter()
        try:
            graph = WALKS[framework](model)
        except Exception as exc:  # noqa: BLE001 -- recorded as the model's n/a
            found["models"][model] = {"reason": f"{type(exc).__name__}: {exc}"[:500]}
            log(f"{framework} {model}: failed: {exc!r}"[:300])
            continue
        found["models"][model] = graphs.walk_record(graph)
        if model == graphs.FIGURE_MODEL:
            title = f"{model_label(model)} MLP, {framework_label(framework)}"
            found["dot"][model] = graphs.to_dot(graph, title)
        log(f"{framework} {model}: {graph.n_nodes} nodes "
            f"({time.perf_counter() - start:.2f} s)")
    out.write_text(json.dumps(found, indent=2) + "\n")


# ------------------------------------------------------------------ supervise
def supervise(python: str, framework: str, out: Path, models: list[str]) -> None:
    """Run `walk` with the framework's Python; a failure becomes the framework's reason."""
    command = [python, os.path.abspath(__file__), "walk", "--framework", framework,
               "--out", str(out), *(f"--model={m}" for m in models)]
    log(" ".join(command))
    try:
        done = subprocess.run(command, timeout=WALK_TIMEOUT_S, capture_output=True, text=True)
        sys.stderr.write(done.stderr)
        reason = None if done.returncode == 0 and out.exists() else (
            f"the walk exited {done.returncode}: " + _last_line(done.stderr))
    except (OSError, subprocess.TimeoutExpired) as exc:
        reason = f"the walk could not run: {type(exc).__name__}: {exc}"
    if reason:
        log(reason)
        out.write_text(json.dumps({"framework": framework, "reason": reason[:500]}) + "\n")


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "no message"


# ------------------------------------------------------------------ draw (analysis env)
def draw(walked_files: list[Path], out_dir: Path) -> None:
    dot = graphs.dot_program()
    out_dir.mkdir(parents=True, exist_ok=True)
    walked = {}
    for path in walked_files:
        found = json.loads(path.read_text())
        walked[found["framework"]] = found
    shown = {framework: _draw_figure(dot, walked.get(framework, {}), framework, out_dir)
             for framework in graphs.GRAPH_FRAMEWORKS}
    graphs.write_nodes_csv(graphs.node_rows(walked), out_dir / graphs.NODES_CSV)
    version = {"command": "dot -V", "dot": dot, "version": graphs.dot_version(dot),
               "frameworks": {f: w.get("versions") for f, w in walked.items()},
               "shown": shown}
    (out_dir / graphs.GRAPHVIZ_JSON).write_text(json.dumps(version, indent=2) + "\n")
    log(f"wrote {out_dir} with {version['version']}")


def _draw_figure(dot: str, found: dict, framework: str, out_dir: Path) -> tuple[int, int]:
    """The figure model's DOT, its PNG (the whole graph, for the HTML report) and its PDF
    (the paper's: cropped where the whole would print its labels too small); where the walk
    failed, a graph saying why.  (Nodes in the PDF, nodes in the graph.)"""
    text = found.get("dot", {}).get(graphs.FIGURE_MODEL)
    if text is None:
        why = (found.get("models", {}).get(graphs.FIGURE_MODEL, {}).get("reason")
               or found.get("reason") or "not walked")
        text = graphs.to_dot(graphs.Graph(), f"{framework_label(framework)}: n/a, {why}")
    source = out_dir / f"{graphs.figure_name(framework)}.dot"
    source.write_text(text)
    graphs.render(dot, source, source.with_suffix(".png"))
    return graphs.render_for_print(dot, source, source.with_suffix(".pdf"))


# ------------------------------------------------------------------ command line
def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    steps = p.add_subparsers(dest="step", required=True)
    w = steps.add_parser("walk", help="in the framework's environment")
    w.add_argument("--framework", required=True, choices=graphs.GRAPH_FRAMEWORKS)
    w.add_argument("--out", required=True, type=Path)
    s = steps.add_parser("supervise", help="run walk with --python, record its failure")
    s.add_argument("--python", required=True)
    s.add_argument("--framework", required=True, choices=graphs.GRAPH_FRAMEWORKS)
    s.add_argument("--out", required=True, type=Path)
    d = steps.add_parser("draw", help="in the analysis environment, with Graphviz")
    d.add_argument("--walked", required=True, action="append", type=Path)
    d.add_argument("--out-dir", required=True, type=Path)
    for step in (w, s):  # the run's models; the figure's always
        step.add_argument("--model", dest="models", action="append", choices=tuple(spec.MODELS),
                          default=[graphs.FIGURE_MODEL])
    args = p.parse_args(argv)
    if args.step != "draw":
        args.models = list(dict.fromkeys(m for m in spec.MODELS if m in args.models))
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.step == "walk":
        walk(args.framework, args.out, args.models)
    elif args.step == "supervise":
        supervise(args.python, args.framework, args.out, args.models)
    else:
        draw(args.walked, args.out_dir)


if __name__ == "__main__":
    main()
