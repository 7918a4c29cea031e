"""The trn1 training job: continued pretraining of a converted Llama with Neuron Distributed on SageMaker.

THE PATH FOR EXISTING NxD USERS, PINNED. NxD Training and the NxD Core training APIs are at end of support
(maintenance from Neuron 2.30, end of support as of 2.32: fmlab.neuron.status, with sources), so this job runs
the LAST Neuron training container that ships NxD Training, Neuron 2.30.0's
pytorch-training-neuronx:2.9.0-neuronx-py312-sdk2.30.0-ubuntu24.04 (fmlab.jobs.images), and nothing newer will
come. For new work on Trainium see fmlab.neuron.native (trn2, native PyTorch).

`Trn1TrainingSettings` holds what the job needs to know (instances, TP/PP sizes, sequence, batch, Neuron
environment); its defaults are the Llama 2 70B worked example (TP 8, PP 8, 4,096-token sequences, global
batch 512, 8 x ml.trn1.32xlarge). `trn1_job_spec` turns it into a `JobSpec` for the course's jobs layer, so the
same `capture_request` / `launch` that run every other job build the SDK v3 ModelTrainer: the Neuron PyTorch
training container (`job_images`, the one place image versions live), torchrun with one process per
NeuronCore (32 per instance), FastFile input, the converted weights and the dataset as input channels, and
/opt/ml/checkpoints synced to the checkpoint URI (new checkpoints and the Neuron compiler cache).

    from fmlab.neuron.job import LLAMA2_70B_TRN1, trn1_job_spec
    from fmlab.jobs.request import capture_request
    LLAMA2_70B_TRN1.check()                          # NeuronLayoutError naming what to change, if anything
    spec = trn1_job_spec(LLAMA2_70B_TRN1, weights_uri="s3://b/llama2-70b/nxd", data_uri="s3://b/data",
                         checkpoint_uri="s3://b/llama2-70b/checkpoints")
    captured = capture_request(spec)                 # the CreateTrainingJob request, validated; nothing runs

The entry script, entrypoints/neuron_train.py (logic in fmlab.neuron.train), needs torch-xla and
neuronx-distributed, which exist only in the Neuron container: this job runs on Trainium, never on a laptop.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fmlab.jobs.images import IMAGES, ImageError, neuron_sdk
from fmlab.jobs.images import image_uri as _image_uri
from fmlab.jobs.spec import JobSpec
from fmlab.neuron.sharding import LlamaShape, NeuronLayoutError, NxdLayout
from fmlab.plan import catalog

ENTRY_POINT = "entrypoints/neuron_train.py"
SAMPLE_SOURCE = ("aws-samples/sagemaker-trainium-examples, 3_llama2_llm_training/1_llama2_70b_nxd_training/"
                 "'2. Continued_pretraining_llama2_70b.ipynb' @ 36bfadd2ce6b369669c3f83543aa7454a5e3f273 "
                 "(the notebook of the AWS blog post on training Llama 2 with Trainium on SageMaker, 2024)")
LLAMA2_PAPER = "Touvron et al., 'Llama 2: Open Foundation and Fine-Tuned Chat Models', 2023, Table 1"
CHECKPOINT_LOCAL_PATH = "/opt/ml/checkpoints"  # SageMaker syncs it with the checkpoint URI, both ways
CACHE_DIR = f"{CHECKPOINT_LOCAL_PATH}/neuron_cache"  # compiled graphs sync to S3 too: a restart skips compiling
CHANNELS = {"train": "the packed token dataset", "weights": "the converted NxD checkpoint and its config.json"}


@dataclass(frozen=True)
class NeuronEnvVar:
    """One environment variable of the job, and what it does."""

    name: str
    value: str
    purpose: str


# XLA_DOWNCAST_BF16=1 made torch-xla keep float32 tensors as bf16 on the device; "Neuron Release 2.24 will be the
# last release to support" it (Neuron announcement "end of support XLA_USE_BF16 and XLA_DOWNCAST_BF16", read
# 2026-11-23), so it is set only for images of Neuron 2.24 or older (`env()`); newer ones need autocast or
# model.to(torch.bfloat16) in the script.
DOWNCAST_BF16 = NeuronEnvVar("XLA_DOWNCAST_BF16", "1", "torch-xla keeps torch.float32 tensors as bf16 on the device "
                             "(and float64 as fp32); supported up to Neuron 2.24 only")
LAST_SDK_WITH_DOWNCAST = (2, 24)

NEURON_ENVIRONMENT = (
    NeuronEnvVar("NEURON_CC_FLAGS", f"--model-type=transformer --distribution-strategy=llm-training "
                 f"--enable-saturate-infinity --cache_dir={CACHE_DIR}",
                 "neuronx-cc compiler flags: transformer-tuned and LLM-training optimisations, infinities "
                 "saturated to the largest float in NaN-prone ops, and a persistent cache of compiled graphs"),
    NeuronEnvVar("NEURON_FUSE_SOFTMAX", "1", "use the fused softmax kernel"),
    NeuronEnvVar("NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS", "5",
                 "how many graph executions the Neuron runtime may queue ahead asynchronously"),
    NeuronEnvVar("MALLOC_ARENA_MAX", "128", "caps glibc malloc arenas, bounding host memory of 32 processes"),
    NeuronEnvVar("FI_PROVIDER", "efa", "libfabric talks over the Elastic Fabric Adapter"),
    NeuronEnvVar("FI_EFA_USE_DEVICE_RDMA", "1", "EFA reads and writes device memory directly (RDMA)"),
    NeuronEnvVar("FI_EFA_FORK_SAFE", "1", "libfabric stays correct when the data loader forks"),
    NeuronEnvVar("RDMAV_FORK_SAFE", "1", "the RDMA verbs library stays correct across fork()"),
    NeuronEnvVar("NCCL_PROTO", "simple", "the collective protocol the sample pins"),
    NeuronEnvVar("NCCL_SOCKET_IFNAME", "^lo,docker", "bootstrap sockets avoid loopback and docker interfaces"),
)


@dataclass(frozen=True)
class Trn1TrainingSettings:
    """A SageMaker training job for NxD on Trainium; the defaults are the Llama 2 70B example of SAMPLE_SOURCE
    (TP 8, PP 8, 4,096-token sequences, global batch 512, 8 x ml.trn1.32xlarge, FastFile input)."""

    model: str = "llama2-70b"
    instance_type: str = "ml.trn1.32xlarge"
    instance_count: int = 8
    tensor_parallel: int = 8
    pipeline_parallel: int = 8
    qkv_linear: bool = False
    kv_size_multiplier: int = 1
    seq_len: int = 4096
    global_batch: int = 512
    max_steps: int = 1000
    lr: float = 1.5e-5  # continued pretraining: a tenth of Llama 2 70B's peak of 1.5e-4 (LLAMA2_PAPER)
    warmup_steps: int = 100
    checkpoint_every: int = 100
    keep_checkpoints: int = 2
    image_version: str = IMAGES["neuron"].default_version  # PyTorch of the Neuron container: 2.9.0, Neuron 2.30.0
    input_mode: str = "FastFile"
    max_run_seconds: int = 2 * 24 * 3600
    keep_alive_seconds: int = 600  # warm pool
    volume_gb: int = 512  # compiler work files and the local copy of checkpoints before they sync
    environment: tuple[NeuronEnvVar, ...] = field(default=NEURON_ENVIRONMENT)
    source: str = SAMPLE_SOURCE

    @property
    def neuron_sdk(self) -> str:
        return neuron_sdk(self.image_version)

    def image_uri(self, region: str = "us-east-1") -> str:
        """The Neuron PyTorch training container: ...pytorch-training-neuronx:2.9.0-neuronx-py312-sdk2.30.0-ubuntu24.04
        by default, the last with NxD Training (fmlab.neuron.status)."""
        return _image_uri("neuron", region, self.image_version)

    @property
    def cores_per_instance(self) -> int:
        return catalog.instance(self.instance_type).processes

    @property
    def neuron_cores(self) -> int:
        return self.instance_count * self.cores_per_instance

    @property
    def data_parallel(self) -> int:
        return self.neuron_cores // (self.tensor_parallel * self.pipeline_parallel)

    @property
    def batch_per_replica(self) -> int:
        """Sequences per data-parallel replica per step; the sample runs them as that many 1-sequence microbatches."""
        return self.global_batch // self.data_parallel

    @property
    def tokens_per_step(self) -> int:
        return self.global_batch * self.seq_len

    def nxd_layout(self) -> NxdLayout:
        return NxdLayout(self.tensor_parallel, self.pipeline_parallel, self.qkv_linear, self.kv_size_multiplier)

    def env(self) -> dict[str, str]:
        """The job's environment: `environment`, plus XLA_DOWNCAST_BF16 on images of Neuron 2.24 or older."""
        extra = (DOWNCAST_BF16,) if _sdk_tuple(self.neuron_sdk) <= LAST_SDK_WITH_DOWNCAST else ()
        return {v.name: v.value for v in (*extra, *self.environment)}

    def hyperparameters(self) -> dict:
        """The arguments of fmlab.neuron.train (the job's hyperparameters, passed as --name value)."""
        return {"tensor_parallel_size": self.tensor_parallel, "pipeline_parallel_size": self.pipeline_parallel,
                "seq_len": self.seq_len, "train_batch_size": self.batch_per_replica,
                "num_microbatches": self.batch_per_replica, "qkv_linear": int(self.qkv_linear),
                "kv_replicator": self.kv_size_multiplier, "use_zero1_optimizer": 1, "lr": self.lr,
                "warmup_steps": self.warmup_steps, "max_steps": self.max_steps,
                "checkpoint_freq": self.checkpoint_every, "num_kept_checkpoints": self.keep_checkpoints,
                "activation_checkpointing": "full",
                "pretrained_weight_dir": "/opt/ml/input/data/weights",
                "checkpoint_dir": f"{CHECKPOINT_LOCAL_PATH}/nxd", "training_dir": "/opt/ml/input/data/train"}

    def check(self) -> None:
        """Raise NeuronLayoutError, saying what to change, unless this job can run as configured."""
        inst = catalog.instance(self.instance_type)
        if inst.accelerator != "Trainium1":
            raise NeuronLayoutError(f"{self.instance_type} has {inst.accelerator} accelerators; choose "
                                    "ml.trn1.32xlarge or ml.trn1n.32xlarge")
        per_node = self.cores_per_instance
        if self.tensor_parallel > per_node:
            raise NeuronLayoutError(f"tensor_parallel={self.tensor_parallel} spans nodes; keep it within the "
                                    f"{per_node} NeuronCores of one instance (NeuronLink)")
        group = self.tensor_parallel * self.pipeline_parallel
        if self.neuron_cores % group:
            raise NeuronLayoutError(f"TP x PP = {group} does not divide the {self.neuron_cores} NeuronCores of "
                                    f"{self.instance_count} x {self.instance_type}")
        if self.global_batch % self.data_parallel:
            raise NeuronLayoutError(f"global batch {self.global_batch} does not split over {self.data_parallel} "
                                    "data-parallel replicas")
        preset = catalog.model(self.model)
        if self.seq_len > preset.seq_len:
            raise NeuronLayoutError(f"seq_len {self.seq_len} exceeds {self.model}'s context of {preset.seq_len}")
        self.nxd_layout().check(LlamaShape.from_preset(preset))
        try:
            neuron_sdk(self.image_version)
        except ImageError as e:
            raise NeuronLayoutError(str(e)) from None


def _sdk_tuple(sdk: str) -> tuple[int, ...]:
    return tuple(int(x) for x in sdk.split("."))


LLAMA2_70B_TRN1 = Trn1TrainingSettings()


def trn1_job_spec(settings: Trn1TrainingSettings = LLAMA2_70B_TRN1, *, weights_uri: str, data_uri: str,
                  checkpoint_uri: str, name: str | None = None, role: str | None = None, region: str | None = None,
                  bucket: str | None = None, output_path: str | None = None) -> JobSpec:
    """The JobSpec of a trn1 continued-pretraining job; `capture_request`/`jobs.launch` take it from there.

    weights_uri: the folder `fmlab convert hf-to-nxd` wrote (uploaded), with its config.json; data_uri: a packed
    dataset made with the model's own tokenizer; checkpoint_uri: where /opt/ml/checkpoints syncs (a restarted
    job resumes from the newest completed checkpoint there)."""
    settings.check()
    for label, uri in (("weights_uri", weights_uri), ("data_uri", data_uri), ("checkpoint_uri", checkpoint_uri)):
        if not str(uri).startswith("s3://"):
            raise NeuronLayoutError(f"{label}={uri!r}: a trn1 job reads and writes S3; give an s3:// URI")
    return JobSpec(
        name=name or f"trn1-{settings.model}",
        entry_point=ENTRY_POINT,
        hyperparameters=settings.hyperparameters(),
        instance_type=settings.instance_type,
        instance_count=settings.instance_count,
        processes_per_host=settings.cores_per_instance,
        distribution="torchrun",
        inputs={"train": data_uri, "weights": weights_uri},
        input_mode=settings.input_mode,
        checkpoint_s3_uri=checkpoint_uri,
        output_path=output_path,
        keep_alive_seconds=settings.keep_alive_seconds,
        max_run_seconds=settings.max_run_seconds,
        role=role,
        region=region,
        image="neuron",
        image_version=settings.image_version,
        environment=settings.env(),
        bucket=bucket,
        volume_gb=settings.volume_gb,
        requirements=(),  # the Neuron container brings torch-xla and neuronx-distributed; fmlab ships with the script
    )
