"""Module 11's requeue where Slurm cannot start (fmlab.hyperpod.without_slurm): a lost instance, a fresh start, a
resume from the newest checkpoint, in the sandbox and without root.

    .venv/bin/pytest tests/hyperpod/test_without_slurm.py -v
"""

import pytest

from fmlab.hyperpod import without_slurm


@pytest.mark.distributed
def test_a_lost_node_is_replaced_and_the_job_resumes_from_its_newest_checkpoint(tmp_path, monkeypatch):
    monkeypatch.setenv("FMLAB_SANDBOX_CPUS", "2")
    drill = without_slurm.lost_node_drill(steps=8, checkpoint_every=3, fault_step=5)
    assert drill.status == "Completed" and drill.attempts == 2
    assert drill.states.count("Restarting") == 1 and drill.states[-1] == "Completed"
    assert drill.resumed_at == [3]  # the newest complete save before the fault at step 5
