"""The local sandbox runs SageMaker job requests: SM_* contract, hosts algo-1..N, rendezvous, failures, queueing.

Every job here is launched through fmlab.jobs.launch(backend="local"): the SDK v3 ModelTrainer builds the
request in-process (moto), the sandbox validates and runs it. The entry script is a tiny probe (no torch
import in the worker), so these tests measure the sandbox, not training; tests/sandbox/test_sandbox_training.py runs
the real training script.
"""

import json
import subprocess
import sys
import textwrap
import time

import pytest

from fmlab import jobs, sandbox, storage
from fmlab.jobs.spec import JobSpec

PROBE = textwrap.dedent('''
    """Sandbox probe: records its environment, its start/end times, and plays with checkpoints."""
    import json, os, sys, time
    args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
    rank = os.environ.get("RANK", os.environ["SM_CURRENT_HOST_RANK"])
    start = time.time()
    info = {k: v for k, v in os.environ.items() if k.startswith(("SM_", "AWS_")) or k in
            ("RANK", "WORLD_SIZE", "LOCAL_RANK", "GROUP_RANK", "TRAINING_JOB_NAME", "FMLAB_CHECKPOINT_DIR")}
    info["argv"] = sys.argv[1:]
    ckpt = os.environ.get("FMLAB_CHECKPOINT_DIR")
    if ckpt:
        info["checkpoints_found"] = sorted(os.listdir(ckpt))
        open(os.path.join(ckpt, f"step-2-rank{rank}.txt"), "w").write("2")
        watched = args.get("--watch")
        deadline = time.time() + 10
        while watched and not os.path.exists(os.path.join(watched, f"step-2-rank{rank}.txt")) and time.time() < deadline:
            time.sleep(0.2)
        info["synced_while_running"] = bool(watched) and os.path.exists(os.path.join(watched, f"step-2-rank{rank}.txt"))
    print("step=1 loss=2.50 lr=1.0e-03")
    print("step=2 loss=2.25 lr=1.0e-03 AKIAIOSFODNN7EXAMPLE aws_secret_access_key=wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEY")
    time.sleep(float(args.get("--sleep", 0)))
    if rank == "0":
        open(os.path.join(os.environ["SM_MODEL_DIR"], "weights.txt"), "w").write("trained")
    info["start"], info["end"] = start, time.time()
    open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], f"probe-{rank}.json"), "w").write(json.dumps(info))
    if args.get("--times"):
        open(os.path.join(args["--times"], f"{os.environ['TRAINING_JOB_NAME']}-{rank}.json"), "w").write(
            json.dumps([start, time.time()]))
    if args.get("--fail") == "1":
        raise SystemExit("boom: the probe fails on purpose")
''')


@pytest.fixture
def local_jobs(local_env):
    """A fresh local bucket and sandbox with 2 CPU slots, and the probe script; returns the probe's path."""
    probe = local_env / "probe.py"
    probe.write_text(PROBE)
    return probe


def probe_records(job) -> dict[str, dict]:
    """rank -> the probe's record, read from each host's output data folder in the job's sandbox folder."""
    folder = sandbox.job_dir(job.name) / "hosts"
    return {p.stem.removeprefix("probe-"): json.loads(p.read_text())
            for p in sorted(folder.glob("algo-*/output/data/probe-*.json"))}


@pytest.mark.distributed
def test_two_instances_one_process_each_rendezvous_as_algo_1_and_algo_2(local_jobs):
    spec = JobSpec("probe-2x1", entry_point=str(local_jobs), instance_type="ml.p4d.24xlarge", instance_count=2,
                   distribution="torchrun", processes_per_host=1, hyperparameters={"lr": 0.001})
    job = jobs.launch(spec, backend="local", quiet=True)
    d = job.wait(timeout=120)
    assert d["TrainingJobStatus"] == "Completed", d.get("FailureReason")
    records = probe_records(job)
    assert sorted(records) == ["0", "1"]
    for rank, rec in records.items():
        host_rank = int(rec["SM_CURRENT_HOST_RANK"])
        assert rec["SM_CURRENT_HOST"] == f"algo-{host_rank + 1}"
        assert rec["GROUP_RANK"] == str(host_rank) == rank  # algo-1 is node 0, as on SageMaker
        assert rec["WORLD_SIZE"] == "2"
        assert json.loads(rec["SM_HOSTS"]) == ["algo-1", "algo-2"] and rec["SM_HOST_COUNT"] == "2"
        assert rec["SM_MASTER_ADDR"] == "algo-1" and rec["SM_MASTER_PORT"] == "7777"
        assert rec["SM_CURRENT_INSTANCE_TYPE"] == "ml.p4d.24xlarge"
        assert json.loads(rec["SM_HPS"]) == {"lr": 0.001} and rec["SM_HP_LR"] == "0.001"
        assert rec["argv"] == ["--lr", "0.001"]
        assert rec["TRAINING_JOB_NAME"] == job.name
        assert json.loads(rec["SM_TRAINING_ENV"])["hosts"] == ["algo-1", "algo-2"]
        for var in ("SM_MODEL_DIR", "SM_OUTPUT_DATA_DIR", "SM_INPUT_CONFIG_DIR", "SM_CHANNEL_CODE"):
            assert f"hosts/algo-{host_rank + 1}/" in rec[var] + "/"
    config = sandbox.job_dir(job.name) / "hosts" / "algo-2" / "input" / "config"
    assert json.loads((config / "resourceconfig.json").read_text())["current_host"] == "algo-2"
    assert json.loads((config / "hyperparameters.json").read_text()) == {"lr": "0.001"}
    model = job.download("model", local_jobs.parent / "model")
    assert (model / "weights.txt").read_text() == "trained"


@pytest.mark.distributed
def test_one_instance_two_processes_capped_from_eight_with_a_notice(local_jobs):
    # ml.p4d.24xlarge has 8 GPUs, so the request asks for 8 processes per host (SageMaker's default); this
    # machine has 2 slots, so the sandbox runs a 1-instance x 2-process job and says so.
    spec = JobSpec("probe-1x2", entry_point=str(local_jobs), instance_type="ml.p4d.24xlarge", distribution="torchrun")
    job = jobs.launch(spec, backend="local", quiet=True)
    d = job.wait(timeout=120)
    assert d["TrainingJobStatus"] == "Completed", d.get("FailureReason")
    assert d["Sandbox"]["ProcessesPerHost"] == 2 and d["Sandbox"]["Slots"] == 2
    assert any("asks for 1 x 8 processes" in n for n in d["Sandbox"]["Notices"])
    records = probe_records(job)
    assert {r["LOCAL_RANK"] for r in records.values()} == {"0", "1"}
    assert {r["SM_CURRENT_HOST"] for r in records.values()} == {"algo-1"}
    assert all(r["WORLD_SIZE"] == "2" for r in records.values())
    assert json.loads(records["0"]["SM_DISTRIBUTED_CONFIG"]) == {"process_count_per_node": None}


def test_failing_script_ends_failed_with_its_error_and_log_tail(local_jobs):
    job = jobs.launch(JobSpec("probe-fail", entry_point=str(local_jobs), hyperparameters={"fail": 1}),
                      backend="local", quiet=True)
    d = job.wait(timeout=60)
    assert d["TrainingJobStatus"] == "Failed" and d["SecondaryStatus"] == "Failed"
    assert d["FailureReason"].startswith("AlgorithmError:")
    assert "boom: the probe fails on purpose" in d["FailureReason"]
    assert "step=2 loss=2.25" in d["FailureReason"]  # the tail of its log
    assert "model" not in job.artifacts()  # a failed job leaves no model.tar.gz


def test_logs_metrics_and_credentials_redacted(local_jobs, monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "notarealsecretbutlongenough1234567890abcd")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "FwoGZXIvYXdzEXAMPLESESSIONTOKEN1234567890")
    job = jobs.launch(JobSpec("probe-logs", entry_point=str(local_jobs)), backend="local", quiet=True)
    assert job.wait(timeout=60)["TrainingJobStatus"] == "Completed"
    log = job.logs()
    assert "AKIAIOSFODNN7EXAMPLE" not in log and "wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEY" not in log
    assert "****" in log
    table = job.metrics()
    assert list(table["step"]) == [1, 2] and list(table["loss"]) == [2.5, 2.25]
    env = probe_records(job)["0"]
    assert not any(k in env for k in ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"))  # never handed to the job


def test_checkpoints_copied_down_before_start_and_up_while_running(local_jobs):
    uri = "s3://fmlab-local/fmlab/checkpoints/probe"
    folder = storage.to_local_path(uri)
    folder.mkdir(parents=True)
    (folder / "step-1.txt").write_text("1")  # a previous attempt's checkpoint
    job = jobs.launch(JobSpec("probe-ckpt", entry_point=str(local_jobs), checkpoint_s3_uri=uri,
                              hyperparameters={"watch": str(folder)}), backend="local", quiet=True)
    assert job.wait(timeout=60)["TrainingJobStatus"] == "Completed"
    rec = probe_records(job)["0"]
    assert rec["checkpoints_found"] == ["step-1.txt"]
    assert rec["synced_while_running"] is True
    assert sorted(p.name for p in folder.iterdir()) == ["step-1.txt", "step-2-rank0.txt"]


def test_four_jobs_all_finish_and_never_exceed_the_slots(local_jobs, tmp_path):
    times = tmp_path / "times"
    times.mkdir()
    base = JobSpec("probe-q", entry_point=str(local_jobs), hyperparameters={"sleep": 1.0, "times": str(times)})
    started = time.monotonic()
    launched = [jobs.launch(s, backend="local", quiet=True) for s in jobs.sweep(base, "lr", [1, 2, 3, 4])]
    results = jobs.wait_all(launched, timeout=120, progress=False)
    assert [d["TrainingJobStatus"] for d in results] == ["Completed"] * 4
    spans = [json.loads(p.read_text()) for p in times.glob("*.json")]
    assert len(spans) == 4
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans], key=lambda t: (t[0], t[1]))
    running, peak = 0, 0
    for _, step in events:
        running += step
        peak = max(peak, running)
    assert peak <= 2  # FMLAB_SANDBOX_CPUS=2
    print(f"4 queued probe jobs: {time.monotonic() - started:.1f} s wall, peak {peak} at once")


def test_cleanup_stops_running_local_jobs(local_jobs, capsys):
    job = jobs.launch(JobSpec("probe-stop", entry_point=str(local_jobs), hyperparameters={"sleep": 60}),
                      backend="local", quiet=True)
    deadline = time.monotonic() + 30
    while job.describe()["SecondaryStatus"] != "Training" and time.monotonic() < deadline:
        time.sleep(0.2)
    actions = jobs.cleanup("local")
    assert actions == [f"stopped {job.name} (local sandbox)"]
    assert job.describe()["TrainingJobStatus"] == "Stopped"
    assert "stopped" in capsys.readouterr().out


def test_cleanup_leaves_a_job_another_live_process_launched_and_the_command_stops_it(local_jobs, monkeypatch, capsys):
    # make course runs two notebooks at a time: lab 03's cleanup once stopped lab 07's twin job (2026-11-27)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        monkeypatch.setattr(sandbox.service, "_launcher_pid", lambda: other.pid)
        job = jobs.launch(JobSpec("probe-other", entry_point=str(local_jobs), hyperparameters={"sleep": 60}),
                          backend="local", quiet=True)
        assert jobs.cleanup("local") == [] and job.describe()["TrainingJobStatus"] == "InProgress"
        assert f"left {job.name} running: another live process (pid {other.pid})" in capsys.readouterr().out
        assert jobs.cleanup("local", every_launcher=True) == [f"stopped {job.name} (local sandbox)"]
        assert job.describe()["TrainingJobStatus"] == "Stopped"
    finally:
        other.kill()
        other.wait()


def test_duplicate_name_and_missing_drivers_are_refused(local_jobs):
    job = jobs.launch(JobSpec("probe-dup", entry_point=str(local_jobs)), backend="local", quiet=True)
    job.wait(timeout=60)
    with pytest.raises(sandbox.SandboxError, match="ResourceInUse"):
        sandbox.submit(job.request)
    bare = {**job.request, "TrainingJobName": "fmlab-no-drivers",
            "InputDataConfig": [c for c in job.request["InputDataConfig"] if c["ChannelName"] != "sm_drivers"]}
    with pytest.raises(sandbox.SandboxError, match="sm_drivers"):
        sandbox.submit(bare)


def test_max_run_time_stops_the_job_as_sagemaker_does(local_jobs):
    job = jobs.launch(JobSpec("probe-slow", entry_point=str(local_jobs), max_run_seconds=2,
                              hyperparameters={"sleep": 60}), backend="local", quiet=True)
    d = job.wait(timeout=60)
    assert d["TrainingJobStatus"] == "Stopped" and d["SecondaryStatus"] == "MaxRuntimeExceeded"
    assert "MaxRuntimeInSeconds reached" in job.logs()


KILLED_ONCE = textwrap.dedent('''
    """Dies by SIGKILL (the OOM killer, a crash) unless its checkpoint folder shows an earlier attempt."""
    import os, signal
    ckpt = os.environ["FMLAB_CHECKPOINT_DIR"]
    seen = sorted(os.listdir(ckpt))
    print("step=1 loss=2.50 lr=1.0e-03 attempt_saw=" + ",".join(seen), flush=True)
    if "attempt-1.txt" not in seen:
        open(os.path.join(ckpt, "attempt-1.txt"), "w").write("1")
        import time; time.sleep(2.5)  # long enough for the supervisor to sync the file to the checkpoint URI
        if os.environ.get("LOSE_HOST"):  # what fmlab.train's --fault lose-host does: the instance is gone
            open(os.environ["FMLAB_SANDBOX_LOST_MARKER"], "w").write("lost by the test")
        os.kill(os.getpid(), signal.SIGKILL)
    open(os.path.join(os.environ["SM_MODEL_DIR"], "weights.txt"), "w").write("trained on the retry")
''')


def test_a_killed_process_is_an_algorithm_error_and_not_retried_as_on_sagemaker(local_env):
    # Corrected semantics (issue 25): SageMaker's RetryStrategy retries InternalServerError only; a process the
    # OOM killer (or anything) SIGKILLs is the script failing, an AlgorithmError, even with retries left.
    script = local_env / "killed_once.py"
    script.write_text(KILLED_ONCE)
    d = jobs.launch(JobSpec("killed-not-retried", entry_point=str(script), max_retry_attempts=2,
                            checkpoint_s3_uri="s3://fmlab-local/fmlab/checkpoints/killed"),
                    backend="local", quiet=True).wait(timeout=60)
    assert d["TrainingJobStatus"] == "Failed" and d["FailureReason"].startswith("AlgorithmError:")
    assert "SIGKILL" in d["FailureReason"] and "API reference, RetryStrategy" in d["FailureReason"]
    assert d["Sandbox"]["Attempts"] == 1
    assert "Restarting" not in [t["Status"] for t in d["SecondaryStatusTransitions"]]


def test_a_lost_instance_is_retried_replaced_with_its_checkpoints_as_sagemaker_does(local_env):
    script = local_env / "lost_once.py"
    script.write_text(KILLED_ONCE)
    uri = "s3://fmlab-local/fmlab/checkpoints/retry"
    lost = {"LOSE_HOST": "1"}
    once = jobs.launch(JobSpec("lost-no-retry", entry_point=str(script), checkpoint_s3_uri=uri + "-none",
                               environment=lost), backend="local", quiet=True).wait(timeout=60)
    assert once["TrainingJobStatus"] == "Failed" and once["FailureReason"].startswith("InternalServerError:")
    job = jobs.launch(JobSpec("lost-retried", entry_point=str(script), checkpoint_s3_uri=uri, max_retry_attempts=2,
                              environment=lost), backend="local", quiet=True)
    d = job.wait(timeout=90)
    assert d["TrainingJobStatus"] == "Completed", d.get("FailureReason")
    assert d["Sandbox"]["Attempts"] == 2
    restarts = [t for t in d["SecondaryStatusTransitions"] if t["Status"] == "Restarting"]
    assert len(restarts) == 1 and "algo-1 replaced" in restarts[0]["StatusMessage"]
    assert restarts[0]["StatusMessage"].startswith("InternalServerError: instance algo-1 was lost")
    assert "Last lines" not in restarts[0]["StatusMessage"]  # the cause, not the log's tail
    assert "attempt_saw=attempt-1.txt" in job.logs()  # the retry started from the checkpoints in S3
    assert "model" in job.artifacts()


def test_checkpoint_upload_survives_folders_deleted_while_it_walks(tmp_path):
    """The script rotates old checkpoints out while the sandbox copies them up (the race that once failed notebook
    08 in CI with a FileNotFoundError from Path.rglob): the upload skips what vanished and copies the rest."""
    import shutil
    import threading

    from fmlab.sandbox.host import sync_folder

    source, target = tmp_path / "checkpoints", tmp_path / "bucket"
    stop = threading.Event()

    def rotate():
        i = 0
        while not stop.is_set():
            step = source / f"step_{i:05d}" / "shards"
            step.mkdir(parents=True)
            (step / "rank0.pt").write_bytes(b"x" * 64)
            shutil.rmtree(source / f"step_{i - 1:05d}", ignore_errors=True)
            i += 1

    (source / "keep").mkdir(parents=True)
    (source / "keep" / "latest").write_text("1")
    writer = threading.Thread(target=rotate)
    writer.start()
    try:
        seen: dict = {}
        for _ in range(300):
            sync_folder(source, target, seen)
    finally:
        stop.set()
        writer.join()
    assert (target / "keep" / "latest").read_text() == "1"


def test_checkpoint_sync_mirrors_deletions_so_the_prefix_holds_what_a_restart_is_costed_for(tmp_path):
    """SageMaker deletes in S3 what the script deletes in /opt/ml/checkpoints (fmlab.sandbox.host
    CHECKPOINT_SYNC_SOURCE). The course's Checkpointer saves 8 times, keeps the last KEEP_CHECKPOINTS, and the
    sandbox's sync runs after every save and once while each save is still staged (`.incomplete-step_N`, which
    S3 cannot rename). The local bucket then holds the kept checkpoints and nothing else: exactly what module 8's
    restart arithmetic (fmlab.course.figures.checkpoint_costs) has every node download."""
    import torch

    from fmlab.checkpoint import Checkpointer
    from fmlab.course import figures
    from fmlab.plan import reliability
    from fmlab.sandbox.host import sync_folder

    folder, bucket, seen = tmp_path / "opt-ml-checkpoints", tmp_path / "bucket", {}
    model = torch.nn.Linear(8, 8)
    optimizer = torch.optim.AdamW(model.parameters())
    ckpt = Checkpointer(folder, keep_last=figures.KEEP_CHECKPOINTS)
    commit = ckpt._commit

    def commit_after_an_upload(step, tmp, group=None):
        assert sync_folder(folder, bucket, seen) > 0  # the staged save reaches S3 before its rename
        assert any(p.name.startswith(".incomplete") for p in bucket.iterdir())
        return commit(step, tmp, group)

    ckpt._commit = commit_after_an_upload
    for step in range(1, 9):
        model(torch.randn(2, 8)).sum().backward()
        optimizer.step()
        ckpt.save(step, model, optimizer)
        sync_folder(folder, bucket, seen)

    def tree(root):
        return {p.relative_to(root).as_posix(): p.stat().st_size for p in root.rglob("*") if p.is_file()}

    assert tree(bucket) == tree(folder)  # no staging copy, no pruned checkpoint left behind
    kept = sorted(p.name for p in bucket.iterdir())
    assert len(kept) == figures.KEEP_CHECKPOINTS and kept[-1].endswith("8")
    one = sum(tree(bucket / kept[-1]).values())
    assert sum(tree(bucket).values()) == pytest.approx(figures.KEEP_CHECKPOINTS * one, rel=0.01)
    c = figures.checkpoint_costs()  # the same count of checkpoints, each the 30B run's training state
    restart_h = reliability.transfer_hours(len(kept) * c["state_gb"], figures.S3_GB_PER_S_PER_NODE)
    assert c["restart_s"] == pytest.approx(restart_h * 3600)
    # a fresh job's copy down (an empty `seen`) copies it all and deletes nothing
    down = tmp_path / "new-instance"
    sync_folder(bucket, down, {})
    assert tree(down) == tree(bucket)
