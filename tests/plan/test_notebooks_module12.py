"""Notebook 12 (the capstone) runs top to bottom on 2 cores in seconds and records its figures: the plan passes its
brief, the simulator agrees with Young/Daly and with Llama 3's reported effective training time, and the bare
reservation misses the deadline several times as often as module 11's (at the predicted 12.2 days, not always)."""

import pytest

from fmlab.course.run import bare_figures

pytestmark = pytest.mark.notebook


def test_notebook_12_plans_simulates_and_prices_each_choice(run_notebook):
    r = run_notebook("notebooks/12_capstone.ipynb", runs=2000)
    assert r.ok, r.error
    assert bare_figures(r.output) == []  # the histogram and the cost curve are drawn
    rec = r.records
    sim = rec["nb12.simulation"]
    assert sim["P(miss deadline)"] <= 0.10 and sim["cost P90 $"] <= 260_000 and sim["runs"] == 2000
    assert 0.98 < rec["nb12.checks"]["closed_ratio"] < 1.02 and 0.90 < rec["nb12.checks"]["llama3"] < 0.95
    choices = {row["choice"]: row for row in rec["nb12.variations"]}
    assert choices["the plan as it is"]["passes"] is True
    bare = next(row for label, row in choices.items() if label.startswith("reservation at margin x1 ("))
    plan_miss = choices["the plan as it is"]["P(miss)"]
    assert bare["P(miss)"] > max(3 * plan_miss, 0.02)  # the margin is insurance: it buys most of the risk away
    other = rec["nb12.other_brief"]
    assert [row["passes"] for row in other] == [True, True]  # the 8B brief's deadline has room: no margin needed
