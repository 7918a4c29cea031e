"""Lab 11's checks catch what they should: a capacity choice that ignores a rule, an sbatch script that lacks what a
requeue needs (milliseconds; the real Slurm run of the solved lab is in test_labs.py)."""

import dataclasses
import math

import pytest

from fmlab.hyperpod import slurm
from fmlab.labs import lab11


def good(rows, deadline_days, reserve_from_instances=16):
    ok = [r for r in rows if r.quota >= r.instances and r.days <= deadline_days and r.fits
          and (r.instances < reserve_from_instances or not math.isnan(r.reserved_usd))]
    price = {id(r): r.reserved_usd if r.instances >= reserve_from_instances else r.on_demand_usd for r in ok}
    return min(ok, key=lambda r: price[id(r)]) if ok else None


def ignores_quota(rows, deadline_days, reserve_from_instances=16):
    return good([dataclasses.replace(r, quota=r.instances) for r in rows], deadline_days, reserve_from_instances)


def always_on_demand(rows, deadline_days, reserve_from_instances=16):
    return good(rows, deadline_days, reserve_from_instances=10**6)


def test_the_capacity_check_passes_the_rule_and_fails_each_shortcut(capsys):
    assert lab11.check_capacity(good) is True
    assert lab11.check_capacity(ignores_quota) is False
    assert "the rule gives" in capsys.readouterr().out
    assert lab11.check_capacity(always_on_demand) is False  # 8 p5en without a published rate is chosen
    assert lab11.check_capacity(None) is False


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
