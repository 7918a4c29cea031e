"""Lab 06's checks without a notebook: the lab's own solution passes every check, and the bugs a learner really
writes (an all-reduce too many, a bias added on every rank, heads torn apart, an unscaled micro-batch loss, a
stage 0 that ignores the gradient it receives) fail with a hint that names what differed. Each check forks 2 or
4 gloo processes: about 0.5-2 s per test on 2 cores."""

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from fmlab.labs import lab06

pytestmark = pytest.mark.distributed


def _message(capsys) -> str:
    out = capsys.readouterr().out
    assert out.count("lab 06") == 1, out
    return out


def test_the_lab_solution_passes_every_check(tmp_path, capsys):
    assert lab06.check_operators(lab06.ReferenceCopy, lab06.ReferenceReduce, tmp_path)
    assert lab06.check_mlp(lab06.ReferenceMLP, tmp_path)
    assert lab06.check_attention(lab06.ReferenceAttention, tmp_path)
    assert lab06.check_pipeline(lab06.reference_pipeline_step, tmp_path)
    assert lab06.check_bubble(lab06.reference_bubble, tmp_path, lab06.reference_pipeline_step)
    out = capsys.readouterr().out
    assert out.count("[PASS]") == 5 and "[FAIL]" not in out
    assert "on 2 and 4 processes" in out and "4 micro-batches of 4" in out
    assert "Measured on your pipeline_step" in out and "m = 8:" in out


def test_the_single_process_references_are_what_the_checks_compare_with():
    """The shards the checks expect tile the full weights; the model's halves are the whole model."""
    want = lab06.expected_mlp(1, 2)
    full = lab06.make_mlp()
    assert torch.equal(want["weights"]["up.weight"], full.up.weight.detach()[32:])
    assert torch.equal(want["weights"]["down.weight"], full.down.weight.detach()[:, 32:])
    rows = torch.cat([lab06.head_rows(lab06.D_MODEL, r, 2) for r in range(2)])
    assert sorted(rows.tolist()) == list(range(3 * lab06.D_MODEL))
    assert lab06.head_rows(16, 1, 2).tolist()[:8] == list(range(8, 16))  # q of heads 2-3 first, then k, v
    model = lab06.make_pipeline_model()
    names = [n for s in range(2) for n, _ in lab06.stage_module(model, s).named_parameters()]
    assert names == [n for n, _ in model.named_parameters()]


# ---------------------------------------------------------------- exercise 1: wrong f and g


class ReduceBothWays(torch.autograd.Function):  # g that all-reduces in backward too
    @staticmethod
    def forward(ctx, x):
        x = x.clone()
        dist.all_reduce(x)
        return x

    @staticmethod
    def backward(ctx, grad):
        grad = grad.clone()
        dist.all_reduce(grad)
        return grad


class CopyNoReduce(torch.autograd.Function):  # f that forgets the backward's all-reduce
    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad


class ReduceInPlace(torch.autograd.Function):  # g that all-reduces its own input
    @staticmethod
    def forward(ctx, x):
        dist.all_reduce(x)
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return grad


class Unanswered(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        raise NotImplementedError

    @staticmethod
    def backward(ctx, grad):
        raise NotImplementedError


def test_operators_reject_an_all_reduce_in_gs_backward(tmp_path, capsys):
    assert not lab06.check_operators(lab06.ReferenceCopy, ReduceBothWays, tmp_path)
    out = _message(capsys)
    assert "[FAIL]" in out and "g backward" in out and "2 x the expected" in out and "g's backward is the identity" in out


def test_operators_reject_an_f_that_does_not_sum(tmp_path, capsys):
    assert not lab06.check_operators(CopyNoReduce, lab06.ReferenceReduce, tmp_path)
    out = _message(capsys)
    assert "f backward" in out and "this rank's own gradient" in out and "all-reduces the gradient" in out


def test_operators_reject_a_g_that_changes_its_input(tmp_path, capsys):
    assert not lab06.check_operators(lab06.ReferenceCopy, ReduceInPlace, tmp_path)
    out = _message(capsys)
    assert "g input after" in out and "all-reduce a clone" in out


def test_operators_unanswered(tmp_path, capsys):
    assert not lab06.check_operators(Unanswered, Unanswered, tmp_path)
    assert "not answered yet" in _message(capsys)


# ---------------------------------------------------------------- exercise 2: wrong MLPs


class RowBiasEveryRank(lab06.ReferenceRow):
    def forward(self, x_slice):
        return lab06.ReferenceReduce.apply(F.linear(x_slice, self.weight, self.bias))  # bias summed world times


class RowDoubleBackward(lab06.ReferenceRow):
    def forward(self, x_slice):
        return ReduceBothWays.apply(F.linear(x_slice, self.weight)) + self.bias


class ColumnWithoutF(lab06.ReferenceColumn):
    def forward(self, x):
        return F.linear(x, self.weight, self.bias)


def mlp_with(column, row):
    class MLP(nn.Module):
        def __init__(self, full, rank, world_size):
            super().__init__()
            self.up, self.down = column(full.up, rank, world_size), row(full.down, rank, world_size)

        def forward(self, x):
            return self.down(F.gelu(self.up(x)))

    return MLP


def test_mlp_rejects_a_bias_added_on_every_rank(tmp_path, capsys):
    assert not lab06.check_mlp(mlp_with(lab06.ReferenceColumn, RowBiasEveryRank), tmp_path)
    out = _message(capsys)
    assert "with 2 processes" in out and "output: max |diff|" in out and "(world_size - 1) x down.bias" in out


def test_mlp_rejects_an_all_reduce_too_many(tmp_path, capsys):
    assert not lab06.check_mlp(mlp_with(lab06.ReferenceColumn, RowDoubleBackward), tmp_path)
    out = _message(capsys)
    assert "input grad" in out and "2 x the expected" in out and "an all-reduce too many in a backward" in out


def test_mlp_rejects_a_column_layer_without_f(tmp_path, capsys):
    assert not lab06.check_mlp(mlp_with(ColumnWithoutF, lab06.ReferenceRow), tmp_path)
    out = _message(capsys)
    assert "the output matches, but input grad" in out and "must call f" in out


def test_mlp_rejects_rows_and_columns_swapped(tmp_path, capsys):
    class RowByRows(lab06.ReferenceRow):
        def __init__(self, full, rank, world_size):
            super().__init__(full, rank, world_size)
            self.weight = nn.Parameter(full.weight.detach().chunk(world_size, dim=0)[rank].clone())

    assert not lab06.check_mlp(mlp_with(lab06.ReferenceColumn, RowByRows), tmp_path)
    out = _message(capsys)
    assert "rank 0 of 2 holds the wrong shard: down.weight: shape (8, 64), expected (16, 32)" in out and "COLUMNS" in out


def test_mlp_works_only_for_2_processes_fails_on_4(tmp_path, capsys):
    class HalfColumn(lab06.ReferenceColumn):
        def __init__(self, full, rank, world_size):
            super().__init__(full, rank, 2)  # hard-coded two ranks

    class HalfRow(lab06.ReferenceRow):
        def __init__(self, full, rank, world_size):
            super().__init__(full, rank, 2)

    assert not lab06.check_mlp(mlp_with(HalfColumn, HalfRow), tmp_path)
    out = _message(capsys)
    assert "the module built for rank 0 of 4 holds the wrong shard: up.weight: shape (32, 16), expected (16, 16)" in out


def test_mlp_unanswered(tmp_path, capsys):
    class Stub(nn.Module):
        def __init__(self, full, rank, world_size):
            raise NotImplementedError

    assert not lab06.check_mlp(Stub, tmp_path)
    assert "not answered yet" in _message(capsys)


# ---------------------------------------------------------------- exercise 3: heads torn apart


class AttentionChunkedRows(lab06.ReferenceAttention):  # qkv split in contiguous blocks, not by heads
    def __init__(self, full, rank, world_size):
        super().__init__(full, rank, world_size)
        self.qkv = lab06.ReferenceColumn(full.qkv, rank, world_size)


def test_attention_rejects_qkv_rows_split_without_keeping_heads(tmp_path, capsys):
    assert not lab06.check_attention(AttentionChunkedRows, tmp_path)
    out = _message(capsys)
    assert "qkv.weight" in out and "max |diff|" in out and "regroup the rows" in out


def test_attention_rejects_a_bias_added_on_every_rank(tmp_path, capsys):
    class Attention(lab06.ReferenceAttention):
        def __init__(self, full, rank, world_size):
            super().__init__(full, rank, world_size)
            proj = RowBiasEveryRank(full.proj, rank, world_size)
            self.proj = proj

    assert not lab06.check_attention(Attention, tmp_path)
    assert "(world_size - 1) x proj.bias" in _message(capsys)


# ---------------------------------------------------------------- exercise 4: wrong pipelines


def unscaled(stage, module, x, y, microbatches):  # forgets the 1 / microbatches
    if stage == 0:
        return lab06.reference_pipeline_step(stage, module, x, y, microbatches)
    received, losses = [], []
    for ym in y.chunk(microbatches):
        a = torch.empty(len(ym), lab06.CUT)
        dist.recv(a, src=0)
        a.requires_grad_()
        losses.append(lab06.loss_fn(module(a), ym))
        received.append(a)
    for a, loss in zip(received, losses, strict=True):
        loss.backward()
        dist.send(a.grad, dst=0)
    return sum(loss.item() for loss in losses) / microbatches  # the loss it reports is even right


def ignores_the_gradient(stage, module, x, y, microbatches):  # stage 0 receives, then backwards a sum
    if stage == 1:
        return lab06.reference_pipeline_step(stage, module, x, y, microbatches)
    outputs = []
    for xm in x.chunk(microbatches):
        out = module(xm)
        dist.send(out.detach(), dst=1)
        outputs.append(out)
    for out in outputs:
        grad = torch.empty_like(out)
        dist.recv(grad, src=1)
        out.sum().backward()
    return None


def whole_batch(stage, module, x, y, microbatches):  # right numbers, but no micro-batches at all
    return lab06.reference_pipeline_step(stage, module, x, y, 1)


def test_pipeline_rejects_an_unscaled_micro_batch_loss(tmp_path, capsys):
    assert not lab06.check_pipeline(unscaled, tmp_path)
    out = _message(capsys)
    assert "with 2 micro-batches" in out and "every gradient is 2 x one process's" in out and "divide it" in out


def test_pipeline_rejects_a_stage_0_that_ignores_the_gradient(tmp_path, capsys):
    assert not lab06.check_pipeline(ignores_the_gradient, tmp_path)
    out = _message(capsys)
    assert "stage 0: grad['0.weight']" in out and "stage 1's gradients are right" in out


def test_pipeline_rejects_a_step_without_micro_batches(tmp_path, capsys):
    assert not lab06.check_pipeline(whole_batch, tmp_path)
    out = _message(capsys)
    assert "the loss and gradients are right, but with 2 micro-batches, stage 0 sent 1 activation(s) to stage 1, " \
        "expected 2" in out


def test_pipeline_reports_a_hang_as_a_failure_not_a_freeze(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(lab06, "COLLECTIVE_TIMEOUT", 2.0)

    def never_sends(stage, module, x, y, microbatches):
        if stage == 1:
            return lab06.reference_pipeline_step(stage, module, x, y, microbatches)
        return None

    assert not lab06.check_pipeline(never_sends, tmp_path)
    out = _message(capsys)
    assert "the pipeline failed" in out and "Every send needs its recv" in out


def test_pipeline_unanswered(tmp_path, capsys):
    def stub(stage, module, x, y, microbatches):
        raise NotImplementedError

    assert not lab06.check_pipeline(stub, tmp_path)
    assert "not answered yet" in _message(capsys)


# ---------------------------------------------------------------- exercise 5: the bubble


def test_bubble_rejects_the_fraction_of_compute_time(tmp_path, capsys):
    assert not lab06.check_bubble(lambda p, m: (p - 1) / m, tmp_path)
    out = _message(capsys)
    assert "bubble_fraction(2, 4) = 0.25, expected 0.2" in out and "m + p - 1" in out


def test_bubble_unanswered(tmp_path, capsys):
    def stub(stages, microbatches):
        raise NotImplementedError

    assert not lab06.check_bubble(stub, tmp_path)
    assert "not answered yet" in _message(capsys)


def test_bubble_measures_the_labs_pipeline_when_the_learners_fails(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(lab06, "BUBBLE_MICROBATCHES", (1, 4))

    def stub(stage, module, x, y, microbatches):
        raise NotImplementedError

    assert lab06.check_bubble(lab06.reference_bubble, tmp_path, stub)
    out = _message(capsys)
    assert "Measured on the lab's pipeline (yours failed" in out and "m = 4:" in out
