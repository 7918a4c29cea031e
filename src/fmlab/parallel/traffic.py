"""Data parallelism in numbers: what each worker sends per step, how a run scales, and the published claims.

    from fmlab.parallel import traffic
    traffic.ring_allreduce_bytes(6.7e9, 2, 64)        # bytes each GPU sends per step: ~2x the bf16 gradients
    traffic.parameter_server_bytes(6.7e9, 2, 64)      # bytes a single parameter server must send per step

Used by notebooks/04_data_parallel.ipynb and labs/lab_04_data_parallel.ipynb (checks: fmlab.labs.lab04).
Every published figure is a `Claim` with its source; the course quotes them as claims of that source.
Tested by tests/parallel/test_data_parallel.py.
"""

from __future__ import annotations

from dataclasses import dataclass

# ---------------------------------------------------------------- communication volume


def ring_allreduce_bytes(params: float, bytes_per_value: float, workers: int) -> float:
    """Bytes each worker sends (and receives) in one ring all-reduce of `params` values: 2(W-1)/W x size.

    Reduce-scatter then all-gather, each moving (W-1)/W of the buffer; bandwidth-optimal and nearly independent
    of W (Patarasuk & Yuan 2009, "Bandwidth optimal all-reduce algorithms for clusters of workstations";
    the factor NCCL's performance notes call busbw = algbw x 2(n-1)/n)."""
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    return 2 * (workers - 1) / workers * params * bytes_per_value


def parameter_server_bytes(params: float, bytes_per_value: float, workers: int, servers: int = 1) -> float:
    """Bytes the busiest parameter server sends per step: every worker pulls the whole updated model, and
    the servers share the model (each holds 1/servers of it). Grows linearly with the worker count."""
    if workers < 1 or servers < 1:
        raise ValueError(f"workers and servers must be at least 1, got {workers} and {servers}")
    return workers * params * bytes_per_value / servers


def transfer_seconds(nbytes: float, gbps: float) -> float:
    """Seconds to move `nbytes` over a link of `gbps` gigabits per second (no latency, full bandwidth)."""
    return nbytes * 8 / (gbps * 1e9)


def scaling_efficiency(rate: float, single_rate: float, workers: int) -> float:
    """Measured throughput over `workers` times one worker's: 1.0 is perfectly linear scaling."""
    return rate / (workers * single_rate)


def speedup(faster: float, slower: float) -> float:
    """How much faster, as a fraction: 10,000 vs 6,300 iterations/day is 0.587 (58.7% faster)."""
    return faster / slower - 1


def global_batch_tokens(micro_batch: int, seq_len: int, grad_accum: int, data_parallel: int) -> int:
    """Tokens per optimizer step: every data-parallel rank contributes micro_batch x seq_len x grad_accum."""
    return micro_batch * seq_len * grad_accum * data_parallel


# ---------------------------------------------------------------- published claims


@dataclass(frozen=True)
class Claim:
    """A figure as a source states it (not measured here)."""

    name: str
    value: float | tuple[float, float]
    unit: str
    source: str


CLAIMS: dict[str, Claim] = {c.name: c for c in [
    Claim("smddp_speedup_over_nccl", (0.20, 0.40), "fraction faster",
          "AWS pretraining lesson: SageMaker's data-parallel library (SMDDP, built on the 'Herring' design of "
          "Thangakrishnan et al., SC20) trains 20-40% faster than NCCL/MPI-based all-reduce (as claimed)"),
    Claim("exaone_smddp_iterations_per_day", 10_000, "iterations/day",
          "AWS 'Train and host foundation models' talk, LG AI Research EXAONE on SageMaker with SMDDP and FSx "
          "for Lustre (as stated in the talk)"),
    Claim("exaone_ddp_iterations_per_day", 6_300, "iterations/day",
          "same talk: the same EXAONE training with PyTorch DDP (as stated in the talk)"),
]}

HISTORY = [
    ("parameter server", "Li et al. 2014, 'Scaling distributed machine learning with the parameter server' (OSDI)",
     "workers push gradients to and pull weights from server nodes; the servers' links carry W copies"),
    ("ring all-reduce (Horovod)", "Sergeev & Del Balso 2018, 'Horovod: fast and easy distributed deep learning in "
     "TensorFlow' (arXiv:1802.05799)", "peers average gradients among themselves with NCCL/MPI ring all-reduce"),
    ("PyTorch DDP", "Li et al. 2020, 'PyTorch Distributed: experiences on accelerating data parallel training' "
     "(VLDB)", "bucketed all-reduce overlapped with the backward pass"),
    ("SMDDP", "AWS SageMaker distributed data parallelism library (smddp backend)",
     "AllReduce and AllGather optimized for AWS's EFA network and P4/P4de instance topology"),
]
