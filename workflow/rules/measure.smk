# One timing job per cell: a fresh process in the cell's framework environment.


# What a timing or reference job executes decides whether it re-runs, not when its files were
# last written: its code files are inputs whose times Snakemake ignores (ancient: they must
# exist, and adding or dropping one re-runs the job), and its params hold the digest of what
# they execute (adbench/code_inputs.py): a comment, a docstring or a reformatting re-runs
# nothing; an edit of one model's or one task's entry in the spec re-runs its cells alone.


rule harness:
    # A framework's environment and code on a device (common.smk, "the timing harness").
    input:
        harness_env,
        # run_cell.py runs in the analysis environment: it can record a cell whose own
        # environment could not be built.
        env_inputs(spec.ANALYSIS_ENV),
        code=lambda wc: [ancient(f) for f in harness_code(wc)],
    output:
        HARNESS_FILE,
    log:
        tree("logs/harness/{device}/{framework}.log"),
    params:
        code=lambda wc: code_inputs.code_digests(harness_code(wc)),
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
    # Timing jobs never share a machine with each other: timing_lock, limit 1 in
    # profiles/default; in profiles/slurm the same limit, scoped local, runs the cells of a
    # pack one at a time in their SLURM job, while the packs run side by side. On a cluster a
    # cell is in the pack adbench/cluster.py gives it (its group, with rule pack's job), and
    # its runtime (minutes: SLURM's --time) is its share of the pack's walltime, which
    # Snakemake adds up; plan_campaign.py prints the same packs. Budget, memory, walltime and
    # the cluster's settings are resources, not parameters: changing one re-times nothing. On
    # a workstation a retry (--retries) asks for more memory and time; the budget, part of
    # the experiment, stays what the config says. On a cluster retries are refused (a retried
    # pack would re-time its finished cells): the same command run again retries. First: the site's settings by the cell's device
    # and its GPU, as the site asks for one (common.smk, cell_slurm_resources).
    group:
        cell_pack
    conda:
        cell_conda_env
    threads: same_for_every_cell(lambda cell: int(cell.threads))
    resources:
        **cell_slurm_resources(),
        timing_lock=1,
        # An integer, or a string where it is not whole (a budget may be 0.5 s): Snakemake's
        # numeric resources are integers, and a packed job's string resources must agree.
        budget_s=same_for_every_cell(
            lambda cell: run_config.budget_resource(WORKLOADS.budget_s(cell.model, cell.task))
        ),
        runtime=cell_runtime,
        mem_mb=cell_mem_mb,
    params:
        cell=cell_arguments,
        # The spec's entries of the cell's model and task (the rest of spec.py is the
        # harness's): a constant when every cell shares them.
        spec=same_for_every_cell(lambda cell: code_inputs.cell_digest(cell.model, cell.task)),
    shell:
        # The budget goes to run_cell.py (which kills at it) and measure.py (which stops its
        # loop before it); the supervisor's path is written in at parse time.
        f"{env_python(spec.ANALYSIS_ENV)} {RUN_CELL_SCRIPT} --budget-s {{resources.budget_s}} "
        "{params.cell} --budget-s {resources.budget_s} --granted-threads {threads} > {log} 2>&1"


# The float64 references take seconds each (ResNet50's Jacobian 3 s): on a cluster they run on
# the submit host, beside the analysis, rather than as jobs shorter than a site's minimum.
localrules:
    reference,


rule reference:
    # The float64 ground truth of one model's derivative (numpy, or a float64 torch run).
    input:
        lambda wc: env_inputs(reference_env(wc)),
        code=lambda wc: [ancient(f) for f in reference_code(wc)],
    output:
        tree(spec.REFERENCE_PATTERN),
    log:
        tree("logs/reference/{model}/{derivative}/seed{seed}.log"),
    conda:
        lambda wc: env_file(reference_env(wc))
    # Heavy (a float64 ResNet50): it never runs beside a timing job either. A memory request
    # as its (model, task)'s cells'; a walltime (minutes) estimated from its model and data
    # sizes (adbench/cluster.py, Walltimes.reference), times the attempt on retries.
    resources:
        timing_lock=1,
        runtime=lambda wc, attempt: RUN.walltimes.reference_runtime_min(wc, attempt),
        mem_mb=lambda wc, attempt: attempt
        * WORKLOADS.mem_mb(wc.model, spec.REFERENCE_TASK[wc.derivative]),
    params:
        code=lambda wc: code_inputs.code_digests(reference_code(wc)),
        spec=lambda wc: code_inputs.cell_digest(wc.model, spec.REFERENCE_TASK[wc.derivative]),
        python=lambda wc: env_python(reference_env(wc)),
        data=lambda wc: data_args(wc.model, spec.REFERENCE_TASK[wc.derivative]),
    shell:
        "{params.python} {input.code[0]} --model {wildcards.model} "
        "--derivative {wildcards.derivative} --seed {wildcards.seed} "
        "{params.data} "
        "--out {output} > {log} 2>&1"


rule pack:
    # On a cluster, what joins a pack's cells into one SLURM job (a group job: its cells,
    # then this): a record of which job and node ran them. Its group is its pack's name.
    input:
        pack_cells,
    output:
        tree("packs/{pack}.json"),
    log:
        tree("logs/packs/{pack}.log"),
    wildcard_constraints:
        pack=r"pack_\w+",
    group:
        lambda wildcards: wildcards.pack
    resources:
        runtime=0,
        mem_mb=100,
        gpu=0,
    run:
        write_pack(wildcards.pack, input, output[0], log[0])


# Before a run submits anything to SLURM (not in a dry run): common.smk, slurm_preflight.
onstart:
    slurm_preflight()


# Said while planning: CUDA cells bound for a cluster without a GPU partition (a real run
# stops before submitting).
if submitting():
    for _problem in run_config.gpu_partition_problems(CLUSTER, packs().pending):
        logger.warning(f"adbench: {_problem}")
