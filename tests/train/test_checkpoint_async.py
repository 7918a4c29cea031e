"""Asynchronous checkpoint saves (Checkpointer.save_async / save(..., asynchronous=True), on DCP's async_save).

The atomic commit holds while the write runs in the background: nothing is committed before every rank has
written, the state saved is the state of the saving step even though training went on, a process killed mid-write
leaves only `.incomplete-step_N` (the previous checkpoint resumes), and two gloo processes commit one checkpoint
holding both ranks' shards. The background write is held back where a test needs it in flight (a gated
FileSystemWriter), so no test depends on timing.

Run: .venv/bin/pytest tests/train/test_checkpoint_async.py   (-m "not distributed" skips the torchrun launch)
This file is also the script of the processes it starts: `python test_checkpoint_async.py kill|ranks FOLDER`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
from torch.distributed.checkpoint import FileSystemWriter
from torchrun_launch import torchrun

from fmlab.checkpoint import (
    Checkpointer,
    CheckpointError,
    PendingSave,
    complete_checkpoints,
    latest,
    read_marker,
)
from fmlab.data import ResumableSampler
from fmlab.models import build_model

VOCAB, SEQ = 512, 16
ROWS = torch.randint(0, VOCAB, (40, SEQ), generator=torch.Generator().manual_seed(7))


def make_run(seed: int = 0):
    model = build_model("tiny", seed=seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95), weight_decay=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / 4))
    sampler = ResumableSampler(40, rank=0, world_size=1, seed=3)
    return model, optimizer, scheduler, sampler


def train_steps(run, steps: int) -> list[float]:
    model, optimizer, scheduler, sampler = run
    losses = []
    for _ in range(steps):
        it = iter(sampler)
        x = ROWS[[next(it) for _ in range(4)]]
        loss = model(input_ids=x, labels=x).loss + torch.randn(()) * 1e-3  # the RNG state matters on resume
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        scheduler.step()
        losses.append(loss.item())
    return losses


def tensors_of(model, optimizer) -> dict[str, torch.Tensor]:
    """A copy of every tensor a checkpoint holds (weights, AdamW moments and step counts), local shards as is."""
    def local(t):
        return (t.to_local() if hasattr(t, "to_local") else t).detach().clone()

    out = {f"model.{k}": local(v) for k, v in model.state_dict().items()}
    for i, state in optimizer.state_dict()["state"].items():
        out.update({f"optim.{i}.{k}": local(v) for k, v in state.items() if isinstance(v, torch.Tensor)})
    return out


def assert_same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k


@pytest.fixture
def gate(monkeypatch):
    """Hold every DCP file write until the test opens the gate (at most 30 s): a save truly in flight."""
    opened = threading.Event()
    write = FileSystemWriter.write_data

    def held(self, plan, planner):
        opened.wait(30)
        return write(self, plan, planner)

    monkeypatch.setattr(FileSystemWriter, "write_data", held)
    yield opened
    opened.set()


def test_an_async_save_commits_atomically_with_the_state_of_its_step(tmp_path, gate):
    torch.manual_seed(1)
    run = make_run()
    gate.set()  # the first two saves write at once
    ckpt = Checkpointer(tmp_path / "a", keep_last=1)
    train_steps(run, 2)
    previous = ckpt.save(2, *run)
    train_steps(run, 1)
    at_save = tensors_of(*run[:2])
    reference = Checkpointer(tmp_path / "sync").save(3, *run)  # a synchronous save of the same state
    gate.clear()

    pending = ckpt.save_async(3, *run)
    assert isinstance(pending, PendingSave) and pending.path == ckpt.path_for(3) and not pending.done()
    uninterrupted = train_steps(run, 3)  # the optimizer changes the weights in place while the save is in flight
    # nothing is committed, pruned or picked before the write has finished
    assert not pending.done() and latest(tmp_path / "a") == previous
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == [".incomplete-step_00000003", "step_00000002"]
    gate.set()
    assert ckpt.wait() == pending.path and ckpt.pending is None and pending.committed is not None
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["step_00000003"]  # committed, then pruned
    info = read_marker(pending.path)
    assert set(info.files) == {p.name for p in pending.path.iterdir()} - {"COMPLETE"}
    assert ckpt.wait() is None and ckpt.finish() is None  # nothing left in flight

    loaded, from_sync = make_run(seed=5), make_run(seed=6)
    assert Checkpointer(tmp_path / "a").resume(*loaded)["step"] == 3
    Checkpointer(tmp_path / "sync").load(reference, *from_sync)
    assert_same(tensors_of(*loaded[:2]), at_save)  # the state of step 3, not of the steps trained since
    assert_same(tensors_of(*from_sync[:2]), at_save)
    assert not torch.equal(run[0].lm_head.weight, loaded[0].lm_head.weight)  # training did go on
    assert train_steps(loaded, 3) == uninterrupted  # data position, LR schedule and RNG of step 3 too


def test_saves_commit_in_step_order_and_the_loop_calls_stay_short(tmp_path):
    run = make_run()
    ckpt = Checkpointer(tmp_path, keep_last=2)
    for step in (1, 2, 3):
        train_steps(run, 1)
        # the loop's call: a Path either way (where the checkpoint is, or will be once committed)
        assert ckpt.save(step, *run, asynchronous=True) == ckpt.path_for(step)
    train_steps(run, 1)
    assert ckpt.save(4, *run) == ckpt.path_for(4)  # a synchronous save first commits the one in flight
    assert [c.step for c in complete_checkpoints(tmp_path)] == [3, 4]
    again = ckpt.save_async(4, *run)  # already complete on disk: nothing to do
    assert again.done() and again.result() == ckpt.path_for(4) and ckpt.pending is None
    ckpt.save(5, *run, asynchronous=True)
    assert ckpt.finish() == ckpt.path_for(5)  # the end of the run
    assert [c.step for c in complete_checkpoints(tmp_path)] == [4, 5]
    assert not list(tmp_path.glob(".incomplete-*"))


def test_a_failed_async_write_is_never_committed(tmp_path, monkeypatch):
    run = make_run()
    ckpt = Checkpointer(tmp_path)
    good = ckpt.save(1, *run)

    def broken(self, plan, planner):
        raise OSError("No space left on device")

    monkeypatch.setattr(FileSystemWriter, "write_data", broken)
    ckpt.save_async(2, *run)
    train_steps(run, 1)
    with pytest.raises(CheckpointError, match=r"step 2 failed.*No space left.*\.incomplete-step_00000002"):
        ckpt.finish()
    assert latest(tmp_path) == good and (tmp_path / ".incomplete-step_00000002").is_dir()
    monkeypatch.undo()
    assert ckpt.save(3, *run, asynchronous=True) and ckpt.finish() == ckpt.path_for(3)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step_00000001", "step_00000003"]  # debris pruned


def test_the_stall_measurement_notebook_08_plots(tmp_path):
    from fmlab.checkpoint import measure_stall, stall_rows

    result = measure_stall(steps=5, save_at=3, hidden=64, layers=1, batch=2, seq_len=16, folder=tmp_path)
    assert result["state_mb"] > 0 and [r["mode"] for r in stall_rows(result)] == ["sync", "async"]
    for mode in ("sync", "async"):
        run = result[mode]
        assert [r["step"] for r in run["trace"]] == [1, 2, 3, 4, 5]
        assert run["stall_s"] == run["trace"][2]["save_s"] > 0 and run["save_total_s"] >= run["stall_s"]
        assert Path(run["checkpoint"]).name == "step_00000003" and (Path(run["checkpoint"]) / "COMPLETE").is_file()
    assert result["async"]["written_at_s"] <= result["async"]["committed_at_s"]


# ---------------------------------------------------------------- processes this file starts


def _spawn(args: list[str], log: Path, timeout: float, stop_when: Path | None = None) -> int | None:
    """Run `args` in a session of its own, output to `log`; with `stop_when`, SIGKILL it as soon as that file
    appears. Bounded: the whole session is killed after `timeout` seconds and the test fails. Its exit code."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    with open(log, "w") as out:
        proc = subprocess.Popen(args, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if stop_when is not None and stop_when.exists():
                os.killpg(proc.pid, signal.SIGKILL)  # mid-write: no clean-up of any kind runs
                proc.wait(10)
                return None
            if proc.poll() is not None:
                assert stop_when is None, f"the process ended before it was killed:\n{log.read_text()[-3000:]}"
                return proc.returncode
            time.sleep(0.05)
        pytest.fail(f"{' '.join(args[:4])}... did not finish in {timeout} s:\n{log.read_text()[-3000:]}")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def _killed_mid_write(folder: Path) -> None:
    """Save step 2, start an async save of step 4 whose write never finishes (its shard is written, the DCP
    index never is), train on, say so, and wait to be killed."""
    torch.manual_seed(1)
    run = make_run()
    ckpt = Checkpointer(folder)
    train_steps(run, 2)
    ckpt.save(2, *run)
    train_steps(run, 2)
    FileSystemWriter.finish = lambda self, *args, **kwargs: time.sleep(3600)
    ckpt.save_async(4, *run)
    train_steps(run, 2)
    shard = folder / ".incomplete-step_00000004" / "__0_0.distcp"
    for _ in range(600):  # the shard is on disk: the write is well under way
        if shard.is_file() and shard.stat().st_size > 0:
            break
        time.sleep(0.05)
    (folder / "IN_FLIGHT").write_text("")
    time.sleep(3600)


def test_a_process_killed_during_an_async_write_resumes_from_the_previous_checkpoint(tmp_path):
    folder = tmp_path / "ck"
    folder.mkdir()
    _spawn([sys.executable, __file__, "kill", str(folder)], tmp_path / "log", timeout=60,
           stop_when=folder / "IN_FLIGHT")
    (folder / "IN_FLIGHT").unlink()
    assert sorted(p.name for p in folder.iterdir()) == [".incomplete-step_00000004", "step_00000002"]
    assert [c.step for c in complete_checkpoints(folder)] == [2] and latest(folder) == folder / "step_00000002"
    assert not (folder / ".incomplete-step_00000004" / "COMPLETE").exists()
    fresh = make_run(seed=5)
    assert Checkpointer(folder).resume(*fresh)["step"] == 2
    train_steps(fresh, 2)
    ckpt = Checkpointer(folder)
    ckpt.save(4, *fresh, asynchronous=True)  # the same step again, from the resumed run
    assert ckpt.finish() == folder / "step_00000004"
    assert sorted(p.name for p in folder.iterdir()) == ["step_00000002", "step_00000004"]


def _two_ranks(folder: Path) -> None:
    """FSDP2 over 2 gloo ranks: async saves at steps 2 and 4 while training (and its collectives) goes on."""
    import torch.distributed as dist

    from fmlab.parallel import ParallelConfig, init_distributed, parallelize

    cfg = ParallelConfig(sharding="full", backend="gloo")
    info = init_distributed(cfg)
    rank = dist.get_rank()

    def build(seed):
        model = parallelize(build_model("tiny", seed=seed), cfg, info)
        return model, torch.optim.AdamW(model.parameters(), lr=3e-3)

    model, optimizer = build(0)

    def steps(n, offset):
        for i in range(n):
            x = ROWS[4 * (2 * (offset + i) + rank) % 40:][:4]  # each rank its own sequences
            model(input_ids=x, labels=x).loss.backward()
            optimizer.step()
            optimizer.zero_grad()

    ckpt = Checkpointer(folder, keep_last=2)
    steps(2, 0)
    first = ckpt.save_async(2, model, optimizer)
    at_2 = tensors_of(model, optimizer)
    steps(2, 2)
    ckpt.save_async(4, model, optimizer)  # commits step 2 first
    steps(2, 4)
    assert ckpt.finish() == ckpt.path_for(4) and first.committed is not None
    fresh, fresh_optimizer = build(9)
    ckpt.load(ckpt.path_for(2), fresh, fresh_optimizer)
    assert_same(tensors_of(fresh, fresh_optimizer), at_2)  # this rank's shards, as they were at step 2
    (folder / f"ok_{rank}").write_text(json.dumps({"stall_s": first.stall_seconds}))
    dist.destroy_process_group()


@pytest.mark.distributed
def test_two_gloo_processes_commit_one_async_checkpoint_with_every_ranks_shard(tmp_path):
    folder = tmp_path / "ck"
    run = torchrun(2, Path(__file__), "ranks", str(folder), cwd=tmp_path, timeout=120)
    assert run.returncode == 0, run.text[-4000:]
    assert sorted(p.name for p in folder.iterdir()) == ["ok_0", "ok_1", "step_00000002", "step_00000004"]
    for info in complete_checkpoints(folder):
        assert info.world_size == 2
        assert {"__0_0.distcp", "__1_0.distcp", ".metadata", "trainer.json", "rank_00000.json",
                "rank_00001.json"} == set(info.files)


if __name__ == "__main__":
    {"kill": _killed_mid_write, "ranks": _two_ranks}[sys.argv[1]](Path(sys.argv[2]))
