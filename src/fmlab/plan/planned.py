"""The planned run: one object for a pretraining run, planned once, that every job, script and manifest renders.

    from fmlab.plan.planned import planned_run
    run = planned_run("gpt-30b", 300e9, "ml.p5.48xlarge", 16)   # the planner chooses the layout and micro-batch
    run.parallel, run.micro_batch, run.global_batch, run.checkpoint_every, run.keep_checkpoints
    run.days, run.mfu, run.cost_usd, run.reserved_days           # what it takes
    run.to_dict()                                                # `fmlab plan --json` prints exactly this

A run is planned in four steps, each owned by the module that teaches it:
1. the layout and micro-batch: `layout.choose(layout.candidates(...))`, the fastest predicted step that fits with the
   planner's headroom, over micro-batches PLANNER_MICRO_BATCHES (modules 5-7); or the caller's layout;
2. the global batch: GPT-3's batch for the model's size in whole micro-batches on every replica (module 7's rule,
   `layout.default_global_batch`), unless given; the days and dollars follow from the predicted step at that batch;
3. the checkpoint interval: Daly's optimum for asynchronous saves to S3 at Llama 3's failure rate on the run's nodes,
   in optimizer steps of the predicted step (module 8, `scenario.checkpoint_every_steps`); the saves kept: enough to
   reach back past module 10's hourly held-out gate (`keep_needed`), at least module 8's three;
4. the reservation: a training plan that holds the job, its start-up and the plan's last 30 minutes
   (module 11, `capacity.reservation`).

The SageMaker job's hyperparameters, the HyperPod Slurm script, the HyperPod EKS manifest, the torchtitan TOML and
SMP's mp_parameters are rendered from this object (fmlab.train.planned: its TrainConfig and flags) and parsed back to
it (`fields_of`, used by the tests and by each artefact's own check). Torch-free.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fmlab.plan import capacity, scenario
from fmlab.plan.compute import PlanError
from fmlab.plan.layout import PLANNER_MICRO_BATCHES, TrainingPlan, candidates, choose, make_plan
from fmlab.plan.parallelism import ParallelConfig

KEEP_AT_LEAST = 3  # module 8 keeps the newest three saves
GATE_HOURS = 1.0  # module 10's held-out gate runs every hour: a spike is noticed within it
# The fields an artefact must carry for it to run the planned run (`fields_of` reads them back from a TrainConfig).
AGREED = ("sharding", "shard_degree", "tp", "activation_checkpointing", "activation_offloading", "micro_batch",
          "global_batch", "seq_len", "checkpoint_every")


def keep_needed(interval_hours: float, window_hours: float) -> int:
    """Saves to keep so that one from before a loss spike survives until it is noticed: the saves made during the
    detection window may hold the diverged model, and one more from before it must remain."""
    return 1 + math.ceil(window_hours / interval_hours - 1e-9)


@dataclass(frozen=True)
class PlannedRun:
    """A run planned once: the planner's estimate (`estimate`: model, tokens, instance, instances, devices,
    parallel, micro_batch, global_batch in sequences, grad_accum, seq_len, memory, the predicted step, days, mfu,
    cost_usd, fits), the checkpoint interval and retention, and the reservation that holds it. The estimate's fields
    read through: run.days is run.estimate.days."""

    estimate: TrainingPlan
    checkpoint_every: int  # optimizer steps between saves (Daly's, asynchronous saves to S3)
    checkpoint_hours: float  # the same interval in hours of the predicted step
    keep_checkpoints: int  # the newest saves kept
    reserved_days: int | None  # a training plan's whole days that hold the job (capacity.reservation); None: no
    # single reservation holds it
    layout_chosen: bool  # True: the planner chose the layout and micro-batch; False: the caller gave them
    async_checkpoint: bool = True

    def __getattr__(self, name: str):
        """The estimate's fields read through (days, parallel, micro_batch, memory_gb_per_device, step ...)."""
        if name.startswith("__") or name == "estimate":
            raise AttributeError(name)
        return getattr(self.estimate, name)

    @property
    def step_seconds(self) -> float:
        """Seconds per optimizer step at the plan's speed (the predicted step, or the what-if MFU's)."""
        return scenario.step_seconds(self.estimate)

    @property
    def global_batch_tokens(self) -> int:
        return self.global_batch * self.seq_len

    @property
    def steps(self) -> int:
        """Optimizer steps of the whole run: the tokens over the tokens of one step, rounded up."""
        return math.ceil(self.tokens / self.global_batch_tokens)

    def fields(self) -> dict:
        """The settings every artefact must carry (AGREED), as `fields_of` reads them back from one."""
        return fields_of(self.parallel, self.devices, self.micro_batch, self.global_batch, self.seq_len,
                         self.checkpoint_every)

    def to_dict(self) -> dict:
        """Every field, flat: the estimate's (model, days, cost, memory, step ...) beside the run's own."""
        return {**self.estimate.to_dict(), "checkpoint_every": self.checkpoint_every,
                "checkpoint_hours": self.checkpoint_hours, "keep_checkpoints": self.keep_checkpoints,
                "async_checkpoint": self.async_checkpoint, "step_seconds": self.step_seconds, "steps": self.steps,
                "global_batch_tokens": self.global_batch_tokens, "reserved_days": self.reserved_days,
                "layout_chosen_by_planner": self.layout_chosen}


def fields_of(parallel: ParallelConfig, devices: int, micro_batch: int, global_batch: int, seq_len: int,
              checkpoint_every: int) -> dict:
    """An artefact's settings as PlannedRun.fields() gives them, from what it carries (a TrainConfig's fields): the
    global batch as the script trains it (0 means one micro-batch per replica, no accumulation)."""
    batch = global_batch or parallel.dp(devices) * micro_batch
    return {"sharding": parallel.sharding, "shard_degree": parallel.shard_degree(devices), "tp": parallel.tp,
            "activation_checkpointing": parallel.activation_checkpointing,
            "activation_offloading": parallel.activation_offloading, "micro_batch": micro_batch,
            "global_batch": batch, "seq_len": seq_len, "checkpoint_every": checkpoint_every}


def differences(run: PlannedRun, carried: dict) -> list[str]:
    """Where an artefact's settings (`fields_of`) differ from the planned run's, one line each ([] when they agree)."""
    planned = run.fields()
    return [f"{name}: the artefact has {carried.get(name)!r}, the plan {planned[name]!r}"
            for name in AGREED if carried.get(name) != planned[name]]


def planned_run(model: str, tokens: float, instance: str, instances: int, *, parallel: ParallelConfig | None = None,
                micro_batch: int | None = None, global_batch: int | None = None, seq_len: int | None = None,
                mfu: float | None = None, attention: str = "flash",
                micro_batches: tuple[int, ...] = PLANNER_MICRO_BATCHES) -> PlannedRun:
    """Plan the run: the layout and micro-batch the planner chooses (or `parallel` and `micro_batch` as given), its
    global batch, predicted step, days and cost, Daly's checkpoint interval in steps, the saves to keep and the
    reservation. PlanError when the layout cannot be built or nothing fits."""
    chosen = parallel is None
    if chosen:
        if micro_batch is not None:
            micro_batches = (micro_batch,)
        row = choose(candidates(model, tokens, instance, instances, micro_batches=micro_batches, attention=attention,
                                mfu=mfu))
        parallel, micro_batch = row["parallel"], row["micro-batch"]
    estimate = make_plan(model, tokens, instance, instances, parallel=parallel, micro_batch=micro_batch or 1,
                         seq_len=seq_len, mfu=mfu, attention=attention, global_batch=global_batch)
    every = scenario.checkpoint_every_steps(estimate)
    hours = every * scenario.step_seconds(estimate) / 3600
    keep = max(KEEP_AT_LEAST, keep_needed(hours, GATE_HOURS))
    try:
        reserved = capacity.reservation(estimate.days).days
    except PlanError:
        reserved = None  # longer than one reservation can hold (182 days): the caller splits the run
    return PlannedRun(estimate, every, hours, keep, reserved, chosen)
