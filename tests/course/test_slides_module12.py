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
    assert "90.8% effective training time" in DECK
    assert f"{simulate.simulate(llama, runs=10_000, seed=0).goodput.mean():.1%}" == "90.8%"


def test_the_margin_slide_reads_the_simulation():
    brief = capstone.BRIEFS["gpt-30b"]
    ref = capstone.reference_plan(brief)
    bare = replace(ref, reserved_days=13)
    rate = capacity.RESERVED_RATE[(ref.instance, ref.region)] * ref.nodes * 24
    days = capstone._plan_of(ref, brief).days
    assert f"13 days hold the run's predicted {days:.1f}" in DECK and "about\n$30k up front" in DECK
    assert "module 11's 15 reserved days" in DECK and ref.reserved_days == 15
    assert (ref.reserved_days - bare.reserved_days) * rate == pytest.approx(30_000, rel=0.02)
    outlive = simulate.simulate(capstone.scenario_of(bare, brief), runs=4000, seed=1).waited_hours > 0
    assert "about 7%\nof runs outlive the reservation" in DECK and 0.05 < outlive.mean() < 0.09
    assert "about 5% miss the deadline" in DECK and 0.03 < capstone.grade(bare, brief, seeds=(1,)).p_miss < 0.07
    assert "P(miss) under 1%" in DECK and capstone.grade(ref, brief, seeds=(1,)).p_miss < 0.01


def test_the_gate_claim_reads_the_simulation():
    brief = capstone.BRIEFS["gpt-30b"]
    ungated = replace(capstone.reference_plan(brief), eval_every_hours=None)
    assert "without one, a quarter of runs miss" in DECK
    assert 0.2 < capstone.grade(ungated, brief, seeds=(1,)).p_miss < 0.3
    assert "4 loss spikes\nper run" in DECK and capstone.SPIKES_PER_RUN == 4
