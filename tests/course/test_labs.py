"""Every lab, discovered on disk: its unsolved notebook fails every check, then its solution passes every check,
both in one Jupyter kernel.

A lab labs/lab_NN_topic.ipynb (or lab_NNx_topic, a module's second lab) is checked by fmlab.labs.labNN(x), whose LAB
lists its exercises; a new lab is picked up here without editing this file.

One kernel per lab, not two: the test runs a notebook made of the unsolved lab's cells (its summary cell made to
record LabIncomplete instead of stopping the run), a cell that forgets the checks' results, then the solution's
cells (its parameters cell left out: papermill's values stay). Both halves start from the same set-up cells, so the
solution meets what it would meet alone; a kernel's start and the lab's imports are paid once instead of twice (about
5 CPU s a lab). `make course` runs each solution alone, as a learner does. Half the labs run here, half in
test_labs_second_half.py.
"""

import importlib
import json
import re
from pathlib import Path

import pytest

from fmlab.course.records import records_in
from fmlab.course.run import execute

ROOT = Path(__file__).resolve().parents[2]
LABS = sorted(p.stem for p in (ROOT / "labs").glob("lab_[0-9][0-9]*_*.ipynb"))

pytestmark = pytest.mark.notebook


def exercises(lab: str) -> list[str]:
    return importlib.import_module(f"fmlab.labs.lab{lab.split('_')[1]}").LAB.exercises


def test_every_lab_has_a_solution():
    assert LABS, "no labs found"
    for lab in LABS:
        assert (ROOT / "labs" / "solutions" / f"{lab}.ipynb").exists(), lab


def unsolved_then_solved(lab: str) -> tuple[dict, int]:
    """The notebook this file runs for `lab`, and the index of its first solved cell."""
    unsolved = json.loads((ROOT / "labs" / f"{lab}.ipynb").read_text())
    solved = json.loads((ROOT / "labs" / "solutions" / f"{lab}.ipynb").read_text())
    summary = unsolved["cells"][-1]
    module = re.fullmatch(r"\s*(\w+)\.summary\(\)\s*", "".join(summary["source"]))
    assert summary["cell_type"] == "code" and module, f"{lab}: its last cell is not `labNN.summary()`"
    name = module.group(1)
    summary["source"] = (f"from fmlab.labs import LabIncomplete\nfrom fmlab.course import record\n\ntry:\n"
                         f"    {name}.summary()\nexcept LabIncomplete as e:\n    record('unsolved.incomplete', str(e))\n"
                         f"else:\n    record('unsolved.incomplete', '')\n")
    forget = {"cell_type": "code", "execution_count": None, "id": "forget-unsolved", "metadata": {}, "outputs": [],
              "source": f"{name}.LAB.results.clear()  # the solution's checks start from nothing\n"}
    rest = [c for c in solved["cells"] if "parameters" not in c.get("metadata", {}).get("tags", [])]
    for i, cell in enumerate(rest):  # the unsolved lab was generated from the solution: their cells share ids
        cell["id"] = f"solved-{i}"
    unsolved["cells"] += [forget, *rest]
    return unsolved, len(unsolved["cells"]) - len(rest)


def check_unsolved_then_solved(lab: str, tmp_path: Path) -> None:
    notebook, first_solved = unsolved_then_solved(lab)
    source = tmp_path / f"{lab}.unsolved-then-solved.ipynb"
    source.write_text(json.dumps(notebook))
    r = execute(source, tmp_path / f"{lab}.ipynb", {"work_dir": str(tmp_path / "work")}, cwd=ROOT / "labs")
    assert r.ok, r.error
    executed = json.loads(r.output.read_text())["cells"]
    first_solved += sum(1 for c in executed if "injected-parameters" in c.get("metadata", {}).get("tags", []))
    unsolved, solved = records_in(executed[:first_solved]), records_in(executed[first_solved:])
    names = exercises(lab)
    assert "still to solve" in unsolved["unsolved.incomplete"], unsolved.get("unsolved.incomplete")
    assert [unsolved[f"lab.{e}"] for e in names] == [False] * len(names), "an unsolved check passed"
    assert solved["lab.passed"] == solved["lab.total"] == len(names)
    assert all(solved[f"lab.{e}"] for e in names)


# Half the labs here, every other one in course order; the rest in test_labs_second_half.py, so that two test
# workers share them under `make test` (a file goes to one worker whole).
@pytest.mark.parametrize("lab", LABS[0::2])
def test_the_unsolved_lab_fails_every_check_and_the_solution_passes_them(tmp_path, lab):
    check_unsolved_then_solved(lab, tmp_path)


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
    from fmlab.plan.parallelism import ParallelConfig

    def eager(model, instance_type, instances, memory_cap_gb):  # forgets attention="flash"
        for tp in (1, 2, 4, 8):
            plan = layout.make_plan(model, 1e9, instance_type, instances, parallel=ParallelConfig(sharding="full", tp=tp),
                                    suggest=False)
            if plan.memory_gb_per_device <= memory_cap_gb:
                return {"hybrid_shard_degree": 0, "tensor_parallel_degree": tp, "activation_checkpointing": "none"}
        raise ValueError("nothing fits: add instances")

    assert lab07.check_choose_smp(lab07.reference_choice) is True
    assert lab07.check_choose_smp(eager) is False
    assert "the rule gives" in capsys.readouterr().out
    assert lab07.check_choose_smp(None) is False


# ---- lab 08: the attacks catch what they should, on 2 real (forked) gloo processes (seconds each)


def _save_without_barrier(folder, step, model, optimizer, scheduler, rank, world_size):
    """Lab 08's save, less its barrier: rank 0 commits while rank 1 may still be writing."""
    import json
    import os
    import time

    import torch

    stage, final = Path(folder) / f".incomplete-step_{step:06d}", Path(folder) / f"step_{step:06d}"
    stage.mkdir(parents=True, exist_ok=True)
    if rank == 1:
        time.sleep(0.5)  # a slower writer, so the missing barrier shows on every run, however loaded the machine
    torch.save({"step": step, "model": model.state_dict()}, stage / f"rank{rank}.pt")
    if rank == 0:
        os.rename(stage, final)
        files = {p.name: p.stat().st_size for p in final.glob("rank*.pt")}
        (final / "COMPLETE").write_text(json.dumps({"files": files}))


def _latest_ignoring_sizes(folder):
    found = sorted(p for p in Path(folder).glob("step_*") if (p / "COMPLETE").exists())
    return found[-1] if found else None


def _train_forgetting_rng(folder, steps, rank, world_size):
    import torch

    from fmlab.labs import lab08

    torch.set_rng_state = lambda state: None  # in this forked process only: the resume forgets the RNG
    return lab08.reference_train(folder, steps, rank, world_size)


def test_lab_08_checks_catch_a_missing_barrier_unchecked_sizes_and_a_forgotten_rng(tmp_path, capsys):
    from fmlab.labs import lab08

    assert lab08.check_save(_save_without_barrier, tmp_path) is False
    out = capsys.readouterr().out  # rank 0 commits too early: rank 1 then writes into a vanished folder, or too late
    assert any(sign in out for sign in ("expected only step_000004", "Parent directory", "FileNotFoundError"))
    assert lab08.check_latest(_latest_ignoring_sizes, tmp_path) is False
    assert "cut to half its size (a partial copy from S3), latest_checkpoint picked step_000012" in capsys.readouterr().out
    assert lab08.check_resume(_train_forgetting_rng, tmp_path) is False
    out = capsys.readouterr().out
    assert "resumed from step_000004: rank 0, step 5: loss" in out and "differs by" in out


def test_lab_08_reference_is_reproducible_bit_for_bit(tmp_path):
    """The checks compare losses with tolerance 0: two uninterrupted runs must agree exactly."""
    from fmlab.labs import lab08

    first, second = lab08.reference(tmp_path / "a"), lab08.reference(tmp_path / "b")
    assert first["losses"] == second["losses"] and len(first["losses"][1]) == lab08.STEPS
    assert first["losses"][0] != first["losses"][1]  # each rank its own data and dropout
    assert lab08.complete_steps(first["checkpoints"]) == [4, 8, 12]


def test_lab_08_a_hung_world_is_killed_whole(tmp_path):
    import time

    from fmlab.labs import lab08

    start = time.perf_counter()
    world = lab08.run_world(lambda rank, world_size: time.sleep(60), tmp_path / "logs", timeout=2)
    assert world.timed_out and not world.ok and world.exitcodes == [-9, -9]
    assert time.perf_counter() - start < 10 and "ran past" in world.failure()
