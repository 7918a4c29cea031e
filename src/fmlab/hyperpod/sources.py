"""What SageMaker HyperPod adds to a Slurm or EKS cluster for a long pretraining run, as dated, sourced facts.

    from fmlab.hyperpod.sources import HYPERPOD, table
    table()        # rows: feature, what it does, how you turn it on, what the course runs here instead, source

Module 11 runs a real Slurm on this machine; these are the parts of HyperPod that a plain Slurm does not have,
each with the AWS page it comes from and the day it was read. A feature that changes (a new flag, a new AMI
requirement) is changed here and nowhere else.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

READ = "2026-11-24"
_DG = "https://docs.aws.amazon.com/sagemaker/latest/dg/"


@dataclass(frozen=True)
class Feature:
    name: str
    what: str
    how: str  # how a user turns it on
    here: str  # what module 11 runs on this machine in its place
    source: str
    read: str = READ


HYPERPOD = [
    Feature("auto-resume (Slurm)",
            "when a job step fails on a hardware fault, HyperPod replaces the faulty node and restarts the job "
            "step, which resumes from its last saved checkpoint",
            "`srun --auto-resume=1 ...` in the sbatch script (HyperPod's Slurm plugin)",
            "the job is requeued (`scontrol requeue`, `StartTime=now`) by `run_with_auto_resume`; the script "
            "resumes from its newest complete checkpoint (module 8)",
            _DG + "sagemaker-hyperpod-resiliency-slurm-auto-resume.html ('Automatic node recovery and auto-resume')"),
    Feature("automatic node recovery",
            "a faulty node is rebooted or replaced without an operator; the cluster's NodeRecovery setting",
            "CreateCluster / UpdateCluster `NodeRecovery=Automatic` (the default; `None` only labels the node)",
            "`slurm.replace_node`: the faulty node is marked `State=FAIL Reason=Action:Replace`, its slurmd "
            "stopped and a new one started under the same name, before the job is requeued",
            _DG + "sagemaker-hyperpod-resiliency-slurm-auto-resume.html; API CreateCluster NodeRecovery"),
    Feature("health-monitoring agent",
            "a daemon on every GPU or Trainium node watches the accelerators (GPU, NVLink) and EFA and marks a "
            "node unhealthy; on Slurm since 2025-09-11 (after UpdateClusterSoftware to the newest AMI)",
            "installed by HyperPod on every node; nothing in the job",
            "the fault drill itself is the detected fault (a rank SIGKILLed at a step)",
            _DG + "sagemaker-hyperpod-resiliency-slurm-cluster-health-check.html ('Health monitoring agent')"),
    Feature("deep health checks",
            "DCGM diagnostics level 4, NVLink/GPU counts, EFA latency and bandwidth, NCCL tests across nodes; "
            "nodes under test sit in a Slurm maintenance reservation until they pass",
            "on instance start (OnStartDeepHealthChecks), or on demand: StartClusterHealthCheck",
            "not run here (no GPU); `sinfo` shows the node idle when it takes jobs",
            _DG + "sagemaker-hyperpod-resiliency-slurm-deep-health-checks.html ('Deep health checks')"),
    Feature("managed tiered checkpointing (EKS)",
            "checkpoints saved often to the cluster's CPU memory (a memory-management daemon, a share of each "
            "node's memory) and now and then to durable storage such as S3; HyperPod clusters orchestrated by EKS",
            "CreateCluster `TieredStorageConfig={Mode: Enable, InstanceMemoryAllocationPercentage: N}`; in the "
            "script, DCP's save with `SageMakerTieredStorageWriter` (amzn-sagemaker-checkpointing)",
            "the arithmetic of a cheap save (fmlab.plan.recovery), and the engine's save with the tiered writer in "
            "place of its FileSystemWriter (fmlab.hyperpod.tiered.save_change)",
            "https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ClusterTieredStorageConfig.html"),
    Feature("checkpointless training",
            "model and optimizer state replicated across node groups; after a fault the healthy replicas finish "
            "their step and hand their state to the recovering one: no checkpoint is read, at most a step is lost",
            "HyperPod EKS with the training operator >= v1.2.0 and the checkpointless NeMo recipes (p5.48xlarge)",
            "the arithmetic (fmlab.plan.recovery): no save stall, one step lost per failure",
            _DG + "sagemaker-eks-checkpointless-in-process-recovery.html ('In-process recovery and checkpointless "
                  "training'); " + _DG + "sagemaker-eks-checkpointless.html"),
    Feature("training operator (EKS)",
            "HyperPod's Kubernetes operator for PyTorch jobs: restarts only the failed processes, detects hung "
            "jobs and slow steps from the job's logs, recovery policies in the job's YAML",
            "a HyperPodPyTorchJob manifest (fmlab.hyperpod.eks)",
            "the manifest is built and checked against the operator's CRD schema",
            _DG + "sagemaker-eks-operator.html ('Using the HyperPod training operator')"),
]


def table() -> list[dict]:
    return [asdict(f) for f in HYPERPOD]
