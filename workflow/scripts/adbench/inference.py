"""Uncertainty of what the tables and the paper compare (analysis environment: numpy).

A condition's time is the study's statistic: the mean over seeds (fresh processes) of each
seed's mean over its measured iterations.  Its uncertainty has two levels: seeds differ
(a process's layout, its allocator, the machine's state), and iterations within a seed
scatter.  `bootstrap_means` resamples both, hierarchically: seeds with replacement, then
each drawn seed's iterations with replacement.  A ratio of two conditions gets the
percentile interval of the ratio of their replicates (drawn independently: two conditions
are separate processes); several ratios summarise as a geometric mean, whose interval is the
geometric mean of the replicates, replicate by replicate.

A difference is "within noise" when the interval of its ratio contains 1; a comparison of
equality ("costs the same") holds when the interval lies within 1 ± the margin.
"""

from __future__ import annotations

import dataclasses
import zlib
from typing import Iterable, Sequence

import numpy as np

SUPPORTED, CONTRADICTED, INCONCLUSIVE = "supported", "contradicted", "inconclusive"


def replicate_seed(key: str, seed: int = 0) -> int:
    """A random stream per condition, stable across runs and Python processes (not hash())."""
    return zlib.crc32(key.encode()) ^ seed


def bootstrap_means(samples: Sequence[np.ndarray], replicates: int,
                    rng: np.random.Generator) -> np.ndarray:
    """`replicates` draws of the mean over seeds of per-seed means, resampling seeds and then
    each drawn seed's iterations (every draw of a seed resamples its iterations anew)."""
    samples = [np.asarray(s, dtype=float) for s in samples if len(s)]
    if not samples:
        return np.full(replicates, np.nan)
    n_seeds = len(samples)
    picks = rng.integers(0, n_seeds, size=(replicates, n_seeds))
    totals = np.zeros(replicates)
    for index, values in enumerate(samples):
        times_picked = (picks == index).sum(axis=1)
        draws = int(times_picked.sum())
        if not draws:
            continue
        resampled = values[rng.integers(0, len(values), size=(draws, len(values)))]
        np.add.at(totals, np.repeat(np.arange(replicates), times_picked),
                  resampled.mean(axis=1))
    return totals / n_seeds


def point_mean(samples: Sequence[np.ndarray]) -> float:
    """The statistic itself: the mean over seeds of per-seed means."""
    means = [float(np.mean(s)) for s in samples if len(s)]
    return float(np.mean(means)) if means else float("nan")


@dataclasses.dataclass(frozen=True)
class Interval:
    """A ratio (or a geometric mean of ratios) and its percentile bootstrap interval."""

    point: float
    low: float
    high: float
    replicates: np.ndarray = dataclasses.field(repr=False, compare=False)

    @property
    def excludes_one(self) -> bool:
        return bool(self.low > 1 or self.high < 1)


def percentile_interval(point: float, replicates: np.ndarray, confidence: float) -> Interval:
    finite = replicates[np.isfinite(replicates)]
    if not np.isfinite(point) or len(finite) == 0:
        return Interval(float("nan"), float("nan"), float("nan"), replicates)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(finite, [tail, 100 - tail])
    return Interval(float(point), float(low), float(high), replicates)


def ratio_interval(numerator: tuple[float, np.ndarray], denominator: tuple[float, np.ndarray],
                   confidence: float) -> Interval:
    """numerator / denominator, each given as (point, bootstrap replicates)."""
    (num, num_reps), (den, den_reps) = numerator, denominator
    with np.errstate(divide="ignore", invalid="ignore"):
        return percentile_interval(num / den, num_reps / den_reps, confidence)


def geometric_mean_interval(ratios: Iterable[Interval], confidence: float) -> Interval:
    """The geometric mean of several ratios (e.g. one per model), replicate by replicate."""
    ratios = [r for r in ratios if np.isfinite(r.point)]
    if not ratios:
        return Interval(float("nan"), float("nan"), float("nan"), np.array([]))
    point = float(np.exp(np.mean([np.log(r.point) for r in ratios])))
    with np.errstate(divide="ignore", invalid="ignore"):
        replicates = np.exp(np.mean([np.log(r.replicates) for r in ratios], axis=0))
    return percentile_interval(point, replicates, confidence)


def verdict_greater(interval: Interval) -> str:
    """The ratio is above 1: supported when the whole interval is, contradicted when the whole
    interval is below 1, inconclusive (within noise) when it contains 1."""
    if not np.isfinite(interval.point):
        return INCONCLUSIVE
    if interval.low > 1:
        return SUPPORTED
    return CONTRADICTED if interval.high < 1 else INCONCLUSIVE


def verdict_equal(interval: Interval, margin: float) -> str:
    """The ratio is 1 within ± margin: supported when the interval lies inside, contradicted
    when it lies wholly outside, inconclusive otherwise."""
    if not np.isfinite(interval.point):
        return INCONCLUSIVE
    low, high = 1 - margin, 1 + margin
    if low <= interval.low and interval.high <= high:
        return SUPPORTED
    return CONTRADICTED if interval.high < low or interval.low > high else INCONCLUSIVE


def combine(verdicts: Sequence[str]) -> str:
    """A claim made of several comparisons: supported when every one is, contradicted when
    any one is, inconclusive otherwise (or when none was measured)."""
    if verdicts and all(v == SUPPORTED for v in verdicts):
        return SUPPORTED
    return CONTRADICTED if CONTRADICTED in verdicts else INCONCLUSIVE
