"""What the paper says of when cells stopped measuring and of a busy machine, from planted
cells.parquet rows and environment.json (paper_context.protocol_context, busy_context;
paper_framing's limitations): the stop rule per task and models, the reasons counted, the
precision reached, the busy cells counted; nothing said where the run recorded none."""

from __future__ import annotations

import pandas as pd

from adbench import formatting as fmt
from adbench import paper_context, paper_framing, report_spec

WORKLOAD = {"warmup": 5, "iterations": 469, "stop": "precision", "precision": 0.02,
            "min_iterations": 10, "measure_s": 5, "busy_share": 0.25, "busy_retimes": 1}


def cells(rows: list[dict]) -> pd.DataFrame:
    """cells.parquet rows, ok, one thread on the CPU, 469 iterations after 5 of warm-up."""
    base = {"framework": "torch", "mode": "eager", "device": "cpu", "threads": 1,
            "status": "ok", "warmup": 5, "iterations": 469}
    return pd.DataFrame([{**base, **r} for r in rows])


def planted() -> pd.DataFrame:
    """The backward pass of [512] a fixed count (3 seeds); the loss Jacobian of [512] and of
    FCN a precision stop: seed 0 at its time cap (4 %), seeds 1-2 at their precision."""
    fixed = [{"model": "mlp512", "task": "backward", "seed": s, "stop": "fixed",
              "stop_reason": "fixed", "precision_reached": 0.003} for s in range(3)]
    precise = [{"model": m, "task": "loss_jacobian", "seed": s, "stop": "precision",
                "stop_reason": "budget" if s == 0 else "precision",
                "precision_reached": 0.04 if s == 0 else 0.015}
               for m in ("mlp512", "fcn") for s in range(3)]
    return cells(fixed + precise)


def test_each_row_gives_its_stop_rule_the_reasons_counted_and_the_precision_reached():
    found = paper_context.protocol_context(planted(), WORKLOAD)
    assert not found["uniform"]  # a fixed count beside a precision stop
    rows = {r["task"]: r for r in found["rows"]}
    backward = rows[fmt.latex(report_spec.task_label("backward"))]
    assert (backward["rule"], backward["reasons"], backward["reached"]) == (
        "fixed", "fixed 3", r"0.3\%")
    jacobian = rows[fmt.latex(report_spec.task_label("loss_jacobian"))]
    assert jacobian["models"] == "[512], FCN"  # ran alike: one row
    assert jacobian["rule"] == r"$\pm$2\% or 5 s, 10 at least"
    assert (jacobian["reasons"], jacobian["reached"]) == ("precision 4, time 2", r"1.5--4\%")
    stop = found["stop"]
    assert stop["precision"] and stop["fixed"] and stop["target"] == r"2\%"
    assert stop["count"] == "after at least 10 and at most 469 iterations"
    assert stop["reasons"] == ("4 stopped at their precision, 2 at the time cap, "
                               "3 after a fixed count")
    assert stop["reached"] == r"0.3--4\%"


def test_a_cells_own_stop_keys_win_over_the_configs():
    """Where aggregate carries a cell's precision, cap and fewest iterations, those are its
    rule; the config's workload fills only what the cells do not carry."""
    mine = planted().assign(precision=0.05, min_iterations=20)
    jacobian = next(r for r in paper_context.protocol_context(mine, WORKLOAD)["rows"]
                    if "FCN" in r["models"])
    assert jacobian["rule"] == r"$\pm$5\% or 5 s, 20 at least"


def test_cells_from_before_the_precision_stop_read_a_fixed_count_and_no_reasons():
    old = cells([{"model": "mlp512", "task": "backward", "seed": s} for s in range(2)])
    found = paper_context.protocol_context(old, WORKLOAD)
    assert found["uniform"] and found["rows"][0]["rule"] == "fixed"
    assert found["rows"][0]["reasons"] == fmt.NA and found["rows"][0]["reached"] == fmt.NA
    assert not found["stop"]["precision"] and found["stop"]["reasons"] is None
    assert paper_framing.precision_limit(old, {"workload": WORKLOAD}) is None


def test_cells_stopped_short_of_their_precision_are_a_limitation():
    said = paper_framing.precision_limit(planted(), {"workload": WORKLOAD})
    assert said.startswith("Precision: 2 of the 6 cells measured to a precision stopped before")
    assert r"within $\pm$2\% of it (2 at the time cap); their medians reached 4\%." in said
    reached = planted().assign(stop_reason=lambda c: c["stop"])  # every one at its precision
    assert paper_framing.precision_limit(reached, {"workload": WORKLOAD}) is None


def environment(n_busy: int, n_retimed: int, retimes: int = 1) -> dict:
    """environment.json's busy counts (aggregate.measuring_facts) for 160 completed cells."""
    return {"workload": {**WORKLOAD, "busy_retimes": retimes}, "n_ok": 160, "n_busy": n_busy,
            "n_busy_retimed": n_retimed,
            "busy_other_cores": [0.412, 0.934] if n_busy else None}


def limitations(env: dict) -> str:
    data = {t.name: {"ours": pd.DataFrame()} for t in report_spec.TABLES}
    return " ".join(paper_framing.limitations(planted(), env, None, data, {}, True))


def test_busy_cells_are_counted_with_how_busy_and_how_many_were_measured_again():
    said = limitations(environment(n_busy=3, n_retimed=7))
    assert ("Busy machine: 7 cells were measured again for a busy machine (other processes "
            "took more than 0.25 of a core beyond the CPUs the cell's threads left spare); 3 of "
            "the 160 completed cells stayed busy (other processes took 0.41--0.93 cores of "
            "their CPUs while they were measured): they are kept, their numbers marked in the "
            "tables.") in said
    busy = paper_context.busy_context(environment(n_busy=3, n_retimed=7))
    assert (busy["share"], busy["retimes"], busy["n_busy"], busy["n_retimed"]) == (
        "0.25", "once", 3, 7)
    assert busy["found"] == r"7 cells were measured again and 3 stayed busy " \
        r"(Section~\ref{sec:limitations})."
    never = limitations(environment(n_busy=2, n_retimed=0, retimes=0))  # no re-timing asked
    assert paper_context.busy_context(environment(2, 0, 0))["found"].startswith(
        "2 cells were busy (")
    assert "2 of the 160 completed cells were busy" in never and "measured again" not in never
    quiet_again = limitations(environment(n_busy=0, n_retimed=1))
    assert "1 cell was measured again" in quiet_again and "none stayed busy" in quiet_again


def test_a_quiet_run_or_one_never_judged_says_nothing_of_a_busy_machine():
    assert "Busy machine" not in limitations(environment(n_busy=0, n_retimed=0))
    assert paper_context.busy_context(environment(0, 0))["found"] == \
        "No measured phase was busy."  # judged: the rule is stated, and that none was
    unjudged = {"workload": {k: v for k, v in WORKLOAD.items() if k != "busy_share"}}
    assert paper_context.busy_context(unjudged) is None  # stated only where it was read
    assert paper_context.busy_context({}) is None and "Busy" not in limitations({})


def test_shares_and_cores_are_written_to_two_significant_digits_and_hundredths():
    assert fmt.percent_span([0.02]) == "2%" and fmt.percent_span([0.0035, 0.039]) == "0.35–3.9%"
    assert fmt.percent_span([None]) == fmt.NA
    assert fmt.cores_span([0.934, 0.412]) == "0.41–0.93" and fmt.cores_span([0.5]) == "0.50"
    assert fmt.cores_span([0.412, 0.934], tex=True) == "0.41--0.93"
    assert fmt.seconds(5) == "5 s" and fmt.seconds(0.5) == "0.5 s"
