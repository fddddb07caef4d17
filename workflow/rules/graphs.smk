# The study's Figures 4-5 (the 512-MLP's computation graph drawn from PyTorch and from
# TensorFlow) and every model's graph node count (graphs/nodes.csv): each framework's graphs
# walked in its own environment, drawn by Graphviz's dot in the analysis environment
# (workflow/scripts/graphs.py; adbench/graphs.py).
from adbench import graphs as graph_figures  # noqa: E402

# The figures' DOT source, PDF (the paper's) and PNG (Snakemake's report), by framework.
GRAPH_FILES = {
    f"{framework}_{ext}": tree(f"graphs/{graph_figures.figure_name(framework)}.{ext}")
    for framework in graph_figures.GRAPH_FRAMEWORKS
    for ext in ("dot", "pdf", "png")
}
GRAPH_NODES = tree(f"graphs/{graph_figures.NODES_CSV}")
GRAPH_VERSION = tree(f"graphs/{graph_figures.GRAPHVIZ_JSON}")


# Seconds of work on the submit host, as the analysis rules (common.smk's localrules).
localrules:
    graph_walk,
    graphs,


rule graph_walk:
    # One framework's graphs, in its environment, supervised as the timing jobs are: a walk
    # that cannot run records why, and its models read n/a.
    input:
        lambda w: env_inputs(spec.FRAMEWORKS[w.framework].env),
        env_inputs(spec.ANALYSIS_ENV),
        code=lambda w: code("graphs.py", backend_module(w.framework)),
    output:
        tree("graphs/walked/{framework}.json"),
    log:
        tree("logs/graphs/{framework}.log"),
    conda:
        lambda w: env_file(spec.FRAMEWORKS[w.framework].env)
    # Building and tracing every model (ResNet50's 2,500 ops) is framework work: never
    # beside a timing job.
    resources:
        timing_lock=1,
    params:
        python=lambda w: env_python(spec.FRAMEWORKS[w.framework].env),
        # The run's models (the figure's model is always walked): a tiny config's walk takes
        # seconds, the paper config's every model.
        models=" ".join(sorted({f"--model={cell.model}" for cell in CELLS})),
    shell:
        f"{env_python(spec.ANALYSIS_ENV)} {{input.code[0]}} supervise "
        "--python {params.python} --framework {wildcards.framework} --out {output} "
        "{params.models} > {log} 2>&1"


rule graphs:
    input:
        env_inputs(spec.ANALYSIS_ENV),
        walked=expand(rules.graph_walk.output[0], framework=graph_figures.GRAPH_FRAMEWORKS),
        code=code("graphs.py"),
    output:
        **{
            key: (
                reported(path, f"graphs_{key.removesuffix('_png')}", "Figures")
                if key.endswith("_png")
                else path
            )
            for key, path in GRAPH_FILES.items()
        },
        # Beside the study's tables (common.smk, reported_tables), with their labels.
        nodes=report(
            GRAPH_NODES,
            caption="../../report/captions/graphs_nodes.rst",
            category="Tables",
            subcategory="Computation graphs: nodes per model and framework",
            labels={"table": "nodes", "format": "CSV"},
        ),
        version=GRAPH_VERSION,
    log:
        tree("logs/graphs/draw.log"),
    conda:
        env_file(spec.ANALYSIS_ENV)
    params:
        python=env_python(spec.ANALYSIS_ENV),
        walked=lambda w, input: " ".join(f"--walked {p}" for p in input.walked),
        folder=lambda w, output: os.path.dirname(output.nodes),
    shell:
        "{params.python} {input.code[0]} draw {params.walked} --out-dir {params.folder} "
        "> {log} 2>&1"
