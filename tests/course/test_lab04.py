"""Lab 04 (your own DDP) without a notebook: the lab's own solution passes every check, plausible wrong solutions
fail with a hint that names what differed, and the buckets the lab asks for are the ones PyTorch's DDP builds.

Run: .venv/bin/python -m pytest -q tests/course/test_lab04.py   (each check forks 2 gloo processes: ~0.3 s)
"""

import contextlib

import pytest
import torch
import torch.distributed as dist

from fmlab.labs import lab04
from fmlab.labs.lab04 import ReferenceDDP
from fmlab.labs.world import run_world


def _check(capsys, check, *args) -> tuple[bool, str]:
    passed = check(*args)
    return passed, capsys.readouterr().out


def _unanswered(*args, **kwargs):
    raise NotImplementedError


def test_the_lab_solution_passes_every_check(tmp_path, capsys):
    passed, out = _check(capsys, lab04.check_naive, lab04.reference_average_gradients, tmp_path)
    assert passed, out
    passed, out = _check(capsys, lab04.check_buckets, ReferenceDDP, tmp_path)
    assert passed, out
    assert "8, 4, 3, 1 buckets" in out and "bucket 0 launched with 4 of 8 gradients still to come" in out
    passed, out = _check(capsys, lab04.check_no_sync, ReferenceDDP, lab04.reference_accumulate_step, tmp_path)
    assert passed, out
    assert "the first 3 communicated nothing, the last issued 3 all_reduce" in out


def test_the_two_rank_run_matches_one_process_to_float32_rounding(tmp_path):
    """The tolerance (1e-6 + 1e-5 x |value|) is tight: the right answer is within ~1e-7, a wrong one ~1e-3 off."""
    world = lab04.run_world(lambda rank, ws: lab04._train_naive(lab04.reference_average_gradients, rank, ws),
                            tmp_path / "logs")
    assert world.ok, world.failure()
    problems, worst = lab04.numbers_problems(world.results)
    assert problems == [] and 0 < worst < 3e-7


def _ddp_buckets(rank, world_size):
    """The buckets DistributedDataParallel rebuilds after its first iteration, for each cap of the lab."""
    from torch.nn.parallel import DistributedDataParallel

    out = {}
    for cap in lab04.CAPS:
        model = lab04.make_model()
        names = [n for n, _ in model.named_parameters()]
        ddp = DistributedDataParallel(model, bucket_cap_mb=cap / 2**20)
        for step in range(1, 4):
            x, y = lab04.local_batch(step, rank, world_size)
            lab04.loss_fn(ddp(x), y).backward()
        data = ddp._get_ddp_logging_data()
        indices = data.get("rebuilt_per_bucket_param_indices", data.get("bucket_indices", ""))
        out[cap] = [[names[int(i)] for i in bucket.split()] for bucket in str(indices).split(",")]
    return out


def test_the_lab_buckets_are_the_ones_ddp_rebuilds(tmp_path):
    world = run_world(_ddp_buckets, tmp_path / "logs", world_size=1)
    assert world.ok, world.failure()
    model = lab04.make_model()
    for cap in lab04.CAPS:
        assert world.results[0][cap] == lab04.reference_buckets(model, cap), cap
    assert [len(lab04.reference_buckets(model, cap)) for cap in lab04.CAPS] == [8, 4, 3, 1]


# ---------------------------------------------------------------- exercise 1


def _summing(model):  # forgets to divide by the world size
    for p in model.parameters():
        dist.all_reduce(p.grad)


def test_ex1_a_sum_instead_of_a_mean_fails_and_says_so(tmp_path, capsys):
    passed, out = _check(capsys, lab04.check_naive, _summing, tmp_path)
    assert not passed
    assert "[FAIL]" in out and "0.weight after step 1: max |diff|" in out
    assert "summed over the 2 ranks, not averaged: divide by the world size" in out


def test_ex1_unanswered(tmp_path, capsys):
    passed, out = _check(capsys, lab04.check_naive, _unanswered, tmp_path)
    assert not passed and "not answered yet" in out


# ---------------------------------------------------------------- exercise 2


class _Rebucketed(ReferenceDDP):
    """The lab's solution with other buckets (the hooks read them when they run)."""

    def rebucket(self, buckets):
        self.buckets = buckets
        self.bucket_of = {n: i for i, names in enumerate(buckets) for n in names}
        self.waiting = [len(names) for names in buckets]

    def _hook(self, name, param):
        if name in self.bucket_of:
            super()._hook(name, param)

    def finish(self):
        super().finish()
        self.rebucket(self.buckets)


class ForwardOrderDDP(_Rebucketed):  # walks the parameters in registration order
    def __init__(self, model, cap):
        super().__init__(model, cap)
        self.rebucket(lab04._group(model.named_parameters(), cap))


class NoLastBucketDDP(_Rebucketed):  # forgets the last, partial bucket
    def __init__(self, model, cap):
        super().__init__(model, cap)
        self.rebucket(self.buckets[:-1] if len(self.buckets) > 1 else self.buckets)


class BlockingDDP(ReferenceDDP):  # all-reduces each bucket in its hook with async_op=False
    def _hook(self, name, param):
        if not self.sync:
            return
        self.waiting[self.bucket_of[name]] -= 1
        while self.next < len(self.buckets) and self.waiting[self.next] == 0:
            names = self.buckets[self.next]
            flat = torch.cat([self.params[n].grad.flatten() for n in names])
            dist.all_reduce(flat)
            flat /= dist.get_world_size()
            offset = 0
            for n in names:
                grad = self.params[n].grad
                grad.copy_(flat[offset:offset + grad.numel()].view_as(grad))
                offset += grad.numel()
            self.next += 1

    def finish(self):
        self.next, self.waiting = 0, [len(names) for names in self.buckets]


class AfterBackwardDDP(ReferenceDDP):  # launches every bucket from finish(), after backward: no overlap
    def _hook(self, name, param):
        pass

    def finish(self):
        for name, p in self.params.items():
            ReferenceDDP._hook(self, name, p)
        super().finish()


class NoCopyBackDDP(ReferenceDDP):  # averages the flat copy and forgets to write it back into .grad
    def finish(self):
        for work, flat, _ in self.launched:
            work.wait()
            flat /= dist.get_world_size()
        self.launched, self.next = [], 0
        self.waiting = [len(names) for names in self.buckets]


class NoResetDDP(ReferenceDDP):  # finish() waits and copies back, but leaves the hooks' countdown at zero
    def finish(self):
        waiting = self.waiting
        super().finish()
        self.waiting = waiting


class NoDivisionDDP(ReferenceDDP):
    def finish(self):
        for work, flat, names in self.launched:
            work.wait()
            offset = 0
            for n in names:
                grad = self.params[n].grad
                grad.copy_(flat[offset:offset + grad.numel()].view_as(grad))
                offset += grad.numel()
        self.launched, self.next = [], 0
        self.waiting = [len(names) for names in self.buckets]


class UnansweredDDP:
    def __init__(self, model, bucket_cap_bytes):
        raise NotImplementedError


@pytest.mark.parametrize("wrong, said", [
    (ForwardOrderDDP, "you grouped the parameters in registration order"),
    (NoLastBucketDDP, "the last parameters are in no bucket"),
    (BlockingDDP, "3 of the 3 all_reduce calls had async_op=False"),
    (AfterBackwardDDP, "3 of the 3 all_reduce calls started after the backward pass had produced every gradient"),
    (NoCopyBackDDP, "none of the gradients came back averaged: torch.cat copies"),
    (NoResetDDP, "step 1 was right, step 2 averaged nothing: finish() must reset what the hooks count"),
    (NoDivisionDDP, "summed over the 2 ranks, not averaged"),
    (UnansweredDDP, "not answered yet"),
])
def test_ex2_wrong_solutions_fail_with_what_differed(tmp_path, capsys, wrong, said):
    passed, out = _check(capsys, lab04.check_buckets, wrong, tmp_path)
    assert not passed and "[FAIL]" in out
    assert said in out, out


# ---------------------------------------------------------------- exercise 3


class IgnoresNoSyncDDP(ReferenceDDP):  # no_sync() that changes nothing: every micro-batch communicates
    @contextlib.contextmanager
    def no_sync(self):
        yield


def _summed_micro_batches(ddp, optimizer, batches):  # forgets to divide each loss by the number of micro-batches
    total = 0.0
    for i, (x, y) in enumerate(batches):
        with contextlib.nullcontext() if i == len(batches) - 1 else ddp.no_sync():
            loss = lab04.loss_fn(ddp.model(x), y)
            loss.backward()
        total += loss.item() / len(batches)
    ddp.finish()
    optimizer.step()
    optimizer.zero_grad()
    return total


def _all_under_no_sync(ddp, optimizer, batches):  # the last micro-batch under no_sync too: nothing is averaged
    total = 0.0
    with ddp.no_sync():
        for x, y in batches:
            loss = lab04.loss_fn(ddp.model(x), y) / len(batches)
            loss.backward()
            total += loss.item()
    ddp.finish()
    optimizer.step()
    optimizer.zero_grad()
    return total


@pytest.mark.parametrize("ddp_class, step, said", [
    (IgnoresNoSyncDDP, lab04.reference_accumulate_step, "micro-batches 1-3 of step 1 issued 3 all_reduce call(s)"),
    (ReferenceDDP, _summed_micro_batches, "the 4 micro-batches' losses were summed, not averaged"),
    (ReferenceDDP, _all_under_no_sync, "step 1 issued 0 all_reduce call(s) for your 3 buckets"),
    (ReferenceDDP, _unanswered, "not answered yet"),
])
def test_ex3_wrong_solutions_fail_with_what_differed(tmp_path, capsys, ddp_class, step, said):
    passed, out = _check(capsys, lab04.check_no_sync, ddp_class, step, tmp_path)
    assert not passed and "[FAIL]" in out
    assert said in out, out
