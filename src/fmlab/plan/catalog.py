"""Facts as data: accelerator instances, model presets and published training runs.

Every figure here comes from a public source, named beside it. Prices move: each price carries the
region and the date it was read, and `fmlab plan` prints them so a learner knows what they are looking at.

    >>> from fmlab.plan.catalog import INSTANCES, MODELS
    >>> INSTANCES["ml.p4d.24xlarge"].peak_tflops_bf16
    312.0
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

# Training processes per device: one per GPU, one per (logical) NeuronCore.
# - Trainium1: AWS Trn1 page and Neuron docs: each chip has two NeuronCore-v2, so a trn1.32xlarge's 16 chips
#   run 32 processes.
# - Trainium2: each chip has eight physical NeuronCore-v3; the default Logical NeuronCore configuration,
#   LNC=2, pairs them into four logical NeuronCores per chip: "64 ranks per instance" on a trn2.48xlarge (Neuron
#   docs, "Best practices for training on AWS Neuron" and "Logical NeuronCore configuration", read 2026-11-23).
#   With NEURON_LOGICAL_NC_CONFIG=1 a chip exposes 8 cores; the planner assumes the default.
PROCESSES_PER_DEVICE = {"Trainium1": 2, "Trainium2": 4}
GB = 1e9  # decimal gigabyte: the unit of the ZeRO paper and of AWS memory figures
GIB = 2**30


@dataclass(frozen=True)
class Instance:
    """One SageMaker instance type and its accelerators."""

    name: str
    accelerator: str
    accelerators: int  # devices per instance (GPUs, or Trainium chips)
    device_memory_gb: float  # memory of ONE device, decimal GB
    peak_tflops_bf16: float  # dense (no sparsity) bf16 peak of ONE device
    network_gbps: int  # instance network bandwidth (EFA where present)
    price_per_hour: float  # USD per instance-hour, of the kind `price_basis` names; NaN where none is published
    price_region: str = "us-east-1"
    price_date: str = "2024-06"  # when the price was read
    source: str = ""
    price_basis: str = "SageMaker training, on-demand"  # what the price is, when it is not SageMaker's own

    @property
    def price_known(self) -> bool:
        """False where no published price was found (price_per_hour is NaN): costs come out NaN, pass a price."""
        return math.isfinite(self.price_per_hour) and self.price_per_hour > 0

    @property
    def price_kind(self) -> str:
        """What the price is, in one short phrase: service and purchase option, Region, date read ("none published"
        where there is no price). Two prices compare only when their kinds are equal (compute.one_price_kind)."""
        if not self.price_known:
            return "none published"
        return f"{self.price_basis.split(' (')[0].split(':')[0]}, {self.price_region}, read {self.price_date}"

    @property
    def cluster_peak_tflops(self) -> float:
        return self.accelerators * self.peak_tflops_bf16

    @property
    def processes(self) -> int:
        """Training processes per instance, as SageMaker's launchers start them (one per GPU or NeuronCore)."""
        return self.accelerators * PROCESSES_PER_DEVICE.get(self.accelerator, 1)


_PRICE_SOURCE = ("Amazon SageMaker AI pricing page, on-demand Training, us-east-1 (read 2024-06; NOT re-read on "
                 "2026-11-23: the page renders its instance tables with JavaScript and no stored copy of them could "
                 "be read, so this is the 2024-06 price. EC2's own on-demand prices of P4/P5 fell in 2025 (p5.48xlarge "
                 "$98.32 -> $55.04, instances.vantage.sh data of 2026-08-26): SageMaker's may have fallen too)")
# Where no SageMaker training price could be read, the EC2 on-demand price stands in, flagged in price_basis.
# SageMaker's price is higher than EC2's for the same instance (2024-06: ml.p5.48xlarge $113.07 against EC2
# p5.48xlarge $98.32, +15%), so these understate a SageMaker bill.
_EC2_PRICES = ("EC2 on-demand Linux price, us-east-1, from instances.vantage.sh's data as republished in "
               "github.com/tsaol/aws-gpu data/{family}_instances.js (generated 2026-08-26, read 2026-11-23)")
_EC2_BASIS = "EC2 on-demand (no SageMaker training price found): a SageMaker training job costs more"
_NO_PRICE = "none published: no on-demand price found for it; pass your own price (price_per_hour=...)"
_A100 = "NVIDIA A100 datasheet: 312 TFLOP/s dense BF16 (624 with sparsity)"
_H100 = "NVIDIA H100 SXM datasheet: 989 TFLOP/s dense BF16 (1,979 with sparsity)"
_H200 = ("NVIDIA H200 datasheet: 141 GB HBM3e, BF16 1,979 TFLOP/s WITH sparsity, so 989 dense (the same GH100 "
         "tensor cores as H100)")
_B200 = ("NVIDIA HGX B200 datasheet: per GPU FP16/BF16 Tensor Core 4.5 PFLOP/s, a WITH-sparsity figure like all of "
         "NVIDIA's tensor numbers, so 2,250 TFLOP/s dense; 180 GB HBM3e per GPU (AWS: 1,440 GB per p6-b200.48xlarge)")
_SM_TRAINS = "offered for SageMaker training (in botocore 1.44.5's CreateTrainingJob TrainingInstanceType enum)"
_A10G = "AWS G5 page (A10G, 24 GB); A10G dense BF16 about 70 TFLOP/s as compared by Baseten, 'A10 vs A10G'"
_TRN1 = "AWS Trn1 page: 16 Trainium chips, 512 GB HBM, 3,040 TFLOP/s BF16 per instance (190 per chip)"
_TRN2 = ("Neuron docs, 'Trainium2 Architecture' and 'Amazon EC2 Trn2 Architecture' (read 2026-11-23): 16 Trainium2 "
         "chips, each 8 NeuronCore-v3 with 667 TFLOP/s dense BF16 (2,563 sparse; 10.7 PFLOP/s dense BF16 per "
         "instance) and 96 GiB HBM (1,536 GiB per instance; kept as 96, the figure AWS markets, as trn1 keeps 32); "
         "EFA 3.2 Tbps (AWS Trn2 page); offered for SageMaker training: ml.trn2.48xlarge is in the CreateTrainingJob "
         "TrainingInstanceType enum (botocore 1.44.5 sagemaker service-2.json)")

INSTANCES: dict[str, Instance] = {
    i.name: i
    for i in [
        Instance("ml.p4d.24xlarge", "A100-40GB", 8, 40, 312.0, 400, 37.688,
                 source=f"AWS P4 page (8x A100 40GB, 400 Gbps EFA); {_A100}; {_PRICE_SOURCE}"),
        Instance("ml.p4de.24xlarge", "A100-80GB", 8, 80, 312.0, 400, 47.11,
                 source=f"AWS P4 page (8x A100 80GB, 400 Gbps EFA); {_A100}; {_PRICE_SOURCE}"),
        Instance("ml.p5.48xlarge", "H100-80GB", 8, 80, 989.0, 3200, 113.07,
                 source=f"AWS P5 page (8x H100 80GB, 3,200 Gbps EFAv2); {_H100}; {_PRICE_SOURCE}"),
        Instance("ml.g5.12xlarge", "A10G-24GB", 4, 24, 70.0, 40, 7.09,
                 source=f"AWS G5 page (4x A10G, 40 Gbps); {_A10G}; {_PRICE_SOURCE}"),
        Instance("ml.g5.48xlarge", "A10G-24GB", 8, 24, 70.0, 100, 20.36,
                 source=f"AWS G5 page (8x A10G, 100 Gbps); {_A10G}; {_PRICE_SOURCE}"),
        Instance("ml.trn1.32xlarge", "Trainium1", 16, 32, 190.0, 800, 24.725,
                 source=f"{_TRN1}, 800 Gbps EFA; {_PRICE_SOURCE}"),
        Instance("ml.trn1n.32xlarge", "Trainium1", 16, 32, 190.0, 1600, 28.497,
                 source=f"{_TRN1}, 1,600 Gbps EFAv2 (trn1n); {_PRICE_SOURCE}"),
        # No on-demand price for trn2.48xlarge was found: not on SageMaker's page (unreadable, see above), and
        # instances.vantage.sh lists it as "preview" with no on-demand price (it is sold through Capacity Blocks).
        Instance("ml.trn2.48xlarge", "Trainium2", 16, 96, 667.0, 3200, math.nan, price_date="2026-11-23",
                 price_basis=_NO_PRICE, source=_TRN2),
        Instance("ml.p5e.48xlarge", "H200-141GB", 8, 141, 989.0, 3200, math.nan, price_date="2026-11-23",
                 price_basis=_NO_PRICE + " (instances.vantage.sh: 'preview', no on-demand price; EC2 sells p5e "
                                         "through Capacity Blocks)",
                 source=f"AWS P5 page (p5e: 8x H200 141 GB, 3,200 Gbps EFAv2); {_H200}; {_SM_TRAINS}"),
        Instance("ml.p5en.48xlarge", "H200-141GB", 8, 141, 989.0, 3200, 63.296, price_date="2026-11-23",
                 price_basis=_EC2_BASIS,
                 source=f"AWS P5 page (p5en: 8x H200 141 GB, 3,200 Gbps EFAv3); {_H200}; {_SM_TRAINS}; "
                        f"{_EC2_PRICES.format(family='p5en')}"),
        Instance("ml.p6-b200.48xlarge", "B200-180GB", 8, 180, 2250.0, 3200, 113.9328, price_date="2026-11-23",
                 price_basis=_EC2_BASIS,
                 source=f"AWS P6 page (p6-b200: 8x B200, 1,440 GB HBM3e, 3,200 Gbps EFAv4); {_B200}; {_SM_TRAINS}; "
                        f"{_EC2_PRICES.format(family='p6-b200')}"),
    ]
}

# Peak of a bare accelerator, for published runs that name the GPU rather than an instance.
# (train/log.py matches these keys against torch.cuda.get_device_name, e.g. "NVIDIA H200".)
ACCELERATOR_PEAK_TFLOPS = {"A100": 312.0, "H100": 989.0, "H200": 989.0, "B200": 2250.0, "V100": 125.0,
                           "Trainium1": 190.0, "Trainium2": 667.0}


@dataclass(frozen=True)
class ModelPreset:
    """A decoder-only transformer, described well enough to count its parameters exactly.

    family picks the `transformers` architecture that builds it (and so the exact parameter layout):
      llama  - RMSNorm, SwiGLU MLP, rotary positions, no biases, untied head, grouped-query attention
      opt    - the GPT-3 layout (learned positions, LayerNorm, biases, 4h GELU/ReLU MLP, tied head), built
               with separate q/k/v nn.Linear layers so tensor parallelism applies to it
      falcon - Falcon's "new decoder architecture": parallel attention+MLP, grouped KV, rotary, tied head
      bloom  - BLOOM: ALiBi, embedding LayerNorm, fused QKV, tied head (BloombergGPT's architecture)
    """

    name: str
    family: str
    hidden: int
    layers: int
    heads: int
    vocab: int
    seq_len: int
    intermediate: int = 0  # MLP width; 0 means 4 * hidden
    kv_heads: int = 0  # 0 means heads (plain multi-head attention)
    published_params: float = 0.0  # what the model's authors call it, for display
    source: str = ""

    @property
    def ffn(self) -> int:
        return self.intermediate or 4 * self.hidden

    @property
    def n_kv_heads(self) -> int:
        return self.kv_heads or self.heads

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


MODELS: dict[str, ModelPreset] = {
    m.name: m
    for m in [
        # A debug model: a few hundred thousand parameters, trains on a laptop CPU in seconds.
        ModelPreset("tiny", "llama", hidden=64, layers=2, heads=4, vocab=512, seq_len=128, intermediate=176,
                    kv_heads=2, source="fmlab debug model (torchtitan-style); vocabulary matches the course tokenizer"),
        ModelPreset("tiny-gpt", "opt", hidden=64, layers=2, heads=4, vocab=512, seq_len=128,
                    source="fmlab debug model in the GPT (OPT) layout"),
        # The next size up of tiny-gpt, the laptop's "medium" rung of module 7's scaling ladder.
        ModelPreset("small-gpt", "opt", hidden=128, layers=4, heads=4, vocab=512, seq_len=128,
                    source="fmlab debug model in the GPT (OPT) layout, the rung above tiny-gpt"),
        ModelPreset("gpt-30b", "opt", hidden=7168, layers=48, heads=64, vocab=50257, seq_len=2048,
                    published_params=30e9,
                    source="SageMaker model-parallel GPT-30B example: hidden 7168, 48 layers, 64 heads, context 2048, GPT-2 vocabulary"),
        ModelPreset("llama2-7b", "llama", hidden=4096, layers=32, heads=32, vocab=32000, seq_len=4096,
                    intermediate=11008, published_params=7e9,
                    source="Touvron et al. 2023, Llama 2, Table 1; Hugging Face meta-llama/Llama-2-7b-hf config.json"),
        ModelPreset("llama2-13b", "llama", hidden=5120, layers=40, heads=40, vocab=32000, seq_len=4096,
                    intermediate=13824, published_params=13e9,
                    source="Touvron et al. 2023, Llama 2; Hugging Face meta-llama/Llama-2-13b-hf config.json"),
        ModelPreset("llama2-70b", "llama", hidden=8192, layers=80, heads=64, vocab=32000, seq_len=4096,
                    intermediate=28672, kv_heads=8, published_params=70e9,
                    source="Touvron et al. 2023, Llama 2 (GQA, 8 KV heads); Hugging Face meta-llama/Llama-2-70b-hf config.json"),
        # Llama 3.1: shapes from the released config.json files (meta-llama/Llama-3.1-{8B,70B,405B}, also in
        # Dubey et al. 2024, "The Llama 3 Herd of Models", Table 3): GQA with 8 KV heads, vocabulary 128,256,
        # RoPE, untied LM head. seq_len is 8,192, the length of the main pretraining stage (paper section
        # 3.4.1, "initial pre-training ... 8K tokens"), not the 131,072 the 3.1 configs allow after the
        # long-context stage (section 3.4.2): that last stage is a small share of the 15.6T tokens, so 8K is
        # what a FLOP and memory plan of the bulk of pretraining should use.
        ModelPreset("llama3.1-8b", "llama", hidden=4096, layers=32, heads=32, vocab=128256, seq_len=8192,
                    intermediate=14336, kv_heads=8, published_params=8e9,
                    source="Hugging Face meta-llama/Llama-3.1-8B config.json; Dubey et al. 2024, Llama 3, Table 3"),
        ModelPreset("llama3.1-70b", "llama", hidden=8192, layers=80, heads=64, vocab=128256, seq_len=8192,
                    intermediate=28672, kv_heads=8, published_params=70e9,
                    source="Hugging Face meta-llama/Llama-3.1-70B config.json; Dubey et al. 2024, Llama 3, Table 3"),
        ModelPreset("llama3.1-405b", "llama", hidden=16384, layers=126, heads=128, vocab=128256, seq_len=8192,
                    intermediate=53248, kv_heads=8, published_params=405e9,
                    source="Hugging Face meta-llama/Llama-3.1-405B config.json; Dubey et al. 2024, Llama 3, Table 3"),
        ModelPreset("falcon-40b", "falcon", hidden=8192, layers=60, heads=128, vocab=65024, seq_len=2048,
                    kv_heads=8, published_params=40e9,
                    source="TII Falcon-40B model card and config.json (60 layers, 8192 hidden, 128 heads, 8 KV groups)"),
        ModelPreset("bloomberggpt-50b", "bloom", hidden=7680, layers=70, heads=40, vocab=131072, seq_len=2048,
                    published_params=50.6e9,
                    source="Wu et al. 2023, BloombergGPT, section 3 (70 layers, 40 heads, hidden 7680, vocabulary 131,072)"),
        ModelPreset("gpt3-175b", "opt", hidden=12288, layers=96, heads=96, vocab=50257, seq_len=2048,
                    published_params=175e9,
                    source="Brown et al. 2020, GPT-3, Table 2.1 (96 layers, d_model 12288, 96 heads, context 2048)"),
    ]
}


@dataclass(frozen=True)
class PublishedRun:
    """A pretraining run as its authors (or the AWS lesson quoting them) reported it."""

    name: str
    model: str  # key into MODELS, or "" when the model is not a decoder LM we can count
    params: float
    tokens: float  # training tokens (images for Stable Diffusion)
    dataset: str  # the dataset size as published
    accelerator: str
    devices: int
    instance: str = ""
    instances: int = 0
    days: float = 0.0
    gpu_hours: float = 0.0
    source: str = ""
    notes: str = field(default="")


PUBLISHED_RUNS: dict[str, PublishedRun] = {
    r.name: r
    for r in [
        PublishedRun("Stable Diffusion 2.1", "", params=0.9e9, tokens=5e9, dataset="5B images, 240 TB",
                     accelerator="A100", devices=296, instance="ml.p4d.24xlarge", instances=37, days=28,
                     source="AWS pretraining lesson, 'what it takes' table", notes="a diffusion model: tokens are images"),
        PublishedRun("Falcon-40B", "falcon-40b", params=40e9, tokens=1e12, dataset="1T tokens, 2.8 TB",
                     accelerator="A100", devices=384, instance="ml.p4d.24xlarge", instances=48, days=60,
                     source="AWS pretraining lesson ('two months' on 48 p4d); TII Falcon-40B model card"),
        PublishedRun("BloombergGPT", "bloomberggpt-50b", params=50.6e9, tokens=569e9, dataset="700B tokens, 1.9 TB",
                     accelerator="A100", devices=512, instance="ml.p4d.24xlarge", instances=64, days=53,
                     source="Wu et al. 2023, BloombergGPT (569B tokens trained of a 708B-token corpus, 64 p4d, 53 days)"),
        PublishedRun("Llama 2 7B", "llama2-7b", params=7e9, tokens=2e12, dataset="2T tokens",
                     accelerator="A100", devices=0, gpu_hours=184_320,
                     source="Touvron et al. 2023, Llama 2, Table 2 (A100-80GB GPU hours)"),
        PublishedRun("Llama 2 13B", "llama2-13b", params=13e9, tokens=2e12, dataset="2T tokens",
                     accelerator="A100", devices=0, gpu_hours=368_640,
                     source="Touvron et al. 2023, Llama 2, Table 2 (A100-80GB GPU hours)"),
        PublishedRun("Llama 2 70B", "llama2-70b", params=70e9, tokens=2e12, dataset="2T tokens",
                     accelerator="A100", devices=0, gpu_hours=1_720_320,
                     source="Touvron et al. 2023, Llama 2, Table 2 (A100-80GB GPU hours)"),
        # Dubey et al. 2024, "The Llama 3 Herd of Models": 405B dense, 15.6T tokens (section 3.4), 3.8e25 FLOPs
        # (section 1), up to 16,384 H100s at 38-43% BF16 MFU (section 3.3.2, Table 4). The report gives no
        # wall-clock total (its "54 days" is a snapshot of the run used for the reliability count in section
        # 3.3.4), so the device-hours are the model card's: 30.84M H100-80GB GPU-hours for Llama 3.1 405B
        # (github.com/meta-llama/llama-models models/llama3_1/MODEL_CARD.md, read 2026-11-23), which counts all
        # of its training, pretraining at 8K and 128K context included.
        PublishedRun("Llama 3.1 405B", "llama3.1-405b", params=405e9, tokens=15.6e12, dataset="15.6T tokens",
                     accelerator="H100", devices=16_384, gpu_hours=30.84e6,
                     source="Dubey et al. 2024, The Llama 3 Herd of Models, sections 3.3-3.4 and Table 4 (16K H100, "
                            "15.6T tokens, 3.8e25 FLOPs, 38-43% MFU); Llama 3.1 model card (30.84M H100 GPU-hours)",
                     notes="GPU-hours from the model card; the report's 54 days is a reliability snapshot"),
    ]
}


def instance(name: str) -> Instance:
    """Look an instance type up, with a helpful error for a typo."""
    try:
        return INSTANCES[name]
    except KeyError:
        raise KeyError(f"unknown instance type {name!r}; the catalog has: {', '.join(INSTANCES)}") from None


def model(name: str) -> ModelPreset:
    """Look a model preset up, with a helpful error for a typo."""
    try:
        return MODELS[name]
    except KeyError:
        raise KeyError(f"unknown model preset {name!r}; the catalog has: {', '.join(MODELS)}") from None
