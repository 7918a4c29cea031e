"""The simulator answers at the course's scales, and refuses, naming the cause, what it could only answer in minutes:
a 100,000-node run, ten thousand loss spikes (issue 62). The times are measured in benchmarks/simulate_runs.py.

    .venv/bin/python -m pytest tests/plan/test_simulate_refusals.py -q      # about a second
"""

from dataclasses import replace

import pytest

from fmlab.plan import capstone, scenario, simulate
from fmlab.plan.compute import PlanError
from fmlab.plan.planned import planned_run

PLAN = planned_run("gpt-30b", 300e9, "ml.p5.48xlarge", 16)


@pytest.mark.parametrize("built, words", [
    (lambda: scenario.checkpointless_at_scale(100_000), "failures in one run (one every 3.8 min"),
    (lambda: scenario.llama3_405b().with_(nodes=100_000), "failures before the last checkpoint"),
    (lambda: scenario.scenario_for(PLAN, scenario.Chances()).with_(nodes=100_000), "failures before the last"),
    (lambda: scenario.scenario_for(PLAN).with_(spike_mean_hours=PLAN.days * 24 / 10_000), "loss spikes per run"),
])
def test_what_would_take_minutes_is_refused_with_its_cause(built, words):
    with pytest.raises(PlanError, match="spikes" if "spikes" in words else "failures") as e:
        simulate.simulate(built(), runs=10_000, seed=1)
    assert words in str(e.value)


def test_the_courses_scales_are_answered():
    for s in (scenario.checkpointless_at_scale(16_384), scenario.llama3_405b(),
              scenario.scenario_for(PLAN, replace(scenario.QUIET, spikes_per_run=1_000))):  # saves at Daly's
        assert 0 < simulate.simulate(s, runs=1_000, seed=1).goodput.mean() < 1


def test_the_grader_refuses_a_brief_the_simulator_cannot_run_and_the_brief_bounds_its_spikes():
    brief = capstone.BRIEFS["gpt-30b"]
    with pytest.raises(PlanError, match="spikes_per_run is at most 1,000"):
        replace(brief, spikes_per_run=10_000)
    hourly = replace(capstone.reference_plan(brief), interval_hours=1.0, keep_checkpoints=3)  # a save an hour
    g = capstone.grade(hourly, replace(brief, spikes_per_run=1_000), seeds=(1,))
    assert not g.passed and "loss spikes per run" in g.problems[0]
