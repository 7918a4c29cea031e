"""Notebook 12's map: on each brief of lab12_map.MAP the check's own search chooses the platform and recovery its
reason names, and the choice rule prefers the simpler plan unless more machinery buys a point of P(miss).

    .venv/bin/pytest tests/course/test_lab12_map.py -v
"""

from types import SimpleNamespace

import pytest

from fmlab.labs import lab12, lab12_map
from fmlab.plan import capstone


@pytest.mark.slow
def test_each_map_brief_chooses_what_its_reason_names():
    rows = lab12_map.where_each_wins()
    for entry in lab12_map.MAP:
        chosen = [(r["platform"], r["recovery"]) for r in rows if r["brief"] == entry.brief.name and r["chosen"]]
        assert chosen == [entry.expected], (entry.brief.name, entry.why)
    over_64 = [r for r in rows if r["brief"].startswith("70B, 1.5T") and r["platform"] == "training jobs"]
    assert over_64 and all(r["nodes"] is None for r in over_64)  # 64 instances are too few, more is two plans


def _plan(platform, recovery, nodes=32):
    return capstone.RunPlan("ml.p5.48xlarge", nodes, "us-east-1", None, 1, 1, platform=platform, recovery=recovery)


def _grade(cost, p_miss):
    return SimpleNamespace(cost_p90=cost, p_miss=p_miss)


def test_a_tie_goes_to_the_simpler_plan_unless_more_machinery_buys_a_point_of_p_miss():
    jobs, slurm = _plan("training jobs", "checkpoint to S3"), _plan("HyperPod Slurm", "checkpoint to S3")
    tiered = _plan("HyperPod EKS", "tiered: memory, then S3")
    assert lab12.best_of([(slurm, _grade(100.0, 0.050)), (jobs, _grade(100.5, 0.055))])[0] is jobs  # within 1%
    assert lab12.best_of([(slurm, _grade(100.0, 0.040)), (jobs, _grade(100.5, 0.055))])[0] is slurm  # 1.5 points
    assert lab12.best_of([(slurm, _grade(100.0, 0.050)), (jobs, _grade(102.0, 0.010))])[0] is slurm  # 2% dearer
    assert lab12.best_of([(jobs, _grade(100, 0.05)), (slurm, _grade(100, 0.045)),
                          (tiered, _grade(100, 0.035))])[0] is tiered
    assert lab12.best_of([]) == (None, None)
