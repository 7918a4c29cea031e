"""The recovery options AWS offers in 2026, in module 8's arithmetic: goodput of a run under failures.

    from fmlab.plan import recovery, reliability
    mtbf = reliability.job_mtbf_hours(16)                       # Llama 3's failure rate, 16 nodes
    rows = recovery.compare(state_gb=480, nodes=16, mtbf_hours=mtbf, step_seconds=10)
    [(r.name, r.interval_hours, r.goodput) for r in rows]

Three ways back from a failure (each an `Option`):
- checkpoint to S3 (module 8): every save stalls training for the node's share of the state over its S3 write
  rate; after a failure the replaced node and the others read the newest checkpoint back from S3.
- managed tiered checkpointing (HyperPod): the save goes to CPU memory of the cluster first (a memcpy-fast
  write), S3 later in the background; after a failure the state comes back from memory (a peer's copy).
  A cheap save moves Young/Daly's optimum interval, sqrt(2 delta M), down with sqrt(delta).
- checkpointless (HyperPod EKS): the model and optimizer state is replicated across groups of nodes and kept in
  GPU memory (a second copy of each shard, updated with every step), and healthy replicas hand it to the recovering
  one without a job restart (CHECKPOINTLESS_GPU_MEMORY_SOURCE): a failure it absorbs costs half a step plus its recovery, which
  AWS measured at under 2 minutes where a checkpoint restart took 15-30 minutes or more (CHECKPOINTLESS_SOURCE).
  The failures it cannot absorb (a whole replica group lost: `Assumptions.unrecoverable_share`, not published)
  restart from the durable checkpoints the run still writes to S3, at their own Daly interval, far longer than the
  S3 option's because those failures are rarer.
The S3 and tiered options pay a node replacement and a process restart (`Assumptions`); so do checkpointless's
unabsorbed failures. The tiered option holds the node's share of the state again in host (CPU) memory, checkpointless
in GPU memory, beside the training state (`memory_gb_per_node`, `memory_where`): memory the layout must leave free. Figures no AWS page publishes (write rates, replacement minutes, the unabsorbed share) are
assumptions, named as such, for the learner to change.

Goodput = 1 - wasted, the share of wall-clock time spent on new training: reliability.expected_wasted_fraction, the
exact expected waste of saving delta every tau and, per failure, the work since the last save and the restart
(module 8 teaches its first order, wasted_fraction, which overstates it where saves or restarts are long against the
MTBF); checkpointless's absorbed failures the same expectation with a step for the interval, and its steady upkeep
(`Assumptions.checkpointless_overhead`, 0 unless measured) besides. Sources: module 8's (reliability.py); the options: fmlab.hyperpod.sources.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fmlab.plan import reliability
from fmlab.plan.compute import PlanError, check_positive


@dataclass(frozen=True)
class Assumptions:
    """Rates and times no AWS page publishes for a 30B run; change them to your measurements."""

    s3_write_gb_per_s_per_node: float = 1.25  # module 8: 10 Gbit/s per node to S3
    s3_read_gb_per_s_per_node: float = 1.25
    memory_write_gb_per_s_per_node: float = 10.0  # assumed: GPU -> pinned host memory, shared by the node's 8 GPUs
    peer_gb_per_s_per_node: float = 12.5  # assumed: 100 Gbit/s of a node's EFA for state from a peer's memory
    replace_node_minutes: float = 10.0  # assumed: detect, replace (a healthy node from AWS: no spare is reserved), rejoin
    restart_minutes: float = 5.0  # assumed: processes, rendezvous, NCCL initialisation, data loader
    # assumed: failures checkpointless cannot absorb whatever its replicas (a step or checksum mismatch, a failure that
    # needs the whole job restarted: the recipe's code then falls back to the checkpoint). A second failure among a
    # shard's replicas before the first is recovered is added to it by the mechanism (options()).
    unrecoverable_share: float = 0.02
    # What keeping checkpointless's replica costs every step, beyond its memory. The mechanism adds no periodic save:
    # the replica is a second instance of the distributed optimizer (num_distributed_optimizer_instances=2), updated
    # by the step's own collectives (CHECKPOINTLESS_GPU_MEMORY_SOURCE), and no AWS page publishes a per-step cost: 0.
    # Held against AWS's "up to 95%" (CHECKPOINTLESS_SOURCE), not set to it: tests/plan/test_recovery.py.
    checkpointless_overhead: float = 0.0


# AWS's measurement of checkpointless recovery (an upper bound: "under 2 minutes"), with a spare node ready.
CHECKPOINTLESS_RECOVERY_MINUTES = 2.0
# The in-process abort's bound in AWS's checkpointless recipe (abort_timeout=60.0 in the developer guide's snippet):
# the healthy ranks stop and wait for the recovering one, which then takes its shard from a peer replica.
IN_PROCESS_ABORT_MINUTES = 1.0
REPLICA_PARTNERS = 1  # num_distributed_optimizer_instances=2: each shard has one other copy
CHECKPOINTLESS_SOURCE = ("AWS Machine Learning Blog, 'Checkpointless training on Amazon SageMaker HyperPod: Production-"
                         "scale training with faster fault recovery', 2025-12-16: '80-93% reduction in recovery time "
                         "(from 15-30 minutes or more to under 2 minutes)', 'up to 95% training goodput on cluster sizes "
                         "with thousands of AI accelerators' (read 2026-11-26 in a syndicated copy)")

CHECKPOINTLESS_GPU_MEMORY_SOURCE = (
    "SageMaker developer guide, 'In-process recovery and checkpointless training' (docs.aws.amazon.com/sagemaker/"
    "latest/dg/sagemaker-eks-checkpointless-in-process-recovery.html): 'model and optimizer states are fully "
    "replicated across multiple node groups', processes keep 'all model and optimizer states in GPU memory'; built "
    "on the NeMo framework (its recipes, not an FSDP2 script); read 2026-11-28")


@dataclass(frozen=True)
class Option:
    name: str
    save_seconds: float  # training stalled per save (0: no periodic save needed for recovery)
    restart_hours: float  # from the failure to training again
    loses: str  # "interval": half a checkpoint interval is redone; "step": half a step
    step_seconds: float = 0.0
    memory_gb_per_node: float = 0.0  # memory each node gives to a copy of the state (a tier, a replica)
    memory_where: str = ""  # "host" (tiered: CPU memory) or "GPU" (checkpointless: the replica stays on the GPUs)
    unrecoverable_share: float = 0.0  # "step" only: failures it cannot absorb, restarted from the durable save
    durable_restart_hours: float = 0.0  # "step" only: the restart of those failures (replace, restart, read S3)
    steady_overhead: float = 0.0  # share of training time lost every step to the option's upkeep


@dataclass(frozen=True)
class Result:
    name: str
    save_seconds: float
    interval_hours: float  # Daly's optimum between (durable) saves
    restart_minutes: float
    wasted: float
    goodput: float
    memory_gb_per_node: float = 0.0
    memory_where: str = ""


def options(state_gb: float, nodes: int, step_seconds: float, a: Assumptions = Assumptions(),
            node_mtbf_hours: float = reliability.LLAMA3_405B.node_mtbf_hours) -> list[Option]:
    """The three options for one run: `state_gb` of training state (weights + optimizer) over `nodes` nodes.

    Checkpointless's cost follows its mechanism: an absorbed failure waits for the replacement node (no spare is
    reserved, as for every option), the in-process abort (IN_PROCESS_ABORT_MINUTES) and the shard from a peer replica;
    nothing is redone but half a step. It cannot absorb a failure that strikes a shard's other replica before the
    first is recovered (REPLICA_PARTNERS x that recovery / the node MTBF) or one the assumptions say needs a full
    restart (`unrecoverable_share`); those restart from the durable S3 checkpoints."""
    check_positive("state_gb", state_gb)
    check_positive("step_seconds", step_seconds)
    if not isinstance(nodes, int) or nodes < 1:
        raise PlanError(f"nodes must be a whole number >= 1, not {nodes!r}")
    per_node = state_gb / nodes
    base = (a.replace_node_minutes + a.restart_minutes) / 60
    s3_save = 3600 * reliability.transfer_hours(per_node, a.s3_write_gb_per_s_per_node)
    s3_load = reliability.transfer_hours(per_node, a.s3_read_gb_per_s_per_node)
    memory_save = 3600 * reliability.transfer_hours(per_node, a.memory_write_gb_per_s_per_node)
    from_peer = reliability.transfer_hours(per_node, a.peer_gb_per_s_per_node)
    if not 0 <= a.unrecoverable_share <= 1:
        raise PlanError(f"unrecoverable_share must be a fraction in [0, 1], not {a.unrecoverable_share!r}")
    if not 0 <= a.checkpointless_overhead < 1:
        raise PlanError(f"checkpointless_overhead must be a fraction in [0, 1), not {a.checkpointless_overhead!r}")
    absorbed = (a.replace_node_minutes + IN_PROCESS_ABORT_MINUTES) / 60 + from_peer
    partner_lost = REPLICA_PARTNERS * absorbed / check_positive("node_mtbf_hours", node_mtbf_hours)
    return [
        Option("checkpoint to S3", s3_save, base + s3_load, "interval"),
        Option("tiered: memory, then S3", memory_save, base + from_peer, "interval", memory_gb_per_node=per_node,
               memory_where="host"),
        Option("checkpointless", s3_save, absorbed, "step", step_seconds, memory_gb_per_node=per_node,
               memory_where="GPU", unrecoverable_share=min(1.0, a.unrecoverable_share + partner_lost),
               durable_restart_hours=base + s3_load, steady_overhead=a.checkpointless_overhead),
    ]


def _absorbed_waste(step_hours: float, mtbf_hours: float, recovery_hours: float) -> float:
    """The share of wall clock the absorbed failures take, exactly as for a checkpoint every step (renewal theory,
    Daly's eq. 10 with no save): half a step redone and the recovery, begun again when a failure strikes during it."""
    tau = max(step_hours, 1e-12)
    return 1 - tau / (mtbf_hours * math.exp(min(recovery_hours / mtbf_hours, 700.0))
                      * math.expm1(tau / mtbf_hours))


def evaluate(option: Option, mtbf_hours: float) -> Result:
    """Daly's interval for the option's save time, and the fraction of time it wastes."""
    if option.loses == "interval":
        save_h = option.save_seconds / 3600
        interval = reliability.daly_interval_hours(save_h, mtbf_hours)
        wasted = reliability.expected_wasted_fraction(interval, save_h, mtbf_hours, option.restart_hours)
    elif option.loses == "step":  # absorbed failures: half a step and the recovery; the rest: S3 at their rate
        share, save_h = option.unrecoverable_share, option.save_seconds / 3600
        rare_mtbf = mtbf_hours / share
        interval = reliability.daly_interval_hours(save_h, rare_mtbf)
        rare = reliability.expected_wasted_fraction(interval, save_h, rare_mtbf, option.durable_restart_hours)
        absorbed = _absorbed_waste(option.step_seconds / 3600, mtbf_hours / (1 - share), option.restart_hours) \
            if share < 1 else 0.0
        wasted = min(1.0, 1 - (1 - rare) * (1 - absorbed) * (1 - option.steady_overhead))
    else:
        raise PlanError(f"Option.loses must be 'interval' or 'step', not {option.loses!r}")
    return Result(option.name, option.save_seconds, interval, 60 * option.restart_hours, wasted, 1 - wasted,
                  option.memory_gb_per_node, option.memory_where)


def compare(state_gb: float, nodes: int, mtbf_hours: float, step_seconds: float,
            assumptions: Assumptions = Assumptions()) -> list[Result]:
    """Every option for one run, evaluated under the same failure rate (`mtbf_hours`: the job's, over `nodes`)."""
    return [evaluate(o, mtbf_hours) for o in options(state_gb, nodes, step_seconds, assumptions, mtbf_hours * nodes)]


def sweep(state_gb: float, node_counts: list[int], step_seconds: float,
          assumptions: Assumptions = Assumptions()) -> dict[int, list[Result]]:
    """`compare` at each node count, each with the job MTBF of that many nodes (Llama 3's rate per node)."""
    return {n: compare(state_gb, n, reliability.job_mtbf_hours(n), step_seconds, assumptions) for n in node_counts}
