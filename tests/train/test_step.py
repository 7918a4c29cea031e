"""The training step and the clocks around it: fmlab.train.train_step and fmlab.train.log.StepTimer.

One process, no process group: the step's accumulation and the timer's arithmetic, each against what it must equal.
"""

import contextlib

import pytest
import torch

from fmlab.models import build_model
from fmlab.train import TrainConfig, build_optimizer, train_step
from fmlab.train.log import StepTimer


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_timer_tiles_windows_leaves_out_the_first_step_data_waits_and_evaluation():
    clock = FakeClock()
    timer = StepTimer(clock)
    for step in range(1, 5):
        with timer.data():
            clock.now += 0.5  # waiting for the batch
        clock.now += 1.5  # the step
        timer.step_done()
        if step == 2:
            t0 = clock.now
            clock.now += 10.0  # an evaluation
            assert timer.exclude(since=t0) == 10.0
    steps, seconds, data_seconds = timer.take_window()
    assert (steps, seconds, data_seconds) == (4, 8.0, 2.0)  # 4 steps of 2 s; the evaluation is left out
    assert timer.take_window() == (0, 0.0, 0.0)  # the next window starts now
    # steady state: steps 2-4 (the first is warm-up): 3 steps in 6 s
    assert timer.steady_rate(per_step=100) == pytest.approx(100 * 3 / 6.0)
    assert StepTimer(clock).steady_rate(100) == 0.0  # no steady steps yet


def test_accumulated_micro_batches_equal_one_large_batch():
    torch.manual_seed(0)
    batch = torch.randint(0, 512, (4, 32))
    results = []
    for micro_batches in ([batch], [batch[:2], batch[2:]]):
        model = build_model("tiny", seed=0)
        optimizer, scheduler = build_optimizer(model, TrainConfig(warmup_steps=1))
        seen: dict = {}

        def keep_gradients(m, seen=seen):
            seen.update({n: p.grad.clone() for n, p in m.named_parameters()})

        loss = train_step(model, optimizer, scheduler, micro_batches, grad_clip=0.0, on_gradients=keep_gradients)
        results.append((loss.item(), seen, [p.detach().clone() for p in model.parameters()]))
    (loss_one, grads_one, params_one), (loss_two, grads_two, params_two) = results
    assert loss_two == pytest.approx(loss_one, rel=1e-5)  # the step's mean loss, not the sum
    for name in grads_one:
        torch.testing.assert_close(grads_two[name], grads_one[name], rtol=1e-4, atol=1e-6)
    for a, b in zip(params_one, params_two, strict=True):  # Adam's first update is about lr x sign(grad)
        torch.testing.assert_close(a, b, rtol=0, atol=1e-4)


def test_only_the_last_micro_batch_synchronises():
    class Recorder(torch.nn.Module):
        """A model with DDP's no_sync: records whether each backward pass ran inside it."""

        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.ones(1))
            self.synced, self.inside = [], False

        @contextlib.contextmanager
        def no_sync(self):
            self.inside = True
            yield
            self.inside = False

        def forward(self, input_ids, labels):
            self.synced.append(not self.inside)
            return type("Out", (), {"loss": (self.weight * input_ids.float()).mean()})()

    model = Recorder()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0)
    loss = train_step(model, optimizer, scheduler, [torch.full((2,), 1.0), torch.full((2,), 3.0)], grad_clip=1.0)
    assert model.synced == [False, True]  # accumulate quietly, all-reduce once
    assert loss.item() == pytest.approx(2.0)  # (1 + 3) / 2
    assert model.weight.grad is None  # zeroed (set to None) after the step


def test_train_config_check_names_what_to_change():
    from fmlab.plan.compute import PlanError
    from fmlab.plan.parallelism import ParallelConfig
    from fmlab.train import TrainConfigError

    hybrid = TrainConfig(parallel=ParallelConfig(sharding="hybrid", hybrid_shard_degree=2))
    assert hybrid.check() is hybrid  # before the world is known: only what needs no world
    assert hybrid.check(world=4) is hybrid
    with pytest.raises(PlanError, match="hybrid_shard_degree=2 must divide the 3 data-parallel ranks"):
        hybrid.check(world=3)
    with pytest.raises(PlanError, match="pipeline stages are planned"):
        TrainConfig(parallel=ParallelConfig(pp=2)).check()
    with pytest.raises(TrainConfigError, match="--micro-batch, --grad-accum"):
        TrainConfig(micro_batch=0).check()
    with pytest.raises(TrainConfigError, match="--collective-timeout"):
        TrainConfig(collective_timeout=0.5).check()


def test_clip_gradients_equals_torch_clip_and_clips_what_the_optimizer_steps():
    from fmlab.train.step import clip_gradients

    torch.manual_seed(0)
    grads = [torch.randn(5, 3) * 4, torch.randn(7), torch.randn(2, 2, 2)]
    ours, theirs = ([torch.nn.Parameter(torch.zeros_like(g)) for g in grads] for _ in range(2))
    for a, b, g in zip(ours, theirs, grads, strict=True):
        a.grad, b.grad = g.clone(), g.clone()
    ours[1].grad = None  # a parameter without a gradient is left out, as torch does
    theirs[1].grad = None
    norm = clip_gradients(ours, 1.0)
    assert norm.item() == pytest.approx(torch.nn.utils.clip_grad_norm_(theirs, 1.0).item(), rel=1e-6)
    assert norm.item() > 1.0  # so the gradients were scaled down
    for a, b in zip(ours, theirs, strict=True):
        if a.grad is not None:
            torch.testing.assert_close(a.grad, b.grad)
    assert clip_gradients([torch.nn.Parameter(torch.zeros(2))], 1.0).item() == 0.0  # no gradients: norm 0
