"""fmlab.hyperpod: the sbatch script, the local Slurm set-up and its refusals, a real job on the local Slurm.

The tests marked `distributed` submit jobs to this machine's Slurm (requirements/slurm.sh starts it where it can:
root with apt); where there is none they skip, saying why (under CI, where the set-up runs as root, they run).
"""

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from fmlab.environment import ROOT
from fmlab.hyperpod import slurm, sources


def spec(tmp_path, **kw):
    return slurm.SlurmTrainSpec(tmp_path / "job", train_args=["--model", "tiny", "--max-steps", "4"], **kw)


def test_the_script_runs_one_torchrun_per_node_and_can_be_requeued(tmp_path):
    text = slurm.batch_script(spec(tmp_path, nodes=2, processes_per_node=8), port=29500)
    assert text.startswith("#!/bin/bash\n")
    for line in ("#SBATCH --nodes=2", "#SBATCH --ntasks-per-node=1", "#SBATCH --requeue", "#SBATCH --open-mode=append",
                 f"#SBATCH --output={tmp_path / 'job' / 'slurm-job.out'}"):
        assert line in text.splitlines()
    srun = [line for line in text.splitlines() if line.startswith("srun ")]
    assert len(srun) == 1
    for part in ("-m torch.distributed.run", "--nnodes $SLURM_JOB_NUM_NODES", "--nproc-per-node 8",
                 "--rdzv-endpoint $HEAD_NODE:29500", "--rdzv-id $SLURM_JOB_ID", "--model tiny --max-steps 4",
                 f"--checkpoint-dir {tmp_path / 'job' / 'checkpoints'}"):
        assert part in srun[0]
    assert "--auto-resume" not in text  # plain Slurm would refuse HyperPod's flag
    hyperpod = slurm.batch_script(spec(tmp_path, hyperpod=True), port=29500)
    assert [ln for ln in hyperpod.splitlines() if ln.startswith("srun")][0].startswith("srun --auto-resume=1 ")


@pytest.mark.parametrize("kw, words", [(dict(nodes=0), "at least 1"), (dict(processes_per_node=0), "at least 1"),
                                       (dict(time_limit_minutes=0), "time_limit_minutes")])
def test_bad_specs_say_what_to_change(tmp_path, kw, words):
    with pytest.raises(ValueError, match=words):
        spec(tmp_path, **kw)


def test_no_slurm_on_the_path_is_a_reason_not_an_error(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    status = slurm.cluster_status()
    assert not status.available and "sinfo not found" in status.reason
    status = slurm.ensure_cluster()  # not even bash to run the set-up with
    assert not status.available and "sinfo not found" in status.reason and "could not run" in status.reason


def test_every_hyperpod_feature_has_its_aws_source_and_date():
    assert len(sources.HYPERPOD) >= 6
    for f in sources.HYPERPOD:
        assert "docs.aws.amazon.com" in f.source and f.read == "2026-11-24" and f.how and f.here
    assert any("--auto-resume=1" in f.how for f in sources.HYPERPOD)


TOOLS = ("bash", "uname", "id", "echo", "cat", "grep")


def test_the_set_up_says_why_not_and_succeeds_where_it_cannot_run():
    """Not root and no Slurm on the PATH: one line that says so, exit status 0 (make test goes on)."""
    with tempfile.TemporaryDirectory() as folder:  # not tmp_path: its parents are private to root
        _run_set_up_without_root(Path(folder), ROOT / "requirements" / "slurm.sh")


def test_the_set_up_runs_unprivileged_from_a_clone_in_a_private_folder(tmp_path):
    """A clone inside a folder of mode 0700 (what `mktemp -d` or a home folder gives): uid 65534 cannot read the
    script where it lies, so the test runs a world-readable copy of it, and passes wherever the clone lives."""
    clone = tmp_path / "private"
    (clone / "requirements").mkdir(parents=True)
    script = clone / "requirements" / "slurm.sh"
    shutil.copyfile(ROOT / "requirements" / "slurm.sh", script)
    clone.chmod(0o700)
    with tempfile.TemporaryDirectory() as folder:
        _run_set_up_without_root(Path(folder), script)


def _run_set_up_without_root(tmp_path, script):
    """Run `script` as an unprivileged user (uid 65534 when the tests run as root) with only TOOLS on the PATH.
    That user may not be able to read the clone (a private folder above it), so it runs a copy of the script,
    byte for byte, in the world-readable `tmp_path`."""
    tmp_path.chmod(0o755)
    for tool in TOOLS:
        (tmp_path / tool).symlink_to(shutil.which(tool))
    readable = tmp_path / "slurm.sh"
    shutil.copyfile(script, readable)
    readable.chmod(0o644)
    assert readable.read_bytes() == (ROOT / "requirements" / "slurm.sh").read_bytes()
    env = {"PATH": str(tmp_path), "HOME": str(tmp_path)}
    setpriv = shutil.which("setpriv")
    if os.geteuid() == 0 and not setpriv:
        pytest.skip("setpriv is needed to run the set-up as an unprivileged user")
    user = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"] if os.geteuid() == 0 else []
    done = subprocess.run(user + [str(tmp_path / "bash"), str(readable)], env=env, capture_output=True, text=True,
                          timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ("slurm set-up: not available: starting slurmctld/slurmd needs root "
                                   "(run this script as root, or sudo)")


def _need_slurm():
    status = slurm.ensure_cluster()
    if not status.available:
        if os.environ.get("CI", "").lower() in ("true", "1", "yes"):
            pytest.fail(f"Slurm must run under CI (requirements/slurm.sh as root): {status.reason}", pytrace=False)
        pytest.skip(f"no local Slurm: {status.reason}")


@pytest.mark.distributed
def test_the_set_up_is_idempotent_when_slurm_runs():
    _need_slurm()
    done = subprocess.run(["bash", str(ROOT / "requirements" / "slurm.sh")], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0 and done.stdout.startswith("slurm set-up: running")
    assert set(slurm.node_states()) == {"node-1", "node-2"}  # two nodes on one host


def test_the_fault_line_names_the_node_it_struck():
    out = "job 3 start 0 on node-[1-2]\nfault: rank 1 on node-2 killed (SIGKILL) at step 7 (attempt 0, --fault kill)\n"
    assert slurm.fault_node(out) == "node-2"
    assert slurm.fault_node("fault: rank 1 killed (SIGKILL) at step 7") is None  # not under Slurm: no node


@pytest.mark.distributed
def test_replacing_a_node_that_is_not_there_says_which_are(tmp_path):
    _need_slurm()
    with pytest.raises(slurm.SlurmError, match="no node 'node-9'.*node-1, node-2"):
        slurm.replace_node("node-9")


@pytest.mark.distributed
def test_a_replaced_node_is_out_while_replaced_and_takes_jobs_after():
    _need_slurm()
    while_out = slurm.replace_node("node-2")
    assert "node-2 fail Action:Replace" in while_out
    assert slurm.node_states()["node-2"] == "idle"


@pytest.mark.distributed
def test_a_job_that_overruns_is_cancelled_and_the_error_says_so(tmp_path):
    _need_slurm()
    slow = slurm.SlurmTrainSpec(tmp_path / "slow", job_name="fmlab-test-slow")
    script = "#!/bin/bash\n#SBATCH --output=" + str(slow.output_file) + "\nsleep 60\n"
    with pytest.raises(slurm.SlurmError, match="did not finish in 3 s"):
        slurm.run_with_auto_resume(slow, timeout=3, script=script)
    jobs = subprocess.run(["squeue", "-h", "-n", "fmlab-test-slow", "-t", "PENDING,RUNNING"], capture_output=True,
                          text=True, timeout=20).stdout
    assert jobs.strip() == ""  # cancelled, not left behind


@pytest.mark.distributed
def test_a_clean_run_completes_without_a_requeue(tmp_path):
    _need_slurm()
    from fmlab.data import course_dataset

    data = course_dataset(seq_len=128, vocab_size=512)
    run = slurm.run_with_auto_resume(slurm.SlurmTrainSpec(tmp_path / "clean", job_name="fmlab-test-clean", train_args=[
        "--model", "tiny", "--data", str(data), "--max-steps", "4", "--micro-batch", "2", "--log-every", "2",
        "--tensorboard", "false"]), timeout=180)
    assert run.state == "COMPLETED" and run.restarts == 0 and run.resumed_at == [] and not run.faults
    assert [line.split()[0] for line in run.output.splitlines() if line.startswith("step=")] == ["step=2", "step=4"]
    assert "fmlab-te" in run.squeue[0]  # squeue showed it running


def test_the_cluster_is_held_by_one_run_at_a_time_across_processes(tmp_path, monkeypatch):
    """A node replaced under another run's job would kill it: runs and replacements take the cluster in turn."""
    import sys
    import time

    lock = tmp_path / "cluster.lock"
    monkeypatch.setattr(slurm, "CLUSTER_LOCK", lock)
    waiter = ("import sys, time; from pathlib import Path; from fmlab.hyperpod import slurm\n"
              f"slurm.CLUSTER_LOCK = Path({str(lock)!r}); start = time.monotonic()\n"
              "with slurm.cluster_to_itself(): print(round(time.monotonic() - start, 2))")
    with slurm.cluster_to_itself():
        with slurm.cluster_to_itself():  # re-entrant: a run replaces nodes while it holds the cluster
            other = subprocess.Popen([sys.executable, "-c", waiter], stdout=subprocess.PIPE, text=True)
            time.sleep(1.5)
            assert other.poll() is None  # still waiting for the cluster
    waited = float(other.communicate(timeout=60)[0])
    assert waited >= 1.0
