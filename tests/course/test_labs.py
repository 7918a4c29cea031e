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


# ---- lab 07: its checks and the premises its text states, without a notebook (milliseconds)


def test_lab_07_scenarios_still_say_what_the_lab_text_says():
    """The planner decides lab 07's answers; if it changes, the lab's text (the cloud run is hybrid, one
    scenario needs full recomputation, one fits nowhere) must change with it."""
    from fmlab.labs import lab07
    from fmlab.plan.compute import PlanError

    outcomes = []
    for s in lab07.EX1:
        try:
            outcomes.append(lab07.reference_choice(**s))
        except PlanError:
            outcomes.append(None)
    cloud = lab07.cloud_choice()
    assert lab07.sharding_kind(cloud["hybrid_shard_degree"], lab07.world("ml.p4d.24xlarge", 16)) == "hybrid"
    assert cloud == {"hybrid_shard_degree": 64, "tensor_parallel_degree": 1, "activation_checkpointing": "none"}
    assert outcomes.count(None) == 1
    found = [o for o in outcomes if o]
    assert {o["activation_checkpointing"] for o in found} == {"none", "full"}
    assert {o["tensor_parallel_degree"] for o in found} > {1}
    assert any(o["hybrid_shard_degree"] == 0 for o in found) and any(o["hybrid_shard_degree"] > 0 for o in found)


def test_lab_07_ex1_check_names_what_differs(capsys):
    from fmlab.labs import lab07
    from fmlab.plan import layout

    def eager(model, instance_type, instances, memory_cap_gb):  # forgets attention="flash"
        for tp in (1, 2, 4, 8):
            plan = layout.make_plan(model, 1e9, instance_type, instances, sharding="full", tp=tp, suggest=False)
            if plan.memory_gb_per_device <= memory_cap_gb:
                return {"hybrid_shard_degree": 0, "tensor_parallel_degree": tp, "activation_checkpointing": "none"}
        raise ValueError("nothing fits: add instances")

    assert lab07.check_choose_smp(lab07.reference_choice) is True
    assert lab07.check_choose_smp(eager) is False
    assert "the rule gives" in capsys.readouterr().out
    assert lab07.check_choose_smp(None) is False
