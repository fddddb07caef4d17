# From raw per-iteration files to statistics, the gradient cross-check and the study's tables.
# These jobs run in the analysis environment and may run beside timing jobs.


rule aggregate:
    input:
        env_inputs(spec.ANALYSIS_ENV),
        raw=raw_files(),
        code=code("aggregate.py"),
    output:
        iterations=tree("aggregate/iterations.parquet"),
        cells=tree("aggregate/cells.parquet"),
        trials=tree("aggregate/trials.parquet"),
        summary=tree("aggregate/summary.parquet"),
        bootstrap=tree("aggregate/bootstrap.parquet"),
        first=tree("aggregate/first_iterations.csv"),
        environment=tree("aggregate/environment.json"),
        raw_files=tree("aggregate/raw_files.txt"),
    log:
        tree("logs/aggregate.log"),
    conda:
        env_file(spec.ANALYSIS_ENV)
    params:
        python=env_python(spec.ANALYSIS_ENV),
        outdir=lambda w, output: os.path.dirname(output.cells),
        settings=json.dumps(
            {
                "workload": run_config.without_resources(WORKLOAD),
                "gradient_check": config["gradient_check"],
                "statistics": config["statistics"],
            }
        ),
    # Every cell's file goes through a list (printf is the shell's own, not a program): a
    # program's command line holds 2 MB, a campaign's paths 75 bytes each.
    shell:
        "printf '%s\\n' {input.raw:q} > {output.raw_files} && "
        "{params.python} {input.code[0]} --settings {params.settings:q} "
        "--outdir {params.outdir} @{output.raw_files} > {log} 2>&1"


rule check_gradients:
    input:
        env_inputs(spec.ANALYSIS_ENV),
        gradients=gradient_files(),
        references=reference_files(),
        code=code("check_gradients.py"),
    output:
        csv=reported(tree("checks/gradients.csv"), "gradients", "Checks", format="CSV"),
        md=reported(tree("checks/gradients.md"), "gradients", "Checks", format="Markdown"),
        gradient_files=tree("checks/gradient_files.txt"),
    log:
        tree("logs/check_gradients.log"),
    conda:
        env_file(spec.ANALYSIS_ENV)
    params:
        python=env_python(spec.ANALYSIS_ENV),
        tolerances=tolerance_args(),
    # The cells' files through a list, as in rule aggregate.
    shell:
        "printf '%s\\n' {input.gradients:q} > {output.gradient_files} && "
        "{params.python} {input.code[0]} {params.tolerances} --csv {output.csv} "
        "--md {output.md} --references {input.references} --cells @{output.gradient_files} "
        "2>&1 | tee {log}"


rule tables:
    input:
        env_inputs(spec.ANALYSIS_ENV),
        summary=tree("aggregate/summary.parquet"),
        cells=tree("aggregate/cells.parquet"),
        comparisons=tree("aggregate/comparisons.parquet"),
        code=code("make_tables.py"),
    output:
        reported_tables(),
        reported(MEMORY_FILE, "memory", "Tables"),
        reported(VARLEN_FILE, "varlen", "Tables"),
    log:
        tree("logs/tables.log"),
    conda:
        env_file(spec.ANALYSIS_ENV)
    params:
        python=env_python(spec.ANALYSIS_ENV),
        outdir=lambda w, output: os.path.dirname(output[0]),
        noise=config["statistics"]["noise_threshold"],
    shell:
        "{params.python} {input.code[0]} --summary {input.summary} --cells {input.cells} "
        "--comparisons {input.comparisons} "
        "--noise-threshold {params.noise} --outdir {params.outdir} > {log} 2>&1"


rule comparisons:
    # Every estimate and comparison the outputs show, made once (adbench/comparisons.py):
    # the tables, figures, scaling, verdicts and the paper read them and recompute nothing.
    input:
        env_inputs(spec.ANALYSIS_ENV),
        bootstrap=tree("aggregate/bootstrap.parquet"),
        code=code("compare.py"),
    output:
        conditions=tree("aggregate/conditions.parquet"),
        comparisons=tree("aggregate/comparisons.parquet"),
    log:
        tree("logs/comparisons.log"),
    conda:
        env_file(spec.ANALYSIS_ENV)
    params:
        python=env_python(spec.ANALYSIS_ENV),
        outdir=lambda w, output: os.path.dirname(output.comparisons),
        confidence=config["statistics"]["confidence"],
    shell:
        "{params.python} {input.code[0]} --bootstrap {input.bootstrap} "
        "--confidence {params.confidence} --outdir {params.outdir} > {log} 2>&1"


rule verdicts:
    input:
        env_inputs(spec.ANALYSIS_ENV),
        comparisons=tree("aggregate/comparisons.parquet"),
        code=code("make_verdicts.py"),
    output:
        claims=reported(tree("verdicts/claims.csv"), "claims", "Verdicts", file="claims"),
        groups=reported(tree("verdicts/groups.csv"), "groups", "Verdicts", file="groups"),
        comparisons=reported(
            tree("verdicts/comparisons.csv"), "comparisons", "Verdicts", file="comparisons"
        ),
    log:
        tree("logs/verdicts.log"),
    conda:
        env_file(spec.ANALYSIS_ENV)
    params:
        python=env_python(spec.ANALYSIS_ENV),
        outdir=lambda w, output: os.path.dirname(output.claims),
        confidence=config["statistics"]["confidence"],
    shell:
        "{params.python} {input.code[0]} --comparisons {input.comparisons} "
        "--confidence {params.confidence} --outdir {params.outdir} > {log} 2>&1"
