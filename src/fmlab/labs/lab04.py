"""Checks for labs/lab_04_data_parallel.ipynb: all-reduce traffic, averaging gradients, the global batch,
a published speed-up, and the SageMaker launch that SMDDP's AllReduce needs."""

from __future__ import annotations

from fmlab.labs import Lab, close
from fmlab.parallel import traffic
from fmlab.plan import catalog, compute

LAB = Lab("lab 04", ["ex1_ring_bytes", "ex2_average_gradients", "ex3_grad_accum", "ex4_exaone_speedup",
                     "ex5_smddp_launcher"])

# The questions' inputs live here so that the notebook and its checks cannot drift apart.
EX1 = dict(model="llama2-7b", bytes_per_value=2, workers=64)  # bf16 gradients
EX3 = dict(target_tokens=4 * 2**20, micro_batch=2, seq_len=4096, gpus=64)  # a 4M-token global batch
EX5 = dict(instance_type="ml.p4d.24xlarge", instance_count=4)


def check_ring_bytes(answer: float) -> bool:
    params = compute.param_count(catalog.model(EX1["model"]))
    expected = traffic.ring_allreduce_bytes(params, EX1["bytes_per_value"], EX1["workers"])
    return LAB.check("ex1_ring_bytes", answer, lambda a: close(float(a), expected, 0.01),
                     f"{expected / 1e9:.1f} GB sent by each GPU per step",
                     "a ring all-reduce sends 2(W-1)/W times the gradient bytes from every worker; the gradients "
                     "are parameters x 2 bytes in bf16 (compute.param_count gives the parameters)")


def _toy_gradients(average):
    """Full-batch gradient of a small linear model, and `average` applied to the two half-batch gradients."""
    import torch

    torch.manual_seed(0)
    model = torch.nn.Linear(6, 3)
    x, y = torch.randn(8, 6), torch.randn(8, 3)

    def grad(xs, ys):
        model.zero_grad()
        torch.nn.functional.mse_loss(model(xs), ys).backward()
        return model.weight.grad.clone()

    full = grad(x, y)
    halves = [grad(x[:4], y[:4]), grad(x[4:], y[4:])]
    return full, average(halves)


def check_average_gradients(average) -> bool:
    """`average(list_of_gradients) -> gradient`: what DDP's all-reduce (sum, then divide) leaves on every rank."""
    import torch

    def same(fn) -> bool:
        if not callable(fn):
            raise TypeError("give a function that takes a list of gradient tensors")
        full, averaged = _toy_gradients(fn)
        return isinstance(averaged, torch.Tensor) and torch.allclose(averaged, full, atol=1e-6)

    return LAB.check("ex2_average_gradients", average, same,
                     "the average of the ranks' gradients is the gradient of the whole batch",
                     "sum the tensors and divide by how many there are (torch.stack(grads).mean(0) does both)")


def check_grad_accum(answer: int) -> bool:
    per_step = traffic.global_batch_tokens(EX3["micro_batch"], EX3["seq_len"], 1, EX3["gpus"])
    expected = EX3["target_tokens"] // per_step
    return LAB.check("ex3_grad_accum", answer, lambda a: a == expected and int(a) == a,
                     f"{expected} micro-batches per step keep {EX3['target_tokens']:,} tokens per step",
                     "tokens per step = micro-batch x sequence length x accumulation steps x data-parallel ranks")


def check_exaone_speedup(answer: float) -> bool:
    smddp = traffic.CLAIMS["exaone_smddp_iterations_per_day"].value
    ddp = traffic.CLAIMS["exaone_ddp_iterations_per_day"].value
    expected = traffic.speedup(smddp, ddp)
    return LAB.check("ex4_exaone_speedup", answer, lambda a: close(float(a), expected, 0.01),
                     f"{expected:.1%} faster, the 'about 60%' of the talk",
                     "as a fraction: faster / slower - 1 (10,000 and 6,300 iterations per day)")


def check_smddp_launcher(answer) -> bool:
    def right(a) -> bool:
        from sagemaker.train.distributed import MPI

        gpus = catalog.INSTANCES[EX5["instance_type"]].accelerators
        return isinstance(a, MPI) and a.process_count_per_node == gpus

    return LAB.check("ex5_smddp_launcher", answer, right, "MPI(process_count_per_node=8): mpirun, one process per GPU",
                     "SMDDP's AllReduce needs an mpirun-based launcher: sagemaker.train.distributed.MPI, with one "
                     "process per GPU of the instance (catalog.INSTANCES[...].accelerators)")


def summary() -> None:
    LAB.summary()
