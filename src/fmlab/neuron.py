"""Hugging Face Llama <-> AWS Neuron Distributed (NxD) checkpoints, and the settings of a trn1 training job.

Trainium trains with NxD's tensor- and pipeline-parallel layers, which load one state dict per (tp, pp) rank. To
continue pretraining a Hugging Face Llama on trn1, convert it to that layout; to serve the result, convert back.
No Neuron package is needed (or available on PyPI): the rules are in `neuron_layout`, the file formats in
`neuron_files`, and both match NxD's source (cited there).

    from fmlab.neuron import hf_to_nxd, nxd_to_hf, LLAMA2_70B_TRN1
    hf_to_nxd("tiny-llama/", "nxd/", tp=2, pp=2)                       # nxd/pretrained_weight/model/*.pt + done
    hf_to_nxd("tiny-llama/", "nxd-legacy/", tp=4, pp=1, layout="legacy", qkv_linear=True, kv_size_multiplier=2)
    nxd_to_hf("nxd/", "restored/", config="tiny-llama/config.json")    # newest completed tag, back to HF
    LLAMA2_70B_TRN1.check(); LLAMA2_70B_TRN1.image_uri("us-west-2")

The same from a shell: `fmlab convert hf-to-nxd --input HF_DIR --output DIR --tp 2 --pp 2` and
`fmlab convert nxd-to-hf --input DIR --output HF_DIR --config HF_DIR/config.json`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from fmlab import catalog
from fmlab.neuron_files import (
    find_shard_files,
    read_config,
    read_hf_folder,
    read_shards,
    write_hf_folder,
    write_shards,
)
from fmlab.neuron_layout import (
    HEAD,
    LAYER_KEY,
    NORM,
    LlamaShape,
    NeuronLayoutError,
    NxdLayout,
    Shards,
    merge_shards,
    pipeline_stages,
    shard_shape,
    shard_state_dict,
    stage_keys,
)

DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32, "keep": None}
IGNORED_HF_KEYS = ("rotary_emb.inv_freq",)  # a buffer older Llama checkpoints saved; recomputed at load time


@dataclass
class ConversionReport:
    """What a conversion did: where, how, how many files and bytes, how long."""

    direction: str
    source: Path
    target: Path
    layout: str
    nxd: NxdLayout
    dtype: str
    files: list[Path]
    seconds: float
    tag: str = ""

    @property
    def total_bytes(self) -> int:
        return sum(f.stat().st_size for f in self.files)

    def tree(self) -> str:
        """The files written, relative to the target folder, with their sizes."""
        return "\n".join(f"{f.relative_to(self.target)}  ({f.stat().st_size:,} bytes)" for f in self.files)

    def summary(self) -> str:
        n = self.nxd
        return (f"{self.direction}: {len(self.files)} files, {self.total_bytes / 1e6:.2f} MB in {self.seconds:.2f} s "
                f"({self.layout} layout, tp={n.tp}, pp={n.pp}, qkv_linear={n.qkv_linear}, "
                f"kv_size_multiplier={n.kv_size_multiplier}, dtype {self.dtype})")


def _checked_hf_state(state: dict[str, torch.Tensor], shape: LlamaShape) -> dict[str, torch.Tensor]:
    """The state dict restricted to the keys of the config's Llama, or an error naming what is missing or extra."""
    state = {k: v for k, v in state.items() if not k.endswith(IGNORED_HF_KEYS)}
    expected = shape.hf_keys()
    missing = [k for k in expected if k not in state]
    extra = sorted(set(state) - set(expected))
    if missing or extra:
        raise NeuronLayoutError(f"the Hugging Face weights do not match their config ({shape.layers} layers): "
                                f"missing {missing[:4] or 'nothing'}, unexpected {extra[:4] or 'nothing'}")
    return {k: state[k] for k in expected}


def _cast(state: dict[str, torch.Tensor], dtype: str) -> dict[str, torch.Tensor]:
    if dtype not in DTYPES:
        raise NeuronLayoutError(f"dtype {dtype!r} is unknown: choose bf16 (Trainium's training type), fp32 or keep")
    target = DTYPES[dtype]
    return state if target is None else {k: v.to(target) for k, v in state.items()}


def hf_state_to_nxd(state: dict[str, torch.Tensor], config: dict, layout: NxdLayout, dtype: str = "keep") -> Shards:
    """In memory: a Hugging Face Llama state dict and its config -> NxD shards {(tp_rank, pp_rank): state dict}."""
    shape = LlamaShape.from_config(config)
    layout.check(shape)
    return shard_state_dict(_cast(_checked_hf_state(state, shape), dtype), shape, layout)


def hf_to_nxd(hf_dir: str | Path, output_dir: str | Path, tp: int = 1, pp: int = 1, layout: str = "current",
              qkv_linear: bool = False, kv_size_multiplier: int = 1, dtype: str = "bf16",
              tag: str = "pretrained_weight", user_content: dict | None = None,
              overwrite: bool = False) -> ConversionReport:
    """Convert a Hugging Face Llama folder into an NxD checkpoint for tensor size `tp` and `pp` pipeline stages.

    layout "current" writes <output>/<tag>/model/dp_rank_00_tp_rank_XX_pp_rank_YY.pt and the `done` marker (NxD
    trainers load the tag "pretrained_weight" as their starting weights); "legacy" writes
    <output>/tp_rank_XX_pp_rank_YY/checkpoint.pt. dtype: bf16 (default, what trn1 trains in), fp32, or keep.
    """
    start = time.perf_counter()
    nxd = NxdLayout(tp=tp, pp=pp, qkv_linear=qkv_linear, kv_size_multiplier=kv_size_multiplier)
    config, state = read_hf_folder(hf_dir)
    shards = hf_state_to_nxd(state, config, nxd, dtype)
    files = write_shards(shards, output_dir, layout=layout, tag=tag, user_content=user_content, overwrite=overwrite)
    return ConversionReport("hf-to-nxd", Path(hf_dir), Path(output_dir), layout, nxd, dtype, files,
                            time.perf_counter() - start, tag if layout == "current" else "")


def detect_layout(shards: Shards, shape: LlamaShape) -> NxdLayout:
    """Read T, P, qkv_linear and the KV multiplier off a complete grid of shards, or say which rank is missing."""
    tp = 1 + max(t for t, _ in shards)
    pp = 1 + max(p for _, p in shards)
    first = shards[(0, 0)]
    if any(k.endswith("qkv_proj.weight_qkv") for k in first):
        raise NeuronLayoutError("these shards fuse q, k and v into qkv_proj.weight_qkv (NxD's fuse_qkv); convert them "
                                "with fuse_qkv off, or split weight_qkv into weight_q/_k/_v first")
    down = next((v for k, v in first.items() if k.endswith("mlp.down_proj.weight")), None)
    if down is None:
        raise NeuronLayoutError("tp_rank_00_pp_rank_00 holds no mlp.down_proj.weight: not a Llama NxD shard")
    tp_from_shape = shape.intermediate // down.shape[1]
    if tp_from_shape != tp:
        raise NeuronLayoutError(f"each shard holds 1/{tp_from_shape} of down_proj, so {tp_from_shape} tensor-parallel "
                                f"ranks are expected, but files exist for tp ranks 0..{tp - 1}: a rank is missing "
                                "or the config belongs to another model")
    layers = {int(m.group(1)) for state in shards.values() for k in state if (m := LAYER_KEY.match(k))}
    absent = sorted(set(range(shape.layers)) - layers)
    ends = [k for k in (NORM, HEAD) if not any(k in state for state in shards.values())]
    if absent or ends:
        raise NeuronLayoutError(f"layers {absent} and {ends} are in no shard: a pipeline rank is missing (found pp "
                                f"ranks 0..{pp - 1}) or the config has more layers than the checkpoint")
    firsts = [min((int(m.group(1)) for k in shards[(0, p)] if (m := LAYER_KEY.match(k))), default=-1)
              for p in range(pp)]
    if pp > shape.layers or firsts != [s.start for s in pipeline_stages(shape.layers, pp)]:
        raise NeuronLayoutError(f"the layers are not cut into {pp} stages the way NxD cuts them "
                                f"({pipeline_stages(shape.layers, pp)})")
    key_k = next((k for k in first if k.endswith("qkv_proj.weight_k")), None)
    if key_k is None:
        return NxdLayout(tp=tp, pp=pp)
    multiplier, rest = divmod(first[key_k].shape[0] * tp, shape.kv_heads * shape.head_dim)
    if rest:
        raise NeuronLayoutError(f"{key_k} has {first[key_k].shape[0]} rows per rank: not whole replicated KV heads")
    layout = NxdLayout(tp=tp, pp=pp, qkv_linear=True, kv_size_multiplier=multiplier)
    try:
        layout.check(shape)
    except NeuronLayoutError as e:
        raise NeuronLayoutError(f"these shards do not fit the given config ({e}); pass the model's own config") from e
    return layout


def nxd_to_hf(nxd_dir: str | Path, output_dir: str | Path, config: str | Path,
              tag: str | None = None) -> ConversionReport:
    """Convert an NxD checkpoint (either layout; the newest completed tag unless `tag`) back to a Hugging Face
    folder (model.safetensors + config.json) that `LlamaForCausalLM.from_pretrained` loads. dtype is kept."""
    start = time.perf_counter()
    cfg = read_config(config)
    shape = LlamaShape.from_config(cfg)
    found = find_shard_files(nxd_dir, tag)
    shards = read_shards(found)
    nxd = detect_layout(shards, shape)
    full = merge_shards(shards, shape, nxd)
    files = write_hf_folder(full, cfg, output_dir)
    dtype = str(next(iter(full.values())).dtype).removeprefix("torch.")
    return ConversionReport("nxd-to-hf", Path(nxd_dir), Path(output_dir), found.layout, nxd, dtype, files,
                            time.perf_counter() - start, found.tag)


def shard_table(shape: LlamaShape, layout: NxdLayout, pp_rank: int = 0) -> list[dict]:
    """One row per NxD key of stage `pp_rank`: how it is split and its shape on every tensor-parallel rank."""
    rows = []
    for key in stage_keys(shape, layout, pp_rank):
        part = LAYER_KEY.match(key).group(2) if LAYER_KEY.match(key) else key
        if "layernorm" in part or key == NORM:
            rule = "whole on every rank (RMSNorm)"
        elif part in ("model.embed_tokens.weight", HEAD):
            rule = "vocabulary split, dim 0"
        elif part in ("self_attn.o_proj.weight", "mlp.down_proj.weight"):
            rule = "row-parallel, dim 1"
        elif "gate_up" in part:
            rule = "column-parallel, dim 0: [gate rows; up rows] of this rank"
        elif layout.qkv_linear and part.endswith(("weight_k", "weight_v")):
            rule = f"column-parallel, dim 0, after tiling K/V heads x{layout.kv_size_multiplier}"
        else:
            rule = "column-parallel, dim 0"
        rows.append({"key": key, "split": rule, "shape_per_rank": shard_shape(key, shape, layout)})
    return rows


# ------------------------------------------------------------------ the trn1 job (data for the jobs module)

NEURON_CORES_PER_CHIP = 2  # AWS Trn1 page and Neuron docs: each Trainium (v1) chip has two NeuronCore-v2
SAMPLE_SOURCE = ("aws-samples/sagemaker-trainium-examples, 3_llama2_llm_training/1_llama2_70b_nxd_training/"
                 "'2. Continued_pretraining_llama2_70b.ipynb' @ 36bfadd2ce6b369669c3f83543aa7454a5e3f273 "
                 "(the notebook of the AWS blog post on training Llama 2 with Trainium on SageMaker, 2024)")


@dataclass(frozen=True)
class NeuronEnvVar:
    """One environment variable of the job, and what it does."""

    name: str
    value: str
    purpose: str


CACHE_DIR = "/opt/ml/checkpoints/neuron_cache"  # under the checkpoint path, so compiled graphs sync to S3
NEURON_ENVIRONMENT = (
    NeuronEnvVar("XLA_DOWNCAST_BF16", "1", "torch-xla keeps torch.float32 tensors as bf16 on the device (and "
                 "float64 as fp32): bf16 training without changing the model code. Deprecated from Neuron 2.23 "
                 "in favour of autocast or model.to(torch.bfloat16)"),
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
    neuron_sdk: str = "2.15.0"
    framework_version: str = "1.13.1"  # PyTorch of the Neuron training container
    python_version: str = "py310"
    os_version: str = "ubuntu20.04"
    dlc_account: str = "763104351884"  # AWS Deep Learning Containers registry (all commercial regions but a few)
    input_mode: str = "FastFile"
    max_run_seconds: int = 2 * 24 * 3600
    keep_alive_seconds: int = 600  # warm pool
    checkpoint_local_path: str = "/opt/ml/checkpoints"
    pretrained_weight_dir: str = "/opt/ml/checkpoints/llama70b_weights"
    environment: tuple[NeuronEnvVar, ...] = field(default=NEURON_ENVIRONMENT)
    source: str = SAMPLE_SOURCE

    def image_uri(self, region: str = "us-east-1") -> str:
        """The Neuron PyTorch training container, e.g. ...pytorch-training-neuronx:1.13.1-neuronx-py310-sdk2.15.0-..."""
        return (f"{self.dlc_account}.dkr.ecr.{region}.amazonaws.com/pytorch-training-neuronx:"
                f"{self.framework_version}-neuronx-{self.python_version}-sdk{self.neuron_sdk}-{self.os_version}")

    @property
    def neuron_cores(self) -> int:
        return self.instance_count * catalog.instance(self.instance_type).accelerators * NEURON_CORES_PER_CHIP

    @property
    def data_parallel(self) -> int:
        return self.neuron_cores // (self.tensor_parallel * self.pipeline_parallel)

    @property
    def batch_per_replica(self) -> int:
        """Sequences per data-parallel replica per step; the sample runs them as that many 1-sequence microbatches."""
        return self.global_batch // self.data_parallel

    def nxd_layout(self) -> NxdLayout:
        return NxdLayout(self.tensor_parallel, self.pipeline_parallel, self.qkv_linear, self.kv_size_multiplier)

    def env(self) -> dict[str, str]:
        return {v.name: v.value for v in self.environment}

    def hyperparameters(self) -> dict:
        """What the sample passes to run_llama_nxd.py (the SageMaker job's hyperparameters)."""
        return {"tensor_parallel_size": self.tensor_parallel, "pipeline_parallel_size": self.pipeline_parallel,
                "seq_len": self.seq_len, "train_batch_size": self.batch_per_replica,
                "num_microbatches": self.batch_per_replica, "qkv_linear": int(self.qkv_linear),
                "kv_replicator": self.kv_size_multiplier, "use_zero1_optimizer": 1, "use_meta_device_init": 1,
                "pretrained_weight_dir": self.pretrained_weight_dir,
                "checkpoint_dir": f"{self.checkpoint_local_path}/checkpts", "training_dir": "/opt/ml/input/data/train"}

    def check(self) -> None:
        """Raise NeuronLayoutError, saying what to change, unless this job can run as configured."""
        inst = catalog.instance(self.instance_type)
        if inst.accelerator != "Trainium1":
            raise NeuronLayoutError(f"{self.instance_type} has {inst.accelerator} accelerators; choose "
                                    "ml.trn1.32xlarge or ml.trn1n.32xlarge")
        per_node = inst.accelerators * NEURON_CORES_PER_CHIP
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


LLAMA2_70B_TRN1 = Trn1TrainingSettings()
