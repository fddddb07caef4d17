# One timing job per cell: a fresh process in the cell's framework environment.


rule measure:
    input:
        lambda wc: env_inputs(framework_env(wc)),
        code=measure_code,
    output:
        raw=spec.RAW_PATTERN,
        gradients=spec.GRADIENT_PATTERN,
    log:
        spec.RAW_PATTERN.replace("results/raw/", "results/logs/measure/").replace(
            ".parquet", ".log"
        ),
    benchmark:
        spec.RAW_PATTERN.replace("results/raw/", "results/benchmarks/measure/").replace(
            ".parquet", ".tsv"
        )
    conda:
        lambda wc: env_file(framework_env(wc))
    threads: lambda wc: int(wc.threads)
    # Timing jobs never share the machine with each other (limit set in profiles/default).
    resources:
        timing_lock=1,
    params:
        python=lambda wc: env_python(framework_env(wc)),
        workload=workload_args(),
    shell:
        "{params.python} {input.code[0]} --framework {wildcards.framework} "
        "--mode {wildcards.mode} --model {wildcards.model} --task {wildcards.task} "
        "--device {wildcards.device} --threads {wildcards.threads} --seed {wildcards.seed} "
        "{params.workload} --out {output.raw} --gradients {output.gradients} > {log} 2>&1"
