"""One parallel layout, from the planner to the job: ParallelConfig and its one check.

    cfg = ParallelConfig(sharding="hybrid", hybrid_shard_degree=8, tp=2, activation_checkpointing="full")
    cfg.check(world=128, model="gpt-30b")   # PlanError naming the fix, or cfg itself
    cfg.mesh_shape(128)                     # (8, 8, 2): replicas, shards within a replica, tensor-parallel ranks
    cfg.recompute                           # "full": the planner tables' word for the memory saving

The planner (fmlab.plan.layout.make_plan), the engine (fmlab.parallel.parallelize), TrainConfig (its `parallel`
field; each field here is also a flag and a SageMaker hyperparameter), the jobs (fmlab.jobs.sharded.ShardedRun,
fmlab.neuron.native) and SMP's `mp_parameters` (fmlab.parallel.smp) all read this one description and call this
one `check`, so a layout the planner approves is one the engine builds. Two things are planned but not built
here: ZeRO stages 1-2 and pipeline stages; `check_trainable()` refuses them with what to use instead.

Nothing here imports torch (the planner is pure arithmetic); fmlab.parallel re-exports ParallelConfig.
"""

from __future__ import annotations

import math
import numbers
import warnings
from dataclasses import dataclass, fields, replace

from fmlab.plan import catalog
from fmlab.plan.compute import RECOMPUTE_CHOICES, PlanError

SHARDINGS = ("none", "zero1", "zero2", "full", "hybrid")
TRAINABLE_SHARDINGS = ("none", "full", "hybrid")  # what fmlab.parallel builds (ZeRO-1/2 are planned only)
# Which model states each sharding splits over its shard degree (Rajbhandari et al. 2020, ZeRO, section 5.1:
# stage 1 the optimizer states, stage 2 the gradients too, stage 3 the parameters too). The optimizer states
# include the fp32 master weights. The one place the course keeps this fact (layout and memory both read it).
SHARDED_STATES = {"none": (), "zero1": ("optimizer",), "zero2": ("optimizer", "gradients"),
                  "full": ("optimizer", "gradients", "weights"), "hybrid": ("optimizer", "gradients", "weights")}
CHECKPOINTING = ("none", "selective", "full")
PRECISIONS = ("auto", "bf16", "fp32")
BACKENDS = ("auto", "gloo", "nccl", "neuron", "smddp")
MESH_DIMS = ("dp_replicate", "dp_shard", "tp")  # the device mesh's dimensions, as mesh_shape orders them
TRUE_WORDS, FALSE_WORDS = ("true", "1", "yes", "on"), ("false", "0", "no", "off", "")


def parse_bool(value) -> bool:
    """A boolean setting as SageMaker (every hyperparameter a string), a command line or JSON gives it: true/false,
    1/0, yes/no, on/off in any case. Anything else raises ValueError (a typo is not read as false)."""
    if isinstance(value, bool):
        return value
    word = str(value).strip().lower()
    if word in TRUE_WORDS or word in FALSE_WORDS:
        return word in TRUE_WORDS
    raise ValueError(f"expected true or false, got {value!r}")

@dataclass
class ParallelConfig:
    """How to lay the model out over the devices. `check(world, model)` says what to change if it cannot work."""

    sharding: str = "none"  # none (DDP when world > 1) | zero1 | zero2 | full (FSDP) | hybrid (FSDP within groups)
    hybrid_shard_degree: int = 0  # with sharding hybrid: ranks per shard group (e.g. one node's devices)
    tp: int = 1  # tensor-parallel degree (keep it within a node)
    pp: int = 1  # pipeline stages (planned; the engine has no pipeline)
    activation_checkpointing: str = "none"  # none | selective | full: what each layer recomputes in backward
    activation_offloading: bool = False  # move what each layer keeps for backward to host memory
    offload_horizon: int = 2  # layers whose activations are fetched back ahead of the backward pass
    mixed_precision: str = "auto"  # auto (bf16 on a GPU that has it, fp32 on CPU) | bf16 | fp32
    backend: str = "auto"  # auto (from the device: nccl, neuron or gloo) | gloo | nccl | neuron | smddp

    def __post_init__(self) -> None:
        if isinstance(self.sharding, str) and self.sharding.startswith("hybrid:"):
            degree = self.sharding.split(":", 1)[1]
            if not degree.isdigit():
                raise PlanError(f"sharding={self.sharding!r} is not a layout: write sharding='hybrid', "
                                f"hybrid_shard_degree=D (D ranks per shard group, e.g. 8)")
            warnings.warn(f"sharding={self.sharding!r} is the course's old spelling: write sharding='hybrid', "
                          f"hybrid_shard_degree={degree} (read as that)", FutureWarning, stacklevel=3)
            self.sharding, self.hybrid_shard_degree = "hybrid", int(degree)

    def with_recompute(self, recompute: str) -> ParallelConfig:
        """This layout with the memory saving that a planner table's "recompute" column names: none | selective |
        full set activation_checkpointing (offloading off); offload is full checkpointing with each layer's input
        moved to host memory. The inverse of the `recompute` property."""
        if recompute not in RECOMPUTE_CHOICES:
            raise PlanError(f"recompute must be one of {', '.join(RECOMPUTE_CHOICES)}, not {recompute!r}")
        offload = recompute == "offload"
        return replace(self, activation_checkpointing="full" if offload else recompute, activation_offloading=offload)

    @classmethod
    def from_hyperparameters(cls, hyper: dict) -> ParallelConfig:
        """The layout that a job's hyperparameters give fmlab.train (other keys are left alone; strings, as
        SageMaker passes every hyperparameter, are read as the field's type)."""
        values = {}
        for name in FIELDS:
            if name in hyper:
                kind, value = type(getattr(cls(), name)), hyper[name]
                try:
                    values[name] = parse_bool(value) if kind is bool else kind(value)
                except (TypeError, ValueError):
                    raise PlanError(f"hyperparameter {name} must be a {kind.__name__}, got {value!r}") from None
        return cls(**values)

    def hyperparameters(self) -> dict:
        """fmlab.train's layout flags (SageMaker hyperparameters) for this layout: every field, so a job's request
        states its whole layout."""
        return {name: getattr(self, name) for name in FIELDS}

    def flags(self) -> list[str]:
        """fmlab.train's command-line flags for this layout (`--sharding=hybrid --hybrid-shard-degree=8 ...`)."""
        return [f"--{name.replace('_', '-')}={value}" for name, value in self.hyperparameters().items()]

    @property
    def recompute(self) -> str:
        """The planner's word: none | selective | full | offload."""
        return "offload" if self.activation_offloading else self.activation_checkpointing

    @property
    def label(self) -> str:
        """A short name for tables: "full", "hybrid 8", "none"."""
        return f"hybrid {self.hybrid_shard_degree}" if self.sharding == "hybrid" else self.sharding

    def dp(self, world: int) -> int:
        """Data-parallel ranks: the world over tensor-parallel ranks and pipeline stages."""
        return world // (self.tp * self.pp)

    def shard_degree(self, world: int) -> int:
        """Over how many data-parallel ranks the sharded model states are spread (1: not sharded)."""
        if self.sharding == "none":
            return 1
        return self.hybrid_shard_degree if self.sharding == "hybrid" else self.dp(world)

    def mesh_shape(self, world: int) -> tuple[int, int, int]:
        """(dp_replicate, dp_shard, tp): replicas of the model, shards within a replica, tensor-parallel ranks."""
        dp = self.dp(world)
        if self.sharding == "none":
            return (dp, 1, self.tp)
        return (dp // self.shard_degree(world), self.shard_degree(world), self.tp)

    def check(self, world: int, model: catalog.ModelPreset | str | None = None) -> ParallelConfig:
        """Raise PlanError naming the fix if this layout cannot be built on `world` devices (for `model`, when
        given: tensor parallelism splits its heads and widths, pipeline stages its layers); return self."""
        _choice("sharding", self.sharding, SHARDINGS)
        _choice("activation_checkpointing", self.activation_checkpointing, CHECKPOINTING)
        _choice("mixed_precision", self.mixed_precision, PRECISIONS)
        _choice("backend", self.backend, BACKENDS)
        for name in ("tp", "pp", "hybrid_shard_degree", "offload_horizon"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Integral):
                raise PlanError(f"{name} must be a whole number, got {value!r}")
        if isinstance(world, bool) or not isinstance(world, numbers.Integral) or world < 1:
            raise PlanError(f"the world must be a whole number of devices of at least 1, got {world!r}")
        world = int(world)
        for name in ("tp", "pp"):
            if getattr(self, name) < 1:
                raise PlanError(f"{name} must be a whole number of at least 1, got {getattr(self, name)}")
        if world % (self.tp * self.pp):
            degrees = f"tp={self.tp}" if self.pp == 1 else f"tp x pp = {self.tp} x {self.pp} = {self.tp * self.pp}"
            raise PlanError(f"{degrees} does not divide the {world} device{'s' * (world != 1)} (one process each): choose degrees whose product divides "
                            f"{world} (e.g. tp={largest_divisor(world // math.gcd(world, self.pp), self.tp)}), or "
                            f"use {self.tp * self.pp * max(1, world // (self.tp * self.pp))} devices")
        dp = self.dp(world)
        if self.sharding == "hybrid":
            d = self.hybrid_shard_degree
            if d < 1:
                raise PlanError(f"sharding='hybrid' needs hybrid_shard_degree >= 1 (ranks per shard group, e.g. the "
                                f"GPUs of one node); with {dp} data-parallel ranks try {largest_divisor(dp, 8)}")
            if dp % d:
                raise PlanError(f"hybrid_shard_degree={d} must divide the {dp} data-parallel ranks (world {world} / "
                                f"tp {self.tp} / pp {self.pp}): try {largest_divisor(dp, d)}")
        elif self.hybrid_shard_degree not in (0, 1):
            raise PlanError(f"hybrid_shard_degree={self.hybrid_shard_degree} is only used with sharding='hybrid': "
                            f"set sharding='hybrid' or leave the degree at 0")
        if self.offload_horizon < 1:
            raise PlanError(f"offload_horizon must be at least 1 layer, got {self.offload_horizon}")
        if model is not None:
            m = catalog.model(model) if isinstance(model, str) else model
            for what, n in (("attention heads", m.heads), ("key/value heads", m.n_kv_heads),
                            ("MLP width", m.ffn), ("hidden size", m.hidden)):
                if n % self.tp:
                    good = largest_divisor(math.gcd(math.gcd(m.heads, m.n_kv_heads), math.gcd(m.ffn, m.hidden)),
                                           self.tp)
                    raise PlanError(f"tp={self.tp} must divide {m.name}'s {n} {what} (each device keeps whole heads "
                                    f"and equal slices of every matrix): use tp={good}")
            if m.layers % self.pp:
                raise PlanError(f"pp={self.pp} must divide {m.name}'s {m.layers} layers: use "
                                f"pp={largest_divisor(m.layers, self.pp)}")
        return self

    def check_trainable(self) -> ParallelConfig:
        """Raise PlanError for what the planner can price but fmlab.parallel cannot build; return self."""
        if self.pp > 1:
            raise PlanError(f"pp={self.pp}: pipeline stages are planned in module 1 but fmlab's engine has no "
                            f"pipeline: train with pp=1 (shard with sharding='full' or 'hybrid', split layers with tp)")
        if self.sharding not in TRAINABLE_SHARDINGS:
            raise PlanError(f"sharding={self.sharding!r} (ZeRO stage {self.sharding[-1]}) is planned in module 1 "
                            f"but the engine builds FSDP only: use sharding='full' (ZeRO-3: it also shards what "
                            f"{self.sharding} shards) or 'hybrid'; module 5's lab writes a ZeRO-1 optimizer by hand")
        return self


FIELDS = tuple(f.name for f in fields(ParallelConfig))


def largest_divisor(n: int, at_most: int) -> int:
    """The largest divisor of n that is at most `at_most` (at least 1)."""
    return max(d for d in range(1, max(1, min(n, at_most)) + 1) if n % d == 0)


def _choice(name: str, value, allowed) -> None:
    if value not in allowed:
        raise PlanError(f"{name} must be one of {', '.join(map(repr, allowed))}, not {value!r}")
