# The study's Figure 3 (the first iterations of every mode, compiled modes' outliers visible)
# the Jacobian timings of every model, task and mode, and every framework and mode's step
# and time to first step.


rule figures:
    input:
        env_inputs(spec.ANALYSIS_ENV),
        iterations=tree("aggregate/iterations.parquet"),
        summary=tree("aggregate/summary.parquet"),
        cells=tree("aggregate/cells.parquet"),
        bootstrap=tree("aggregate/bootstrap.parquet"),
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
    shell:
        "{params.python} {input.code[0]} --iterations {input.iterations} "
        "--first {params.first} --out {output.first_iterations_pdf} "
        "--out {output.first_iterations_png} --summary {input.summary} --cells {input.cells} "
        "--jacobians-out {output.jacobians_pdf} --jacobians-out {output.jacobians_png} "
        "--frameworks-out {output.frameworks_pdf} --frameworks-out {output.frameworks_png} "
        "--bootstrap {input.bootstrap} --confidence {params.confidence} > {log} 2>&1"
