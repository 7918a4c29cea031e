"""The 2026 stack beside the course's: FP8 training as published, and the reference stacks' names for the course's flags.

    from fmlab.hyperpod import stack
    stack.fp8_rows(planned_run("gpt-30b", 300e9, "ml.p5.48xlarge", 16))   # bf16 and FP8 recipes: days, cost, memory
    stack.reference_names()                                           # course flag -> torchtitan / HyperPod recipes
    stack.torchtitan_toml(config, nodes=16, gpus_per_node=8)          # the course's TrainConfig as torchtitan's TOML

FP8 is not measured here (no H100): its speed-up is taken from published runs on H100, each with its source, and the
planner's bf16 days are divided by it. The published measurements show the same peak memory with and without FP8
(the weights stay in high precision; only the matmuls and, with tensorwise scaling, FSDP's all-gather are in
float8), so the plan's memory is the bf16 plan's. Torch-free: the plan floor.
"""

from __future__ import annotations

from dataclasses import dataclass

from fmlab.plan.capacity import EC2_ON_DEMAND, EC2_ON_DEMAND_SOURCE

READ = "2026-11-26"
TORCHTITAN_RELEASE = "v0.2.2"  # the last release with TOML configs (2026-02-20); later ones configure in Python
TORCHTITAN_SOURCE = ("pytorch/torchtitan, torchtitan/config/job_config.py at tag v0.2.2 (73a0e69); TOML was replaced "
                     "by Python configs in 9810191 (2026-02-23), whose --section.key flags are kept only for old "
                     f"scripts; read {READ}")
RECIPES_SOURCE = ("aws/sagemaker-hyperpod-recipes: v1 at tag v1.5.1, recipes_collection/recipes/training/llama/"
                  "hf_llama3_8b_seq8k_gpu_p5x16_pretrain.yaml; v2 at v2.0.9, checkpointless_llama3_70b_pretrain.yaml "
                  f"(v2 has no other Llama pretraining recipe, and no SMP), at 557470f; read {READ}")
TRANSFORMER_ENGINE = {"pytorch 2.11 EC2 DLC": "2.12.0", "pytorch 2.12 EC2 DLC": "2.12.0",
                      "pytorch 2.13 EC2 DLC": "2.17.0"}
TRANSFORMER_ENGINE_SOURCE = ("aws/deep-learning-containers, .github/config/image/pytorch/2.1x-ec2-cuda.yml "
                             "(transformer_engine_version), main at e0ecede (2026-08-21): the build configuration, not "
                             f"a release note of a published tag; read {READ}")


@dataclass(frozen=True)
class Fp8Result:
    """One published FP8 measurement against bf16 on H100."""

    recipe: str
    model: str
    setting: str
    bf16: float  # tokens per second (per GPU or per node, as the source gives it)
    fp8: float
    peak_memory_gb: tuple[float, float]  # (bf16, fp8); NaN where the source gives none
    source: str

    @property
    def speedup(self) -> float:
        return self.fp8 / self.bf16 - 1


FP8_RESULTS = [
    Fp8Result("tensorwise (torchtitan float8)", "Llama 3.1 8B", "8 H100, FSDP2 + torch.compile, selective AC",
              6667, 8532, (77.0, 76.8), "pytorch/torchtitan benchmarks/llama3_h100_202412_torchtitan.md, table 1 "
              f"(tokens/s per GPU; GiB), at v0.2.2; read {READ}"),
    Fp8Result("rowwise (torchao)", "Llama 3 8B", "8 H100, FSDP2 + torch.compile, per-op SAC, seq 8192",
              6150, 6768, (47.65, 47.79), "pytorch/ao docs/source/workflows/training.md (median tokens/s; GB), at "
              f"36027d8; read {READ}"),
    Fp8Result("tensorwise (torchao)", "Llama 3 8B", "8 H100, FSDP2 + torch.compile, per-op SAC, seq 8192",
              6150, 7689.5, (47.65, 47.77), "pytorch/ao docs/source/workflows/training.md (median tokens/s; GB), at "
              f"36027d8; read {READ}"),
    Fp8Result("tensorwise (torchao)", "Llama 3 70B", "H100 cluster, FSDP2 + torch.compile, seq 8192",
              956, 1430, (float("nan"), float("nan")), "PyTorch blog, 'Supercharging training using float8 and FSDP2' "
              f"(IBM and Meta): 50% faster with loss and evaluation parity; read {READ}"),
]
FP8_RISK = ("rowwise scaling handles outliers better than tensorwise (torchao docs). At 3B and 1T tokens the float8 "
            "model scored about one point below bf16 (MMLU 0.26 against 0.29, PyTorch blog). Attention stays bf16, "
            "and so do linears with a dimension not divisible by 16 (torchtitan)")


@dataclass(frozen=True)
class StackRow:
    precision: str
    days: float
    cost_usd: float  # EC2 on-demand for the run's hours (EC2_ON_DEMAND_SOURCE)
    memory_gb_per_device: float
    speedup: float  # over the bf16 plan
    source: str


def fp8_rows(run) -> list[StackRow]:
    """The planned run (fmlab.plan.planned.PlannedRun) in bf16 (the planner's days: its predicted step, or its "what
    if" MFU) and in FP8 with each 8B recipe's published speed-up on H100: days, cost on EC2's on-demand price, memory
    (unchanged: the measurements show the same peak)."""
    plan = run.estimate
    hourly = EC2_ON_DEMAND.get(run.instance, float("nan")) * run.instances
    basis = "what if" if plan.speed_basis.startswith("what if") else "predicted"
    rows = [StackRow("bf16", plan.days, hourly * 24 * plan.days, plan.memory_gb_per_device, 0.0,
                     f"the course's planner at {plan.mfu:.0%} MFU ({basis}); {EC2_ON_DEMAND_SOURCE}")]
    for result in FP8_RESULTS:
        if result.model.endswith("8B"):
            days = plan.days / (1 + result.speedup)
            rows.append(StackRow(f"fp8 {result.recipe}", days, hourly * 24 * days, plan.memory_gb_per_device,
                                 result.speedup, result.source))
    return rows


@dataclass(frozen=True)
class Name:
    """One setting of the course's training script and what the reference stacks call it."""

    course: str  # the flag of fmlab.train
    torchtitan: str  # TOML section.key at TORCHTITAN_RELEASE
    recipes_v1: str  # HyperPod recipes v1 (SMP-based) key
    recipes_v2: str  # HyperPod recipes v2 (NeMo/Megatron checkpointless) key, or what it has instead


NAMES = [
    Name("--sharding hybrid --hybrid-shard-degree D", "parallelism.data_parallel_shard_degree = D, "
         "parallelism.data_parallel_replicate_degree = world / (D x tp)", "model.sharding_strategy: hybrid_shard, "
         "model.shard_degree: D", "no FSDP: Megatron's distributed optimizer (strategy."
         "num_distributed_optimizer_instances)"),
    Name("--sharding full", "parallelism.data_parallel_shard_degree = -1 (every rank left)",
         "model.sharding_strategy (the p5 x 16 recipe: hybrid_shard)", "as above"),
    Name("--tp T", "parallelism.tensor_parallel_degree = T", "model.tensor_model_parallel_degree: T",
         "strategy.tensor_model_parallel_size: T"),
    Name("--activation-checkpointing", 'activation_checkpoint.mode = "full" ("selective" is its default)',
         "model.activation_checkpointing: true", "(not set in the recipe)"),
    Name("--activation-offloading", "(none)", "model.offload_activations: true", "(none)"),
    Name("--micro-batch B", "training.local_batch_size = B", "model.train_batch_size: B", "data.micro_batch_size: B"),
    Name("--global-batch G", "training.global_batch_size = G (accumulation follows)", "(derived)",
         "data.global_batch_size: G"),
    Name("--seq-len L", "training.seq_len = L", "model.max_context_width: L", "data.seq_length: L"),
    Name("--max-steps N", "training.steps = N", "trainer.max_steps: N", "trainer.max_steps: N"),
    Name("--checkpoint-every K", "checkpoint.interval = K", "exp_manager.checkpoint_callback_params."
         "every_n_train_steps: K", "log.ckpt.every_n_train_steps: K"),
    Name("--checkpoint-dir P", "checkpoint.folder = P (under job.dump_folder)", "exp_manager.checkpoint_dir: P",
         "log.ckpt.dirpath: P"),
    Name("--compile true", "compile.enable = true", "(none)", "(none)"),
    Name("(bf16 only)", 'model.converters = ["quantize.linear.float8"]', "model.fp8: true",
         "plugins.precision (bf16-mixed in the recipe)"),
]


# The fields of torchtitan's JobConfig sections that the course maps to, as torchtitan/config/job_config.py names
# them at TORCHTITAN_RELEASE (read from the tag's source, TORCHTITAN_SOURCE).
TORCHTITAN_FIELDS = {
    "parallelism": ("data_parallel_replicate_degree", "data_parallel_shard_degree", "tensor_parallel_degree",
                    "pipeline_parallel_degree", "context_parallel_degree"),
    "activation_checkpoint": ("mode", "selective_ac_option"),
    "training": ("local_batch_size", "global_batch_size", "seq_len", "steps"),
    "compile": ("enable", "components", "backend"),
    "checkpoint": ("enable", "folder", "interval", "async_mode", "keep_latest_k"),
    "model": ("name", "flavor", "converters"),
    "job": ("config_file", "dump_folder"),
}


def reference_names() -> list[dict]:
    return [vars(n) for n in NAMES]


def torchtitan_toml(config, nodes: int, gpus_per_node: int = 8) -> dict[str, dict]:
    """The course's TrainConfig (`fmlab.train.config`) as torchtitan's TOML sections at TORCHTITAN_RELEASE: the layout,
    batch, length, steps, checkpoints and compile. What has no torchtitan name (offloading) raises ValueError."""
    p = config.parallel
    world = nodes * gpus_per_node
    if p.activation_offloading:
        raise ValueError("torchtitan has no activation offloading: use --activation-checkpointing or a larger shard "
                         "group")
    shard = -1 if p.sharding == "full" else (p.hybrid_shard_degree if p.sharding == "hybrid" else 1)
    replicate = 1 if shard == -1 else world // (shard * p.tp)
    toml = {
        "parallelism": {"data_parallel_shard_degree": shard, "data_parallel_replicate_degree": replicate,
                        "tensor_parallel_degree": p.tp},
        "activation_checkpoint": {"mode": p.activation_checkpointing},  # none | selective | full: the same words
        "training": {"local_batch_size": config.micro_batch, "seq_len": config.seq_len, "steps": config.max_steps},
        "compile": {"enable": config.compile != "false"},
    }
    if config.global_batch:
        toml["training"]["global_batch_size"] = config.global_batch
    if config.checkpoint_every:
        toml["checkpoint"] = {"enable": True, "interval": config.checkpoint_every,
                              "folder": config.checkpoint_dir or "checkpoint"}
    return toml


def toml_text(sections: dict[str, dict]) -> str:
    """`torchtitan_toml`'s sections as TOML text (strings quoted, booleans lower-case)."""
    def value(v):
        return str(v).lower() if isinstance(v, bool) else f'"{v}"' if isinstance(v, str) else str(v)
    return "\n\n".join(f"[{name}]\n" + "\n".join(f"{k} = {value(v)}" for k, v in fields.items())
                       for name, fields in sections.items())
