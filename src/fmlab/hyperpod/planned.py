"""The planned run on HyperPod: its Slurm script, its EKS manifest and its torchtitan TOML, rendered from the plan and
read back to the training script's settings.

    from fmlab.plan.planned import planned_run
    from fmlab.hyperpod import planned
    run = planned_run("gpt-30b", 300e9, "ml.p5.48xlarge", 16)
    spec = planned.slurm_spec(run, "/fsx/runs/gpt30b", data="/fsx/data/gpt2-tokens")   # slurm.batch_script(spec)
    job = planned.eks_manifest(run, "fmlab-gpt30b", image, data=..., checkpoint_dir="/fsx/checkpoints/gpt30b")
    toml = planned.torchtitan(run)                                                      # stack.toml_text(toml)
    planned.config_of_script(script), planned.config_of_manifest(job)                    # back to a TrainConfig
    planned.toml_fields(toml, run.instances)                                            # back to the plan's fields

Each artefact's training flags are `fmlab.train.planned.flags(train_config(run, ...))`: the layout, micro-batch,
global batch, context, steps, checkpoint interval and saves kept of the one planned run. Read back, they are the
same run again (fmlab.train.planned.differences is empty); the checks that need no plan (`slurm.script_problems`,
`eks.problems`) re-plan them from what they carry. The SageMaker job is fmlab.jobs.sharded.planned_job.
"""

from __future__ import annotations

from pathlib import Path

from fmlab.hyperpod import eks, slurm, stack
from fmlab.jobs.sharded import script_settings
from fmlab.plan import catalog
from fmlab.plan.capacity import JOB_MARGIN
from fmlab.plan.parallelism import ParallelConfig
from fmlab.plan.planned import PlannedRun, fields_of
from fmlab.train.config import TrainConfig, parse_config
from fmlab.train.planned import flags, train_config

# What HyperPod's Slurm nodes run the script in, as AWS's recipes set them up (slurm.CLUSTER_SOURCE).
HYPERPOD_CONTAINER = "/fsx/images/pytorch-2.13-ec2.sqsh"


def _config(run: PlannedRun, **changes) -> TrainConfig:
    """The planned run's settings over NCCL (HyperPod runs PyTorch's own FSDP2, not SMP), on the script's own."""
    return train_config(run, script_settings(parallel=ParallelConfig(backend="nccl")), **changes)


def slurm_spec(run: PlannedRun, work_dir: str | Path, data: str, job_name: str = "gpt30b",
               code_dir: str = "/fsx/fmlab", container_image: str = HYPERPOD_CONTAINER) -> slurm.SlurmTrainSpec:
    """The HyperPod Slurm job of the planned run: its nodes with one process per GPU, whole nodes, the GPUs as a
    generic resource, auto-resume, the container on FSx, a time limit of the job's days (run x JOB_MARGIN), and the
    planned run's flags (the spec puts its checkpoints under work_dir/checkpoints)."""
    gpus = catalog.instance(run.instance).accelerators
    hours = run.days * JOB_MARGIN * 24
    return slurm.SlurmTrainSpec(
        work_dir=work_dir, job_name=job_name, nodes=run.instances, processes_per_node=gpus, gpus_per_node=gpus,
        exclusive=True, hyperpod=True, time_limit_minutes=round(hours * 60), code_dir=code_dir,
        container_image=container_image, container_mounts="/fsx:/fsx", python="python",
        train_args=flags(_config(run, data=data)))


def eks_manifest(run: PlannedRun, name: str, image: str, data: str, checkpoint_dir: str,
                 elastic: tuple[int, int] | None = None, service_account: str | None = None) -> dict:
    """The HyperPodPyTorchJob of the planned run: one pod per instance, the planned run's flags with its checkpoints
    on the FSx claim; `elastic` (low, high) lets the operator scale it, the global batch held (more accumulation on
    fewer nodes)."""
    return eks.manifest(name, image, run.instances, run.instance,
                        flags(_config(run, data=data, checkpoint_dir=checkpoint_dir)), elastic=elastic,
                        service_account=service_account)


def torchtitan(run: PlannedRun) -> dict[str, dict]:
    """The planned run as torchtitan's TOML sections (stack.torchtitan_toml of its settings)."""
    gpus = catalog.instance(run.instance).accelerators
    return stack.torchtitan_toml(_config(run), nodes=run.instances, gpus_per_node=gpus)


def config_of_script(script: str) -> TrainConfig:
    """The training script's settings a Slurm batch script passes (its srun line's flags, parsed as the script does)."""
    return parse_config(slurm.train_args_of(script), env={})


def config_of_manifest(job: dict) -> TrainConfig:
    """The training script's settings the manifest's first container passes."""
    command = job["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["command"]
    return parse_config(eks.script_args(command) or [], env={})


def toml_fields(toml: dict[str, dict], devices: int) -> dict:
    """torchtitan's TOML read back as the planned run's fields (fmlab.plan.planned.AGREED), on `devices` GPUs."""
    par, training = toml["parallelism"], toml["training"]
    shard, tp = par["data_parallel_shard_degree"], par["tensor_parallel_degree"]
    sharding = "full" if shard == -1 or shard * tp == devices else "none" if shard == 1 else "hybrid"
    layout = ParallelConfig(sharding=sharding, hybrid_shard_degree=shard if sharding == "hybrid" else 0, tp=tp,
                            activation_checkpointing=toml["activation_checkpoint"]["mode"])
    return fields_of(layout, devices, training["local_batch_size"], training.get("global_batch_size", 0),
                     training["seq_len"], toml.get("checkpoint", {}).get("interval", 0))
