"""Uncertainty of what the tables and the paper compare, and the one rule that judges a claim
(analysis environment: numpy).

The unit of replication is the process: every cell runs once per seed in a fresh process,
and processes differ (layout, allocator, the machine's state) by more than iterations inside
one scatter.  A process's statistic (the mean or the median of its measured iterations) gets
replicates by resampling its iterations (`process_replicates`); a condition's statistic is
the mean over its processes, and its replicates resample the processes, then each drawn
process's iterations (`over_processes`): a hierarchical bootstrap.  A ratio of two
conditions pairs them by seed (`paired_ratio`): only seeds both sides ran, drawn together.
Several ratios pool as a geometric mean whose interval resamples the ratios as well
(`pooled`): it carries the spread between them, not only each one's noise.  Percentile
intervals from n resampled units run short of their level when n is small (about 83% for a
nominal 95% from five processes), so every interval over n resampled processes is expanded
about its point by t(n-1) / z * sqrt(n / (n-1)) (`expansion`; Hesterberg's expanded percentile
interval): from five processes it holds its level, from two it is honestly wide.

The decision rule (`decide`), the same for every claim: a ratio is established above 1 + m
(or below 1 - m, or within 1 +- m) when the share of replicates on the other side of that
bound is below alpha / 2 (alpha = 1 - confidence), i.e. when the interval clears it.  A claim
that the ratio is above 1 (kind "greater") is supported above 1 + m, contradicted below
1 - m, "equivalent" within the margin, inconclusive otherwise; a claim of equal cost is
supported within the margin and contradicted outside it.  A claim of a bound (kind
"at_most": the ratio is at most B, with no margin, the bound being the tolerance itself) is
supported when the interval lies below B, contradicted above it.  Several tests of one question
(a claim's groups) are Holm-corrected (`holm`).  A ratio from one process per side gets an
interval (iterations only) but no verdict: nothing in it measures the spread between
processes.
"""

from __future__ import annotations

import dataclasses
import math
import zlib
from typing import Mapping, Sequence

import numpy as np
import scipy.stats

SUPPORTED, CONTRADICTED, INCONCLUSIVE = "supported", "contradicted", "inconclusive"
EQUIVALENT = "equivalent"  # a directional claim whose ratio is within the margin of 1
ONE_PROCESS = "one process"  # printed, never judged
STATISTICS = ("mean", "median")
# A verdict needs the spread between processes, which one process cannot show.
MIN_PROCESSES = 2

Replicated = tuple[float, np.ndarray]  # a statistic and its bootstrap replicates


def replicate_seed(key: str, seed: int = 0) -> int:
    """A random stream per condition, stable across runs and Python processes (not hash())."""
    return zlib.crc32(key.encode()) ^ seed


def rng_for(key: str, seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(replicate_seed(key, seed))


# ----------------------------------------------------------------------------- bootstrap
def process_replicates(values: np.ndarray, statistic: str, replicates: int,
                       rng: np.random.Generator) -> Replicated:
    """One process's statistic over its iterations, and `replicates` draws of it from its
    iterations resampled with replacement."""
    values = np.asarray(values, dtype=float)
    reduce = getattr(np, statistic)
    resampled = values[rng.integers(0, len(values), size=(replicates, len(values)))]
    return float(reduce(values)), reduce(resampled, axis=1)


def spread_picks(n: int, replicates: int, rng: np.random.Generator) -> np.ndarray:
    """(replicates, n) indices of n items drawn with replacement, once per replicate."""
    return rng.integers(0, n, size=(replicates, n))


def over_processes(processes: Sequence[Replicated], picks: np.ndarray) -> Replicated:
    """The mean over processes and its hierarchical replicates: replicate r averages the
    processes `picks[r]` names, each at its own iteration replicate (column r + j for the
    j-th draw, so a process drawn twice brings two different resamples of its iterations)."""
    points = np.array([p for p, _ in processes])
    table = np.stack([np.asarray(r, dtype=float) for _, r in processes])
    replicates, n = picks.shape
    columns = (np.arange(replicates)[:, None] + np.arange(n)[None, :]) % table.shape[1]
    return float(points.mean()), table[picks, columns].mean(axis=1)


def condition_replicates(processes: Sequence[Replicated], key: str) -> Replicated:
    """A condition's mean over its processes, with processes resampled (stream per key)."""
    replicates = len(processes[0][1])
    return over_processes(processes, spread_picks(len(processes), replicates, rng_for(key)))


def expansion(n: int, confidence: float) -> float:
    """How much wider than the bootstrap's spread an interval from n resampled units must be
    to hold its level (1 for fewer than two units: nothing to correct)."""
    if n < 2:
        return 1.0
    p = 1 - (1 - confidence) / 2
    return scipy.stats.t.ppf(p, n - 1) / scipy.stats.norm.ppf(p) * math.sqrt(
        n / (n - 1))


def expanded(point: float, replicates: np.ndarray, n: int, confidence: float,
             log: bool = False) -> np.ndarray:
    """Replicates moved away from the point by `expansion` (in log space for a ratio)."""
    factor = expansion(n, confidence)
    if factor == 1.0 or not np.isfinite(point):
        return replicates
    with np.errstate(divide="ignore", invalid="ignore"):
        if log:
            return np.exp(np.log(point) + factor * (np.log(replicates) - np.log(point)))
        return point + factor * (replicates - point)


@dataclasses.dataclass(frozen=True)
class Interval:
    """A ratio (or a pooled ratio) and its percentile bootstrap interval; `n_processes`: the
    processes behind it (per side, paired; for a pooled ratio the fewest of its ratios)."""

    point: float
    low: float
    high: float
    replicates: np.ndarray = dataclasses.field(repr=False, compare=False)
    n_processes: int = 0

    @property
    def excludes_one(self) -> bool:
        return bool(self.low > 1 or self.high < 1)

    @property
    def judged(self) -> bool:
        return self.n_processes >= MIN_PROCESSES


NO_INTERVAL = Interval(float("nan"), float("nan"), float("nan"), np.array([]), 0)


def percentile_interval(point: float, replicates: np.ndarray, confidence: float,
                        n_processes: int = 0) -> Interval:
    finite = replicates[np.isfinite(replicates)]
    if not np.isfinite(point) or len(finite) == 0:
        return dataclasses.replace(NO_INTERVAL, replicates=replicates, n_processes=n_processes)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(finite, [tail, 100 - tail])
    return Interval(float(point), float(low), float(high), replicates, n_processes)


def ratio_interval(numerator: Replicated, denominator: Replicated, confidence: float,
                   n_processes: int = 0) -> Interval:
    """numerator / denominator, each given as (point, bootstrap replicates) over
    `n_processes` resampled processes (expanded for them)."""
    (num, num_reps), (den, den_reps) = numerator, denominator
    with np.errstate(divide="ignore", invalid="ignore"):
        point, reps = num / den, num_reps / den_reps
    return percentile_interval(point, expanded(point, reps, n_processes, confidence, log=True),
                               confidence, n_processes)


def paired(numerator: Mapping[int, Replicated], denominator: Mapping[int, Replicated],
           key: str) -> tuple[Replicated, Replicated, int] | None:
    """Two conditions' means over the seeds both ran (processes by seed), with the seeds
    drawn together on both sides, and how many seeds; None when they share no seed."""
    seeds = sorted(set(numerator) & set(denominator))
    if not seeds:
        return None
    replicates = len(numerator[seeds[0]][1])
    picks = spread_picks(len(seeds), replicates, rng_for(key))
    return (over_processes([numerator[s] for s in seeds], picks),
            over_processes([denominator[s] for s in seeds], picks), len(seeds))


def paired_ratio(numerator: Mapping[int, Replicated], denominator: Mapping[int, Replicated],
                 confidence: float, key: str) -> Interval:
    """numerator / denominator, paired by seed (see `paired`); NO_INTERVAL without a seed
    in common."""
    sides = paired(numerator, denominator, key)
    return NO_INTERVAL if sides is None else ratio_interval(*sides[:2], confidence, sides[2])


def difference_interval(numerator: Replicated, denominator: Replicated, confidence: float,
                        n_processes: int = 0) -> Interval:
    """numerator - denominator, each given as (point, bootstrap replicates)."""
    (num, num_reps), (den, den_reps) = numerator, denominator
    point = num - den
    return percentile_interval(point, expanded(point, num_reps - den_reps, n_processes,
                                               confidence), confidence, n_processes)


def pooled_mean(items: Sequence[Interval], confidence: float, key: str) -> Interval:
    """The mean of several estimates; its replicates resample the estimates too, so the
    interval holds the spread between them (one estimate: its own interval)."""
    items = [i for i in items if np.isfinite(i.point)]
    if not items:
        return NO_INTERVAL
    replicates = len(items[0].replicates)
    point, reps = over_processes([(i.point, i.replicates) for i in items],
                                 spread_picks(len(items), replicates, rng_for(key)))
    # Not expanded for the number of estimates: they are the claim's fixed set of
    # comparisons, not a sample of them; resampling them only lets their spread show.
    return percentile_interval(point, reps, confidence, min(i.n_processes for i in items))


def pooled(ratios: Sequence[Interval], confidence: float, key: str) -> Interval:
    """The geometric mean of several ratios, with `pooled_mean`'s between-ratio interval."""
    logs = [dataclasses.replace(r, point=float(np.log(r.point)),
                                replicates=np.log(r.replicates))
            for r in ratios if np.isfinite(r.point) and r.point > 0]
    mean = pooled_mean(logs, confidence, key)
    return dataclasses.replace(mean, point=float(np.exp(mean.point)), low=float(np.exp(mean.low)),
                               high=float(np.exp(mean.high)), replicates=np.exp(mean.replicates))


# ----------------------------------------------------------------------------- decision rule
@dataclasses.dataclass(frozen=True)
class Evidence:
    """One-sided bootstrap p-values of a ratio against the margin's bounds: that it is above
    1 + m, below 1 - m, within 1 +- m (the larger of the two one-sided tests)."""

    above: float
    below: float
    within: float


def evidence(interval: Interval, margin: float, bound: float = 1.0) -> Evidence:
    """Against bound x (1 +- margin): 1 for a ratio of equal costs, B for a claim of a bound."""
    reps = interval.replicates[np.isfinite(interval.replicates)]
    if not len(reps) or not np.isfinite(interval.point):
        return Evidence(1.0, 1.0, 1.0)
    low, high = bound * (1 - margin), bound * (1 + margin)
    share = lambda mask: float(np.mean(mask))  # noqa: E731
    return Evidence(above=share(reps <= high), below=share(reps >= low),
                    within=max(share(reps <= low), share(reps >= high)))


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment: the k-th smallest of m p-values times (m - k + 1),
    made monotone, capped at 1."""
    order = np.argsort(p_values, kind="stable")
    m = len(p_values)
    adjusted, running = [0.0] * m, 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


def decide(kind: str, found: Evidence, confidence: float) -> str:
    """The verdict a claim of `kind` gets from its evidence (see the module's rule)."""
    alpha = (1 - confidence) / 2  # the interval's tail: the test clears the bound on one side
    above, below, within = (p < alpha for p in (found.above, found.below, found.within))
    if kind == "equal":
        return SUPPORTED if within else CONTRADICTED if above or below else INCONCLUSIVE
    if kind == "at_most":
        return SUPPORTED if below else CONTRADICTED if above else INCONCLUSIVE
    if above:
        return SUPPORTED
    return CONTRADICTED if below else EQUIVALENT if within else INCONCLUSIVE


def decide_all(kind: str, found: Sequence[Evidence], confidence: float) -> list[str]:
    """Verdicts on several tests of one question, each of their p-values Holm-corrected
    over the family."""
    if not found:
        return []
    columns = [holm([getattr(e, side) for e in found]) for side in ("above", "below", "within")]
    return [decide(kind, Evidence(*ps), confidence) for ps in zip(*columns)]
