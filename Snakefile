# adbench: autodiff timings of every framework in spec.py, from raw Parquet to the paper.
# Usage: README.md. No logic here: config logic is adbench/config.py, helpers common.smk.
from snakemake.utils import min_version

min_version("9.0")


# The quick default, only when no --configfile is given: Snakemake would otherwise deep-merge
# it under the user's file and add e.g. frameworks the user left out.
if not workflow.overwrite_configfiles:

    configfile: "config/config.yaml"


# snakemake --report report.html (or .zip): every table, figure, verdict and the paper,
# captioned from report/captions/.
report: "report/workflow.rst"


# On a cluster (profiles/slurm) only the timing and reference jobs are submitted; building
# environments (into the shared .venvs/), the analysis and the paper run on the submit host.
localrules:
    all,
    build_venv,
    harness,
    aggregate,
    check_gradients,
    comparisons,
    tables,
    verdicts,
    figures,
    paper,


include: "workflow/rules/common.smk"
include: "workflow/rules/environments.smk"
include: "workflow/rules/measure.smk"
include: "workflow/rules/aggregate.smk"
include: "workflow/rules/figures.smk"
include: "workflow/rules/graphs.smk"
include: "workflow/rules/scaling.smk"
include: "workflow/rules/paper.smk"
# Last: it freezes what parsing made (the garbage collector of this process, not of any job).
include: "workflow/rules/planning.smk"


rule all:
    default_target: True
    input:
        final_outputs(),
