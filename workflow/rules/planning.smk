# The last include: the garbage collector of the Snakemake process itself (never of a timing
# job, each its own process). Planning a campaign builds tens of thousands of jobs that live
# until the process ends; Python's full collections re-traverse all of them, and every module
# imported while parsing, about a fifth of a 10,080-cell dry run (README, "What the pipeline
# costs"). What parsing made is frozen (never collected, as modules never are), and a full
# collection waits for 1,000 collections of generation 1 instead of Python's 10: cyclic
# garbage is still collected while young, as before, and old garbage at the rarer full ones.
import gc

FULL_COLLECTION_AFTER = 1000

gc.freeze()
gc.set_threshold(*gc.get_threshold()[:2], FULL_COLLECTION_AFTER)
