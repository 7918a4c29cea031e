"""Each notebook's two-minute check (fmlab.course.checks): figures the notebook computed and a question of why or what
if, the answers collapsed; the check cell ends the notebook (before its timing cell). That every answer is found in a
real run, and every Why still holds on it, is asserted by each notebook's test (guide.assert_quoted).

    .venv/bin/pytest tests/course/test_checks.py -v
"""

import json

from fmlab.course import checks, guide
from fmlab.environment import ROOT


def test_every_notebook_ends_with_its_two_minute_check():
    stems = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert sorted(checks.CHECKS) == stems == sorted(guide.NOTEBOOK_OF.values())
    for stem in stems:
        assert len(checks.CHECKS[stem]) == 3, stem
        assert any(isinstance(item, checks.Why) for item in checks.CHECKS[stem]), f"{stem}: no why or what-if"
        cells = [c for c in json.loads((ROOT / "notebooks" / f"{stem}.ipynb").read_text())["cells"]
                 if c["cell_type"] == "code"]
        check = [i for i, c in enumerate(cells) if f'two_minute_check("{stem}")' in "".join(c["source"])]
        assert check and check[0] >= len(cells) - 2, f"{stem}: the check is not at its end"


def test_the_answers_are_the_records_and_collapsed():
    records = {"nb12.checkpoints": {"keep": 4}, "nb12.sensitivity": [{"assumption": "spikes_per_run"}]}
    text = checks.markdown("12_capstone", records)
    assert text.count("<details><summary>answer</summary>") == 3
    assert "4: one from before a spike" in text and "`spikes_per_run`" in text and "(a) More" in text
    missing = checks.answers("12_capstone", {"nb12.checkpoints": {"keep": 4}})
    assert [a.startswith("not computed") for _, a in missing] == [False, True, False]
    assert "`nb12.sensitivity` was skipped" in missing[1][1]


def test_a_choice_is_checked_with_its_reason_and_bad_input_is_named(capsys):
    assert checks.answer("04_data_parallel", 3, "a").startswith("right: each GPU sends its share")
    wrong = checks.answer("04_data_parallel", 3, "(B)")
    assert wrong.startswith("not quite: (b) Eight times more. The answer is (a)")
    for number, choice, said in ((1, "a", "offers no choices; the ones that do: [3]"),
                                 (3, "z", "choose one of a, b, c, not 'z'")):
        try:
            checks.answer("04_data_parallel", number, choice)
        except ValueError as e:
            assert said in str(e)
        else:
            raise AssertionError(f"{number}, {choice!r} was accepted")


def test_a_why_that_no_longer_holds_on_the_records_is_reported():
    keep = {"nb12.checkpoints": {"keep": 4}, "nb12.sensitivity": [{"assumption": "x"}]}
    assert checks.unsupported("12_capstone", keep) == []
    assert "no longer holds" in checks.unsupported("12_capstone", {**keep, "nb12.checkpoints": {"keep": 1}})[0]
    assert "KeyError" in checks.unsupported("12_capstone", {})[0]
    sweep = {"lr_verdict": "inconclusive", "lr_gap": 0.2, "lr_margin": 0.1}  # a verdict its numbers contradict
    assert checks.unsupported("03_parallel_jobs_and_warm_pools", sweep)


def test_a_notebook_test_fails_when_its_check_cannot_answer():
    try:
        guide.assert_quoted({}, "nb12")
    except AssertionError as e:
        assert "two-minute check" in str(e) and "recorded no" in str(e)
    else:
        raise AssertionError("an empty run passed the guide's check")
