# How a derivative's cost grows (adbench/scaling.py, adbench/flops.py): the machine's float32
# matmul peak at the cells' thread counts, and per condition the cheap-gradient ratio, FLOPs
# per step and the share of that peak reached; a figure per axis the tree sweeps.
from adbench import sweeps  # noqa: E402  (the spec only)

SCALING_TABLE = tree("tables/scaling.csv")
# The CPU cells' thread counts; none (a CUDA-only run): no CPU peak is measured. The GPU's,
# where CUDA cells run.
PEAK_THREADS = sweeps.thread_counts(CELLS)
PEAK_FILES = [tree("scaling/peak.json")] if PEAK_THREADS else []
if sweeps.measures_gpu_peak(CELLS):
    PEAK_FILES.append(tree("scaling/peak_cuda.json"))
CUDA_PEAK_ENV = spec.FRAMEWORKS[sweeps.CUDA_PEAK_FRAMEWORK].env
SCALING_FIGURES = {
    f"{axis}_{ext}": tree(f"figures/scaling_{axis}.{ext}")
    for axis in sweeps.sweep_axes(CELLS)
    for ext in ("pdf", "png")
}


# The analysis, like the tables, on the submit host; the peak where the CPU cells run.
localrules:
    scaling,


rule matmul_peak:
    # numpy's float32 matmul in the analysis environment, a fresh process per thread count
    # of the CPU cells; under the timing lock, as it times too.
    input:
        env_inputs(spec.ANALYSIS_ENV),
        code=code("measure_peak.py"),
    output:
        tree("scaling/peak.json"),
    log:
        tree("logs/scaling/peak.log"),
    conda:
        env_file(spec.ANALYSIS_ENV)
    threads: max(PEAK_THREADS, default=1)
    resources:
        **slurm_resources("cpu", max(PEAK_THREADS, default=1)),
        # seconds of products: the walltimes' floor on a cluster; every submitted job asks
        # for its memory (the CPU cells' default)
        runtime=RUN.walltimes.floor_min,
        mem_mb=WORKLOAD["mem_mb"],
        timing_lock=1,
    params:
        python=env_python(spec.ANALYSIS_ENV),
        threads=" ".join(f"--threads {t}" for t in PEAK_THREADS),
    shell:
        "{params.python} {input.code[0]} {params.threads} --out {output} > {log} 2>&1"


rule matmul_peak_cuda:
    # PyTorch's float32 matmul on the GPU (cuBLAS), in its environment, on a node of the CUDA
    # cells; under the timing lock, as it times too. A GPU PyTorch cannot see: the file says
    # why, and the CUDA cells' rates are set against nothing.
    input:
        env_inputs(CUDA_PEAK_ENV),
        code=code("measure_peak.py"),
    output:
        tree("scaling/peak_cuda.json"),
    log:
        tree("logs/scaling/peak_cuda.log"),
    conda:
        env_file(CUDA_PEAK_ENV)
    resources:
        **slurm_resources("cuda", 1),
        runtime=RUN.walltimes.floor_min,
        # PyTorch's CUDA cells hold about 1 GiB resident (example-results): the cells' default
        mem_mb=WORKLOAD["mem_mb"],
        timing_lock=1,
    params:
        python=env_python(CUDA_PEAK_ENV),
    shell:
        "{params.python} {input.code[0]} --device cuda --out {output} > {log} 2>&1"


rule scaling:
    input:
        env_inputs(spec.ANALYSIS_ENV),
        cells=tree("aggregate/cells.parquet"),
        comparisons=tree("aggregate/comparisons.parquet"),
        conditions=tree("aggregate/conditions.parquet"),
        peak=PEAK_FILES,
        code=code("scaling.py"),
    output:
        **{
            key: (
                reported(path, "scaling_figure", "Figures", axis=key.rsplit("_", 1)[0])
                if key.endswith("_png")
                else path
            )
            for key, path in SCALING_FIGURES.items()
        },
        table=reported(SCALING_TABLE, "scaling", "Tables"),
    log:
        tree("logs/scaling.log"),
    conda:
        env_file(spec.ANALYSIS_ENV)
    params:
        python=env_python(spec.ANALYSIS_ENV),
        peak=lambda w, input: " ".join(f"--peak {p}" for p in input.peak),
        figures=" ".join(
            f"--figure {key.rsplit('_', 1)[0]}={path}" for key, path in SCALING_FIGURES.items()
        ),
    shell:
        "{params.python} {input.code[0]} --cells {input.cells} "
        "--comparisons {input.comparisons} --conditions {input.conditions} "
        "{params.peak} --table {output.table} "
        "{params.figures} > {log} 2>&1"
