# The last include: Python's full garbage collections re-traverse every long-lived job of a
# large DAG, so the Snakemake process (never a timing job) freezes what parsing made and runs
# them rarely; benchmarks/dryrun_cost.py measures the effect (its trivial_tuned Snakefile).
import gc

FULL_COLLECTION_AFTER = 1000

gc.freeze()
gc.set_threshold(*gc.get_threshold()[:2], FULL_COLLECTION_AFTER)
