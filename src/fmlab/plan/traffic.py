"""Data parallelism in numbers: what each worker sends per step, how a run scales, and the published claims.

    from fmlab.plan import traffic
    traffic.ring_allreduce_bytes(6.7e9, 2, 64)        # bytes each GPU sends per step: ~2x the bf16 gradients
    traffic.parameter_server_bytes(6.7e9, 2, 64)      # bytes a single parameter server must send per step
    traffic.herring_bytes(6.7e9, 2, instances=8)      # SMDDP's AllReduce: per instance, per CPU server shard

Used by notebooks/04_data_parallel.ipynb, the deck figure `data_parallel_traffic` (fmlab.course.figures) and
labs/lab_04_data_parallel.ipynb (checks: fmlab.labs.lab04).
Every published figure is a `Claim` with its source; the course quotes them as claims of that source.
Tested by tests/parallel/test_data_parallel.py and tests/parallel/test_traffic_herring.py.
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


def ring_allreduce_steps(workers: int) -> int:
    """Sequential transfer steps of one ring all-reduce: W-1 for the reduce-scatter, W-1 for the all-gather.
    Each step pays the network latency once, so the ring's latency term grows with W (Patarasuk & Yuan 2009)."""
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    return 2 * (workers - 1)


# ---------------------------------------------------------------- Herring: SMDDP's AllReduce
#
# What was verified, and where (read 2026-11-23):
# * Thangakrishnan et al., "Herring: Rethinking the Parameter Server at Scale for the Cloud", SC20 (abstract, on
#   sc20.supercomputing.org/proceedings/tech_paper/tech_paper_pages/pap487.html and amazon.science): a parameter-
#   server design rethought for EFA and its Scalable Reliable Datagram (SRD) transport; "gradient reduction with
#   Herring is twice as fast as all-reduce-based methods"; 85% scaling efficiency with up to 2,048 V100 GPUs.
#   The paper's body was not readable here: its own equations are not reproduced, only what the sources below say.
# * SageMaker developer guide, "Introduction to SageMaker's Distributed Data Parallel Library" (the page's
#   earlier edition, awsdocs/amazon-sagemaker-developer-guide doc_source/data-parallel-intro.md): "a
#   communication pattern similar to parameter servers"; a balanced fusion buffer holds gradients on the GPU until
#   a threshold, is copied to CPU memory, sharded into N equal parts, part i goes to server i, which sums part i
#   of every worker and sends the result back to all workers: "each server receives exactly the same number of
#   bytes"; classic parameter servers place whole variables on one server and are unbalanced in time. The library
#   "uses CPUs to AllReduce gradients". The current page (docs.aws.amazon.com/sagemaker/latest/dg/
#   data-parallel-intro.html) keeps the AllReduce/AllGather and CPU-GPU overlap text.
# * SageMaker data-parallel FAQ (same repository, data-parallel-faq.md): "The library uses the CPUs available
#   with GPU instances. No additional C5 or CPU instances are launched"; balanced fusion buffers are "used for
#   parameter server style synchronization", DDP's buckets for AllReduce.
# * Papers with Code's summary of the paper (paperswithcode.com/method/herring): Herring reduces gradients
#   hierarchically, inside the node first, then across nodes.
# * facebookresearch/fairring README ("Fairring (FAIR + Herring)"): with reduction servers a constant number of
#   network hops (2) whatever the number of nodes, and each GPU's bytes stay constant as machines are added;
#   its reading of the paper is that the servers ran on separate CPU machines (the FAQ above says otherwise for
#   SMDDP on SageMaker, so the function below models both placements).


@dataclass(frozen=True)
class HerringTraffic:
    """Bytes of one Herring gradient reduction (decimal bytes, per training step) for a buffer of `buffer_bytes`.

    After the reduction inside each instance, one copy of the buffer per instance goes to the servers: each
    instance sends `worker_sent` (the buffer, split equally over the servers) and gets `worker_received` back;
    each server shard receives and sends `server_bytes` (its 1/servers slice from every instance), the same
    for every shard: balanced. `network_sent` / `network_received` is what crosses one GPU instance's network
    interface (EFA) each way, counting its own shard's traffic when the servers run on the instances' CPUs."""

    instances: int
    servers: int
    colocated: bool
    buffer_bytes: float
    worker_sent: float
    worker_received: float
    server_bytes: float
    network_sent: float
    network_received: float
    hops: int = 2  # worker -> server -> worker, whatever the cluster size


def herring_bytes(params: float, bytes_per_value: float, instances: int, servers: int | None = None,
                  colocated: bool = True) -> HerringTraffic:
    """Herring's traffic per step for `params` gradients of `bytes_per_value` bytes on `instances` instances.

    `servers` parameter-server shards (default: one per instance). `colocated=True` is SMDDP on SageMaker: the
    shards run on the GPU instances' own CPUs (no extra instances, SageMaker FAQ), spread evenly, so an
    instance's EFA carries its buffer to the remote shards and its shards' results back to the other instances:
    2(I-1)/I x the buffer each way, the same bytes as a ring all-reduce among the I instances. `colocated=False`
    puts the shards on separate CPU machines (the classic layout, and Fairring's reading of the paper): then a
    GPU instance sends the buffer once and receives it once, half the ring's ~2x, with the servers' own links
    carrying the rest. Either way every shard carries the same bytes: instances x buffer / servers."""
    if instances < 1:
        raise ValueError(f"instances must be at least 1, got {instances}")
    servers = instances if servers is None else servers
    if servers < 1:
        raise ValueError(f"servers must be at least 1, got {servers}")
    if colocated and servers % instances:
        raise ValueError(f"{servers} server shards cannot be spread evenly over {instances} instances: with "
                         f"colocated=True give a multiple of instances (SMDDP runs them on every instance's CPUs)")
    size = params * bytes_per_value
    server_bytes = instances * size / servers
    if colocated:  # the shards on this instance are local; the rest of the buffer leaves, and their results go out
        remote = size * (instances - 1) / instances
        network = remote + (servers // instances) * server_bytes * (instances - 1) / instances
    else:
        network = size
    return HerringTraffic(instances, servers, colocated, size, size, size, server_bytes, network, network)


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
    Claim("herring_reduction_speedup", 2.0, "x faster gradient reduction than all-reduce",
          "Thangakrishnan et al., 'Herring: Rethinking the Parameter Server at Scale for the Cloud', SC20, abstract "
          "(sc20.supercomputing.org proceedings page, read 2026-11-23): 'twice as fast as all-reduce-based methods'"),
    Claim("herring_scaling_efficiency", 0.85, "scaling efficiency",
          "same abstract: BERT-large with Herring, 85% scaling efficiency on clusters of up to 2,048 NVIDIA V100 "
          "GPUs, without accuracy drop"),
]}

HISTORY = [
    ("parameter server", "Li et al. 2014, 'Scaling distributed machine learning with the parameter server' (OSDI)",
     "workers push gradients to and pull weights from server nodes; the servers' links carry W copies"),
    ("ring all-reduce (Horovod)", "Sergeev & Del Balso 2018, 'Horovod: fast and easy distributed deep learning in "
     "TensorFlow' (arXiv:1802.05799)", "peers average gradients among themselves with NCCL/MPI ring all-reduce"),
    ("PyTorch DDP", "Li et al. 2020, 'PyTorch Distributed: experiences on accelerating data parallel training' "
     "(VLDB)", "bucketed all-reduce overlapped with the backward pass"),
    ("Herring = SMDDP's AllReduce", "Thangakrishnan et al. 2020, 'Herring: Rethinking the Parameter Server at "
     "Scale for the Cloud' (SC20); the SageMaker developer guide's SMDDP introduction and FAQ",
     "a parameter server again: balanced fusion buffers split equally over server shards on the instances' "
     "CPUs, over EFA (SRD); 2 network hops, every shard the same bytes"),
]
