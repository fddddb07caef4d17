# The study's Figure 3 (the first iterations of every mode, compiled modes' outliers visible),
# a figure per kind of the study's tables (its MLP backward tables beside its published
# numbers, the Jacobians, Hypothesis 0, every framework and mode) and the memory per cell.


rule figures:
    input:
        env_inputs(spec.ANALYSIS_ENV),
        iterations=tree("aggregate/iterations.parquet"),
        summary=tree("aggregate/summary.parquet"),
        cells=tree("aggregate/cells.parquet"),
        conditions=tree("aggregate/conditions.parquet"),
        published=sorted(in_tree(p) for p in (ROOT / "report" / "published").glob("*.csv")),
        code=code("figures.py"),
    output:
        **reported_figures(),
    log:
        tree("logs/figures.log"),
    conda:
        env_file(spec.ANALYSIS_ENV)
    params:
        python=env_python(spec.ANALYSIS_ENV),
        first=config["figures"]["first_iterations"],
        confidence=config["statistics"]["confidence"],
        # --<name>-out for the files of every figure but the first iterations'
        figures=lambda w, output: " ".join(
            f"--{key.rsplit('_', 1)[0].replace('_', '-')}-out {path}"
            for key, path in output.items()
            if not key.startswith("first_iterations")
        ),
    shell:
        "{params.python} {input.code[0]} --iterations {input.iterations} "
        "--first {params.first} --out {output.first_iterations_pdf} "
        "--out {output.first_iterations_png} --summary {input.summary} --cells {input.cells} "
        "--published report/published {params.figures} "
        "--conditions {input.conditions} --confidence {params.confidence} > {log} 2>&1"
