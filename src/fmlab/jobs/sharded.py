"""Module 7's job: pretraining a GPT with sharded data parallelism (SMP v2 on PyTorch FSDP), described once.

    run = planned_job(planned_run("gpt-30b", 300e9, "ml.p4d.24xlarge", 16), "gpt30b")   # the planned run, as a job
    spec = run.job_spec(data_uri="s3://bucket/data/v1", checkpoint_uri="s3://bucket/checkpoints/gpt30b")
    twin = run.shrink(model="small-gpt", instances=2, processes_per_host=2, hybrid_shard_degree=2, max_steps=60,
                      lr=3e-3, warmup_steps=5)   # a tiny model trains in few steps: shorter warm-up, higher LR

    chain = job_chain(run, planned_days=34.5, data_uri=..., checkpoint_uri=...)   # a run longer than 28 days
    run.storage()                            # what the volume line of the request means on this instance

The run holds the training script's own `TrainConfig` (fmlab.train.config): the hyperparameters of its request are
`config.to_hyperparameters()`, which the script parses back into the same object (tests/jobs/
test_course_job_configs.py checks every course job). Its layout is one `ParallelConfig` (fmlab.plan.parallelism), the
planner's and the engine's. `shrink` hands each keyword to the object that owns it. `job_spec` gives the `fmlab.jobs.JobSpec` that
`jobs.launch` sends to SageMaker (or runs in the sandbox):
torchrun with SMP v2 (`Torchrun(smp=SMP(...))`, so the SMP v2 image), the EFA/NCCL environment its image needs, the
training data streamed with FastFile, /opt/ml/checkpoints synced to S3, a stopping condition. `shrink` keeps
every one of those choices and changes only the sizes, so the laptop run is the same job, smaller.

The training script is `entrypoints/train.py` (fmlab.train): SMP's settings reach it as `--mp_parameters`;
with `torch.sagemaker` present it calls `tsm.init()` / `tsm.transform()`, elsewhere the same FSDP2 layout
is built with PyTorch alone (fmlab.parallel.smp).

A training job runs at most 28 days (MAX_RUN_SECONDS), all retry attempts included, so a longer run is a chain of
jobs (`job_chain`): each at most 28 days, all with the same checkpoint URI, so each job starts from the
checkpoints the previous one left in S3 (SageMaker copies them to /opt/ml/checkpoints and the training script
resumes from the newest complete one). `fmlab.jobs.guards.worst_case_chain_cost` prices the whole chain.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from fmlab.jobs.request import training_image
from fmlab.jobs.spec import Cluster, JobSpec
from fmlab.plan import catalog
from fmlab.plan.capacity import JOB_MARGIN
from fmlab.plan.compute import param_count, recompute_overhead
from fmlab.plan.layout import checkpoint_gb
from fmlab.plan.parallelism import FIELDS as PARALLEL_FIELDS
from fmlab.plan.planned import PlannedRun, planned_run
from fmlab.service.images import EFA_ENV_DOC, OLD_PLUGIN_ENVIRONMENT, efa_environment, manifest_for
from fmlab.service.rules import MAX_RUNTIME_SECONDS
from fmlab.service.smp_settings import to_mp_parameters
from fmlab.train.config import TrainConfig
from fmlab.train.planned import train_config


@dataclass(frozen=True)
class EnvVar:
    """One environment variable of the job, with why it is set and where that is documented."""

    name: str
    value: str
    purpose: str
    source: str


_EC2_EFA_NCCL = ("Amazon EC2 user guide, 'Get started with EFA and NCCL for ML workloads' (efa-start-nccl-base), "
                 "read 2026-11")
_CHEATSHEET = EFA_ENV_DOC.cite()
# The variables an image whose aws-ofi-nccl is 1.5.0 or older needs on p4/p5 (the plug-in's cheatsheet), and NCCL_DEBUG.
# `environment(image)` gives a job only what its image needs: nothing of the first three from aws-ofi-nccl 1.7.0
# (every PyTorch DLC the course uses), all three where no source gives the version (the SMP image).
EFA_ENVIRONMENT = (
    EnvVar("FI_PROVIDER", "efa", "libfabric uses the EFA provider (NCCL reaches EFA through the aws-ofi-nccl "
           "plug-in); the cheatsheet: 'Use for aws-ofi-nccl<=1.5.0 AND EFA-enabled GPU instances' (newer plug-ins "
           "choose efa themselves)", f"{_CHEATSHEET}; {_EC2_EFA_NCCL}"),
    EnvVar("FI_EFA_USE_DEVICE_RDMA", "1", "use the EFA device's RDMA for one- and two-sided transfers: GPUDirect "
           "RDMA on p4d/p4de; the cheatsheet: 'Do not set for libfabric>=1.18.0 and aws-ofi-nccl>=1.7.0'",
           f"{_CHEATSHEET}; {_EC2_EFA_NCCL}"),
    EnvVar("NCCL_PROTO", "simple", "EFA without byte ordering cannot carry NCCL's LL/LL128 protocols; 'Enabling "
           "them could lead to data corruption'. The cheatsheet: 'Use for aws-ofi-nccl<=1.5.0'; newer plug-ins set "
           "it themselves where it is needed", f"{_CHEATSHEET}; {_EC2_EFA_NCCL}; aws/aws-ofi-nccl issue #76"),
    EnvVar("NCCL_DEBUG", "INFO", "log NCCL's set-up, so the first minutes of the job show which network it "
           "chose (see NCCL_LOG_CHECKS)", _EC2_EFA_NCCL),
)
# Variables the 2021-2023 AWS examples set that the course does NOT set, and why (each read 2026-11-28). NCCL files
# all three under its "Debugging" variables, which "should generally not be set for production code" (NCCL's
# env.rst, NVIDIA/nccl @ 5067397c, v2.30.7).
_NCCL_ENV = "NCCL user guide, environment variables (NVIDIA/nccl docs/userguide/source/env.rst @ 5067397c, v2.30.7)"
_OFI = "aws/aws-ofi-nccl @ 2daf7d30 (after v1.21.1)"
OMITTED_SEED_VARIABLES = (
    EnvVar("NCCL_LAUNCH_MODE", "PARALLEL", "how NCCL launches its kernels when one process drives several GPUs; "
           "PARALLEL is the default, and since NCCL 2.9.6 GROUP is used only when asked for (and deprecated). With "
           "one process per GPU, as torchrun and mpirun start SageMaker jobs, PARALLEL changes nothing: omitted",
           f"{_NCCL_ENV}; NCCL src/init.cc and v2.9.6-1 (a46ea105); awsome-distributed-training's NeMo 1.0 config "
           f"set it (conf.template/config.yaml @ 7217859f); the plug-in never mentions it ({_OFI})"),
    EnvVar("NCCL_NET_SHARED_COMMS", "0", "since NCCL 2.12: reuse one network connection for PXN's sub-channels "
           "(default 1). NCCL shares only when the network plug-in accepts several receives at once: aws-ofi-nccl "
           "reported one (NCCL_OFI_MAX_RECVS 1) up to v1.19, so setting 0 changed nothing on EFA; from v1.20 its RDMA "
           "protocol takes 8 and its multi-recv design relies on the default 1, which setting 0 would turn off: "
           "omitted", f"{_NCCL_ENV}; NCCL src/transport/net.cc; {_OFI}, doc/multi-recv.md and v1.20.0's "
                      "NCCL_OFI_MAX_RECVS"),
    EnvVar("NCCL_ALGO", "(unset)", "forces NCCL's algorithms (ring, tree, ...); unset, NCCL chooses per topology "
           "and size, and aws-ofi-nccl's tuner (1.8+) steps aside when it is set (\"Defaulting to internal tuner\", "
           "v1.17+; an error before): left unset. AWS code still sets NCCL_ALGO=ring in places (the SageMaker "
           "training toolkit's MPI launcher for model-parallel jobs against a hang from torch 2.0; the DLC's EFA "
           "test), a workaround, not a setting to copy",
           f"{_NCCL_ENV}; {_OFI}, src/tuner/nccl_ofi_tuner.cpp (PR #986); aws/sagemaker-training-toolkit "
           "src/sagemaker_training/mpi.py @ 33839372"),
)

# What SDK v3 does on top, whatever the request says: its Torchrun driver exports FI_PROVIDER=efa,
# FI_EFA_USE_DEVICE_RDMA=1, RDMAV_FORK_SAFE=1 and NCCL_PROTO=simple on the EFA instances of its list, and its MPI
# driver passes FI_PROVIDER, NCCL_PROTO and FI_EFA_USE_DEVICE_RDMA to mpirun (sagemaker-train 1.27.0,
# container_drivers/distributed_drivers/torchrun_driver.py setup_env() and mpi_utils.py; read 2026-11-26).

# What to look for in the job's log with NCCL_DEBUG=INFO (grep without case: the plug-in's wording changed).
NCCL_LOG_CHECKS = (
    ("EFA is the provider", "NET/OFI Selected Provider is efa",
     "EC2 EFA+NCCL guide; newer aws-ofi-nccl prints 'Selected provider is efa, fabric is efa (found N nics)'"),
    ("NCCL uses the libfabric plug-in", "Using network AWS Libfabric",
     "aws-ofi-nccl <= 1.11; later versions print 'Using network Libfabric' (aws-ofi-nccl PR #530)"),
    ("GPUDirect RDMA is on", "via NET/AWS Libfabric/0/GDRDMA",
     "a channel line ending in GDRDMA (awslabs/libfabric-ci-scripts checks exactly this in run-nccl-tests.sh)"),
    ("bad sign: plain sockets", "Using network Socket",
     "NCCL fell back to TCP: EFA is not attached or the security group blocks it (SageMaker troubleshooting)"),
)


def environment(image_uri: str) -> dict[str, str]:
    """The job's EFA/NCCL Environment for its image: what the image's aws-ofi-nccl needs on p4/p5
    (fmlab.service.images.efa_environment: nothing from 1.7.0), the old plug-in's three where no source gives the
    version, and NCCL_DEBUG=INFO."""
    m = manifest_for(image_uri)
    needed = efa_environment(m)
    if needed is None:
        needed = OLD_PLUGIN_ENVIRONMENT if m is None or m.processor == "gpu" else {}
    return {v.name: v.value for v in EFA_ENVIRONMENT if v.name in needed or v.name == "NCCL_DEBUG"}


# SageMaker's limit on one job's run time, all retry attempts included: one value, in fmlab.service.rules with its
# source (the CreateTrainingJob API reference, StoppingCondition.MaxRuntimeInSeconds).
MAX_RUN_SECONDS = MAX_RUNTIME_SECONDS
MAX_RUN_DAYS = MAX_RUN_SECONDS // 86400

# Instance storage of the NVMe instances the course runs on (count, GB each). On them SageMaker provisions no EBS
# volume: "Available storage is fixed to the NVMe-type instance's storage capacity" and the training paths
# (data, checkpoints, model, output) use all of it (ResourceConfig.VolumeSizeInGB, same API model).
INSTANCE_STORAGE = {"ml.p4d.24xlarge": (8, 1000), "ml.p4de.24xlarge": (8, 1000), "ml.p5.48xlarge": (8, 3840)}
STORAGE_SOURCE = ("Amazon EC2 accelerated computing instance types, instance storage: p4d.24xlarge and p4de.24xlarge "
                  "8 x 1000 GB NVMe SSD, p5.48xlarge 8 x 3840 GB NVMe SSD (read 2026-11-24); ResourceConfig."
                  "VolumeSizeInGB in the CreateTrainingJob API reference: NVMe instances (ml.p4d, ml.g4dn, ml.g5 ...) "
                  "get no EBS volume and the request's size is not used")


# Module 7's run: the 30B GPT on 300B tokens on 16 x p4d (notebook 07's parameters; its test holds them equal).
GPT30B_RUN = {"model": "gpt-30b", "tokens": 300e9, "instance": "ml.p4d.24xlarge", "instances": 16}


def script_settings(**changes) -> TrainConfig:
    """The 30B run's settings that no plan decides: its learning rate, warm-up and 64 held-out sequences per
    evaluation (`changes` besides, e.g. parallel=ParallelConfig(backend="nccl")). Every artefact of a planned run is
    rendered on these (train_config(run, script_settings()))."""
    return TrainConfig(**{"lr": 1e-4, "warmup_steps": 100, "eval_sequences": 64, **changes})


def gpt30b_config() -> TrainConfig:
    """Module 7's training settings for the 30B GPT: the planned run's (fmlab.plan.planned.planned_run of GPT30B_RUN:
    the layout and micro-batch the planner chooses, GPT-3's global batch, all its steps, Daly's checkpoint interval
    and the saves it keeps), on script_settings()."""
    return train_config(planned_run(**GPT30B_RUN), script_settings())


def planned_job(run: PlannedRun, name: str, base: TrainConfig | None = None, **cluster) -> ShardedRun:
    """The planned run as a SageMaker training job (ShardedRun): the TrainConfig rendered from it
    (fmlab.train.planned.train_config, on `base`'s other settings: script_settings() unless given), on its instances,
    with a MaxRuntime of the run's days x JOB_MARGIN, at most SageMaker's 28 days: a longer run is
    `job_chain(job, run.days, ...)`."""
    hours = min(run.days * JOB_MARGIN * 24, MAX_RUN_SECONDS / 3600)
    config = train_config(run, base or script_settings())
    return ShardedRun(name, config, Cluster(run.instance, run.instances, **cluster), max_run_hours=hours).check()


_CLUSTER_FIELDS = tuple(f.name for f in dataclasses.fields(Cluster))
_CONFIG_FIELDS = tuple(f.name for f in dataclasses.fields(TrainConfig) if f.name not in ("parallel", "ignored"))


@dataclass(frozen=True)
class ShardedRun:
    """A sharded pretraining run: its name, the training script's TrainConfig (model, layout, steps, checkpoints:
    the very object fmlab.train reads back from the job's hyperparameters), the cluster, and the time limit."""

    name: str = "gpt30b"
    config: TrainConfig = field(default_factory=gpt30b_config)
    cluster: Cluster = field(default_factory=Cluster)
    max_run_hours: float = 120.0

    # ---- derived values -------------------------------------------------------------------------------
    @property
    def preset(self) -> catalog.ModelPreset:
        return catalog.model(self.config.model)

    @property
    def processes(self) -> int:
        return self.cluster.processes

    @property
    def tokens_per_step(self) -> int:
        c = self.config
        if c.global_batch:
            return c.global_batch * c.seq_len
        return c.parallel.dp(self.processes) * c.micro_batch * c.grad_accum * c.seq_len

    def smp(self) -> dict:
        """The SMP v2 settings (`SMP(**run.smp())` in SDK v3; `--mp_parameters` in the script)."""
        return to_mp_parameters(self.config.parallel)

    def check(self) -> ShardedRun:
        """Raise PlanError or TrainConfigError naming the fix unless the run can be built on this cluster."""
        self.config.check(self.processes)
        to_mp_parameters(self.config.parallel)  # SMP v2 always shards
        return self

    def hyperparameters(self) -> dict[str, str]:
        """What the training script gets besides the SMP settings: its TrainConfig as hyperparameters, the whole
        layout included (the checkpoint, model and output folders come from SageMaker's environment:
        /opt/ml/checkpoints, SM_MODEL_DIR, SM_OUTPUT_DATA_DIR). The script checks that the layout and SMP's
        `--mp_parameters` agree."""
        return self.config.to_hyperparameters()

    def volume_gb(self) -> int:
        """Disk per instance: room for `keep_checkpoints` full training checkpoints (at a restart SageMaker copies
        the whole checkpoint prefix to every instance), plus 20% and 30 GB for the container and data."""
        per_checkpoint = checkpoint_gb(param_count(self.preset))["training"]
        return max(30, math.ceil(30 + 1.2 * self.config.keep_checkpoints * per_checkpoint))

    def storage(self) -> dict:
        """What the request's VolumeSizeInGB means on this instance type: the size the checkpoints need, and the
        storage the instance really has (NVMe instance storage, where the requested size is not used)."""
        needed, instance_type = self.volume_gb(), self.cluster.instance_type
        if instance_type in INSTANCE_STORAGE:
            disks, each = INSTANCE_STORAGE[instance_type]
            return {"requested VolumeSizeInGB": needed, "instance storage GB": disks * each,
                    "what the instance has": f"{disks} x {each:,} GB NVMe SSD instance storage; SageMaker provisions "
                                             "no EBS volume and does not use VolumeSizeInGB",
                    "fits": disks * each >= needed, "source": STORAGE_SOURCE}
        return {"requested VolumeSizeInGB": needed, "instance storage GB": None,
                "what the instance has": f"not in the course's table: an EBS volume of {needed:,} GB (VolumeSizeInGB) "
                                         "if the instance has no NVMe instance storage; otherwise its NVMe disks, "
                                         "and VolumeSizeInGB is not used", "fits": None, "source": STORAGE_SOURCE}

    def job_spec(self, data_uri: str, checkpoint_uri: str, role: str | None = None, region: str | None = None,
                 **overrides) -> JobSpec:
        """The JobSpec of this run: SMP v2 on torchrun, EFA environment, FastFile data, synced checkpoints."""
        c = self.cluster
        fields = dict(
            name=self.name, hyperparameters=self.hyperparameters(), instance_type=c.instance_type,
            instance_count=c.instances, processes_per_host=c.processes_per_host, distribution="smp",
            smp=self.smp(), inputs={"train": data_uri}, input_mode="FastFile", checkpoint_s3_uri=checkpoint_uri,
            max_run_seconds=int(self.max_run_hours * 3600), role=role, region=region, volume_gb=self.volume_gb())
        fields.update(overrides)
        spec = JobSpec(**fields)
        if "environment" in overrides:
            return spec
        return dataclasses.replace(spec, environment=environment(training_image(spec)))

    def shrink(self, **changes) -> ShardedRun:
        """The same run with other sizes: the laptop twin of a cloud run. Each keyword goes to the object that owns
        it, by `dataclasses.replace`: the run's (name, max_run_hours), the cluster's (instance_type, instances,
        processes_per_host), the layout's (sharding, hybrid_shard_degree, tp, ...) or the TrainConfig's (model,
        max_steps, lr, ...). A new model brings its own context as seq_len unless seq_len is given too; a new model
        or cluster trains one micro-batch per replica (global_batch 0) unless global_batch is given too: the planned
        run's batch is a number of sequences for its own cluster."""
        own = {k: changes.pop(k) for k in list(changes) if k in ("name", "max_run_hours")}
        cluster = {k: changes.pop(k) for k in list(changes) if k in _CLUSTER_FIELDS}
        layout = {k: changes.pop(k) for k in list(changes) if k in PARALLEL_FIELDS}
        config = {k: changes.pop(k) for k in list(changes) if k in _CONFIG_FIELDS}
        if changes:
            raise TypeError(f"shrink() got {', '.join(sorted(changes))}: not a field of ShardedRun, Cluster, "
                            "TrainConfig or ParallelConfig")
        if "model" in config and "seq_len" not in config:
            config["seq_len"] = catalog.model(config["model"]).seq_len
        if ("model" in config or cluster) and "global_batch" not in config:
            config["global_batch"] = 0
        parallel = dataclasses.replace(self.config.parallel, **layout)
        return dataclasses.replace(self, **own, cluster=dataclasses.replace(self.cluster, **cluster),
                                   config=dataclasses.replace(self.config, parallel=parallel, **config))


def job_chain(run: ShardedRun, planned_days: float, data_uri: str, checkpoint_uri: str, margin: float = JOB_MARGIN,
              max_days: float = MAX_RUN_DAYS, **job_kwargs) -> list[JobSpec]:
    """The jobs that together give `planned_days` x `margin` of run time, none longer than `max_days`.

    The time is split evenly over the fewest jobs that keep each within the limit. Every job is the same job
    (same script, hyperparameters and checkpoint URI), named `<run>-<i>of<n>`: the first starts from nothing, each
    later one from the checkpoints the one before left under `checkpoint_uri`. Launch them one after another."""
    if not planned_days > 0:
        raise ValueError(f"planned_days must be a positive number of days, not {planned_days!r}")
    if not margin >= 1:
        raise ValueError(f"margin must be at least 1 (the planned time plus headroom), not {margin!r}")
    if not 0 < max_days <= MAX_RUN_DAYS:
        raise ValueError(f"max_days must be within SageMaker's limit of {MAX_RUN_DAYS} days per job, not {max_days!r}")
    total_s = math.ceil(planned_days * margin * 86400)
    count = math.ceil(total_s / (max_days * 86400))
    each_s = math.ceil(total_s / count)
    return [run.job_spec(data_uri, checkpoint_uri, name=f"{run.name}-{i + 1}of{count}" if count > 1 else run.name,
                         max_run_seconds=each_s, **job_kwargs) for i in range(count)]


@dataclass(frozen=True)
class PublishedThroughput:
    """A throughput a source reports for this kind of run (quoted, not measured here)."""

    tflops_per_gpu: float
    quote: str
    source: str
    note: str
    counts: str = "hardware"  # "hardware": the FLOPs executed, a recomputed forward included; "model": 6N only
    recompute: str = "full"  # the run's activation recomputation (how many FLOPs it executed per model FLOP)
    model: str = "gpt-30b"

    def hfu(self, peak_tflops: float) -> float:
        """The share of `peak_tflops` the run's executed FLOPs reach (recomputation counted)."""
        return self.tflops_per_gpu / peak_tflops * (1.0 if self.counts == "hardware" else self._executed_per_model)

    def mfu(self, peak_tflops: float) -> float:
        """The share of `peak_tflops` its model FLOPs reach (6N per token: a recomputed forward does not count)."""
        return self.tflops_per_gpu / peak_tflops / (self._executed_per_model if self.counts == "hardware" else 1.0)

    @property
    def _executed_per_model(self) -> float:
        return 1 + recompute_overhead(catalog.model(self.model), self.recompute)


SMP_2022_GPT30B = PublishedThroughput(
    141.0,
    "With a 30B parameter GPT-2 model with sequence length 2048, this new feature achieved 141 TFLOPs, a 39.7% "
    "speed up compared to DeepSpeed ZeRO-3.",
    "AWS Machine Learning Blog, 'Train gigantic models with near-linear scaling using sharded data parallelism "
    "on Amazon SageMaker', 2022-10-31 (SMP v1 sharded data parallelism, MiCS), read 2026-11",
    "The post gives 141 TFLOPs without 'per GPU'; on its clusters of up to 256 A100s only a per-GPU reading "
    "is possible (about 45% of the A100's 312 TFLOP/s dense bf16 peak): that reading is ours. SMP's example "
    "script counts 8N FLOPs per token with full recomputation: hardware FLOPs, so its MFU is about a quarter less.")
