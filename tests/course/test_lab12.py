"""Lab 12's checks catch what they should: a plan that does not fit, one that cannot be bought, one with a thin margin and no
held-out gate where the deadline is close, one over budget, the course's own answer; and pass a right plan (about a second each)."""

from dataclasses import replace

import pytest

from fmlab.labs import lab12
from fmlab.plan import capstone
from fmlab.plan.parallelism import ParallelConfig

PLANS = {"gpt-30b": (16, 16, 128), "llama3.1-8b": (32, 16, 256)}  # nodes, reserved days, global batch


def right(brief):
    nodes, days, batch = PLANS[brief.model]
    return capstone.RunPlan(brief.instances[0], nodes, "us-east-1",
                            ParallelConfig(sharding="hybrid", hybrid_shard_degree=16), batch, days)


def too_small_groups(brief):
    return replace(right(brief), parallel=ParallelConfig(sharding="hybrid", hybrid_shard_degree=8))


def thin_margin_and_no_gate(brief):
    # 13 days for the run's predicted 12.2, and a loss spike goes unnoticed: three quarters of runs miss
    return replace(right(brief), reserved_days=13, eval_every_hours=None)


def twelve_nodes(brief):
    return replace(right(brief), nodes=12, global_batch=96)


def the_courses_answer(brief):
    return capstone.reference_plan(brief)


@pytest.mark.parametrize("wrong, words", [(too_small_groups, "does not fit"), (thin_margin_and_no_gate, "misses the 16-day"),
                                          (twelve_nodes, "cannot be reserved"),
                                          (the_courses_answer, "make the plan yourself")])
def test_the_30b_check_passes_a_right_plan_and_fails_each_mistake(capsys, wrong, words):
    assert lab12.check_plan(right, "gpt-30b") is True
    capsys.readouterr()
    assert lab12.check_plan(wrong, "gpt-30b") is False
    assert words in capsys.readouterr().out


def test_the_8b_check_fails_a_plan_over_budget(capsys):
    def sixty_four(brief):
        return replace(right(brief), nodes=64, global_batch=512, reserved_days=9)
    assert lab12.check_plan(right, "llama3.1-8b") is True
    assert lab12.check_plan(sixty_four, "llama3.1-8b") is False
    assert "over the budget" in capsys.readouterr().out


def test_an_unanswered_or_wrongly_typed_plan_fails():
    assert lab12.check_plan(None, "gpt-30b") is False
    assert lab12.check_plan(lambda brief: {"nodes": 16}, "gpt-30b") is False
    with pytest.raises(ValueError, match="brief_key must be one of"):
        lab12.check_plan(right, "gpt-3")
