"""Module 8's failure drills, for real, on 2 gloo processes under torchrun (fmlab.train.faults). A rank SIGKILLed
mid-run (torchrun restarts the world, which resumes exactly) and one SIGKILLed inside a save (its `.incomplete-`
save never picked) run in notebook 08, whose test asserts them; here:

- a hung rank: the other fails after --collective-timeout (5 s here) with an error naming the timeout, and the
  whole torchrun ends non-zero within seconds, not never;
- a 2-process checkpoint resumed on 1 process with the same global batch (1 x 8 against 2 x 4), and a 1-process
  one on 2: the loss continues from the uninterrupted 2-process run's values to float32 summation-order noise
  (rel 1e-5; about 2e-7 observed).

and, in this process, that fault settings which could never fire are refused, that a fault fires only on its rank
and attempt, that kill-save strikes between the shards and the commit, and the --collective-timeout range.

Run: .venv/bin/pytest tests/train/test_faults.py     (about 45 s on 2 cores; -m "not distributed": 2 s)
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch.distributed.checkpoint as dcp
from torchrun_launch import ENTRY, torchrun

from fmlab.checkpoint import complete_checkpoints
from fmlab.cli import main as main_cli
from fmlab.data import course_dataset
from fmlab.parallel import ParallelConfig, PlanError, init_distributed
from fmlab.parallel.mesh import (
    CollectiveTimeout,
    collective_timeout_error,
    peer_lost,
    restart_attempt,
    set_collective_timeout,
)
from fmlab.train import TrainConfig, main, parse_config, train
from fmlab.train import faults as faults_module
from fmlab.train import loop as loop_module
from fmlab.train.config import TrainConfigError, check_collective_timeout, phase_timeouts
from fmlab.train.failure import write_failure_file
from fmlab.train.faults import Faults
from fmlab.train.log import read_metrics

STEPS = 8
COMMON = ["--max-steps", str(STEPS), "--warmup-steps", "2", "--tensorboard", "false", "--log-every", "1",
          "--checkpoint-every", "2", "--keep-checkpoints", str(STEPS)]
REL = 1e-5  # another world size sums the same float32 numbers in another order


def _losses(output_dir: Path) -> dict[int, float]:
    """step -> loss, the last record of each step (a restarted run logs the steps after its checkpoint again)."""
    return {r["step"]: r["loss"] for r in read_metrics(output_dir)}


@pytest.fixture(scope="module")
def dataset() -> str:
    return str(course_dataset(seq_len=128, vocab_size=512))


# ---------------------------------------------------------------- in this process


def test_fault_settings_that_could_never_fire_are_refused_with_the_fix():
    def faults(**kw):
        return Faults.from_config(TrainConfig(**{"max_steps": 8, **kw}), rank=1, world_size=2, env={})

    assert faults() == Faults.none() and not faults(fault="none", fault_step=3).armed
    with pytest.raises(TrainConfigError, match="--fault must be one of none, kill, hang, freeze, stall, skip, "
                                               "kill-save"):
        faults(fault="explode", fault_step=3)
    with pytest.raises(TrainConfigError, match="--fault-step must be a step of the run, 1..8"):
        faults(fault="kill", fault_step=9)
    with pytest.raises(TrainConfigError, match="--fault-rank 2 is not a rank of this world of 2 processes"):
        faults(fault="hang", fault_step=3, fault_rank=2)
    with pytest.raises(TrainConfigError, match="never fire: no checkpoint is saved at step 3"):
        faults(fault="kill-save", fault_step=3, checkpoint_dir="ck", checkpoint_every=2)
    with pytest.raises(TrainConfigError, match="--checkpoint-dir \\(none\\)"):
        faults(fault="kill-save", fault_step=8)
    assert faults(fault="kill-save", fault_step=8, checkpoint_dir="ck").armed is False  # rank 0 is struck, not 1
    assert faults(fault="kill-save", fault_step=8, fault_rank=1, checkpoint_dir="ck").armed  # the final save
    with pytest.raises(TrainConfigError, match="--fault-seconds must say how long the rank stalls"):
        faults(fault="stall", fault_step=1)
    with pytest.raises(TrainConfigError, match="needs plain DDP \\(--sharding none --tp 1\\), not --sharding full"):
        faults(fault="skip", fault_step=2, parallel=ParallelConfig(sharding="full"))


def test_a_fault_fires_only_on_its_rank_and_in_its_attempt():
    cfg = TrainConfig(fault="kill", fault_step=5, fault_rank=1)
    assert Faults.from_config(cfg, 1, 2, env={}).armed  # outside torchrun: attempt 0
    assert Faults.from_config(cfg, 1, 2, env={"TORCHELASTIC_RESTART_COUNT": "0"}).armed
    assert not Faults.from_config(cfg, 1, 2, env={"TORCHELASTIC_RESTART_COUNT": "1"}).armed  # the restart runs clean
    assert not Faults.from_config(cfg, 0, 2, env={}).armed
    cfg.fault_attempt = 1
    assert Faults.from_config(cfg, 1, 2, env={"TORCHELASTIC_RESTART_COUNT": "1"}).armed  # strike a restart too
    assert restart_attempt({"TORCHELASTIC_RESTART_COUNT": "3"}) == 3 and restart_attempt({}) == 0


def test_lose_host_leaves_the_sandboxs_lost_instance_mark_then_dies_by_sigkill(tmp_path):
    """--fault lose-host: the instance is lost. The process writes the mark the sandbox gave it (so the sandbox
    reports an InternalServerError, which RetryStrategy retries) and is SIGKILLed; a plain kill leaves no mark."""
    code = ("from fmlab.train.config import TrainConfig; from fmlab.train.faults import Faults; "
            "Faults.from_config(TrainConfig(fault='{kind}', fault_step=3, max_steps=5), 0, 1, env={{}})"
            ".before_step(3)")
    for kind, marked in (("lose-host", True), ("kill", False)):
        mark = tmp_path / f"lost-{kind}"
        env = {**os.environ, "FMLAB_SANDBOX_LOST_MARKER": str(mark)}
        done = subprocess.run([sys.executable, "-c", code.format(kind=kind)], env=env, capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == -signal.SIGKILL, done.stderr
        assert mark.exists() is marked


def test_kill_save_strikes_after_the_shards_are_written_and_before_the_commit(dataset, tmp_path, monkeypatch):
    """The SIGKILL is recorded instead of sent: what was on disk at that moment is what a killed save leaves."""
    seen = []
    saved_by_torch, async_by_torch = dcp.save, getattr(dcp, "async_save", None)

    def fake_kill(pid, sig):
        folders = sorted(p.name for p in (tmp_path / "ck").iterdir())
        partial = tmp_path / "ck" / ".incomplete-step_00000002"
        seen.append((sig, folders, sorted(p.name for p in partial.iterdir()) if partial.is_dir() else None))

    monkeypatch.setattr(faults_module.os, "kill", fake_kill)
    monkeypatch.setattr(dcp, "save", dcp.save)  # undone after the test whatever happens
    train(TrainConfig(data=dataset, max_steps=2, micro_batch=2, tensorboard=False, checkpoint_dir=str(tmp_path / "ck"),
                      checkpoint_every=2, fault="kill-save", fault_step=2))
    assert len(seen) == 1
    sig, folders, files = seen[0]
    assert sig == signal.SIGKILL and folders == [".incomplete-step_00000002", "fault-fired-kill-save-step2-rank0"]
    # not yet renamed, no step_2; the marker that keeps a restarted or retried run from striking again
    assert {".metadata", "__0_0.distcp"} <= set(files) and "COMPLETE" not in files
    assert [c.step for c in complete_checkpoints(tmp_path / "ck")] == [2]  # (the fake kill let it finish)
    assert dcp.save is saved_by_torch and getattr(dcp, "async_save", None) is async_by_torch  # disarmed


def test_kill_save_strikes_an_asynchronous_save_before_its_commit_can_begin(monkeypatch, tmp_path):
    """async_save's future (or response.upload_completion) is what a checkpointer waits on before committing."""
    from concurrent.futures import Future

    events = []
    written: Future = Future()
    monkeypatch.setattr(faults_module.os, "kill", lambda pid, sig: events.append(("kill", sig)))
    monkeypatch.setattr(dcp, "save", lambda *a, **k: None)
    monkeypatch.setattr(dcp, "async_save", lambda *a, **k: written)
    fault = Faults.from_config(TrainConfig(fault="kill-save", fault_step=4, checkpoint_dir=str(tmp_path / "ck"),
                                           checkpoint_every=2),
                               rank=0, world_size=1, env={})
    with fault.saving(2):
        assert dcp.async_save() is written  # another step's save: untouched
    with fault.saving(4):
        gate = dcp.async_save()
    assert gate is not written and not gate.done() and events == []
    gate.add_done_callback(lambda _: events.append("commit"))
    written.set_result("files")  # the background write ends ...
    assert events == [("kill", signal.SIGKILL), "commit"] and gate.result() == "files"  # ... the kill comes first
    assert fault.fired and dcp.async_save() is written  # the hook took itself out


def test_the_collective_timeouts_have_two_phases_a_range_and_name_themselves_in_the_error(capsys):
    cfg = TrainConfig()
    assert (cfg.init_timeout, cfg.collective_timeout) == (300, 80)  # torchtitan's 300 s; 80 s + torchrun's 30 s < 2 min
    assert phase_timeouts(cfg) == (300, 80) and phase_timeouts(TrainConfig(collective_timeout=900)) == (900, 900)
    hps = parse_config([], env={"SM_HPS": '{"init_timeout": 120, "collective_timeout": 30}'})  # SageMaker's way
    assert (hps.init_timeout, hps.collective_timeout) == (120, 30)
    assert parse_config(["--init-timeout", "60", "--collective_timeout", "20"], env={}).init_timeout == 60
    assert check_collective_timeout(5) == 5
    for bad in (0, 0.5, 86401, float("nan")):
        with pytest.raises(TrainConfigError, match="--collective-timeout .* is outside 1..86400 seconds"):
            check_collective_timeout(bad)
    with pytest.raises(TrainConfigError, match="--init-timeout 0 is outside .* through the first step"):
        TrainConfig(init_timeout=0).check()
    with pytest.raises(TrainConfigError, match="--trace-collectives must be 0"):
        TrainConfig(trace_collectives=-1).check()
    assert main(["--collective-timeout", "0"]) == 2  # refused before anything starts
    assert "is outside 1..86400 seconds" in capsys.readouterr().err
    with pytest.raises(PlanError, match="positive number of seconds"):
        init_distributed(ParallelConfig(), timeout=-1)
    error = collective_timeout_error(RuntimeError("[pair.cc:129] Timed out waiting 5000ms for recv operation"), 5)
    assert isinstance(error, CollectiveTimeout) and "(5 s, --collective-timeout)" in str(error)
    assert "Timed out waiting 5000ms" in str(error)
    named = collective_timeout_error(RuntimeError("Timed out"), 300, "--init-timeout", "rank 1 stopped: ...")
    assert "(300 s, --init-timeout): rank 1 stopped: ..." in str(named)
    assert named.summary == "rank 1 stopped: ... (collective timeout 300 s, --init-timeout)"
    assert collective_timeout_error(RuntimeError("Connection closed by peer"), 5) is None
    assert peer_lost(RuntimeError("Read error [127.0.0.1]:1: Connection reset by peer")) and not peer_lost(error)
    assert collective_timeout_error(ValueError("timeout"), 5) is None
    assert set_collective_timeout(3) == 0  # no process group: nothing to change


def test_the_failure_file_is_written_once_per_host_and_only_inside_a_job(tmp_path):
    path = tmp_path / "output" / "failure"
    assert write_failure_file("rank 1 stopped", {"SM_OUTPUT_FAILURE": str(path)}) == str(path)
    assert write_failure_file("rank 0 second", {"SM_OUTPUT_FAILURE": str(path)}) == str(path)
    assert path.read_text() == "rank 1 stopped\n"  # the first rank's words stay
    assert write_failure_file("anything", {}) == ""  # not in a job: nothing written


def test_a_dead_peer_is_named_in_the_jobs_failure_file_and_its_error_raised_as_it_came(dataset, tmp_path, monkeypatch):
    """A survivor whose collective fails because a peer's connection closed leaves the verdict as the job's
    FailureReason. (Under torchrun the survivor races the agent, which stops it within 0.1 s of the death, so the
    real drill cannot be relied on to get there: here the loop raises the backend's error itself.)"""
    failure = tmp_path / "output" / "failure"
    monkeypatch.setenv("SM_OUTPUT_FAILURE", str(failure))

    def peer_closed(run, started):
        raise RuntimeError("[/x/gloo/transport/tcp/pair.cc:553] Connection closed by peer [127.0.0.1]:5539")

    monkeypatch.setattr(loop_module, "_loop", peer_closed)
    with pytest.raises(RuntimeError, match="Connection closed by peer"):  # the backend's own error, unchanged
        train(TrainConfig(model="tiny", data=dataset, max_steps=2, output_dir=str(tmp_path / "out")))
    assert failure.read_text() == "a collective failed because a peer process closed its connection: it died\n"


# ---------------------------------------------------------------- two gloo processes under torchrun


@pytest.fixture(scope="module")
def reference(dataset, tmp_path_factory) -> dict:
    """The uninterrupted run: 2 processes x micro-batch 4, a checkpoint every 2 steps."""
    out = tmp_path_factory.mktemp("reference")
    run = torchrun(2, ENTRY, "--data", dataset, *COMMON, "--micro-batch", "4", "--checkpoint-dir", str(out / "ck"),
                    "--output-dir", str(out / "log"), cwd=out)
    assert run.returncode == 0, run.text[-3000:]
    losses = _losses(out / "log")
    assert sorted(losses) == list(range(1, STEPS + 1))
    return {"losses": losses, "checkpoints": out / "ck"}


# A rank killed mid-run, and one killed inside a save, restarted and resumed exactly: notebook 08 runs both drills
# and tests/train/test_notebooks_module08.py asserts what they logged and left on disk (the same drills ran here too
# until 2026-11-28: one run of each is enough).


@pytest.mark.distributed
def test_a_hung_peer_fails_the_run_within_the_collective_timeout(dataset, tmp_path):
    timeout = 5
    run = torchrun(2, ENTRY, "--data", dataset, *COMMON, "--micro-batch", "4", "--collective-timeout", str(timeout),
                    "--fault", "hang", "--fault-step", "3", "--fault-rank", "1", cwd=tmp_path, timeout=60)
    assert run.returncode != 0
    hung_at, _ = run.first("fault: rank 1 hangs")
    failed_at, error = run.first("error: a collective waited longer than the collective timeout")
    assert f"({timeout} s, --collective-timeout)" in error and "Timed out waiting 5000ms" in error
    assert "rank 1 stopped at step 3: never entered collective #" in error and "that rank 0 waited in" in error
    detected = failed_at - hung_at
    print(f"hung peer detected after {detected:.2f} s (--collective-timeout {timeout}); torchrun ended after "
          f"{run.seconds:.1f} s with exit status {run.returncode}")
    assert timeout - 0.5 < detected < timeout + 10  # the timeout, the traces gathered (1 s), a loaded machine
    assert run.seconds < 45


@pytest.mark.distributed
def test_a_frozen_rank_is_named_with_its_collective_and_step_in_the_error_the_trace_and_the_command(
        dataset, tmp_path, capsys):
    """SIGSTOP, as a host that stopped scheduling the process: the survivor's error names rank 1, the collective
    and the step; its trace is on disk, and `fmlab hangs` reads the same verdict from it. With the default
    timeouts (--init-timeout 300, --collective-timeout 80) the same drill named rank 1 85.1 s after the freeze
    (measured once, 2 cores; too slow for the suite); here the training phase's timeout is 3 s."""
    run = torchrun(2, ENTRY, "--data", dataset, *COMMON, "--micro-batch", "4", "--init-timeout", "30",
                    "--collective-timeout", "3", "--output-dir", str(tmp_path / "out"), "--fault", "freeze",
                    "--fault-step", "4", "--fault-rank", "1", cwd=tmp_path, timeout=90, until="error:")
    frozen_at, _ = run.first("fault: rank 1 freezes (SIGSTOP) at step 4")
    failed_at, error = run.first("error: a collective waited longer than the collective timeout (3 s, "
                                 "--collective-timeout): rank 1 stopped at step 4: never entered collective #")
    assert "that rank 0 waited in; it left no trace" in error
    assert 2.5 < failed_at - frozen_at < 3 + 10, f"named {failed_at - frozen_at:.2f} s after the freeze"
    assert "note: collective timeout 30 s -> 3 s after the first step" in run.text
    traces = tmp_path / "out" / "collective-traces"
    assert [p.name for p in traces.iterdir()] == ["rank-0.json"]  # the frozen rank wrote none
    capsys.readouterr()
    assert main_cli(["hangs", str(traces)]) == 0
    assert capsys.readouterr().out.splitlines()[0] in error


@pytest.mark.distributed
def test_a_slow_first_step_is_covered_by_the_long_timeout_and_the_same_stall_later_is_not(dataset, tmp_path):
    """A rank that works alone 5 s (a large first forward, a compile) in step 1 is inside --init-timeout (30 s);
    the same 5 s in step 3 is more than --collective-timeout (2 s), and the run fails naming it."""
    args = ["--data", dataset, *COMMON, "--micro-batch", "4", "--init-timeout", "30", "--collective-timeout", "2",
            "--fault", "stall", "--fault-seconds", "5", "--fault-rank", "1"]
    first = torchrun(2, ENTRY, *args, "--fault-step", "1", cwd=tmp_path, timeout=90)
    assert first.returncode == 0, first.text[-3000:]
    assert "fault: rank 1 stalls 5 s at step 1" in first.text
    later = torchrun(2, ENTRY, *args, "--fault-step", "3", cwd=tmp_path, timeout=90)
    assert later.returncode != 0
    _, error = later.first("error: a collective waited longer than the collective timeout (2 s, --collective-timeout)")
    assert "rank 1 stopped at step 3: never entered collective #" in error


@pytest.mark.distributed
def test_a_checkpoint_resumes_on_another_world_size_and_the_loss_continues(reference, dataset, tmp_path):
    whole = reference["losses"]
    tiny = dict(data=dataset, max_steps=STEPS, warmup_steps=2, tensorboard=False, log_every=1)

    # 2 processes x 4 -> 1 process x 8: the same global batches, read from the same global position
    with pytest.warns(UserWarning, match="saved by 2 processes and is loaded by 1"):
        one = train(TrainConfig(**tiny, micro_batch=8, resume=str(reference["checkpoints"] / "step_00000004")))
    assert one.start_step == 4 and sorted(one.losses) == [5, 6, 7, 8]
    for step, loss in one.losses.items():
        assert loss == pytest.approx(whole[step], rel=REL), step

    # 1 process x 8 -> 2 processes x 4
    single = train(TrainConfig(**tiny, micro_batch=8, checkpoint_dir=str(tmp_path / "ck1"), checkpoint_every=4,
                               stop_after=4))
    for step, loss in single.losses.items():
        assert loss == pytest.approx(whole[step], rel=REL), step
    run = torchrun(2, ENTRY, "--data", dataset, *COMMON, "--micro-batch", "4", "--resume",
                    str(tmp_path / "ck1" / "step_00000004"), "--output-dir", str(tmp_path / "log"), cwd=tmp_path)
    assert run.returncode == 0, run.text[-3000:]
    assert "saved by 1 processes and is loaded by 2" in run.text
    resumed = _losses(tmp_path / "log")
    assert sorted(resumed) == [5, 6, 7, 8]
    for step, loss in resumed.items():
        assert loss == pytest.approx(whole[step], rel=REL), step
    print("largest relative difference from the 2-process run:",
          max(abs(x - whole[s]) / whole[s] for losses in (one.losses, resumed) for s, x in losses.items()))


def test_a_fault_fires_once_per_drill_even_after_a_job_retry(tmp_path):
    """A SageMaker retry starts torchrun afresh (restart count 0) with the checkpoint folder copied back: the marker
    the fault left there keeps the retried job from striking again."""
    cfg = TrainConfig(fault="kill", fault_step=3, checkpoint_dir=str(tmp_path), checkpoint_every=2)
    first = Faults.from_config(cfg, rank=0, world_size=1, env={})
    assert first.armed
    first.marker.write_text("kill at step 3 on rank 0\n")  # what _strike leaves before the SIGKILL
    assert not Faults.from_config(cfg, rank=0, world_size=1, env={}).armed
    assert not Faults.from_config(cfg, rank=0, world_size=1, env={"TORCHELASTIC_RESTART_COUNT": "0"}).armed


def test_a_loss_spike_is_stopped_by_the_loss_alert_before_the_diverged_model_is_saved(tmp_path, dataset):
    """--fault spike adds noise to every weight at step 7: the loss jumps about fourfold and stays up. With
    --loss-alert 2 the run stops at that step's log line with LossSpike, naming step 6's checkpoint to roll back to;
    no checkpoint of the diverged model is written (module 12's loss alert, the detector notebook 12 prices)."""
    from fmlab.train.loop import LossSpike

    args = ["--model", "tiny", "--data", dataset, "--max-steps", "9", "--micro-batch", "4", "--warmup-steps", "2",
            "--log-every", "1", "--tensorboard", "false", "--fault", "spike", "--fault-step", "7"]
    free = train(parse_config([*args, "--output-dir", str(tmp_path / "free")]))
    assert free.losses[7] > 3 * free.losses[6] and free.losses[9] > 3 * free.losses[6]  # it does not come back
    with pytest.raises(LossSpike, match=r"step 7's loss .* the mean of the 5 logged before it .*--loss-alert 2\).*"
                                        r"roll back to .*step_00000006 and skip the batches around step 7"):
        train(parse_config([*args, "--output-dir", str(tmp_path / "alert"), "--loss-alert", "2",
                            "--checkpoint-dir", str(tmp_path / "ck"), "--checkpoint-every", "3"]))
    assert [c.step for c in complete_checkpoints(tmp_path / "ck")] == [3, 6]
    with pytest.raises(TrainConfigError, match="--loss-alert must be 0 \\(off\\) or a factor above 1"):
        train(parse_config([*args, "--loss-alert", "0.5"]))
