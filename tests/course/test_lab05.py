"""Lab 05 (your own ZeRO) without its notebook: the lab's own solution passes every check, and each check fails,
naming what differed, for a plausible wrong solution and for the unanswered stub. The checks fork 1-4 gloo
processes (fmlab.labs.world), about a second per check."""

import torch
import torch.distributed as dist
import torch.nn.functional as F

from fmlab.labs import lab05
from fmlab.labs.lab05 import (
    ReferenceFSDPLinear,
    ReferenceShardedAdamW,
    reference_flatten_padded,
    reference_gradient_shard,
    reference_shard,
    unflatten,
)


def stub(*args, **kwargs):
    raise NotImplementedError


# ---- exercise 1


def flatten_unpadded(tensors, world_size):
    return torch.cat([t.reshape(-1) for t in tensors])


def shard_by_chunk(flat, rank, world_size):
    return flat.chunk(world_size)[rank]


def gradient_sum(params, rank, world_size):
    """Forgets to divide the reduce-scattered sum by the world size."""
    flat = reference_flatten_padded([p.grad for p in params], world_size)
    out = torch.empty(flat.numel() // world_size)
    dist.reduce_scatter_single(out, flat)
    return out


def gradient_not_reduced(params, rank, world_size):
    flat = reference_flatten_padded([p.grad for p in params], world_size)
    return reference_shard(flat, rank, world_size).clone()


def gradient_all_reduced(params, rank, world_size):
    """The right numbers, through an all-reduce: every rank receives the whole gradient."""
    flat = reference_flatten_padded([p.grad for p in params], world_size)
    dist.all_reduce(flat)
    return reference_shard(flat, rank, world_size) / world_size


def test_ex1_reference_passes(tmp_path, capsys):
    assert lab05.check_gradient_shards(reference_flatten_padded, reference_shard, reference_gradient_shard, tmp_path)
    assert "[PASS]" in capsys.readouterr().out


def test_ex1_catches_missing_padding(tmp_path, capsys):
    assert not lab05.check_gradient_shards(flatten_unpadded, shard_by_chunk, reference_gradient_shard, tmp_path)
    assert "flatten_padded(params, 2) has 423 elements for 423 parameters, expected 424" in capsys.readouterr().out


def test_ex1_catches_padding_a_whole_extra_row(tmp_path, capsys):
    def always_pad(tensors, world_size):  # (n // ws + 1) * ws: one piece too many when n divides evenly
        flat = torch.cat([t.reshape(-1) for t in tensors])
        return F.pad(flat, (0, (flat.numel() // world_size + 1) * world_size - flat.numel()))

    assert not lab05.check_gradient_shards(always_pad, reference_shard, reference_gradient_shard, tmp_path)
    assert "expected 423: pad only up to the smallest multiple" in capsys.readouterr().out


def test_ex1_catches_a_sum_instead_of_a_mean(tmp_path, capsys):
    assert not lab05.check_gradient_shards(reference_flatten_padded, reference_shard, gradient_sum, tmp_path)
    out = capsys.readouterr().out
    assert "on 2 ranks, rank 0's gradient shard differs" in out and "it is 2 times the mean gradient" in out


def test_ex1_catches_a_gradient_not_reduced(tmp_path, capsys):
    assert not lab05.check_gradient_shards(reference_flatten_padded, reference_shard, gradient_not_reduced, tmp_path)
    assert "this rank's own gradient, not reduced over the ranks" in capsys.readouterr().out


def test_ex1_catches_an_all_reduce(tmp_path, capsys):
    assert not lab05.check_gradient_shards(reference_flatten_padded, reference_shard, gradient_all_reduced, tmp_path)
    assert "gradient_shard called all_reduce and no reduce-scatter" in capsys.readouterr().out


def test_ex1_unanswered(tmp_path, capsys):
    assert not lab05.check_gradient_shards(stub, stub, stub, tmp_path)
    assert "not answered yet" in capsys.readouterr().out
    assert not lab05.check_gradient_shards(reference_flatten_padded, reference_shard, stub, tmp_path)
    assert "not answered yet: gradient_shard" in capsys.readouterr().out


# ---- exercise 2


class NoAllGather(ReferenceShardedAdamW):
    """Updates its own shard and writes only that shard back: the ranks drift apart."""

    @torch.no_grad()
    def step(self):
        grad = reference_gradient_shard(self.params, self.rank, self.world_size)
        flat = reference_flatten_padded([p.detach() for p in self.params], self.world_size)
        p = reference_shard(flat, self.rank, self.world_size)  # a view: updated in place in flat
        self.t += 1
        beta1, beta2 = self.betas
        p.mul_(1 - self.lr * self.weight_decay)
        self.exp_avg.lerp_(grad, 1 - beta1)
        self.exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        denom = (self.exp_avg_sq / (1 - beta2 ** self.t)).sqrt_().add_(self.eps)
        p.addcdiv_(self.exp_avg, denom, value=-self.lr / (1 - beta1 ** self.t))
        for param, value in zip(self.params, unflatten(flat, [q.shape for q in self.params]), strict=True):
            param.copy_(value)


class L2Decay(ReferenceShardedAdamW):
    """Adds the decay to the gradient (Adam's L2), instead of decaying the weights (AdamW)."""

    @torch.no_grad()
    def step(self):
        for p in self.params:
            p.grad.add_(p, alpha=self.weight_decay)
        decay, self.weight_decay = self.weight_decay, 0.0
        super().step()
        self.weight_decay = decay


class Replicated:
    """DDP plus a full AdamW on every rank: right parameters, but no memory saved."""

    def __init__(self, params, rank, world_size, **adamw):
        self.params, self.world_size = list(params), world_size
        self.inner = torch.optim.AdamW(self.params, **adamw)

    def step(self):
        for p in self.params:
            dist.all_reduce(p.grad)
            p.grad /= self.world_size
        self.inner.step()


class KeepsFullBuffer(ReferenceShardedAdamW):
    """Sharded moments, but a full-size gather buffer kept between steps: 1 + 2/N, not 2/N."""

    def __init__(self, params, rank, world_size, **adamw):
        super().__init__(params, rank, world_size, **adamw)
        self.buffer = torch.zeros(lab05.padded_numel(lab05.param_count(), world_size))


class InnerTorchAdamW:
    """The other design the lab allows: torch.optim.AdamW on a local nn.Parameter holding this rank's piece (it
    keeps a master copy of the piece and its gradient too: 4 tensors of 1/N, still 1/N in all)."""

    def __init__(self, params, rank, world_size, **adamw):
        self.params, self.rank, self.world_size = list(params), rank, world_size
        flat = reference_flatten_padded([p.detach() for p in self.params], world_size)
        self.local = torch.nn.Parameter(reference_shard(flat, rank, world_size).clone())
        self.inner = torch.optim.AdamW([self.local], **adamw)

    @torch.no_grad()
    def step(self):
        self.local.grad = reference_gradient_shard(self.params, self.rank, self.world_size)
        self.inner.step()
        full = torch.empty(self.local.numel() * self.world_size)
        dist.all_gather_single(full, self.local.detach())
        for param, value in zip(self.params, unflatten(full, [q.shape for q in self.params]), strict=True):
            param.copy_(value)


def test_ex2_reference_passes(tmp_path, capsys):
    assert lab05.check_sharded_adamw(ReferenceShardedAdamW, tmp_path)
    out = capsys.readouterr().out
    assert "2 ranks: 1,696, 1,696 bytes per rank" in out and "1 rank: 3,384 bytes" in out


def test_ex2_passes_torch_adamw_on_a_local_piece(tmp_path, capsys):
    assert lab05.check_sharded_adamw(InnerTorchAdamW, tmp_path)
    assert "[PASS]" in capsys.readouterr().out


def test_ex2_catches_a_missing_all_gather(tmp_path, capsys):
    assert not lab05.check_sharded_adamw(NoAllGather, tmp_path)
    out = capsys.readouterr().out
    assert "rank 1's parameters differ from rank 0's after step 1" in out
    assert "changed only in its own shard (elements 212-422): all-gather" in out


def test_ex2_catches_adam_l2_decay(tmp_path, capsys):
    assert not lab05.check_sharded_adamw(L2Decay, tmp_path)
    out = capsys.readouterr().out
    assert "rank 0's parameters differ from torch.optim.AdamW's on one process: 0.weight after step 1: max" in out
    assert "Your update matches Adam with L2 regularisation" in out


def test_ex2_catches_a_replicated_optimizer(tmp_path, capsys):
    assert not lab05.check_sharded_adamw(Replicated, tmp_path)
    assert "on 2 ranks, rank 0 holds 3,408 bytes of optimizer state, one rank holds 3,408" in capsys.readouterr().out


def test_ex2_catches_a_full_buffer_kept_between_steps(tmp_path, capsys):
    assert not lab05.check_sharded_adamw(KeepsFullBuffer, tmp_path)
    assert "Its largest tensors: 1,696" in capsys.readouterr().out


def test_ex2_unanswered(tmp_path, capsys):
    class Stub:
        def __init__(self, *args, **kwargs):
            raise NotImplementedError

    assert not lab05.check_sharded_adamw(Stub, tmp_path)
    assert "not answered yet: ShardedAdamW (or a function it calls)" in capsys.readouterr().out


# ---- exercise 3


class _GatherForAutograd(torch.autograd.Function):
    """An all-gather whose backward reduce-scatters: right gradients, used with autograd's own F.linear."""

    @staticmethod
    def forward(ctx, shard, world_size):
        ctx.world_size = world_size
        full = torch.empty(shard.numel() * world_size)
        dist.all_gather_single(full, shard)
        return full

    @staticmethod
    def backward(ctx, grad_full):
        out = torch.empty(grad_full.numel() // ctx.world_size)
        dist.reduce_scatter_single(out, grad_full.contiguous())
        return out / ctx.world_size, None


class KeepsGatheredWeights(ReferenceFSDPLinear):
    """Gathers through autograd: F.linear saves the full weight for backward, which is never freed early."""

    def forward(self, x):
        full = _GatherForAutograd.apply(self.shard, self.world_size)
        weight, bias = unflatten(full, [(self.out_features, self.in_features), (self.out_features,)])
        return F.linear(x, weight, bias)


class KeepsTheLinear(ReferenceFSDPLinear):
    def __init__(self, linear, rank, world_size):
        super().__init__(linear, rank, world_size)
        self.linear = linear


class _SumGatherLinear(lab05._ReferenceGatherLinear):
    """The lab's unit, less the division of the reduce-scattered gradient by the world size."""

    @staticmethod
    def backward(ctx, grad_out):
        grad_x, grad_shard, *rest = lab05._ReferenceGatherLinear.backward(ctx, grad_out)
        return grad_x, grad_shard * ctx.world_size, *rest


class SumsGradients(ReferenceFSDPLinear):
    def forward(self, x):
        return _SumGatherLinear.apply(x, self.shard, self.out_features, self.in_features, self.world_size)


class _CopyForBackward(torch.autograd.Function):
    """Frees the gathered buffer but keeps a copy of the weight for backward: no all-gather in backward."""

    @staticmethod
    def forward(ctx, x, shard, out_features, in_features, world_size):
        full = torch.empty(shard.numel() * world_size)
        dist.all_gather_single(full, shard)
        weight, bias = unflatten(full, [(out_features, in_features), (out_features,)])
        ctx.save_for_backward(x, weight.clone())
        ctx.world_size = world_size
        return F.linear(x, weight, bias)

    @staticmethod
    def backward(ctx, grad_out):
        x, weight = ctx.saved_tensors
        grad_flat = reference_flatten_padded([grad_out.T @ x, grad_out.sum(0)], ctx.world_size)
        grad_shard = torch.empty(grad_flat.numel() // ctx.world_size)
        dist.reduce_scatter_single(grad_shard, grad_flat)
        return grad_out @ weight, grad_shard / ctx.world_size, None, None, None


class CopiesTheWeight(ReferenceFSDPLinear):
    def forward(self, x):
        return _CopyForBackward.apply(x, self.shard, self.out_features, self.in_features, self.world_size)


def test_ex3_reference_passes(tmp_path, capsys):
    assert lab05.check_fsdp_unit(ReferenceFSDPLinear, tmp_path)
    out = capsys.readouterr().out
    assert "forward: 3 all_gather_single; backward: 3 all_gather_single, 3 reduce_scatter_single" in out


def test_ex3_catches_weights_kept_for_backward(tmp_path, capsys):
    assert not lab05.check_fsdp_unit(KeepsGatheredWeights, tmp_path)
    assert "all-gathered buffer(s)" in capsys.readouterr().out


def test_ex3_catches_a_unit_that_keeps_its_linear(tmp_path, capsys):
    assert not lab05.check_fsdp_unit(KeepsTheLinear, tmp_path)
    assert "rank 0's unit 0 holds 812 bytes of tensors right after it was built, its shard is 272" in (
        capsys.readouterr().out)


def test_ex3_catches_a_weight_copied_for_backward(tmp_path, capsys):
    assert not lab05.check_fsdp_unit(CopiesTheWeight, tmp_path)
    assert "rank 0's backward all-gathered 0 time(s) in 2 steps, expected 3 per step" in capsys.readouterr().out


def test_ex3_catches_summed_gradient_shards(tmp_path, capsys):
    assert not lab05.check_fsdp_unit(SumsGradients, tmp_path)
    out = capsys.readouterr().out
    assert "step 1, rank 0 of 2: unit 0's shard.grad: max |diff|" in out and "it is 2 times the mean" in out


def test_ex3_unanswered(tmp_path, capsys):
    class Stub(torch.nn.Module):
        def __init__(self, linear, rank, world_size):
            super().__init__()
            raise NotImplementedError

    assert not lab05.check_fsdp_unit(Stub, tmp_path)
    assert "not answered yet: FSDPLinear (or a function it calls)" in capsys.readouterr().out
