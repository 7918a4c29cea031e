"""fmlab.plan.capstone: the briefs, the reference plan, and a grader that refuses what cannot work and fails what
chance defeats (module 12).

    .venv/bin/pytest tests/plan/test_capstone.py -v
"""

import math
from dataclasses import replace

import pytest

from fmlab.plan import capacity, capstone
from fmlab.plan.parallelism import ParallelConfig


@pytest.fixture(params=sorted(capstone.BRIEFS))
def brief(request):
    return capstone.BRIEFS[request.param]


def test_the_reference_plan_meets_each_brief(brief):
    ref = capstone.reference_plan(brief)
    assert capstone.problems(ref, brief) == []
    g = capstone.grade(ref, brief, seeds=(11, 12))
    assert g.passed, g.failed
    assert g.p_miss <= capstone.MAX_MISS and g.cost_p90 <= brief.budget_usd


def test_the_30b_reference_is_module_11s_choice():
    ref = capstone.reference_plan(capstone.BRIEFS["gpt-30b"])
    # the predicted step (fmlab.plan.speed): 12.2 days on 16 x p5 at a 128-sequence batch, reserved with margin
    assert (ref.instance, ref.nodes, ref.region, ref.reserved_days) == ("ml.p5.48xlarge", 16, "us-east-1", 15)
    assert ref.parallel == ParallelConfig(sharding="hybrid", hybrid_shard_degree=16)


def test_with_no_margin_the_30b_plan_misses_its_deadline_far_more_often():
    brief = capstone.BRIEFS["gpt-30b"]
    ref = capstone.reference_plan(brief)
    bare = replace(ref, reserved_days=math.ceil(capstone._plan_of(ref, brief).days))  # the run, rounded up
    assert capstone.problems(bare, brief) == []
    g, g_ref = capstone.grade(bare, brief), capstone.grade(ref, brief)
    assert g.p_miss > 5 * g_ref.p_miss and g.p_miss > 0.03


@pytest.mark.parametrize("change, words", [
    (dict(parallel=ParallelConfig(sharding="hybrid", hybrid_shard_degree=8)), "does not fit"),
    (dict(nodes=12), "cannot be reserved"),
    (dict(region="eu-west-1"), "no published reserved rate"),
    (dict(reserved_days=16, reservation_kind="capacity block"), "cannot be bought: 21 can"),
    (dict(reserved_days=10), "cannot hold even the run"),
    (dict(global_batch=100), "a multiple of 128"),
    (dict(global_batch=128 * 32), "above module 6's limit"),
    (dict(instance="ml.p4d.24xlarge"), "not one of the brief's instance types"),
])
def test_a_plan_that_cannot_work_is_refused_before_any_simulation(change, words):
    brief = capstone.BRIEFS["gpt-30b"]
    wrong = replace(capstone.reference_plan(brief), **change)
    g = capstone.grade(wrong, brief)
    assert not g.passed and any(words in p for p in g.problems), g.problems


def test_a_plan_over_budget_fails_on_its_p90_cost():
    brief = capstone.BRIEFS["llama3.1-8b"]
    big = replace(capstone.reference_plan(brief), nodes=64, global_batch=512, reserved_days=9)
    g = capstone.grade(big, brief)
    assert capstone.problems(big, brief) == [] and not g.passed
    assert any("over the budget" in f for f in g.failed) and g.cost_p90 > brief.budget_usd


def test_the_grade_is_reproducible_for_its_seeds():
    brief = capstone.BRIEFS["gpt-30b"]
    bare = replace(capstone.reference_plan(brief), reserved_days=13)
    assert capstone.grade(bare, brief, seeds=(5,)).p_miss == capstone.grade(bare, brief, seeds=(5,)).p_miss


def test_the_briefs_chances_are_the_courses_stated_assumptions():
    for b in capstone.BRIEFS.values():
        assert (b.hang_share, b.late_probability, b.fallback_wait_mean_hours) == (
            capstone.HANG_SHARE, capstone.LATE_PROBABILITY, capstone.FALLBACK_WAIT_MEAN_HOURS)
    assert capacity.PLAN_COUNTS[-1] >= max(b.max_nodes for b in capstone.BRIEFS.values())


def test_without_an_evaluation_gate_the_spikes_cost_the_deadline(brief):
    ungated = replace(capstone.reference_plan(brief), eval_every_hours=None)
    g = capstone.grade(ungated, brief)
    assert not g.passed and g.p_miss > capstone.MAX_MISS
