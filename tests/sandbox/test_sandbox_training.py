"""The real training entry point (entrypoints/train.py -> fmlab.train) as SageMaker jobs in the sandbox.

A 2-instance x 1-process job and a 1-instance x 2-process job of the tiny model, both DDP over gloo on the
same seed and data: both complete, put model.tar.gz / output.tar.gz / checkpoints in the local bucket, and
(same world size, same data order) log the same losses.
"""

import json

import pytest

from fmlab import jobs, storage
from fmlab.jobs.spec import JobSpec

pytestmark = pytest.mark.distributed


def test_real_training_script_on_2x1_and_1x2_hosts(local_env):
    data = jobs.course_dataset_uri("local")
    base = JobSpec("train", hyperparameters={"max_steps": 4, "micro_batch": 4, "log_every": 1, "tensorboard": False},
                   inputs={"train": data}, instance_type="ml.g5.12xlarge", distribution="torchrun",
                   checkpoint_s3_uri="s3://fmlab-local/fmlab/checkpoints/train-2x1")
    two_hosts = jobs.launch(base.with_(name="train-2x1", instance_count=2, processes_per_host=1),
                            backend="local", quiet=True)
    one_host = jobs.launch(base.with_(name="train-1x2", processes_per_host=2, checkpoint_s3_uri=None),
                           backend="local", quiet=True)
    results = jobs.wait_all([two_hosts, one_host], timeout=240, progress=False)
    for d in results:
        assert d["TrainingJobStatus"] == "Completed", d.get("FailureReason")
    assert results[0]["Sandbox"]["Hosts"] == ["algo-1", "algo-2"] and results[1]["Sandbox"]["Hosts"] == ["algo-1"]

    curves = [job.metrics() for job in (two_hosts, one_host)]
    assert [list(c["step"]) for c in curves] == [[1, 2, 3, 4]] * 2
    assert curves[0]["loss"].iloc[0] == pytest.approx(6.24, abs=0.3)  # ln(512): the untrained tiny model
    assert list(curves[0]["loss"]) == pytest.approx(list(curves[1]["loss"]), rel=1e-4)  # same world, same data

    for job in (two_hosts, one_host):
        model = job.download("model", local_env / job.name / "model")
        assert (model / "config.json").is_file()
        summary = json.loads((job.download("output", local_env / job.name / "output") / "summary.json").read_text())
        assert summary["world_size"] == 2 and summary["steps"] == 4
    checkpoints = storage.list_objects("s3://fmlab-local/fmlab/checkpoints/train-2x1", "local")
    assert checkpoints, "the checkpoint URI received /opt/ml/checkpoints"
    print("sandbox real-script jobs:", [d["TrainingTimeInSeconds"] for d in results], "s of training each")


def test_a_final_save_equal_to_the_last_periodic_one_ends_cleanly_on_two_instances(local_env):
    """Each instance has its own /opt/ml/checkpoints and only algo-1 holds the COMPLETE marker: the ranks must
    agree (rank 0 decides) that the final save is already on disk, or those on algo-2 wait for a save forever."""
    data = jobs.course_dataset_uri("local")
    spec = JobSpec("final-save", hyperparameters={"max_steps": 4, "checkpoint_every": 2, "micro_batch": 4,
                                                  "log_every": 2, "tensorboard": False},
                   inputs={"train": data}, instance_type="ml.g5.12xlarge", distribution="torchrun",
                   instance_count=2, processes_per_host=1, checkpoint_s3_uri="s3://fmlab-local/fmlab/checkpoints/fs")
    d = jobs.launch(spec, backend="local", quiet=True).wait(timeout=180)
    assert d["TrainingJobStatus"] == "Completed", d.get("FailureReason")
    assert any(k.endswith("step_00000004/COMPLETE") for k in storage.list_objects("s3://fmlab-local/fmlab/checkpoints/fs", "local"))


def test_mpirun_starts_a_rank_per_device_on_every_instance_only_with_the_workaround(local_env, monkeypatch):
    """SDK v3's MPI driver passes process_count_per_node as mpirun's -np, a total in Open MPI: the plain
    request would start 1 rank for 2 instances, which the sandbox refuses with the reason; fmlab's request
    (fmlab.service.mpi_launch.mpi_launch: -np = every rank, --map-by ppr:1:node) trains on both instances."""
    from fmlab.service import mpi_launch

    data = jobs.course_dataset_uri("local")
    spec = JobSpec("mpi-2x1", hyperparameters={"max_steps": 2, "micro_batch": 4, "log_every": 1, "tensorboard": False},
                   inputs={"train": data}, instance_type="ml.g5.12xlarge", distribution="mpi", instance_count=2,
                   processes_per_host=1)
    fixed = jobs.launch(spec, backend="local", quiet=True)
    monkeypatch.setattr(mpi_launch, "mpi_launch", lambda per_host, instances: {"process_count_per_node": per_host,
                                                                          "mpi_additional_options": []})
    plain = jobs.launch(spec.with_(name="mpi-2x1-plain"), backend="local", quiet=True)
    fixed_done, plain_done = jobs.wait_all([fixed, plain], timeout=240, progress=False)
    assert fixed_done["TrainingJobStatus"] == "Completed", fixed_done.get("FailureReason")
    assert fixed_done["Sandbox"]["ProcessesPerHost"] == 1 and fixed_done["Sandbox"]["Hosts"] == ["algo-1", "algo-2"]
    summary = json.loads((fixed.download("output", local_env / "out") / "summary.json").read_text())
    assert summary["world_size"] == 2
    assert plain_done["TrainingJobStatus"] == "Failed"
    assert "mpirun would start 1 ranks in all (algo-1: 1, algo-2: 0)" in plain_done["FailureReason"]


def test_a_hung_rank_on_another_instance_is_named_in_the_jobs_failure_reason(local_env):
    """Rank 1 on algo-2 hangs at step 3: rank 0 on algo-1 times out (3 s), finds in the job's store that rank 1
    published no trace, and its failure file, which the sandbox (like SageMaker) puts after `AlgorithmError: `,
    names the rank, the collective and the step instead of torchrun's summary."""
    data = jobs.course_dataset_uri("local")
    spec = JobSpec("hung-rank", hyperparameters={"max_steps": 6, "micro_batch": 4, "log_every": 1, "tensorboard": False,
                                                 "fault": "hang", "fault_step": 3, "fault_rank": 1,
                                                 "collective_timeout": 3},
                   inputs={"train": data}, instance_type="ml.g5.12xlarge", distribution="torchrun",
                   instance_count=2, processes_per_host=1)
    d = jobs.launch(spec, backend="local", quiet=True).wait(timeout=180)
    assert d["TrainingJobStatus"] == "Failed"
    reason = d["FailureReason"]
    print("FailureReason:", reason.splitlines()[0])
    assert reason.startswith("AlgorithmError: rank 1 stopped at step 3: never entered collective #"), reason[:400]
    assert "that rank 0 waited in; it left no trace" in reason and "(collective timeout 3 s, --collective-timeout)" \
        in reason
