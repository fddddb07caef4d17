# Every figure adbench/sections/figures.py declares, each drawn by its own module: the study's
# Figure 3 (the first iterations), the figures of the study's tables and the memory per cell.


rule figures:
    input:
        env_inputs(spec.ANALYSIS_ENV),
        iterations=tree("aggregate/iterations.parquet"),
        summary=tree("aggregate/summary.parquet"),
        cells=tree("aggregate/cells.parquet"),
        conditions=tree("aggregate/conditions.parquet"),
        published=sorted(in_tree(p) for p in (ROOT / "report" / "published").glob("*.csv")),
        # the script loads each figure's module by name: each is a code input
        code=code("figures.py", *(f.module for f in declared_figures.FIGURES)),
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
        # --out for the figure every run draws, --<name>-out for each other declared one
        figures=lambda w, output: " ".join(
            f"--{'out' if f.name == declared_figures.ALWAYS else f.out_option} "
            f"{output[f'{f.name}_{ext}']}"
            for f in declared_figures.FIGURES
            for ext in ("pdf", "png")
        ),
    shell:
        "{params.python} {input.code[0]} --iterations {input.iterations} "
        "--first {params.first} --summary {input.summary} --cells {input.cells} "
        "--published report/published {params.figures} "
        "--conditions {input.conditions} --confidence {params.confidence} > {log} 2>&1"
