"""The other half of the labs (every other one in course order, from the second): the unsolved lab fails every
check, then the solution passes every check, in one kernel (test_labs.py says how).

    .venv/bin/python -m pytest tests/course/test_labs_second_half.py -q
"""

import pytest
from test_labs import LABS, check_unsolved_then_solved

pytestmark = pytest.mark.notebook


@pytest.mark.parametrize("lab", LABS[1::2])
def test_the_unsolved_lab_fails_every_check_and_the_solution_passes_them(tmp_path, lab):
    check_unsolved_then_solved(lab, tmp_path)
