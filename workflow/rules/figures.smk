# The study's Figure 3: the first iterations of every mode, compiled modes' outliers visible.


rule figure_first_iterations:
    input:
        env_inputs(spec.ANALYSIS_ENV),
        iterations="results/aggregate/iterations.parquet",
        code=code("figures.py", "spec.py"),
    output:
        pdf=FIGURE_FILES[0],
        png=FIGURE_FILES[1],
    log:
        "results/logs/figures.log",
    conda:
        env_file(spec.ANALYSIS_ENV)
    params:
        python=env_python(spec.ANALYSIS_ENV),
        first=config["figures"]["first_iterations"],
    shell:
        "{params.python} {input.code[0]} --iterations {input.iterations} "
        "--first {params.first} --out {output.pdf} --out {output.png} > {log} 2>&1"
