"""fmlab.plan.capacity: instance type, count and Region from quotas, deadline, memory and reserved capacity."""

import math

import pytest

from fmlab.plan import capacity, regions
from fmlab.plan.compute import PlanError
from fmlab.plan.planned import planned_run

P5 = ("us-east-1", "ml.p5.48xlarge")


def test_plans_are_whole_days_up_to_182_and_counts_of_powers_of_two_up_to_64():
    assert capacity.reserved_days(12.01) == 13 and capacity.reserved_days(13.0) == 13
    assert capacity.reserved_days(0.2) == 1
    with pytest.raises(PlanError, match="two back to back"):
        capacity.reserved_days(200)
    assert [capacity.plan_count(n) for n in (1, 3, 12, 16, 33)] == [1, 4, 16, 16, 64]
    with pytest.raises(PlanError, match="several plans"):
        capacity.plan_count(65)


def test_capacity_blocks_sell_days_up_to_14_then_weeks():
    """EC2 user guide, 'Find and purchase Capacity Blocks': 1-day increments up to 14 days, 7-day increments up to
    182; training plans: 1-day increments from 1 to 182 (read 2026-11-26)."""
    assert [capacity.buyable_days(d, "capacity block") for d in (3.2, 14, 14.5, 41, 176)] == [4, 14, 21, 42, 182]
    assert [capacity.buyable_days(d) for d in (3.2, 14.5, 41)] == [4, 15, 41]
    with pytest.raises(PlanError, match="182 days"):
        capacity.buyable_days(183, "capacity block")


def test_the_reservation_holds_the_job_and_its_last_half_hour():
    r = capacity.reservation(12.9)
    assert r.job_days == pytest.approx(12.9 * 1.2) and r.days == 16 and 0 < r.spare_hours < 24
    assert r.needed_days == pytest.approx(12.9 * 1.2 + (60 + 30) / 1440)
    assert r.covers(r.job_days * 86400) and not capacity.reservation(12.9, margin=1.0).covers(r.job_days * 86400)
    with pytest.raises(PlanError, match="margin must be at least 1"):
        capacity.reservation(12.9, margin=0.9)


def test_each_option_says_why_it_cannot_be_used():
    rows = regions.options("gpt-30b", 300e9, deadline_days=30, quotas={P5: 16})
    by = {(r.region, r.instance): r for r in rows}
    assert by[P5].feasible
    assert "quota 0 < 16" in by[("us-east-2", "ml.p5.48xlarge")].why_not
    assert "deadline" in by[("us-west-2", "ml.p4d.24xlarge")].why_not  # 41 days on p4d
    assert "no published rate" in by[("us-west-2", "ml.p5.48xlarge")].why_not
    assert {r.region for r in rows if r.instance == "ml.p5en.48xlarge"} == {"us-east-2"}


def test_the_choice_is_the_cheapest_feasible_at_the_price_that_applies():
    rows = regions.options("gpt-30b", 300e9, deadline_days=30, quotas={P5: 16, ("us-east-2", "ml.p5en.48xlarge"): 8})
    best = regions.choose(rows)
    # reserved p5 at its 2024-12 rate; 8 p5en on demand have no price of that date to weigh against it
    assert (best.region, best.instance) == P5
    p5 = next(r for r in rows if (r.region, r.instance) == P5)
    # the rate x plan count x the days that hold the job: module 7's predicted 10.2 days (the planner's layout for
    # 16 p5, fmlab.plan.planned.planned_run) x 1.2 + start-up + the last 30 minutes -> 13 whole days of Capacity Blocks
    assert p5.days == pytest.approx(planned_run("gpt-30b", 300e9, "ml.p5.48xlarge", 16).days)
    assert p5.reserved_days == capacity.reservation(p5.days, kind="capacity block").days == 13
    assert p5.reserved_usd == pytest.approx(39.33 * 16 * 24 * 13)
    p4d = next(r for r in rows if r.instance == "ml.p4d.24xlarge")  # 36.4 days: Capacity Blocks sell weeks past 14
    assert p4d.reserved_days == 49 and "36.4 days > deadline 30" in p4d.why_not


def test_nothing_feasible_says_what_to_change():
    rows = regions.options("gpt-30b", 300e9, deadline_days=5, quotas={P5: 16})
    with pytest.raises(PlanError, match="quota increase, extend the deadline or add instances"):
        regions.choose(rows)
    with pytest.raises(PlanError, match="deadline_days"):
        regions.options("gpt-30b", 300e9, deadline_days=0, quotas={})


def test_prices_are_compared_on_one_basis():
    """Capacity Blocks against EC2 on demand of the same date (PRICE_BASIS: 2024-12, p5 at $98.32); against today's
    on-demand price (a 44% cut later) or SageMaker's training price the comparison is refused."""
    rows = regions.options("gpt-30b", 300e9, deadline_days=30, quotas={P5: 16})
    p5 = next(r for r in rows if (r.region, r.instance) == P5)
    assert p5.on_demand_usd == pytest.approx(98.32 * 16 * 24 * p5.days)  # EC2 on demand at the reserved rates' date
    assert p5.on_demand_today_usd == pytest.approx(55.04 * 16 * 24 * p5.days)  # shown beside, never compared
    reserved = capacity.Cost(p5.reserved_usd, "EC2 Capacity Blocks")
    assert capacity.saving(reserved, capacity.Cost(p5.on_demand_usd, "EC2 on-demand")) == pytest.approx(
        p5.on_demand_usd - p5.reserved_usd)  # the 30B run: 11 reserved days against 9.0 on demand, both of 2024-12
    with pytest.raises(PlanError, match="not of one date"):
        capacity.saving(reserved, capacity.Cost(p5.on_demand_today_usd, "EC2 on-demand", capacity.EC2_ON_DEMAND_DATE))
    with pytest.raises(PlanError, match="not of one kind"):
        capacity.saving(reserved, capacity.Cost(560_366.0, "SageMaker training on-demand"))
    assert all(r.basis == capacity.PRICE_BASIS for r in rows) and capacity.PRICE_DATE in capacity.PRICE_BASIS


def test_the_choice_weighs_options_at_one_date():
    """A reservation and an on-demand option are weighed at the reserved rates' date; with no price of that date
    the on-demand option drops out. On demand alone, today's prices decide."""
    only = regions.options("gpt-30b", 300e9, deadline_days=30, quotas={("us-east-2", "ml.p5en.48xlarge"): 8})
    best = regions.choose(only)
    assert best.instance == "ml.p5en.48xlarge" and math.isnan(best.on_demand_usd)
    assert best.on_demand_today_usd == pytest.approx(63.296 * 8 * 24 * best.days)
