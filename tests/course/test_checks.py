"""Each notebook's two-minute check (fmlab.course.checks): three questions whose answers the notebook computed, the
answers collapsed; the check cell ends the notebook (before its timing cell). That every answer is found in a real
run is asserted by each notebook's test (guide.assert_quoted).

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
        cells = [c for c in json.loads((ROOT / "notebooks" / f"{stem}.ipynb").read_text())["cells"]
                 if c["cell_type"] == "code"]
        check = [i for i, c in enumerate(cells) if f'two_minute_check("{stem}")' in "".join(c["source"])]
        assert check and check[0] >= len(cells) - 2, f"{stem}: the check is not at its end"


def test_the_answers_are_the_records_and_collapsed():
    records = {"nb12.checkpoints": {"keep": 4}, "nb12.sized": {"sized_days": 13},
               "nb12.sensitivity": [{"assumption": "spikes_per_run"}]}
    text = checks.markdown("12_capstone", records)
    assert text.count("<details><summary>answer</summary>") == 3
    assert "4: one from before a spike" in text and "13 days" in text and "`spikes_per_run`" in text
    missing = checks.answers("12_capstone", {"nb12.checkpoints": {"keep": 4}})
    assert [a.startswith("not computed") for _, a in missing] == [False, True, True]
    assert "`nb12.sized` was skipped" in missing[1][1]


def test_a_notebook_test_fails_when_its_check_cannot_answer():
    try:
        guide.assert_quoted({}, "nb12")
    except AssertionError as e:
        assert "two-minute check" in str(e) and "recorded no" in str(e)
    else:
        raise AssertionError("an empty run passed the guide's check")
