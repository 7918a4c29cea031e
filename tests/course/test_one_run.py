"""One figure per run: the 30B run's days, MFU, layout and reservation, wherever a deck or a notebook quotes them, are
the planned run's (fmlab.plan.planned.planned_run), for each instance type the course runs it on.

    .venv/bin/python -m pytest tests/course/test_one_run.py -q      # about a second

The notebooks' own records are held to the same planned run by their tests (test_notebooks_module01, 07, 11, 12);
this file reads the decks, whose figures are typed, and the figures that must no longer appear anywhere.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fmlab.plan.planned import planned_run

ROOT = Path(__file__).resolve().parents[2]
P4D = planned_run("gpt-30b", 300e9, "ml.p4d.24xlarge", 16)  # module 7's run
P5 = planned_run("gpt-30b", 300e9, "ml.p5.48xlarge", 16)  # module 11's run


def deck(name: str) -> str:
    return " ".join((ROOT / "slides" / f"{name}.md").read_text().split())  # line breaks as spaces


def about(value: float, unit: str) -> str:
    return f"about **{value:.0f} {unit}**"


@pytest.mark.parametrize("name, phrases", [
    ("01_when_to_pretrain", [
        f"groups of {P4D.parallel.shard_degree(P4D.devices)}, {P4D.parallel.recompute} recomputation, "
        f"{P4D.micro_batch} sequences per GPU", f"MFU {P4D.mfu:.0%}", about(P4D.days, "days"),
        f"about **${P4D.cost_usd / 1e3:.0f}k**"]),
    ("07_gpt30b_sharded_training", [
        f"the predicted {P4D.mfu:.0%} MFU, {P4D.days:.1f} days", f"## {P4D.days:.0f} days do not fit in one job",
        f"Planned {P4D.days:.1f} days + 20% = {1.2 * P4D.days:.1f} days: **2 jobs of {0.6 * P4D.days:.1f} days**"]),
    ("11_pretraining_on_aws_in_2026", [
        f"of {P5.days:.1f} days needs a plan of {P5.reserved_days} days", f"{about(P4D.days, 'days')} (predicted MFU "
        f"{P4D.mfu:.0%})", f"hybrid sharding over {P5.parallel.shard_degree(P5.devices)} GPUs, {P5.micro_batch} "
        f"sequences per GPU, {about(P5.days, 'days')} (predicted MFU {P5.mfu:.0%})"]),
])
def test_each_deck_quotes_the_planned_run(name, phrases):
    text = deck(name)
    missing = [p for p in phrases if p not in text]
    assert not missing, f"slides/{name}.md does not quote the planned run as {missing}"


# Figures of runs the course no longer plans: the p5 run at micro-batch 1 and 128 sequences per step (12.2 days, 15
# reserved), the narrower search's 11.8 days, and module 7's old job of full sharding at micro-batch 1 (76.8 days).
STALE = [r"12\.2 days", r"11\.8 days", r"15 reserved days", r"76\.8 days", r"hybrid(-shard-degree|_shard_degree=)? ?16\b"]


def test_no_deck_notebook_or_guide_quotes_a_run_the_course_no_longer_plans():
    found = []
    for path in [*ROOT.glob("slides/*.md"), *ROOT.glob("notebooks/*.ipynb"), *ROOT.glob("labs/**/*.ipynb"),
                 ROOT / "docs" / "instructor.md", ROOT / "README.md"]:
        text = path.read_text()
        found += [f"{path.relative_to(ROOT)}: {m.group(0)!r}" for pattern in STALE
                  for m in re.finditer(pattern, text)]
    assert not found, found
