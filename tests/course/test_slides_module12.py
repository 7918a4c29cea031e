"""Deck 12's numbers are the package's: each claim the deck makes is recomputed here and must read as the deck says."""

from dataclasses import replace
from pathlib import Path

import pytest

from fmlab.plan import capacity, capstone, reliability, scenario, simulate

DECK = (Path(__file__).resolve().parents[2] / "slides" / "12_capstone.md").read_text()


def test_the_failure_rates_the_deck_quotes():
    assert "16 nodes, one every ~400 hours" in DECK and round(reliability.job_mtbf_hours(16), -2) == 400
    assert "2,048 nodes, one every ~3 hours" in DECK and round(reliability.job_mtbf_hours(2048)) == 3


def test_the_closed_form_and_llama_3_figures_the_deck_quotes():
    s, closed = scenario.young_daly_check()
    waste = 1 - s.work_hours * 10_000 / simulate.simulate(s, runs=10_000, seed=1).finish_hours.sum()
    assert "within 0.3%" in DECK and abs(waste / closed - 1) < 0.003
    llama = scenario.llama3_405b()
    assert "90.5% effective training time" in DECK
    longest = reliability.implied_restart_hours(simulate.LLAMA3_EFFECTIVE_TRAINING, llama.save_seconds / 3600,
                                                llama.mtbf_hours, llama.interval_hours)
    assert f"a restart of at most {60 * longest:.1f} min: the course assumes {60 * llama.restart_hours:.1f}" in \
        " ".join(DECK.split())
    assert f"{simulate.simulate(llama, runs=10_000, seed=0).goodput.mean():.1%}" == "90.5%"
    assert "(66%); the first order says 100%" in DECK
    assert round(100 * reliability.expected_wasted_fraction(1.0, 0.2, 1.0, 0.25)) == 66
    assert reliability.wasted_fraction(1.0, 0.2, 1.0, 0.25) == 1


def test_the_margin_slide_reads_the_simulation():
    brief = capstone.BRIEFS["gpt-30b"]
    ref = capstone.reference_plan(brief)
    exact = capstone.days_for_miss(ref, replace(brief, speed_sigma=0.0), seeds=(1,), runs=4000)
    bare = replace(ref, reserved_days=exact)
    rate = capacity.RESERVED_RATE[(ref.instance, ref.region)] * ref.nodes * 24
    days = capstone._plan_of(ref, brief).days
    text = " ".join(DECK.split())
    assert f"Were the planner exact, {exact} days would hold the run's predicted {days:.1f}" in text
    assert 0.07 < capstone.grade(bare, replace(brief, speed_sigma=0.0), seeds=(1,)).p_miss < 0.1  # "about 9%"
    assert f"Module 11's {ref.reserved_days} reserved days cost about $30k up front more" in text
    assert (ref.reserved_days - bare.reserved_days) * rate == pytest.approx(30_000, rel=0.02)
    outlive = simulate.simulate(capstone.scenario_of(bare, brief), runs=4000, seed=1).waited_hours > 0
    assert "about 45% of runs outlive the reservation" in text and 0.42 < outlive.mean() < 0.48
    assert "about 35% miss the deadline" in text and 0.32 < capstone.grade(bare, brief, seeds=(1,)).p_miss < 0.38
    assert "P(miss) to about 8%" in text and 0.07 < capstone.grade(ref, brief, seeds=(1,)).p_miss < 0.09
    sized = capstone.days_for_miss(ref, brief, seeds=(1,), runs=4000)
    assert f"{sized} days are what it takes" in text and sized == ref.reserved_days


def test_the_detector_claims_read_the_simulation():
    brief = capstone.BRIEFS["gpt-30b"]
    ref = capstone.reference_plan(brief)
    keep = capstone.keep_needed(capstone.scenario_of(ref, brief).interval_hours, brief.unwatched_hours)
    blind = replace(ref, detector="none", keep_checkpoints=keep)
    assert "with neither, about half the runs miss" in DECK
    assert 0.45 < capstone.grade(blind, brief, seeds=(1,)).p_miss < 0.55
    assert "4 loss spikes\nper run" in DECK and brief.spikes_per_run == 4


def test_the_sensitivity_slide_reads_the_simulation():
    brief = capstone.BRIEFS["gpt-30b"]
    edge = capstone.reference_plan(brief)  # the 13 days P(miss) sizes too
    rows = {r["assumption"]: r for r in capstone.sensitivity(edge, brief, seed=1, runs=2000)}
    spikes, mtbf = rows["spikes_per_run"], rows["node_mtbf_hours"]
    assert "For the 13-day plan" in DECK and edge.reserved_days == 13
    assert "from about 5% to 29%" in DECK and 0.03 < spikes["P(miss) at low"] < 0.07
    assert 0.26 < spikes["P(miss) at high"] < 0.32
    assert "barely moves it (about 8%)" in DECK and 0.06 < mtbf["P(miss) at low"] < 0.1
    low, high = reliability.node_mtbf_range_hours()
    assert f"spans {high / low:.1f} times" in DECK
    assert (f"every {reliability.job_mtbf_hours(128, high):.0f} h at Llama 3's rate, every "
            f"{reliability.job_mtbf_hours(128, low):.0f} h at Meta's") in " ".join(DECK.split())
