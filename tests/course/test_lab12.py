"""Lab 12's checks: a planner that decides passes the named and the drawn briefs; the course's fixed-margin
reference, a plan hard-coded for one brief, a plan with no reasons and a wrong type fail (a few seconds each).

    .venv/bin/pytest tests/course/test_lab12.py -v
"""

import os
from dataclasses import replace

import pytest

from fmlab.labs import lab12
from fmlab.plan import capstone

SEED = 31  # the drawn briefs of these tests (the lab draws new ones each time it runs)
_DRAWN = {}


@pytest.fixture(autouse=True)
def drawn_once(monkeypatch):
    """A seed's briefs are the same every time (draw is deterministic): draw each once for this file's tests."""
    draw = lab12.draw

    def cached(seed, count=lab12.DRAWN):
        if (seed, count) not in _DRAWN:
            _DRAWN[seed, count] = draw(seed, count)
        return _DRAWN[seed, count]
    monkeypatch.setattr(lab12, "draw", cached)


def with_reasons(run):
    return replace(run, reasons={d: f"the {d} the search chose" for d in capstone.DECISIONS})


_SEARCHED = {}


def search_here(brief):
    """The check's own search for `brief`, run in this process (the learner's plan_run runs in a child, where the
    search refuses): what `searching` hands in, looked up by the brief itself (two drawn briefs may share a name:
    the same model and tokens, other deadlines and platforms)."""
    if brief not in _SEARCHED:
        _SEARCHED[brief] = with_reasons(lab12._search(brief, seeds=(7, 8))[0])
    return _SEARCHED[brief]


def searched_beforehand(*briefs):
    for brief in briefs:
        search_here(brief)


def searching(brief):
    """A planner that decides: the check's own search, found beforehand for these briefs."""
    return _SEARCHED[brief]


def the_courses_reference(brief):
    return with_reasons(capstone.reference_plan(brief))


def hard_coded(brief):
    """The plan that meets module 7's 30B brief, handed in for every brief."""
    return _SEARCHED[capstone.BRIEFS["gpt-30b"]]


@pytest.fixture(autouse=True)
def searched(drawn_once):
    """The search's plans for notebook 12's briefs and this file's drawn ones, found in this process."""
    searched_beforehand(*capstone.BRIEFS.values(), *(brief for brief, _ in lab12.draw(SEED)))


def test_a_planner_that_decides_passes_the_named_and_the_drawn_briefs(capsys):
    assert lab12.check_named(searching) is True
    assert lab12.check_drawn(searching, seed=SEED) is True
    out = capsys.readouterr().out
    assert "against the cheapest passing plan the search found" in out and "seed 31" in out
    assert all(f"    {d:12} the {d}" in out for d in capstone.DECISIONS)  # every reason printed back


def test_the_courses_fixed_margin_reference_fails_a_drawn_brief(capsys):
    assert lab12.check_named(the_courses_reference) is True  # it meets notebook 12's briefs...
    assert lab12.check_drawn(the_courses_reference, seed=SEED) is False  # ...not every brief
    assert "the course's fixed-margin reference plan fails this brief" in capsys.readouterr().out


def test_a_plan_hard_coded_for_one_brief_fails_the_drawn_ones():
    assert lab12.check_drawn(hard_coded, seed=SEED) is False


def test_a_plan_without_a_reason_for_every_decision_fails(capsys):
    def terse(brief):
        run = searching(brief)
        return replace(run, reasons={**run.reasons, "retention": "", "detector": "ok"})
    assert lab12.check_named(terse) is False
    assert "RunPlan.reasons for: retention, detector" in capsys.readouterr().out


def test_a_plan_that_calls_the_checks_own_search_is_refused_however_imported(capsys):
    from fmlab.labs.lab12 import _search as private
    from fmlab.labs.lab12 import search as planner

    for borrowed in (lambda brief: with_reasons(planner(brief)[0]), lambda brief: with_reasons(private(brief)[0])):
        assert lab12.check_named(borrowed) is False
        assert "plan_run called lab12.search" in capsys.readouterr().out
    assert lab12.search(capstone.BRIEFS["gpt-30b"])[0] is not None  # outside a check it is a planner like any


def test_no_switch_in_the_learners_process_turns_the_guard_off(capsys):
    """Whatever plan_run changes runs in its own process: a switch it flips, a grader it replaces, a brief it
    rewrites there leave the grade as it was."""
    def switched(brief):
        lab12._GRADING = {"on": False}  # the switch the check once had
        lab12._HOME = os.getpid()  # a home process, claimed
        return with_reasons(lab12._search(brief)[0])
    assert lab12.check_named(switched) is False
    assert "plan_run called lab12.search" in capsys.readouterr().out

    def lenient(brief):
        cannot_work = replace(_SEARCHED[capstone.BRIEFS["gpt-30b"]], nodes=8, reserved_days=1)
        capstone.grade = lambda *a, **k: capstone.Grade(brief.name, [], 0.0, 0.0, 0.0, 1.0)  # the grader, replaced
        object.__setattr__(brief, "deadline_days", 1e9)  # the frozen brief, rewritten
        object.__setattr__(brief, "budget_usd", 1e12)
        return cannot_work
    deadline = capstone.BRIEFS["gpt-30b"].deadline_days
    assert lab12.check_named(lenient) is False
    assert capstone.BRIEFS["gpt-30b"].deadline_days == deadline and capstone.grade.__module__ == "fmlab.plan.capstone"


def test_the_checks_frames_hold_no_plan_while_plan_run_runs():
    """plan_run may walk up the stack: nothing there is the search's plan (the draw keeps only its cost)."""
    import inspect

    def spying(brief):
        held = [v for frame in inspect.stack() for v in frame.frame.f_locals.values()
                if isinstance(v, capstone.RunPlan) or (isinstance(v, list | tuple) and any(
                    isinstance(x, capstone.RunPlan) or (isinstance(x, tuple) and any(
                        isinstance(y, capstone.RunPlan) for y in x)) for x in v))]
        if held:
            raise RuntimeError(f"found {len(held)} plans on the stack")
        return searching(brief)
    assert lab12.check_drawn(spying, seed=SEED) is True


def test_an_unanswered_or_wrongly_typed_plan_fails():
    assert lab12.check_named(None) is False
    assert lab12.check_named(lambda brief: {"nodes": 16}) is False


def test_every_drawn_brief_can_be_met_and_the_draws_differ():
    drawn = lab12.draw(SEED)
    assert len(drawn) == lab12.DRAWN
    for brief, cost in drawn:
        assert 1.1 * cost <= brief.budget_usd <= 1.3 * cost + 1000  # a little above the search's cheapest plan
        best, grade = lab12._search(brief, max_miss=lab12.DRAW_MISS)
        assert grade.passed and grade.p_miss <= lab12.DRAW_MISS and best.reserved_days <= brief.deadline_days
        for name, a in capstone.LEDGER.items():
            assert a.low <= getattr(brief, name) <= a.high, name
    assert any(lab12.reference_fails(brief) for brief, _ in drawn)
    other = lab12.draw(SEED + 1)
    assert [b.tokens for b, _ in drawn] != [b.tokens for b, _ in other]


@pytest.mark.parametrize("change", [dict(count="3"), dict(count=0), dict(count=True), dict(seed="31"),
                                    dict(seed=1.5)])
def test_the_drawn_check_takes_a_whole_count_and_seed(change):
    with pytest.raises(TypeError, match="count must be|seed must be"):
        lab12.check_drawn(searching, **{"seed": SEED} | change)


@pytest.mark.parametrize("change, words", [
    (dict(recovery="checkpointless"), "does not run on training jobs"),
    (dict(interval_hours=5 / 3600), "never completes"),
    (dict(keep_checkpoints=1), "cannot reach back past a spike"),
    (dict(reservation_kind="capacity block"), "EC2 Capacity Block"),
])
def test_the_check_refuses_what_the_platform_or_physics_rules_out(capsys, change, words):
    def wrong(brief):
        return replace(searching(brief), platform="training jobs", **change)
    assert lab12.check_named(wrong) is False
    assert words in capsys.readouterr().out
