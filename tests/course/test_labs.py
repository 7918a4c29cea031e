"""Every lab, discovered on disk: the solution passes every check, the unsolved lab fails every check.

A lab labs/lab_NN_topic.ipynb is checked by fmlab.labs.labNN, whose LAB lists its exercises; a new lab is
picked up here without editing this file.
"""

import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LABS = sorted(p.stem for p in (ROOT / "labs").glob("lab_[0-9][0-9]_*.ipynb"))

pytestmark = pytest.mark.notebook


def exercises(lab: str) -> list[str]:
    return importlib.import_module(f"fmlab.labs.lab{lab.split('_')[1]}").LAB.exercises


def test_every_lab_has_a_solution():
    assert LABS, "no labs found"
    for lab in LABS:
        assert (ROOT / "labs" / "solutions" / f"{lab}.ipynb").exists(), lab


@pytest.mark.parametrize("lab", LABS)
def test_solution_passes_every_check(run_notebook, tmp_path, lab):
    r = run_notebook(f"labs/solutions/{lab}.ipynb", work_dir=str(tmp_path / "work"))
    assert r.ok, r.error
    assert r.records["lab.passed"] == r.records["lab.total"] == len(exercises(lab))
    assert all(r.records[f"lab.{e}"] for e in exercises(lab))


@pytest.mark.parametrize("lab", LABS)
def test_unsolved_lab_fails_every_check(run_notebook, tmp_path, lab):
    r = run_notebook(f"labs/{lab}.ipynb", work_dir=str(tmp_path / "work"))
    assert not r.ok and "LabIncomplete" in r.error
    assert [r.records[f"lab.{e}"] for e in exercises(lab)] == [False] * len(exercises(lab))
