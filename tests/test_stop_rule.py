"""The precision stop (adbench.timing.StopRule, time_cell): the interval of the median, and
when a cell stops measuring, with planted step distributions on a fake clock (no real
timing).  The busy machine's re-timing, with planted load readings."""

from __future__ import annotations

import math

import numpy as np
import pytest
import yaml

from adbench import config, spec, timing


# ------------------------------------------------------------------ the interval
def coverage(n: int, j: int) -> float:
    """P(x_(j) <= median <= x_(n+1-j)) = 1 - 2 P(Binomial(n, 1/2) <= j-1), exactly."""
    below = sum(math.comb(n, k) for k in range(j)) / 2 ** n
    return 1 - 2 * below


@pytest.mark.parametrize("n", [*range(1, 60), 100, 469, 1500])
def test_median_interval_ranks_are_the_narrowest_of_95_percent_coverage(n):
    ranks = timing.median_interval_ranks(n)
    if n < 6:  # even (x_1, x_n) covers the median with probability 1 - 2**(1-n) < 95 %
        assert ranks is None and coverage(n, 1) < 0.95
        return
    j, k = ranks
    assert k == n + 1 - j and 1 <= j <= k <= n
    assert coverage(n, j) >= 0.95
    assert j + 1 > k - 1 or coverage(n, j + 1) < 0.95  # one rank further in falls short


def test_median_interval_ranks_match_the_textbook_table():
    # Conover, Practical Nonparametric Statistics: the 95 % interval of the median.
    assert timing.median_interval_ranks(10) == (2, 9)
    assert timing.median_interval_ranks(20) == (6, 15)
    assert timing.median_interval_ranks(100) == (40, 61)


def test_the_ranks_of_a_million_samples_are_found_near_the_normal_approximation():
    j, k = timing.median_interval_ranks(10**6)
    assert abs(j - (500_000 - 1.96 * 500)) < 3 and k == 10**6 + 1 - j


def test_the_interval_covers_the_median_of_a_skewed_distribution_95_percent_of_the_time():
    rng = np.random.default_rng(0)
    n, trials, true_median = 25, 4000, 1.0  # lognormal(0, s) has median 1
    j, k = timing.median_interval_ranks(n)
    samples = np.sort(rng.lognormal(0.0, 0.6, size=(trials, n)), axis=1)
    covered = (samples[:, j - 1] <= true_median) & (true_median <= samples[:, k - 1])
    assert 0.93 <= covered.mean() <= 0.995


def test_median_precision_is_the_larger_half_over_the_median():
    samples = [1.0] * 4 + [2.0, 2.0, 2.0] + [10.0] * 3  # n 10: ranks 2 and 9
    # Sorted: 1 1 1 1 2 2 2 10 10 10; median 2, x_(2) = 1, x_(9) = 10.
    assert timing.median_precision(samples) == pytest.approx(8.0 / 2.0)
    assert timing.median_precision([1.0] * 5) is None  # too few for an interval
    assert timing.median_precision([1.0] * 6) == 0.0


# ------------------------------------------------------------------ planted step distributions
class Clock:
    """A fake clock: it moves only when a planted step runs."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


class PlantedSteps:
    """Each iteration takes `draw(iteration)` seconds of the fake clock."""

    def __init__(self, clock: Clock, draw):
        self.clock, self.draw, self.calls = clock, draw, []

    def run(self, iteration, clock):
        self.calls.append(iteration)
        t0 = clock()
        self.clock.now += self.draw(iteration)
        return {"step_s": clock() - t0}


def lognormal(median: float, sigma: float, seed: int = 0):
    rng = np.random.default_rng(seed)
    return lambda i: float(median * rng.lognormal(0.0, sigma))


def run(draw, *, warmup=3, most=10_000, least=10, precision=0.02, measure_s=1e9):
    clock = Clock()
    stepper = PlantedSteps(clock, draw)
    rule = timing.StopRule("precision", most, least, precision, measure_s)
    timed = timing.time_cell(stepper, warmup, rule, clock=clock)
    measured = [r for r in timed.rows if r["phase"] == "measured"]
    return timed, measured, clock


def test_a_tight_distribution_stops_on_precision_at_its_minimum():
    timed, measured, _ = run(lognormal(1e-3, 0.001))
    assert timed.stop_reason == "precision"
    assert len(measured) == 10
    assert timed.precision_reached <= 0.02
    assert [r["iteration"] for r in timed.rows] == list(range(13))  # warm-up 0-2 first


def test_a_noisy_distribution_measures_on_until_its_interval_is_narrow_enough():
    timed, measured, _ = run(lognormal(1e-3, 0.3))
    assert timed.stop_reason == "precision"
    # A 2 % half-interval at sigma 0.3 needs hundreds of iterations, not the minimum ...
    assert 100 < len(measured) < 5000
    assert timed.precision_reached <= 0.02
    # ... and it stops at the first check after reaching it (checks 20 % apart at most).
    fewer = [r["step_s"] for r in measured[: math.floor(len(measured) / 1.25)]]
    assert timing.median_precision(fewer) > 0.02


def test_a_drifting_step_never_reaches_its_precision_and_stops_on_its_measured_time():
    # Each step 0.5 % slower than the one before: the median has no level to converge to.
    timed, measured, clock = run(lambda i: 1e-3 * 1.005 ** i, measure_s=2.0)
    assert timed.stop_reason == "budget"
    assert timed.precision_reached > 0.02
    spent = sum(r["step_s"] for r in measured)
    assert 2.0 <= spent < 2.0 + measured[-1]["step_s"] + 1e-9


def test_very_slow_steps_stop_on_the_measured_time_but_never_before_the_minimum():
    # 3 s steps, noisy, a 5 s measured budget: the minimum of 10 wins over the budget.
    timed, measured, _ = run(lognormal(3.0, 0.3), measure_s=5.0)
    assert timed.stop_reason == "budget"
    assert len(measured) == 10


def test_the_most_iterations_stop_a_noisy_cell_that_has_time_left():
    timed, measured, _ = run(lognormal(1e-3, 0.5), most=40)
    assert timed.stop_reason == "max_count"
    assert len(measured) == 40


def test_a_fixed_count_is_the_studys_protocol():
    clock = Clock()
    stepper = PlantedSteps(clock, lognormal(1e-3, 0.001))  # precise after 10: runs on
    timed = timing.time_cell(stepper, 5, timing.StopRule.fixed(469), clock=clock)
    assert timed.stop_reason == "fixed"
    assert sum(r["phase"] == "measured" for r in timed.rows) == 469
    assert timed.precision_reached is not None


def test_the_process_deadline_stops_a_precision_stop_as_a_timeout():
    clock = Clock()
    stepper = PlantedSteps(clock, lambda i: 1.0)
    rule = timing.StopRule("precision", 1000, 10, 0.0001, None)
    timed = timing.time_cell(stepper, 2, rule, clock=clock, deadline=7.5)
    assert timed.stop_reason == "timeout"
    assert len(timed.rows) == 8  # iterations 0-7 started before the clock passed 7.5


def test_the_stop_rule_of_a_workload():
    fixed = spec.Workload(model="mlp512", seed=0)
    assert timing.StopRule.of(fixed) == timing.StopRule.fixed(469)
    precise = spec.Workload(model="mlp512", seed=0, iterations=7, stop="precision",
                            min_iterations=10, precision=0.02, measure_s=5.0)
    # The most iterations win where they are the fewer.
    assert timing.StopRule.of(precise) == timing.StopRule("precision", 7, 7, 0.02, 5.0)


@pytest.mark.parametrize("key, value", [("stop", "forever"), ("precision", 0.0),
                                        ("precision", 1.5), ("min_iterations", 0),
                                        ("measure_s", -1.0), ("busy_share", -0.1),
                                        ("busy_retimes", -1)])
def test_a_bad_stop_key_is_named(key, value):
    settings = {"stop": "precision", "min_iterations": 10, "precision": 0.02,
                "measure_s": 5.0, key: value}
    with pytest.raises(ValueError, match=f"workload.{key}"):
        spec.CellDescription.of("torch", "eager", "mlp512", **settings)


def test_the_schemas_fewest_iterations_are_the_fewest_that_give_an_interval():
    schema = yaml.safe_load(config.SCHEMA.read_text())
    least = schema["properties"]["workload"]["properties"]["min_iterations"]["minimum"]
    assert timing.median_interval_ranks(least) is not None
    assert timing.median_interval_ranks(least - 1) is None


# ------------------------------------------------------------------ a busy machine, planted
class PlantedLoad:
    """A BusyRule whose windows read planted loads (other processes' cores), in order."""

    def __init__(self, loads, retimes):
        self.loads, self.retimes, self.max_other_cores = list(loads), retimes, 0.25

    def window(self):
        load = self.loads.pop(0)
        return type("W", (), {"stop": lambda _: {"other_cores": load, "steal_cores": 0.0,
                                                 "resolution_cores": 0.01, "cpus": 1,
                                                 "window_s": 1.0}})()

    def busy(self, reading):
        return reading["other_cores"] > self.max_other_cores

    def describe(self, reading):
        return f"{reading['other_cores']} cores"


def timed_under(loads, retimes):
    clock = Clock()
    stepper = PlantedSteps(clock, lognormal(1e-3, 0.001))
    starts = []
    timed = timing.time_cell(stepper, 2, timing.StopRule.fixed(4), clock=clock,
                             at_measured=lambda: starts.append(len(stepper.calls)),
                             load=PlantedLoad(loads, retimes))
    return timed, stepper, starts


def test_a_quiet_machine_is_measured_once():
    timed, stepper, starts = timed_under([0.0], retimes=2)
    assert timed.busy is False and len(timed.attempts) == 1 and starts == [2]
    assert stepper.calls == [0, 1, 2, 3, 4, 5]


def test_a_busy_attempt_is_measured_again_and_the_quiet_one_kept():
    timed, stepper, starts = timed_under([1.0, 0.0], retimes=2)
    assert timed.busy is False
    assert [a["busy"] for a in timed.attempts] == [True, False]
    assert starts == [2, 6]  # memory baselines reset before each attempt
    # The re-timed phase starts again at the first measured iteration: the same batches.
    assert stepper.calls == [0, 1, 2, 3, 4, 5, 2, 3, 4, 5]
    assert [r["iteration"] for r in timed.rows] == [0, 1, 2, 3, 4, 5]


def test_a_machine_that_stays_busy_is_re_timed_a_bounded_number_of_times_then_marked():
    timed, stepper, _ = timed_under([1.0, 0.9, 0.8, 0.0], retimes=2)
    assert timed.busy is True and len(timed.attempts) == 3
    record = timing.stop_record(timed)
    assert record["busy"] is True and record["busy_retimed"] == 2
    assert record["load_other_cores"] == 0.8  # the kept attempt's reading
    assert len(timed.rows) == 2 + 4


def test_a_re_timing_cut_short_by_the_deadline_keeps_the_complete_attempt_before():
    clock = Clock()
    stepper = PlantedSteps(clock, lambda i: 1.0)
    timed = timing.time_cell(stepper, 1, timing.StopRule.fixed(4), clock=clock, deadline=6.5,
                             load=PlantedLoad([1.0, 1.0], retimes=1))
    # Warm-up 1 s, the busy attempt 4 s, then the deadline cuts the re-timing after 2.
    assert timed.stop_reason == "fixed" and timed.busy is True
    assert [a["kept"] for a in timed.attempts] == [True, False]
    assert [r["iteration"] for r in timed.rows] == [0, 1, 2, 3, 4]
    assert timing.stop_record(timed)["busy_retimed"] == 1
