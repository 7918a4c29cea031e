"""Every unsolved lab fails every one of its checks (the solutions pass them: test_labs.py).

    python -m pytest tests/course/test_labs_unsolved.py
"""

import pytest
from test_labs import LABS, exercises

pytestmark = pytest.mark.notebook


# The labs in the opposite order to test_labs.py: under `make test` the two files start together on two of the
# workers, so the same lab never runs on both at once (lab 10's two runs are trained by whichever comes first, then
# copied from fmlab.train.cache by the other, instead of one worker waiting for the other's training).
@pytest.mark.parametrize("lab", LABS[::-1])
def test_unsolved_lab_fails_every_check(run_notebook, tmp_path, lab):
    r = run_notebook(f"labs/{lab}.ipynb", work_dir=str(tmp_path / "work"))
    assert not r.ok and "LabIncomplete" in r.error
    assert [r.records[f"lab.{e}"] for e in exercises(lab)] == [False] * len(exercises(lab))
