"""No scenario input hangs or crashes the simulator (issue 55, item 6): every field fed inf, NaN, an integer, zero,
a negative, a bool and a string is refused with a PlanError that names the field, or simulated within a second (or
found unable to finish, which the simulator says within that second)."""

import dataclasses
import math
import time

import pytest

from fmlab.plan.compute import PlanError
from fmlab.plan.simulate import _NUMBER_FIELDS, Scenario, simulate

BASE = Scenario(work_hours=200.0, nodes=16, interval_hours=1.0, save_seconds=5.0, restart_hours=0.25,
                window_hours=300.0, job_hours=672.0, reserved_usd_per_hour=600.0, on_demand_usd_per_hour=900.0,
                reserved_hours_bought=312.0)
ODD = [math.inf, math.nan, 2, 0, -1, True, "3"]


@pytest.mark.parametrize("name", [*_NUMBER_FIELDS, "nodes", "extension_days"])
def test_every_field_is_refused_clearly_or_simulated_quickly(name):
    for value in ODD:
        try:
            scenario = dataclasses.replace(BASE, **{name: value})
        except PlanError as e:
            assert name in str(e), (name, value, str(e))
            continue
        start = time.perf_counter()
        try:
            out = simulate(scenario, runs=200)
        except PlanError as e:  # a run that cannot finish (failures faster than restarts) says so, quickly
            assert "cannot finish" in str(e), (name, value, str(e))
        else:
            assert math.isfinite(out.p_miss(1000.0)), (name, value)
        assert time.perf_counter() - start < 1.0, (name, value)


def test_no_checkpoints_is_refused_with_what_to_give_instead():
    with pytest.raises(PlanError, match="no checkpoints.*daly_interval_hours"):
        dataclasses.replace(BASE, interval_hours=math.inf)


def test_integers_become_floats_and_a_gate_of_zero_is_refused():
    s = dataclasses.replace(BASE, start_up_hours=1, window_hours=300)
    assert isinstance(s.start_up_hours, float) and isinstance(s.window_hours, float)
    with pytest.raises(PlanError, match="eval_every_hours must be > 0"):
        dataclasses.replace(BASE, eval_every_hours=0)


def test_a_brief_with_no_budget_or_deadline_is_refused_not_passed():
    """A NaN budget or deadline used to let every plan pass (every comparison with NaN is False)."""
    from fmlab.plan.capstone import BRIEFS

    for name, value in (("budget_usd", math.nan), ("deadline_days", math.inf), ("tokens", 0), ("max_nodes", 2.5),
                        ("platforms", ("EC2",)), ("platforms", "training jobs")):
        with pytest.raises(PlanError, match=name):
            dataclasses.replace(BRIEFS["gpt-30b"], **{name: value})


def test_a_gate_every_zero_hours_is_refused_not_read_as_no_gate():
    from fmlab.plan import scenario
    from fmlab.plan.planned import planned_run

    plan = planned_run("gpt-30b", 300e9, "ml.p5.48xlarge", 16).estimate
    with pytest.raises(PlanError, match="eval_every_hours must be > 0"):
        scenario.scenario_for(plan, eval_every_hours=0)
    assert math.isinf(scenario.scenario_for(plan, eval_every_hours=None).eval_every_hours)


@pytest.mark.parametrize("name", ["node_mtbf_hours", "hang_share", "restart_failure_share", "late_probability",
                                  "late_mean_hours", "fallback_wait_mean_hours", "spikes_per_run", "unwatched_hours",
                                  "alert_share", "alert_hours", "sync_over_async", "replace_node_minutes",
                                  "unrecoverable_share", "checkpointless_overhead"])
def test_every_assumption_of_a_brief_is_refused_clearly_or_graded_quickly(name):
    """The ledger's fields (capstone.LEDGER) fed inf, NaN, an int, 0, -1, a bool, a string and 2 (over a share)."""
    from fmlab.plan import capstone

    base = capstone.BRIEFS["gpt-30b"]
    run = capstone.reference_plan(base)
    for value in [*ODD, 2.0]:
        start = time.perf_counter()
        try:
            brief = dataclasses.replace(base, **{name: value})
            g = capstone.grade(run, brief, runs=200)
        except PlanError as e:
            assert name in str(e) or name.replace("_", " ") in str(e) or "cannot finish" in str(e) \
                or "never finishes" in str(e), (name, value, str(e))
        else:
            assert g.problems or math.isfinite(g.p_miss), (name, value)
        assert time.perf_counter() - start < 1.0, (name, value)


@pytest.mark.parametrize("name", ["nodes", "reserved_days", "global_batch", "micro_batch", "interval_hours",
                                  "keep_checkpoints", "eval_every_hours"])
def test_every_number_of_a_plan_is_refused_clearly_or_graded_quickly(name):
    from fmlab.plan import capstone

    brief = capstone.BRIEFS["gpt-30b"]
    run = capstone.reference_plan(brief)
    for value in [*ODD, None, 2.5]:
        start = time.perf_counter()
        try:
            g = capstone.grade(dataclasses.replace(run, **{name: value}), brief, runs=200)
        except PlanError as e:
            assert name in str(e) or "must be" in str(e), (name, value, str(e))
        else:
            assert g.problems or math.isfinite(g.p_miss), (name, value)
        assert time.perf_counter() - start < 1.0, (name, value)
