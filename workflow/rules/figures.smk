# The study's Figure 3: the first iterations of every mode, compiled modes' outliers visible.


rule figure_first_iterations:
    input:
        env_inputs(spec.ANALYSIS_ENV),
        iterations="results/aggregate/iterations.parquet",
    output:
        FIGURE_FILES,
    log:
        "results/logs/figures.log",
    conda:
        conda_env(spec.ANALYSIS_ENV)
    params:
        python=env_python(spec.ANALYSIS_ENV),
        script=SCRIPTS / "figures.py",
        first=config["figures"]["first_iterations"],
    shell:
        "{params.python} {params.script} --iterations {input.iterations} "
        "--first {params.first} --out {output[0]} --out {output[1]} > {log} 2>&1"
