"""Failures at scale and the checkpoint interval, against the published figures they come from."""

import math

import pytest

from fmlab.plan import reliability, scenario
from fmlab.plan.compute import PlanError
from fmlab.plan.reliability import (
    HANG_DETECTION_SECONDS,
    LLAMA3_405B,
    daly_interval_hours,
    hang_detection_hours,
    job_mtbf_hours,
    transfer_hours,
    wasted_fraction,
    young_interval_hours,
)


def test_llama3_failure_rate_is_one_interruption_every_three_hours():
    """Llama 3 paper, section 3.3.4: 419 unexpected interruptions in 54 days on 16,384 GPUs, "one every three hours"."""
    whole_cluster = job_mtbf_hours(LLAMA3_405B.gpus // LLAMA3_405B.gpus_per_node)
    assert whole_cluster == pytest.approx(54 * 24 / 419) and 3.0 <= whole_cluster <= 3.2
    assert LLAMA3_405B.node_mtbf_hours == pytest.approx(6335, rel=1e-3)  # about 264 node-days
    assert job_mtbf_hours(16) == pytest.approx(LLAMA3_405B.node_mtbf_hours / 16)  # ~396 h for 16 nodes


def test_young_and_daly_intervals():
    """Young: sqrt(2 delta M). Daly's higher-order form is close to Young's minus delta when delta << M."""
    assert young_interval_hours(0.5, 100) == pytest.approx(10.0)
    daly = daly_interval_hours(0.5, 100)
    x = 0.5 / 200
    assert daly == pytest.approx(10.0 * (1 + math.sqrt(x) / 3 + x / 9) - 0.5)
    assert daly_interval_hours(300, 100) == 100  # saving takes longer than 2M: checkpoint once per MTBF


def test_the_optimum_minimises_wasted_time():
    save, mtbf = 10 / 3600, 396.0
    best = daly_interval_hours(save, mtbf)
    waste = wasted_fraction(best, save, mtbf)
    for other in (best / 3, best * 3):
        assert wasted_fraction(other, save, mtbf) > waste
    assert wasted_fraction(1.0, save, mtbf, restart_hours=0.5) > wasted_fraction(1.0, save, mtbf)


def test_a_hang_costs_its_detection_time_once_per_failure():
    """A hang is noticed only when a collective times out: 600 s (NCCL's default) against 80 s + the 5 s the
    survivors wait for each other's traces (fmlab.train's default after the first step)."""
    save, mtbf = 10 / 3600, 24.0
    assert hang_detection_hours() == pytest.approx(85 / 3600)
    assert hang_detection_hours(600, 0) == pytest.approx(HANG_DETECTION_SECONDS["NCCL default timeout (10 min)"] / 3600)
    slow = wasted_fraction(1.0, save, mtbf, detection_hours=hang_detection_hours(600, 0))
    fast = wasted_fraction(1.0, save, mtbf, detection_hours=hang_detection_hours())
    assert slow - fast == pytest.approx((600 - 85) / 3600 / mtbf)  # each failure's extra wait, once per MTBF
    with pytest.raises(PlanError, match="detection_hours must be >= 0"):
        wasted_fraction(1.0, save, mtbf, detection_hours=-1)
    with pytest.raises(PlanError, match="collective_timeout_s must be a positive"):
        hang_detection_hours(0)


def test_bad_numbers_are_refused():
    with pytest.raises(PlanError, match="nodes must be"):
        job_mtbf_hours(0)
    with pytest.raises(PlanError, match="save_hours must be a positive"):
        young_interval_hours(-1, 10)
    with pytest.raises(PlanError, match="gigabytes_per_second"):
        transfer_hours(360, 0)
    with pytest.raises(PlanError, match="node_mtbf_hours must be a positive number, got True"):
        job_mtbf_hours(4, node_mtbf_hours=True)  # one positivity check for the planner: a bool is no number
    with pytest.raises(PlanError, match="save_hours must be a positive number, got inf"):
        young_interval_hours(float("inf"), 10)
    assert transfer_hours(360, 1.0) == pytest.approx(0.1)


def test_llama_3s_90_percent_allows_a_restart_of_at_most_16_minutes():
    """Llama 3 (section 3.3.4: 'higher than 90% effective training time'), every interruption a restart: with the
    course's S3 save of the 405B state on 2,048 nodes at Daly's interval, 90% leaves at most 16.1 minutes a restart
    (the exact expectation; the course assumes 15). Longer saves leave less, and a minute's save none."""
    s = scenario.llama3_405b()
    longest = reliability.implied_restart_hours(0.90, s.save_seconds / 3600, s.mtbf_hours, s.interval_hours)
    assert 60 * longest == pytest.approx(16.1, abs=0.1) and longest > s.restart_hours
    waste = reliability.expected_wasted_fraction(s.interval_hours, s.save_seconds / 3600, s.mtbf_hours, longest)
    assert waste == pytest.approx(0.10, abs=1e-9)
    assert reliability.implied_restart_hours(0.90, 10 / 3600, s.mtbf_hours) < longest
    with pytest.raises(PlanError, match="even an instant restart"):
        reliability.implied_restart_hours(0.90, 60 / 3600, s.mtbf_hours)
