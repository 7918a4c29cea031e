"""Failures at scale in numbers (module 8): how often a job is interrupted, and how often to checkpoint.

    mtbf = job_mtbf_hours(nodes=16)                          # about 400 h between interruptions for 16 nodes
    daly_interval_hours(save_hours=10 / 3600, mtbf_hours=mtbf)  # the checkpoint interval that wastes least
    wasted_fraction(1.0, 10 / 3600, mtbf)                      # time lost to saving + redoing lost work
    expected_wasted_fraction(1.0, 10 / 3600, mtbf)             # the same, exactly (renewal theory)

Sources:
- failure rate: Llama 3 team, "The Llama 3 Herd of Models" (Meta, 2024), section 3.3.4 and Table 5: in a 54-day
  snapshot of pre-training on 16,384 H100 GPUs (2,048 nodes of 8) there were 466 job interruptions, 47 planned
  and 419 unexpected, about 78% of the unexpected ones hardware (GPU, HBM3, network...).
- checkpoint interval: Young 1974 ("A first order approximation to the optimum checkpoint interval", CACM
  17(9)), tau = sqrt(2 delta M); Daly 2006 ("A higher order estimate of the optimum checkpoint interval for
  restart dumps", FGCS 22(3)), tau = sqrt(2 delta M) [1 + sqrt(delta / 2M) / 3 + (delta / 2M) / 9] - delta for
  delta < 2M, else M; with delta the time to save a checkpoint and M the mean time between failures.
- wasted time, first order: every interval of tau pays delta to save, and each failure (1/M per unit time)
  loses on average half an interval plus the save in progress, plus the restart time R, plus the time until
  the failure is noticed D: a dead process is noticed at once, a hung one only when a collective times out.
- detection time D of a hang = the collective timeout in force: torch's defaults are 30 min for gloo and 10 min
  for NCCL (torch/distributed/constants.py; "Watchdog caught collective operation timeout ... ran for 600049
  milliseconds" in practice); torchtitan waits 300 s while the group forms and through the first step, then
  100 s (pytorch/torchtitan, torchtitan/config/configs/comm.py, CommConfig.init_timeout_seconds and
  train_timeout_seconds, read 2026-11-24); fmlab.train waits 300 s, then 80 s (--init-timeout,
  --collective-timeout), because torchrun adds 30 s before it SIGKILLs a frozen worker on its host
  (torch/distributed/elastic/agent/server/local_elastic_agent.py, _shutdown(timeout=30)): 80 + 5 + 30 < 120 s.

    wasted_fraction(1.0, 10 / 3600, mtbf, detection_hours=hang_detection_hours())   # a hang costs 80 s + gather
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fmlab.plan.compute import PlanError, check_positive


@dataclass(frozen=True)
class FailureRecord:
    """Interruptions a published run reported, and over what."""

    name: str
    unexpected_interruptions: int
    days: float
    gpus: int
    gpus_per_node: int
    source: str

    @property
    def node_mtbf_hours(self) -> float:
        """Mean time between unexpected interruptions caused by any one node (node-hours per interruption)."""
        return self.days * 24 * (self.gpus / self.gpus_per_node) / self.unexpected_interruptions


LLAMA3_405B = FailureRecord(
    "Llama 3 405B pre-training, 54-day snapshot", 419, 54, 16_384, 8,
    "Meta, 'The Llama 3 Herd of Models' (2024), section 3.3.4, Table 5: 466 interruptions, 47 planned, 419 "
    "unexpected, on 16,384 H100 GPUs; 'one failure every three hours' (read 2026-11)")

# Meta's research clusters (RSC-1: 16k A100; RSC-2: 8k; 11 months, 4 million jobs, 150 million A100 GPU-hours).
# The paper models a job's mean time to failure as 1 / (N_nodes x r_f), with r_f = 6.50 failures per 1,000 node-days
# on RSC-1 (2.34 on RSC-2), and projects from it 1.8 h at 16,384 GPUs; its ETTR sentence uses the same 6.50 ("failure
# rate needs to dramatically improve from 6.50 to ~1"). The course takes that rate: 3,692 node-hours per failure, the
# paper's own basis for a training job. Its measured job MTTFs (47.7 days for 8-GPU jobs, 7.9 h for 1,024-GPU jobs) imply
# 3.3-3.7x that rate under the same 1/N model: they count every job failure of a shared cluster, not a node's share
# of a training job's, and are kept apart (RESEARCH_CLUSTER_JOB_MTTF_HOURS), not used as a rate.
RESEARCH_CLUSTER_FAILURES_PER_1000_NODE_DAYS = 6.5  # RSC-1's r_f
RESEARCH_CLUSTER_JOB_MTTF_HOURS = (1024, 7.9)  # GPUs, hours: measured on the shared clusters, every job failure
KOKOLIS_SOURCE = ("Kokolis et al., 'Revisiting Reliability in Large-Scale Machine Learning Research Clusters' (arXiv "
                  "2410.21680, HPCA 2025): r_f = 6.50 failures per 1,000 node-days on RSC-1 (2.34 on RSC-2), MTTF = "
                  "1 / (N_nodes r_f), 1.8 h projected at 16,384 GPUs; abstract read 2026-11-28, the body's figures as "
                  "public summaries of the paper quote them (2026-11-29; the body was not stored here)")
RESEARCH_CLUSTERS = FailureRecord(  # 65 failures in 10,000 node-days (1,000 nodes for 10 days): RSC-1's r_f
    "Meta's research clusters (RSC-1)", 65, 10, 8_000, 8, KOKOLIS_SOURCE)


def node_mtbf_range_hours() -> tuple[float, float]:
    """The node MTBF between Meta's research clusters (RSC-1's failure rate, Kokolis et al.) and Llama 3's dedicated
    run (unexpected interruptions only): the range the capstone's ledger draws failures from."""
    return RESEARCH_CLUSTERS.node_mtbf_hours, LLAMA3_405B.node_mtbf_hours


# "Checkpoint frequently: every 1 to 3 hours" is the advice the course quotes from AWS's best-practices post.
BEST_PRACTICE_INTERVAL_HOURS = (1.0, 3.0)
BEST_PRACTICE_SOURCE = ("AWS Machine Learning Blog, 'Training large language models on Amazon SageMaker: best "
                        "practices' (2023)")


def _positive(name: str, value: float) -> float:
    return float(check_positive(name, value))


def job_mtbf_hours(nodes: int, node_mtbf_hours: float = LLAMA3_405B.node_mtbf_hours) -> float:
    """Mean time between interruptions of a synchronous job on `nodes` nodes: any one node stops them all."""
    if not isinstance(nodes, int) or nodes < 1:
        raise PlanError(f"nodes must be a whole number >= 1, not {nodes!r}")
    return _positive("node_mtbf_hours", node_mtbf_hours) / nodes


def young_interval_hours(save_hours: float, mtbf_hours: float) -> float:
    """Young's optimum checkpoint interval, sqrt(2 delta M)."""
    return math.sqrt(2 * _positive("save_hours", save_hours) * _positive("mtbf_hours", mtbf_hours))


def daly_interval_hours(save_hours: float, mtbf_hours: float) -> float:
    """Daly's higher-order optimum checkpoint interval (time computing between two saves)."""
    delta, m = _positive("save_hours", save_hours), _positive("mtbf_hours", mtbf_hours)
    if delta >= 2 * m:
        return m
    x = delta / (2 * m)
    return math.sqrt(2 * delta * m) * (1 + math.sqrt(x) / 3 + x / 9) - delta


def wasted_fraction(interval_hours: float, save_hours: float, mtbf_hours: float, restart_hours: float = 0.0,
                    detection_hours: float = 0.0) -> float:
    """Fraction of wall-clock time not spent on new training: saving, redoing lost work, noticing the failure
    (`detection_hours`: for a hang, the collective timeout, hang_detection_hours()), restarting."""
    tau = _positive("interval_hours", interval_hours)
    delta, m = _positive("save_hours", save_hours), _positive("mtbf_hours", mtbf_hours)
    for name, value in (("restart_hours", restart_hours), ("detection_hours", detection_hours)):
        if not value >= 0:
            raise PlanError(f"{name} must be >= 0, not {value!r}")
    saving = delta / (tau + delta)
    lost = ((tau + delta) / 2 + detection_hours + restart_hours) / m
    return min(1.0, saving + lost)


def expected_wasted_fraction(interval_hours: float, save_hours: float, mtbf_hours: float,
                             restart_hours: float = 0.0, detection_hours: float = 0.0) -> float:
    """The exact expected waste under exponential failures (renewal theory), where `wasted_fraction`'s first order
    breaks: a segment of tau training and delta saving commits only if no failure strikes in it, and a restart R
    (after detection D) is itself begun again when a failure strikes during it. Expected wall time per segment:
    M e^((R + D)/M) (e^((tau + delta)/M) - 1) (Daly 2006, eq. 10, with R + D for R); waste = 1 - tau / that.
    Its first-order expansion is `wasted_fraction`, which overstates the waste by a few per cent at normal scale
    and by a third once a save costs a fifth of the MTBF (tests/plan/test_reliability.py)."""
    tau = _positive("interval_hours", interval_hours)
    delta, m = _positive("save_hours", save_hours), _positive("mtbf_hours", mtbf_hours)
    for name, value in (("restart_hours", restart_hours), ("detection_hours", detection_hours)):
        if not value >= 0:
            raise PlanError(f"{name} must be >= 0, not {value!r}")
    exponent = (restart_hours + detection_hours) / m
    if exponent + (tau + delta) / m > 700:
        return 1.0
    segment = m * math.exp(exponent) * math.expm1((tau + delta) / m)
    return 1 - tau / segment


# seconds from a hang to the run failing, by setting (see the module docstring for the sources)
HANG_DETECTION_SECONDS = {
    "NCCL default timeout (10 min)": 600.0,
    "torchtitan after the first step (100 s)": 100.0,
    "fmlab.train after the first step (80 s)": 80.0,
}
TRACE_GATHER_SECONDS = 5.0  # fmlab.train: the survivors then wait up to 5 s for each other's traces


def hang_detection_hours(collective_timeout_s: float = 80.0, gather_s: float = TRACE_GATHER_SECONDS) -> float:
    """Hours from a rank hanging to the run failing with the rank named: the collective timeout in force after
    the first step, plus the survivors' wait for each other's traces (measured in fmlab.train with the default
    settings, 2 gloo processes, one SIGSTOPped: named 85.1 s after the freeze with the 80 s timeout, 2026-11-24)."""
    return (_positive("collective_timeout_s", collective_timeout_s) + max(0.0, gather_s)) / 3600


def transfer_hours(gigabytes: float, gigabytes_per_second: float) -> float:
    """Hours to move `gigabytes` at a sustained rate (a checkpoint save, or a download at restart)."""
    if gigabytes < 0:
        raise PlanError(f"gigabytes must be >= 0, not {gigabytes!r}")
    return gigabytes / _positive("gigabytes_per_second", gigabytes_per_second) / 3600


def implied_restart_hours(goodput: float, save_hours: float, mtbf_hours: float, interval_hours: float | None = None,
                          detection_hours: float = 0.0) -> float:
    """The restart time at which a run saving every `interval_hours` (default: Daly's) keeps exactly `goodput` of its
    wall clock under exponential failures (expected_wasted_fraction, solved for R by bisection): the longest restart a
    reported goodput allows. PlanError when even an instant restart falls short."""
    if not 0 < goodput < 1:
        raise PlanError(f"goodput must be a fraction in (0, 1), not {goodput!r}")
    tau = interval_hours or daly_interval_hours(save_hours, mtbf_hours)

    def waste(restart: float) -> float:
        return expected_wasted_fraction(tau, save_hours, mtbf_hours, restart, detection_hours)

    if waste(0.0) >= 1 - goodput:
        raise PlanError(f"even an instant restart keeps less than {goodput:.0%}: saves of {3600 * save_hours:.0f} s "
                        f"every {tau:.2f} h against a failure every {mtbf_hours:.2f} h waste {waste(0.0):.1%}")
    low, high = 0.0, mtbf_hours
    while waste(high) < 1 - goodput:
        high *= 2
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (mid, high) if waste(mid) < 1 - goodput else (low, mid)
    return (low + high) / 2
