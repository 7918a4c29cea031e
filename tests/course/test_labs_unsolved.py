"""Every unsolved lab fails every one of its checks (the solutions pass them: test_labs.py).

    python -m pytest tests/course/test_labs_unsolved.py
"""

import pytest
from test_labs import LABS, exercises

pytestmark = pytest.mark.notebook


@pytest.mark.parametrize("lab", LABS)
def test_unsolved_lab_fails_every_check(run_notebook, tmp_path, lab):
    r = run_notebook(f"labs/{lab}.ipynb", work_dir=str(tmp_path / "work"))
    assert not r.ok and "LabIncomplete" in r.error
    assert [r.records[f"lab.{e}"] for e in exercises(lab)] == [False] * len(exercises(lab))
