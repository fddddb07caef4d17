# The paper: jinja2 templates in report/ rendered with our results, compiled by latexmk.
# It needs TeX Live on the machine (README); without latexmk only this job fails, with a hint.


rule paper:
    input:
        env_inputs(spec.ANALYSIS_ENV),
        template="report/paper.tex.j2",
        code=code("render_paper.py"),
        bib="report/references.bib",
        published=sorted(in_tree(p) for p in (ROOT / "report" / "published").glob("*.*")),
        tables=TABLE_FILES,
        memory=MEMORY_FILE,  # read from the tables folder
        figure=FIGURE_FILES["first_iterations_pdf"],
        # the figures of the study's tables (tables.FIGURES_OF_TABLES), each beside its tables
        mlp_backward=FIGURE_FILES["mlp_backward_pdf"],
        jacobians=FIGURE_FILES["jacobians_pdf"],
        hypothesis0=FIGURE_FILES["hypothesis0_pdf"],
        frameworks=FIGURE_FILES["frameworks_pdf"],
        memory_figure=FIGURE_FILES["memory_per_cell_pdf"],
        cells=tree("aggregate/cells.parquet"),
        gradients=tree("checks/gradients.csv"),
        environment=tree("aggregate/environment.json"),
        first=tree("aggregate/first_iterations.csv"),
        made=tree("aggregate/comparisons.parquet"),
        claims=tree("verdicts/claims.csv"),
        groups=tree("verdicts/groups.csv"),
        comparisons=tree("verdicts/comparisons.csv"),
        # the sections of report/sections/: how a gradient's cost grows, the graphs
        sections=sorted(in_tree(p) for p in (ROOT / "report" / "sections").glob("*.tex.j2")),
        scaling_table=SCALING_TABLE,
        peak=PEAK_FILES,
        scaling_figures=[p for k, p in SCALING_FIGURES.items() if k.endswith("_pdf")],
        graph_nodes=GRAPH_NODES,
        graph_version=GRAPH_VERSION,
        graph_figures=[GRAPH_FILES[f"{f}_pdf"] for f in graph_figures.GRAPH_FRAMEWORKS],
        # benchmarks/validate_harness.py's findings, when someone ran it for this tree.
        validation=lambda w: [p for p in [tree("validation/harness.json")] if os.path.exists(p)],
    output:
        reported(tree("paper/paper.pdf"), "paper", "Paper"),
    log:
        tree("logs/paper.log"),
    conda:
        env_file(spec.ANALYSIS_ENV)
    params:
        python=env_python(spec.ANALYSIS_ENV),
        tables=lambda w, input: os.path.dirname(input.tables[0]),
        validation=lambda w, input: (
            f"--validation {input.validation[0]}" if input.validation else ""
        ),
        graphs=lambda w, input: os.path.dirname(input.graph_nodes),
        peak=lambda w, input: " ".join(f"--peak {p}" for p in input.peak),
        scaling_figures=" ".join(
            f"--scaling-figure {k.rsplit('_', 1)[0]}={p}"
            for k, p in SCALING_FIGURES.items()
            if k.endswith("_pdf")
        ),
        # the last appendix's commands: this run's config and results tree
        configfile=paper_configfile(),
        results=lambda w, output: os.path.dirname(os.path.dirname(output[0])),
    shell:
        "{params.python} {input.code[0]} --template {input.template} --bib {input.bib} "
        "--published report/published --tables {params.tables} --figure {input.figure} "
        "--mlp-backward-figure {input.mlp_backward} --jacobians-figure {input.jacobians} "
        "--hypothesis0-figure {input.hypothesis0} --frameworks-figure {input.frameworks} "
        "--memory-figure {input.memory_figure} --cells {input.cells} "
        "--gradients {input.gradients} --environment {input.environment} "
        "--first-iterations {input.first} --made {input.made} "
        "--claims {input.claims} --groups {input.groups} --comparisons {input.comparisons} "
        "--scaling-table {input.scaling_table} {params.peak} {params.scaling_figures} "
        "--graphs {params.graphs} {params.validation} --configfile {params.configfile:q} "
        "--results {params.results:q} --out {output} > {log} 2>&1"
