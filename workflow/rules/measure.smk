# One timing job per cell: a fresh process in the cell's framework environment.


rule harness:
    # A framework's environment and code on a device (common.smk, "the timing harness").
    input:
        harness_env,
        # run_cell.py runs in the analysis environment: it can record a cell whose own
        # environment could not be built.
        env_inputs(spec.ANALYSIS_ENV),
        code=harness_code,
    output:
        HARNESS_FILE,
    log:
        tree("logs/harness/{device}/{framework}.log"),
    run:
        write_harness(wildcards, input, output[0], log[0])


rule measure:
    input:
        # The harness rule's own output. (Snakemake 9.27 would skip the search for its job
        # if the global wildcard_constraints were not on that output; measured: 0.4% of a
        # campaign's dry-run calls.)
        rules.harness.output[0],
    output:
        raw=tree(spec.RAW_PATTERN),
        gradients=tree(spec.GRADIENT_PATTERN),
    log:
        tree(spec.LOG_PATTERN),
    conda:
        cell_conda_env
    threads: same_for_every_cell(lambda cell: int(cell.threads))
    # Timing jobs never share a machine with each other: timing_lock, limit 1 in
    # profiles/default; in profiles/slurm the same limit, scoped local, runs the cells packed
    # into one SLURM job one at a time, while the packs run side by side (docs/cluster.md).
    # Budget, memory, walltime and the cluster's settings are resources, not parameters:
    # changing one re-times nothing. The walltime (runtime, minutes: SLURM's --time) is an
    # estimate of the cell with the config's margin, at most the budget plus a minute
    # (adbench/config.py, Walltimes; plan_campaign.py prints the same). A retry (--retries)
    # asks the scheduler for more memory and time; the budget, part of the experiment, stays
    # what the config says. First (unpacked): the config's `cluster` section by the cell's
    # device (common.smk, cell_slurm_resources).
    resources:
        **cell_slurm_resources(),
        timing_lock=1,
        # An integer, or a string where it is not whole (a budget may be 0.5 s): Snakemake's
        # numeric resources are integers, and a packed job's string resources must agree.
        budget_s=same_for_every_cell(
            lambda cell: run_config.budget_resource(WORKLOADS.budget_s(cell.model, cell.task))
        ),
        runtime=lambda wc, attempt: RUN.walltimes.runtime_min(wc, attempt),
        mem_mb=lambda wc, attempt: WORKLOADS.mem_mb(wc.model, wc.task) * attempt,
        # A CUDA cell asks the scheduler for a GPU (SLURM: --gpus=1); a CPU cell for none.
        gpu=same_for_every_cell(lambda cell: run_config.cell_gpus(cell.device)),
    params:
        cell=cell_arguments,
    shell:
        # The budget goes to run_cell.py (which kills at it) and measure.py (which stops its
        # loop before it); the supervisor's path is written in at parse time.
        f"{env_python(spec.ANALYSIS_ENV)} {RUN_CELL_SCRIPT} --budget-s {{resources.budget_s}} "
        "{params.cell} --budget-s {resources.budget_s} --granted-threads {threads} > {log} 2>&1"


rule reference:
    # The float64 ground truth of one model's derivative (numpy, or a float64 torch run).
    input:
        lambda wc: env_inputs(reference_env(wc)),
        code=reference_code,
    output:
        tree(spec.REFERENCE_PATTERN),
    log:
        tree("logs/reference/{model}/{derivative}/seed{seed}.log"),
    conda:
        lambda wc: env_file(reference_env(wc))
    # Heavy (a float64 ResNet50): it never runs beside a timing job either. On a cluster a
    # CPU job: the CPU partition's settings of the config's `cluster` section (first); a
    # memory request as its (model, task)'s cells'; a walltime (minutes) estimated from
    # its model and data sizes with the cells' margin and floor (adbench/config.py,
    # Walltimes.reference), times the attempt on retries.
    resources:
        **slurm_resources("cpu"),
        timing_lock=1,
        runtime=lambda wc, attempt: RUN.walltimes.reference_runtime_min(wc, attempt),
        mem_mb=lambda wc, attempt: attempt
        * WORKLOADS.mem_mb(wc.model, spec.REFERENCE_TASK[wc.derivative]),
    params:
        python=lambda wc: env_python(reference_env(wc)),
        data=lambda wc: data_args(wc.model, spec.REFERENCE_TASK[wc.derivative]),
    shell:
        "{params.python} {input.code[0]} --model {wildcards.model} "
        "--derivative {wildcards.derivative} --seed {wildcards.seed} "
        "{params.data} "
        "--out {output} > {log} 2>&1"
