"""Notebooks 00 (backend and local bucket) and 03 (parallel jobs, warm pools) and lab 03 under papermill.

Notebook 03 runs its sweep of the real training script in the sandbox (2 CPU slots): 4 learning rates x 2
seeds = 8 jobs; the records it leaves are asserted: the SageMaker request it would send, the jobs' outcomes and
concurrency, the learning-rate verdict against the noise measured between seeds, the cost and quota figures.
"""

import pytest

from fmlab.course import guide

pytestmark = pytest.mark.notebook


def test_parallel_jobs_notebook_sweeps_four_learning_rates_with_two_seeds(run_notebook, local_env):
    lrs = [1e-3, 3e-3, 1e-2, 3e-2]
    r = run_notebook("notebooks/03_parallel_jobs_and_warm_pools.ipynb", backend="local", learning_rates=lrs,
                     seeds=[0, 1], max_steps=6, keep_alive_seconds=900)
    assert r.ok, r.error
    guide.assert_quoted(r.records, "nb03")  # the figures docs/instructor.md quotes
    rec = r.records
    # The request it would send to SageMaker: valid, and what the notebook asked for.
    assert rec["request_valid"] is True
    assert rec["request_resources"] == {"InstanceType": "ml.g5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30,
                                        "KeepAlivePeriodInSeconds": 900}
    assert rec["request_channels"] == ["code", "sm_drivers", "train"]
    assert rec["request_hyperparameters"]["lr"] == "0.001" and rec["request_hyperparameters"]["max_steps"] == "6"
    # Preflight: the sweep job passes on the PyTorch 2.13 DLC; 30 days and FSDP on the 2.3 image are refused,
    # although the API model finds nothing wrong with either.
    assert rec["preflight_good_ok"] is True and rec["preflight_image"] == "pytorch:2.13-cu133-amzn2023-sagemaker"
    assert rec["preflight_broken_api_problems"] == 0
    assert rec["preflight_broken_failures"] == ["max-runtime", "image/fsdp2"]
    # The sweep: 4 learning rates x 2 seeds = 8 jobs, all completed, never more than the 2 slots at once.
    assert rec["statuses"] == ["Completed"] * 8
    assert 1 <= rec["peak_concurrency"] <= 2
    losses = rec["final_losses"]  # mean over the seeds of each run's last-steps loss
    assert set(losses) == {str(lr) for lr in lrs}
    assert all(4.0 < v < 6.3 for v in losses.values())  # below ln(512) = 6.24 after a few steps
    assert losses["0.001"] > min(losses.values())  # the smallest learning rate learns slowest in 6 steps
    # A winner only when the gap between the two lowest means beats the noise measured between the seeds.
    assert rec["best_lr"] in lrs and losses[str(rec["best_lr"])] == min(losses.values())
    assert rec["lr_noise"] > 0  # two seeds never give the same loss
    assert rec["lr_margin"] == pytest.approx(2 * rec["lr_noise"], abs=2e-4)  # 2 sigma sqrt(2/n), n = 2 seeds
    ranked = sorted(losses.values())
    assert rec["lr_gap"] == pytest.approx(ranked[1] - ranked[0], abs=2e-4)
    assert rec["best_lr"] in rec["lr_candidates"] and set(rec["lr_candidates"]) <= set(lrs)
    if rec["lr_gap"] > rec["lr_margin"]:
        assert rec["lr_verdict"] == f"{rec['best_lr']:g}" and rec["lr_candidates"] == [rec["best_lr"]]
    else:
        assert rec["lr_verdict"] == "inconclusive" and len(rec["lr_candidates"]) >= 2
    assert {"model", "output", "log"} <= set(rec["artifacts"])
    assert len(rec["startup_seconds"]) == 8 and all(s > 0 for s in rec["startup_seconds"])
    # Warm pools, launchers, quotas.
    assert rec["warm_pool_cost_usd"] == pytest.approx(1.408 * 900 / 3600, rel=1e-3)
    assert rec["launchers"]["smp"]["driver"] == "torchrun_driver.py"
    assert rec["launchers"]["smp"]["mp_parameters"] == {"hybrid_shard_degree": 8}
    assert rec["launchers"]["smp"]["image"].startswith("smdistributed-modelparallel:")
    assert rec["launchers"]["mpi"]["driver"] == "mpi_driver.py"
    assert "ml.g5.xlarge for training job usage" in rec["sweep_quota_requests"]
    assert set(rec["big_run_quota_requests"]) == {
        "Longest run time for a training job", "Number of instances across all training jobs",
        "ml.p4d.24xlarge for training job usage", "ml.p4d.24xlarge for training warm pool usage"}
    assert rec["cleanup_actions"] == 0  # everything had finished
    print(f"notebook 03: {r.seconds:.1f} s; sweep {rec['sweep_seconds']} s; start-up {rec['startup_seconds']} s")
