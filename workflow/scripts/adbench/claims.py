"""The seeds' claims that the grid can test, each as comparisons of cells (data, not prose).

A claim's words (its name, its statement and where the seeds make it, and how our cells
test it) live beside the study's numbers, in report/published/claims.json under "claims",
keyed as here, and only the report reads them; this module says, as data, how our cells
test it.  A comparison is the ratio numerator / denominator of two conditions' times
(VERDICT_STATISTIC), paired by seed, or of another per-process quantity (a ratio of times,
the GPU memory a process holds); or, without a denominator, one condition's value against
the claim's bound (a first step over the median step, against 1; the bytes a retained
graph keeps over its saved activations' expected bytes, against 1 less the reading's
accuracy).  A comparison of kind "greater" says the ratio is above the bound (the
numerator slower); kind "equal" that it is the bound; both are judged against the same
practical margin, MARGIN, by the rule in adbench.inference.  Kind "at_most" says the ratio
is at most the bound, the bound itself being the tolerance (no margin).  A comparison's
kind is its claim's unless it says otherwise: a claim with "only" tests both sides, each
with its own kind.
adbench.comparisons makes the comparisons in every (machine, device, threads) block
measured; adbench.verdicts judges each group of them, and the claim by a rule over its groups.

Nothing here lists frameworks or models of its own: every side is derived from spec.
"""

from __future__ import annotations

import dataclasses

from adbench import spec
from adbench.spec import pairs
from adbench.activation_memory import JUDGED_MODELS, TOLERANCE
from adbench.stats import DEVICE_PROCESS, EPOCH, FIRST_OVER_STEADY, KEPT_OVER_SAVED

# The practical margin of every claim, fixed before looking at the data: a difference under
# 10% is not one a user would choose a framework for (and the study's own gaps are larger).
MARGIN = 0.10
# Griewank & Walther (Evaluating Derivatives, 2nd ed., SIAM 2008) bound a gradient's cost by
# a small constant times the function's: at most about 4 to 5 in operation counts.
CHEAP_GRADIENT_BOUND = 5.0
# Each process's median over its iterations, averaged over processes: a stray slow
# iteration (a collection, a recompilation) moves a mean of 5 iterations by tens of percent
# and a median hardly at all.  The study's tables keep its own statistic, the mean.
VERDICT_STATISTIC = "median"


@dataclasses.dataclass(frozen=True)
class Side:
    """One condition of a comparison (device and threads come from the block evaluated)."""

    framework: str
    mode: str
    model: str
    task: str
    quantity: str


@dataclasses.dataclass(frozen=True)
class Comparison:
    numerator: Side
    denominator: Side | None = None  # None: the numerator's value against the claim's bound
    kind: str | None = None  # None: the claim's

    @property
    def sides(self) -> tuple[Side, ...]:
        """Its conditions: the numerator, and the denominator where it has one."""
        return tuple(s for s in (self.numerator, self.denominator) if s is not None)

    @property
    def group(self) -> tuple[str, str, str | None, str | None]:
        """The (framework, mode) pairs compared: a claim is shown and judged per group."""
        n, d = self.numerator, self.denominator
        return (n.framework, n.mode, *((d.framework, d.mode) if d else (None, None)))


@dataclasses.dataclass(frozen=True)
class Claim:
    """A claim as data: its comparisons and how they are judged.  Every word about it (its
    name, statement, source and how these comparisons test it) is the report's:
    report/published/claims.json "claims"[key], whose test words quote `margin` and `bound`."""

    key: str  # report/published/claims.json "claims" entry with its words
    kind: str  # "greater" | "equal" | "at_most"
    comparisons: tuple[Comparison, ...]
    table: str | None = None  # the two-task table whose ratios these comparisons are (H0)
    bound: float = 1.0  # the ratio the claim is about: 1 (equal costs), or its bound
    margin: float = MARGIN

    def kind_of(self, group: tuple) -> str:
        """The kind a group of the claim is judged by (its comparisons share it)."""
        return next(c.kind or self.kind for c in self.comparisons if c.group == group)


def quantity_of(framework: str, mode: str, task: str, prefer: str) -> str:
    """`prefer` where the cell records it (a whole-step mode has no backward_s), else step_s."""
    return prefer if prefer in spec.timed_quantities(framework, mode, task) else "step_s"


def side(framework: str, mode: str, model: str, task: str, prefer: str = "step_s") -> Side:
    return Side(framework, mode, model, task, quantity_of(framework, mode, task, prefer))


def by_parameters(models) -> list[str]:
    return sorted(models, key=lambda m: spec.MODELS[m].n_parameters)


# The study's own pair: PyTorch's default (eager) against TensorFlow's graph mode.
TORCH_EAGER = ("torch", "eager")
TF_GRAPH = ("tensorflow", "graph")
STUDY_JACOBIAN_MODELS = spec.STUDY_JACOBIAN_MODELS  # the study's "small" models
STUDY_LARGE_MODEL = spec.STUDY_LARGE_MODELS  # its "larger model"


def hypothesis_0() -> Claim:
    first, second = spec.HYPOTHESIS0_TASKS
    return Claim(
        "hypothesis0",
        "equal",
        tuple(
            Comparison(side(f, m, model, second), side(f, m, model, first))
            for model in spec.STUDY_MODELS
            for f, m in pairs()
        ),
        table="table6_hypothesis0",
    )


def hypothesis_1() -> Claim:
    models = spec.MLPS
    return Claim(
        "hypothesis1",
        "greater",
        tuple(
            Comparison(side(*TORCH_EAGER, model, "backward"), side(*TF_GRAPH, model, "backward"))
            for model in models
        ),
    )


def depth() -> Claim:
    mlps = spec.MLPS  # equal parameter counts, growing depth
    return Claim(
        "depth",
        "greater",
        tuple(
            Comparison(
                side(f, m, deeper, "backward", "backward_s"),
                side(f, m, shallower, "backward", "backward_s"),
            )
            for f, m in pairs(spec.STUDY_FRAMEWORKS)
            for shallower, deeper in zip(mlps, mlps[1:])
        ),
    )


def small_vs_large() -> Claim:
    small = [
        Comparison(side(*TF_GRAPH, model, task), side(*TORCH_EAGER, model, task))
        for model in STUDY_JACOBIAN_MODELS
        for task in spec.JACOBIANS
    ]
    large = [
        Comparison(side(*TORCH_EAGER, model, task), side(*TF_GRAPH, model, task))
        for model in STUDY_LARGE_MODEL
        for task in spec.JACOBIANS
    ]
    return Claim(
        "small_vs_large",
        "greater",
        tuple(small + large),
    )


def graph_for_large() -> Claim:
    return Claim(
        "graph_for_large",
        "greater",
        tuple(
            Comparison(side(f, m, model, task), side(*TF_GRAPH, model, task))
            for model in STUDY_LARGE_MODEL
            for task in spec.JACOBIANS
            for f, m in pairs(spec.STUDY_FRAMEWORKS)
            if (f, m) != TF_GRAPH
        ),
    )


def jit_outperforms() -> Claim:
    models = ("rnn_cell",) + spec.MLPS  # the proposal's example first
    return Claim(
        "jit_outperforms",
        "greater",
        tuple(
            Comparison(
                side(*TORCH_EAGER, model, "backward"), side("torch", "script", model, "backward")
            )
            for model in models
        ),
    )


def first_step_only_compiled() -> Claim:
    """000 §3.1.3: the first batches are slow only in compiled models.  "Only" is tested on
    both sides: every compiled mode's first step over its median step above 1 (beyond the
    margin), and every eager mode's within the margin of 1."""
    return Claim(
        "first_step_only_compiled",
        "greater",
        tuple(
            Comparison(Side(f, m, model, task, FIRST_OVER_STEADY),
                       kind="greater" if spec.FRAMEWORKS[f].modes[m].compiled else "equal")
            for f, m in pairs(spec.STUDY_FRAMEWORKS)
            for model in spec.STUDY_MODELS
            for task in spec.STUDY_TASKS
        ),
    )


def variants(frozen: bool, default_allocator: bool = False) -> list[tuple[str, str]]:
    """(task, the task it varies) of the spec's fixed-shape variant tasks, frozen or not, with
    the framework's default GPU allocator or not (the variable-length ones change the data,
    not the step: claims.varying_lengths)."""
    return [(task, info.variant_of) for task, info in spec.TASKS.items()
            if info.variant_of and info.sequence is None and info.frozen == frozen
            and info.default_allocator == default_allocator]


def frozen_subgraphs() -> Claim:
    """003: excluding subgraphs from the derivative computation saves computation."""
    return Claim(
        "frozen_subgraphs",
        "greater",
        tuple(
            Comparison(side(f, m, model, whole, "backward_s"),
                       side(f, m, model, frozen, "backward_s"))
            for frozen, whole in variants(frozen=True)
            for f, m in pairs()
            for model in spec.STUDY_MODELS
            if spec.MODELS[model].frozen
        ),
    )


def graph_freed() -> Claim:
    """003 and 004: the graph is freed after each step, leaving more memory available.

    Judged on bytes, not on whole heaps: the bytes a step with its graph retained keeps past
    its return (read at the start of the measured phase and after the last step, as its
    backend declares valid: stats.KEPT_BY_STEP) over the bytes its saved activations should
    take (adbench.activation_memory, from the spec's shapes).  At least 1 less the reading's
    shown accuracy (activation_memory.TOLERANCE): the retained graph holds its activations,
    which the default step frees (its own kept bytes are in the memory table).  A cell whose
    bytes are not measurable on its device, or a model with no stated expectation, is not
    judged."""
    floor = 1 - TOLERANCE
    return Claim(
        "graph_freed",
        "greater",
        tuple(
            Comparison(Side(f, m, model, retained, KEPT_OVER_SAVED))
            for retained, _ in variants(frozen=False)
            for f, m in pairs()
            for model in JUDGED_MODELS
        ),
        bound=floor,
        margin=0.0,
    )


def memory_grab() -> Claim:
    """004: TensorFlow takes all available GPU memory (unless told otherwise)."""
    return Claim(
        "memory_grab",
        "greater",
        tuple(
            Comparison(Side(f, m, model, default, DEVICE_PROCESS),
                       Side(f, m, model, set_policy, DEVICE_PROCESS))
            for default, set_policy in variants(frozen=False, default_allocator=True)
            for f, m in pairs(spec.CUDA_MEMORY_POLICY)
            for model in spec.STUDY_MODELS
        ),
    )


def varying_lengths() -> Claim:
    """004: a dynamic graph runs each input at its own length, where a static one must pad."""
    return Claim(
        "varying_lengths",
        "greater",
        tuple(
            Comparison(Side(f, m, model, "backward_padded", EPOCH),
                       Side(f, m, model, "backward_varlen", EPOCH))
            for f, m in pairs()
            for model in spec.STUDY_MODELS
            if spec.MODELS[model].sequence_features
        ),
    )


def forward_of(framework: str, mode: str, model: str) -> Side:
    """The forward a mode's backward step is set against (scaling.forward_source's rule): its
    own iterations' forward where it times the forward apart, else the forward task's step."""
    if "forward_s" in spec.timed_quantities(framework, mode, "backward"):
        return Side(framework, mode, model, "backward", "forward_s")
    return Side(framework, mode, model, spec.FORWARD_TASK, "step_s")


def cheap_gradient() -> Claim:
    """The cheap-gradient principle, per (framework, mode)."""
    return Claim(
        "cheap_gradient",
        "at_most",
        tuple(
            Comparison(Side(f, m, model, "backward", "step_s"), forward_of(f, m, model))
            for f, m in pairs()
            for model in spec.STUDY_MODELS
        ),
        bound=CHEAP_GRADIENT_BOUND,
        margin=0.0,
    )


CLAIMS: tuple[Claim, ...] = (
    hypothesis_0(),
    hypothesis_1(),
    depth(),
    small_vs_large(),
    graph_for_large(),
    jit_outperforms(),
    first_step_only_compiled(),
    frozen_subgraphs(),
    graph_freed(),
    memory_grab(),
    varying_lengths(),
    cheap_gradient(),
)
