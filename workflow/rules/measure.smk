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
        workload=lambda wc: workload_args(wc.model, wc.task),
    shell:
        "{params.python} {input.code[0]} --framework {wildcards.framework} "
        "--mode {wildcards.mode} --model {wildcards.model} --task {wildcards.task} "
        "--device {wildcards.device} --threads {wildcards.threads} --granted-threads {threads} "
        "--seed {wildcards.seed} "
        "{params.workload} --out {output.raw} --gradients {output.gradients} > {log} 2>&1"


rule reference:
    # The float64 ground truth of one model's derivative (numpy, or a float64 torch run).
    input:
        lambda wc: env_inputs(reference_env(wc)),
        code=reference_code,
    output:
        spec.REFERENCE_PATTERN,
    log:
        "results/logs/reference/{model}/{derivative}/seed{seed}.log",
    conda:
        lambda wc: env_file(reference_env(wc))
    # Heavy (a float64 ResNet50): it never runs beside a timing job either.
    resources:
        timing_lock=1,
    params:
        python=lambda wc: env_python(reference_env(wc)),
        data=lambda wc: data_args(wc.model, reference.REFERENCE_TASK[wc.derivative]),
    shell:
        "{params.python} {input.code[0]} --model {wildcards.model} "
        "--derivative {wildcards.derivative} --seed {wildcards.seed} "
        "{params.data} "
        "--out {output} > {log} 2>&1"
