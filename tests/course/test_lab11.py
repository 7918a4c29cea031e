"""Lab 11's checks catch what they should: a reservation that forgets a rule, an sbatch script that lacks what a
requeue needs (milliseconds), and, on the local two-node Slurm, a static rendezvous that fails for real (the solved
lab's real Slurm run is in test_labs.py)."""

import math

import pytest

from fmlab.hyperpod import slurm
from fmlab.labs import lab11
from fmlab.plan import capacity


def good(run_days, kind="training plan", margin=1.2, start_up_hours=1.0):
    if margin < 1:
        raise ValueError("margin under 1")
    days = max(1, math.ceil(run_days * margin + (start_up_hours * 60 + capacity.PLAN_END_MINUTES) / 1440))
    if kind == "capacity block" and days > 14:
        days = 7 * math.ceil(days / 7)
    if days > 182:
        raise ValueError("more than 182 days")
    return days


def no_margin(run_days, kind="training plan", margin=1.2, start_up_hours=1.0):
    return good(run_days, kind, 1.0, start_up_hours)


def forgets_the_plans_end(run_days, kind="training plan", margin=1.2, start_up_hours=1.0):
    return good(run_days - capacity.PLAN_END_MINUTES / 1440 / margin, kind, margin, start_up_hours)


def days_for_every_kind(run_days, kind="training plan", margin=1.2, start_up_hours=1.0):
    return good(run_days, "training plan", margin, start_up_hours)


def never_refuses(run_days, kind="training plan", margin=1.2, start_up_hours=1.0):
    try:
        return good(run_days, kind, margin, start_up_hours)
    except ValueError:
        return 182


def calls_the_course(run_days, kind="training plan", margin=1.2, start_up_hours=1.0):
    return capacity.reservation(run_days, margin, kind, start_up_hours).days


@pytest.mark.parametrize("wrong, words", [
    (no_margin, "the rule buys 13"), (forgets_the_plans_end, "the rule buys"),
    (days_for_every_kind, "the rule buys 21"), (never_refuses, "must raise ValueError"),
    (calls_the_course, "write the sizing yourself")])
def test_the_reservation_check_passes_the_rule_and_fails_each_shortcut(capsys, wrong, words):
    assert lab11.check_reservation(good) is True
    capsys.readouterr()
    assert lab11.check_reservation(wrong) is False
    assert words in capsys.readouterr().out
    assert lab11.check_reservation(None) is False


def test_the_30b_case_reads_the_planner_and_needs_13_days():
    """Module 7's 30B run on 16 p5: 10.2 days at the planner's predicted step, a 12.3-day job, 13 days of plan."""
    run = lab11.run_days_30b_p5()
    assert 9.7 < run < 10.7
    assert good(run) == capacity.reservation(run).days == 13


@pytest.fixture
def spec(tmp_path):
    return slurm.SlurmTrainSpec(tmp_path, train_args=["--model", "tiny", "--max-steps", "12"])


def test_the_packages_script_has_the_shape_the_lab_asks_for(spec):
    assert lab11.shape_problems(slurm.batch_script(spec, 29500), spec) == []


@pytest.mark.parametrize("drop, words", [
    ("#SBATCH --requeue", "--requeue is missing"),
    ("#SBATCH --open-mode=append", "--open-mode=append is missing"),
    ("#SBATCH --ntasks-per-node=1", "--ntasks-per-node=1 is missing"),
    ("--rdzv-id $SLURM_JOB_ID", "--rdzv-id $SLURM_JOB_ID"),
    ("--max-steps 12", "lacks training flags"),
])
def test_the_shape_check_names_what_is_missing(spec, drop, words):
    script = slurm.batch_script(spec, 29500).replace(drop, "")
    assert any(words in p for p in lab11.shape_problems(script, spec))


def test_a_static_rendezvous_is_refused(spec):
    """torchrun's default rendezvous (static, localhost) runs on one node and hangs on two: the lab refuses it."""
    script = slurm.batch_script(spec, 29500)
    assert lab11.shape_problems(script, spec, 29500) == []
    static = script.replace("--rdzv-backend c10d", "").replace("--rdzv-endpoint $HEAD_NODE:29500", "")
    found = lab11.shape_problems(static, spec, 29500)
    assert any("--rdzv-backend c10d" in p for p in found) and any("--rdzv-endpoint" in p for p in found)
    local = script.replace("$HEAD_NODE:29500", "localhost:29500")
    assert any("must be the allocation's first node" in p for p in lab11.shape_problems(local, spec, 29500))
    assert any("use the port given" in p for p in lab11.shape_problems(script, spec, 29600))


def test_a_script_with_two_srun_lines_or_none_is_refused(spec):
    script = slurm.batch_script(spec, 29500)
    srun = next(line for line in script.splitlines() if line.startswith("srun"))
    assert "one `srun` line" in lab11.shape_problems(script + srun + "\n", spec)[-1]
    assert "found 0" in lab11.shape_problems(script.replace(srun, ""), spec)[-1]


@pytest.mark.distributed
def test_a_static_rendezvous_fails_for_real_on_two_nodes(tmp_path):
    """The shape check's refusal is not only a rule: on the local two-node Slurm, torchrun's default rendezvous
    (every node's torchrun is node 0 of a static world) fails, and the check says what failed."""
    if not slurm.ensure_cluster().available:
        pytest.skip("no local Slurm")
    solved = slurm.batch_script

    def static(spec, port):
        return solved(spec, port).replace("--rdzv-backend c10d ", "").replace(f"--rdzv-endpoint $HEAD_NODE:{port} ", "")

    assert lab11.check_sbatch(static, tmp_path) is False
