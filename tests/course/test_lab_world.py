"""The lab harness (fmlab.labs.world): real gloo worlds of forked processes, results back as tensors, the
learner's errors and hangs reported instead of raised, and differences named tensor by tensor."""

import time

import torch
import torch.distributed as dist

from fmlab.labs.world import differences, first_lines, run_world


def _sum_of_ranks(rank, world_size):
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t)
    return {"sum": t, "rank": rank}


def test_a_world_all_reduces_and_returns_tensors(tmp_path):
    world = run_world(_sum_of_ranks, tmp_path / "logs", world_size=3)
    assert world.ok, world.failure()
    assert [r["rank"] for r in world.results] == [0, 1, 2]
    assert all(torch.equal(r["sum"], torch.tensor([6.0])) for r in world.results)


def test_the_learners_error_is_reported_with_its_rank(tmp_path):
    def fn(rank, world_size):
        if rank == 1:
            raise NotImplementedError
        dist.barrier()

    world = run_world(fn, tmp_path / "logs")
    assert not world.ok and world.unanswered()
    assert world.failure().startswith("rank 1 raised NotImplementedError")


def test_a_collective_nobody_joins_times_out_instead_of_hanging(tmp_path):
    def fn(rank, world_size):
        if rank == 0:
            dist.recv(torch.zeros(3), src=1)  # rank 1 never sends

    start = time.perf_counter()
    world = run_world(fn, tmp_path / "logs", collective_timeout=2, timeout=30)
    assert not world.ok and not world.timed_out and time.perf_counter() - start < 20
    # rank 0 times out in its recv, rank 1 in the harness's closing barrier; whichever fails first is reported,
    # and the other may see only "connection closed" once its peer has gone
    assert world.failure().startswith(("rank 0 raised RuntimeError", "rank 1 raised RuntimeError"))
    assert any("Timed out" in e or "timed out" in e for e in world.errors), world.errors


def test_a_world_past_its_limit_is_killed(tmp_path):
    world = run_world(lambda rank, world_size: time.sleep(60), tmp_path / "logs", timeout=1.5)
    assert world.timed_out and "ran past 2 s" in world.failure()


def test_differences_name_the_tensor_and_the_size_of_the_gap():
    want = {"grads": [torch.zeros(2), torch.ones(3)], "loss": 1.0}
    assert differences({"grads": [torch.zeros(2), torch.ones(3)], "loss": 1.0}, want) == []
    got = {"grads": [torch.zeros(2), torch.ones(3) * 1.1], "loss": 1.0}
    (line,) = differences(got, want, name="step 3")
    assert line.startswith("step 3['grads'][1]: max |diff| 1.00e-01")
    assert differences({"grads": [torch.zeros(3), torch.ones(3)], "loss": 1.0}, want) == [
        "result['grads'][0]: shape (3,), expected (2,)"]
    assert "missing loss" in differences({"grads": want["grads"]}, want)[0]
    assert first_lines(["a", "b", "c", "d"], keep=2) == "a; b (and 2 more)"
