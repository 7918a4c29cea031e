"""The native path on Trainium: the course's own FSDP2/DTensor training script on ml.trn2.48xlarge with TorchNeuron.

    from fmlab.neuron.native import LLAMA2_70B_TRN2, trn2_job_spec, trn2_problems
    from fmlab.jobs.images import torchneuron_image_uri
    spec = trn2_job_spec(LLAMA2_70B_TRN2, image_uri=torchneuron_image_uri("111122223333", "us-east-2"),
                         data_uri="s3://b/data", checkpoint_uri="s3://b/ckpt", region="us-east-2")
    trn2_problems(spec)              # [] when device, image and layout fit Trainium2 (the lab's check uses it)
    capture_request(spec)            # the CreateTrainingJob request, validated against botocore's model

Nothing here is NxD: the job runs entrypoints/train.py (fmlab.train, the script of modules 5-7) with torchrun,
one process per logical NeuronCore (64 on a trn2.48xlarge: 16 Trainium2 chips x 4 at the default LNC=2,
fmlab.plan.catalog). The script picks its device where it runs (fmlab.parallel.mesh.choose_device: "neuron" and
the "neuron" process-group backend under TorchNeuron), lays the model out with the same FSDP2 + DTensor TP
recipe as on GPUs, and writes the same DCP checkpoints, so a checkpoint moves between GPU and Trainium with no
converter. What still differs: TorchNeuron is a public beta (Neuron 2.33.0) for trn2/trn3 only, graphs are
compiled by neuronx-cc (first steps slow; cache them), and not every op is supported yet
(fmlab.neuron.status has the sources).

The image: AWS documents TorchNeuron for PyTorch 2.13 as pip packages (torch-neuronx 2.13.3.0.*, Ubuntu 26.04)
and a training container for torch-neuronx 2.14 whose tag no source read here gives, so the job runs YOUR image
in ECR, built from the documented installation (fmlab.jobs.images.torchneuron_requirements / _image_uri).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import torch

from fmlab.jobs.images import TORCHNEURON_FAMILIES, ImageError, torchneuron_family
from fmlab.jobs.spec import Cluster, JobSpec
from fmlab.neuron.sharding import NeuronLayoutError
from fmlab.parallel.config import ParallelConfig
from fmlab.plan import catalog
from fmlab.plan.compute import PlanError
from fmlab.service import manifest_for
from fmlab.train.config import TrainConfig, TrainConfigError

ENTRY_POINT = "entrypoints/train.py"  # the course's own training script, as on GPUs
COURSE_TORCH = torch.__version__.split("+")[0]  # the PyTorch the course runs (2.13.0)
NATIVE_ACCELERATORS = ("Trainium2", "Trainium3")  # TorchNeuron's support matrix: Trn2 and Trn3, not Trn1
NATIVE_BACKENDS = ("auto", "neuron")  # "auto" becomes "neuron" where TorchNeuron sees a device
ECR_URI = re.compile(r"^(?P<account>\d{12})\.dkr\.ecr\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(\.cn)?/"
                     r"(?P<repo>[a-z0-9._/-]+):(?P<tag>[\w.-]+)$")
# EFA settings for multi-node collectives (the libfabric settings of the trn1 job, fmlab.neuron.job), without its
# RDMAV_FORK_SAFE=1: aws-ofi-nccl's EFA cheatsheet says "Do not use" it and to prefer FI_EFA_FORK_SAFE, which the
# plug-in does not set itself on Neuron platforms (fmlab.service.images.EFA_ENV_DOC, PLUGIN_DEFAULTS).
EFA_ENVIRONMENT = {"FI_PROVIDER": "efa", "FI_EFA_USE_DEVICE_RDMA": "1", "FI_EFA_FORK_SAFE": "1"}


def llama2_70b_trn2_config() -> TrainConfig:
    """fmlab.train's settings for continuing Llama 2 70B on 4 x trn2.48xlarge like the trn1 NxD example: 4,096-token
    sequences, a global batch of 512 (64 data-parallel replicas x micro-batch 1 x 8 accumulated passes), FSDP2 over
    the replicas and TP 4 (one Trainium2 chip's 4 logical cores, as Neuron's distributed tutorial uses), bf16."""
    return TrainConfig(model="llama2-70b", seq_len=4096, micro_batch=1, grad_accum=8, max_steps=1000, lr=1.5e-5,
                       warmup_steps=100, checkpoint_every=100, keep_checkpoints=2,
                       parallel=ParallelConfig(sharding="full", tp=4, activation_checkpointing="full",
                                               mixed_precision="bf16"))


@dataclass(frozen=True)
class Trn2NativeSettings:
    """A native-PyTorch training job on Trainium2: the training script's own TrainConfig (the object fmlab.train
    reads back from the job's hyperparameters), the cluster, the image's PyTorch and the job's limits."""

    config: TrainConfig = field(default_factory=llama2_70b_trn2_config)
    cluster: Cluster = field(default_factory=lambda: Cluster("ml.trn2.48xlarge", 4))
    torch_version: str = "2.13.0"  # the image's PyTorch: must be the course's, with its torch-neuronx family
    input_mode: str = "FastFile"
    max_run_seconds: int = 2 * 24 * 3600
    keep_alive_seconds: int = 600
    volume_gb: int = 512  # compiler work files and checkpoints before they sync
    environment: dict = field(default_factory=lambda: dict(EFA_ENVIRONMENT))

    @property
    def processes_per_host(self) -> int:
        return self.cluster.processes_per_host or catalog.instance(self.cluster.instance_type).processes

    @property
    def world_size(self) -> int:
        return self.cluster.processes

    @property
    def data_parallel(self) -> int:
        return self.config.parallel.dp(self.world_size)

    @property
    def global_batch(self) -> int:
        """Sequences per optimizer step: replicas x micro-batch x accumulated passes."""
        return self.data_parallel * self.config.micro_batch * self.config.grad_accum

    @property
    def tokens_per_step(self) -> int:
        return self.global_batch * self.config.seq_len

    def hyperparameters(self) -> dict[str, str]:
        """fmlab.train's flags: the TrainConfig as hyperparameters, as the GPU jobs of modules 5-7 send them."""
        return self.config.to_hyperparameters()

    def check(self) -> None:
        """Raise NeuronLayoutError, saying what to change, unless this job can run as configured."""
        instance_type, model = self.cluster.instance_type, catalog.model(self.config.model)
        inst = catalog.instance(instance_type)
        if inst.accelerator not in NATIVE_ACCELERATORS:
            raise NeuronLayoutError(f"{instance_type} has {inst.accelerator}: TorchNeuron runs on Trainium2 and "
                                    "Trainium3 only; choose ml.trn2.48xlarge (trn1 keeps the pinned NxD path)")
        tp = self.config.parallel.tp
        if tp > self.processes_per_host or self.processes_per_host % tp:
            raise NeuronLayoutError(f"tp={tp} must divide the {self.processes_per_host} logical NeuronCores of "
                                    f"one {instance_type} (keep tensor parallelism inside an instance)")
        if self.config.seq_len > model.seq_len:
            raise NeuronLayoutError(f"seq_len {self.config.seq_len} exceeds {model.name}'s context of {model.seq_len}")
        try:
            self.config.check(self.world_size)
            torchneuron_family(self.torch_version)
        except (PlanError, ImageError, TrainConfigError) as e:
            raise NeuronLayoutError(str(e)) from None
        if self.torch_version != COURSE_TORCH:
            raise NeuronLayoutError(f"torch_version {self.torch_version} is not the course's PyTorch {COURSE_TORCH}: "
                                    f"build the image with torch-neuronx {TORCHNEURON_FAMILIES.get(COURSE_TORCH)}")


LLAMA2_70B_TRN2 = Trn2NativeSettings()


def trn2_job_spec(settings: Trn2NativeSettings = LLAMA2_70B_TRN2, *, image_uri: str, data_uri: str,
                  checkpoint_uri: str, name: str | None = None, role: str | None = None, region: str | None = None,
                  bucket: str | None = None, output_path: str | None = None) -> JobSpec:
    """The JobSpec of a native-PyTorch trn2 job; `capture_request` / `jobs.launch` take it from there.
    image_uri: your TorchNeuron image in ECR (fmlab.jobs.images.torchneuron_image_uri)."""
    settings.check()
    for label, uri in (("data_uri", data_uri), ("checkpoint_uri", checkpoint_uri)):
        if not str(uri).startswith("s3://"):
            raise NeuronLayoutError(f"{label}={uri!r}: a trn2 job reads and writes S3; give an s3:// URI")
    spec = JobSpec(
        name=name or f"trn2-{settings.config.model}", entry_point=ENTRY_POINT,
        hyperparameters=settings.hyperparameters(), instance_type=settings.cluster.instance_type,
        instance_count=settings.cluster.instances,
        processes_per_host=settings.processes_per_host, distribution="torchrun", inputs={"train": data_uri},
        input_mode=settings.input_mode, checkpoint_s3_uri=checkpoint_uri, output_path=output_path,
        keep_alive_seconds=settings.keep_alive_seconds, max_run_seconds=settings.max_run_seconds, role=role,
        region=region, image=image_uri, environment=dict(settings.environment), bucket=bucket,
        volume_gb=settings.volume_gb)
    problems = trn2_problems(spec)
    if problems:
        raise NeuronLayoutError("; ".join(problems))
    return spec


def trn2_problems(spec: JobSpec) -> list[str]:
    """What keeps `spec` from running the course's script natively on Trainium2, each with the change to make:
    the device (an instance TorchNeuron supports, the "neuron"/"auto" backend), the image (your TorchNeuron image
    in ECR, in the job's region: not a CUDA image, not the XLA/NxD Neuron container) and the layout (one process
    per logical NeuronCore, torchrun, TP inside an instance, a layout fmlab.parallel accepts)."""
    out = []
    inst = catalog.INSTANCES.get(spec.instance_type)
    if inst is None or inst.accelerator not in NATIVE_ACCELERATORS:
        found = inst.accelerator if inst else "an instance type the catalog does not know"
        out.append(f"device: {spec.instance_type} has {found}; TorchNeuron needs Trainium2 or Trainium3 "
                   "(instance_type='ml.trn2.48xlarge')")
    hyper = spec.hyperparameters
    backend = str(hyper.get("backend", "auto"))
    if backend not in NATIVE_BACKENDS:
        out.append(f"device: backend {backend!r} cannot drive Neuron devices; use 'auto' (the script picks 'neuron' "
                   "where TorchNeuron sees a device) or 'neuron'")
    image = spec.image or ""
    m = ECR_URI.match(image)
    if not m:
        out.append(f"image: {image or 'none given'!r} is not a full ECR image URI (<account>.dkr.ecr.<region>."
                   "amazonaws.com/<repository>:<tag>): give your TorchNeuron image (torchneuron_image_uri)")
    else:
        if m["region"] != spec.aws_region:
            out.append(f"image: it is in {m['region']} but the job runs in {spec.aws_region}; SageMaker pulls from "
                       "the job's region")
        known = manifest_for(image)  # fmlab.service.images: what the image was built for, where the course knows it
        if (known and known.processor == "gpu") or m["repo"] in ("pytorch-training", "smdistributed-modelparallel") \
                or "-gpu-" in m["tag"] or "cu1" in m["tag"]:
            out.append(f"image: {m['repo']}:{m['tag']} is a CUDA image; Trainium needs TorchNeuron")
        elif known and known.processor == "cpu":
            out.append(f"image: {m['repo']}:{m['tag']} is a CPU image; Trainium needs TorchNeuron")
        elif m["repo"] == "pytorch-training-neuronx" and m["tag"].startswith(("1.", "2.1.", "2.5", "2.6", "2.7", "2.8",
                                                                               "2.9")):
            out.append(f"image: {m['tag']} is the PyTorch/XLA (NxD) container, whose training support ended; the "
                       "native path needs TorchNeuron (torch-neuronx 2.13+)")
    per_host = inst.processes if inst else None
    if spec.distribution != "torchrun":
        out.append(f"layout: distribution {spec.distribution!r}; the course's script is started with torchrun")
    if per_host and spec.processes() != per_host:
        out.append(f"layout: {spec.processes()} processes per host; run one per logical NeuronCore: "
                   f"processes_per_host={per_host} on {spec.instance_type}")
    try:
        layout = ParallelConfig.from_hyperparameters(hyper)
    except PlanError as e:
        out.append(f"layout: {e}")
        return out
    if per_host and (layout.tp > per_host or per_host % layout.tp):
        out.append(f"layout: tp={layout.tp} must divide the {per_host} logical NeuronCores of one instance")
    elif per_host:
        try:
            layout.check(spec.instance_count * per_host, catalog.MODELS.get(str(hyper.get("model", "tiny"))))
            layout.check_trainable()
        except PlanError as e:
            out.append(f"layout: {e}")
    return out
