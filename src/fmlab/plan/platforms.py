"""Where a pretraining run runs on AWS, and what each place allows: the platform is a decision (modules 3, 8, 11, 12).

    from fmlab.plan import platforms
    p = platforms.PLATFORMS["HyperPod EKS"]
    p.recoveries, p.reservations, p.job_days        # what it allows
    platforms.problems("training jobs", recovery="checkpointless", reservation="training plan")   # why not

Three places, each with what it allows, from the pages named in `source`:
- **SageMaker training jobs** (modules 3-8): a chain of jobs of at most 28 days each, each on one training plan (at
  most 64 instances); a failed job is a new job (its
  start-up, then the checkpoint download); checkpoints in `/opt/ml/checkpoints` are synced to `checkpoint_s3_uri`,
  and SageMaker copies the **whole prefix to every instance** before the script starts (module 8), unless the script
  writes to S3 itself; capacity from a training plan for `training-job`.
- **HyperPod with Slurm** (module 11): one long job on a cluster (a plan per instance group: past 64 instances); auto-resume replaces a faulty node and restarts the step from the
  newest checkpoint, each node reading its own shard; capacity from a training plan for `hyperpod-cluster`.
- **HyperPod with EKS** (module 11): the same, plus managed tiered checkpointing (CPU memory first) and checkpointless
  training (replicas in GPU memory), both EKS only; the training operator can alert on the logged loss; the EKS
  cluster's control plane costs $0.10 an hour.

EC2 Capacity Blocks reserve EC2 instances (an EKS or Slurm cluster you run yourself): none of the three uses one;
their SageMaker counterpart is the training plan (`fmlab.plan.capacity`). Torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass

from fmlab.plan import capacity
from fmlab.plan.compute import PlanError

_DG = "https://docs.aws.amazon.com/sagemaker/latest/dg/"
READ = "2026-11-28"  # the pages below (fmlab.hyperpod.sources holds the same features, with how to turn them on)


@dataclass(frozen=True)
class Platform:
    name: str
    recoveries: tuple[str, ...]  # fmlab.plan.recovery's options it can run
    reservations: tuple[str, ...]  # what capacity it can be given ("training plan"; "on demand" always)
    job_days: float | None  # one job's limit (None: one job for the whole run)
    restart: str  # what happens after a failure, in words
    synced_checkpoints: bool  # SageMaker's /opt/ml/checkpoints: the whole prefix downloaded to every instance
    restart_is_new_job: bool  # a failure ends the job: the restart pays a job's start-up
    loss_alert: str  # how a loss alert is raised there
    source: str
    plans: int | None = None  # training plans one run can hold (None: one per instance group, as many as it needs)
    cluster_usd_per_hour: float = 0.0  # what the platform costs beside its instances, while the run lasts
    cluster_cost: str = "nothing: a training job bills its instances only"


PLATFORMS: dict[str, Platform] = {p.name: p for p in [
    Platform("training jobs", ("checkpoint to S3",), ("training plan",), 28.0,
             "the job fails; the next job of the chain starts (instances, image, data), downloads the checkpoint "
             "and resumes",
             synced_checkpoints=True, restart_is_new_job=True,
             loss_alert="the script's own: fmlab.train --loss-alert 2 stops the job before it saves a diverged model",
             source=("SageMaker developer guide, 'Use checkpoints in Amazon SageMaker AI' (" + _DG
                     + "model-checkpoints.html): the checkpoint_s3_uri prefix is copied to /opt/ml/checkpoints on "
                       "every instance at start; CreateTrainingJob MaxRuntimeInSeconds at most 28 days; "
                       "'Training plans utilization for SageMaker training jobs' (target training-job); read " + READ),
             plans=1),
    Platform("HyperPod Slurm", ("checkpoint to S3",), ("training plan",), None,
             "auto-resume: HyperPod replaces the faulty node and restarts the job step, which reads its newest "
             "checkpoint, each node its own shard",
             synced_checkpoints=False, restart_is_new_job=False,
             loss_alert="the script's own: fmlab.train --loss-alert 2 stops the job before it saves a diverged model",
             source=(_DG + "sagemaker-hyperpod-resiliency-slurm-auto-resume.html ('Automatic node recovery and "
                     "auto-resume'); training plans for target hyperpod-cluster; read " + READ),
             cluster_cost="a controller instance group (ClusterSlurmConfigDetails NodeType Controller), a small "
                          "instance of the team's choosing: not priced (no SageMaker price of one was read)"),
    Platform("HyperPod EKS", ("checkpoint to S3", "tiered: memory, then S3", "checkpointless"), ("training plan",),
             None,
             "the training operator restarts the failed processes (or the job) on a healthy node; tiered "
             "checkpoints come back from a peer's memory; checkpointless hands the state over from a replica",
             synced_checkpoints=False, restart_is_new_job=False,
             loss_alert="the training operator's logMonitoringConfiguration on the logged loss, or the script's own",
             source=("API_ClusterTieredStorageConfig (tiered checkpointing: HyperPod clusters orchestrated by EKS); "
                     + _DG + "sagemaker-eks-checkpointless-in-process-recovery.html (checkpointless, EKS); " + _DG
                     + "sagemaker-eks-operator.html (the training operator: 'automatic monitoring of critical "
                       "metrics like loss spikes' from the job's logs); read " + READ),
             cluster_usd_per_hour=0.10, cluster_cost=(
                 "the EKS cluster's control plane, $0.10 an hour in standard support (AWS Containers blog, 'Amazon "
                 "EKS extended support for Kubernetes versions pricing', 2024: 'you will continue to pay $0.10 per "
                 "cluster per hour'; read 2026-11-29)")),
]}

CAPACITY_BLOCK_REFUSAL = ("an EC2 Capacity Block reserves EC2 instances, for a cluster you run yourself: SageMaker "
                          "training jobs and HyperPod clusters take a training plan instead")


def platform(name: str) -> Platform:
    if name not in PLATFORMS:
        raise PlanError(f"no platform {name!r}: choose one of {', '.join(PLATFORMS)}")
    return PLATFORMS[name]


def problems(name: str, *, recovery: str, reservation: str, instances: int | None = None) -> list[str]:
    """Why `recovery` and `reservation` (for `instances`, when given) cannot be used on platform `name` ([] when
    they can)."""
    if name not in PLATFORMS:
        return [f"no platform {name!r}: choose one of {', '.join(PLATFORMS)}"]
    p, out = PLATFORMS[name], []
    if instances is not None and reservation == "training plan" and p.plans is not None:
        try:
            held = capacity.plans_for(instances)
        except PlanError as e:
            held = ()
            out.append(str(e))
        if len(held) > p.plans:
            out.append(f"{instances} instances need {len(held)} training plans ({' + '.join(map(str, held))}); "
                       f"{name} takes {p.plans} (one TrainingPlanArn per job): use at most "
                       f"{capacity.PLAN_COUNTS[-1]} instances, or a HyperPod cluster (a plan per instance group)")
    if recovery not in p.recoveries:
        where = [q.name for q in PLATFORMS.values() if recovery in q.recoveries]
        out.append(f"{recovery!r} does not run on {name}: only on {', '.join(where) or 'no platform'} "
                   f"({name} runs {', '.join(p.recoveries)})")
    if reservation == "capacity block":
        out.append(CAPACITY_BLOCK_REFUSAL)
    elif reservation not in p.reservations:
        out.append(f"{name} cannot use a {reservation!r}: {', '.join(p.reservations)}")
    return out


def table() -> list[dict]:
    """One row per platform: what it allows (notebook 12)."""
    return [{"platform": p.name, "recovery options": ", ".join(p.recoveries), "capacity": ", ".join(p.reservations),
             "job limit": f"{p.job_days:g} days" if p.job_days else "none (one job)", "after a failure": p.restart,
             "checkpoint restore": "whole prefix to every instance" if p.synced_checkpoints else "each node its shard",
             "loss alert": p.loss_alert,
             "training plans per run": p.plans or "one per instance group",
             "costs beside the instances": p.cluster_cost} for p in PLATFORMS.values()]
