"""The planned run as the training script's settings, and any artefact's settings held against the plan again.

    from fmlab.plan.planned import planned_run
    from fmlab.train import planned
    run = planned_run("gpt-30b", 300e9, "ml.p5.48xlarge", 16)
    config = planned.train_config(run)               # the TrainConfig a job, a Slurm script or a manifest carries
    planned.flags(config)                            # ["--model", "gpt-30b", ..., "--checkpoint-every", "586", ...]
    planned.differences(run, config)                 # [] : the artefact runs the planned run
    planned.problems(config, "ml.p5.48xlarge", 16)   # re-planned from its own flags: fits? a sensible interval?

Every artefact the course launches (the SageMaker job's hyperparameters, the HyperPod Slurm script, the HyperPod EKS
manifest, the torchtitan TOML, SMP's mp_parameters) is rendered from `train_config(run)`, and read back to a
TrainConfig by its own parser (fmlab.train.config.parse_config for flags and hyperparameters). `problems` is the
check that needs no plan at all: it re-plans the artefact from what it carries and refuses a layout that does not
fit with the planner's headroom, a checkpoint interval shorter than one save's upload, or one far from Daly's.
"""

from __future__ import annotations

import dataclasses

from fmlab.plan import catalog, scenario
from fmlab.plan.compute import PlanError
from fmlab.plan.layout import make_plan
from fmlab.plan.planned import PlannedRun, fields_of
from fmlab.plan.planned import differences as planned_differences
from fmlab.train.config import TrainConfig

# An interval this many times shorter or longer than Daly's is refused: the first-order waste of an interval x times
# the optimum is (x + 1/x) / 2 times the least, so 3x off wastes two thirds more than it must (module 8's curve).
FAR_FROM_DALY = 3.0


def train_config(run: PlannedRun, base: TrainConfig | None = None, **changes) -> TrainConfig:
    """The training script's settings for the planned run: its model, context, layout, micro-batch, global batch
    (the script accumulates what the replicas lack), all its steps, the checkpoint interval, the saves kept and
    asynchronous saves; the rest from `base` (default TrainConfig()), then `changes` (e.g. data, checkpoint_dir)."""
    base = base or TrainConfig()
    settings = dict(model=run.model, seq_len=run.seq_len, micro_batch=run.micro_batch, grad_accum=1,
                    global_batch=run.global_batch, max_steps=run.steps, checkpoint_every=run.checkpoint_every,
                    keep_checkpoints=run.keep_checkpoints, async_checkpoint=run.async_checkpoint,
                    parallel=dataclasses.replace(run.parallel, backend=base.parallel.backend))
    return dataclasses.replace(base, **{**settings, **changes})


def flags(config: TrainConfig) -> list[str]:
    """The settings as `python -m fmlab.train` flags (what a Slurm script or a pod's command passes): every field
    that differs from the default, and the whole layout."""
    out = []
    for name, value in config.to_hyperparameters().items():
        out += [f"--{name.replace('_', '-')}", value]
    return out


def fields(config: TrainConfig, devices: int) -> dict:
    """What the artefact runs, as PlannedRun.fields() says it (fmlab.plan.planned.AGREED)."""
    batch = config.global_batch or config.parallel.dp(devices) * config.micro_batch * config.grad_accum
    return fields_of(config.parallel, devices, config.micro_batch, batch, config.seq_len, config.checkpoint_every)


def differences(run: PlannedRun, config: TrainConfig) -> list[str]:
    """Where the artefact's settings differ from the planned run's ([] when it runs the planned run)."""
    return planned_differences(run, fields(config, run.devices))


def replan(config: TrainConfig, instance: str, nodes: int):
    """The planner's plan (fmlab.plan.layout.TrainingPlan) of what the artefact carries: its layout, micro-batch,
    global batch and context on `nodes` x `instance` (PlanError when the layout cannot be built there). Flags that
    leave --seq-len at the script's default train on the data's sequences: re-planned at the model's context."""
    seq_len = config.seq_len
    if seq_len == TrainConfig.seq_len:
        seq_len = catalog.model(config.model).seq_len
    tokens = max(1, config.max_steps) * (config.global_batch or 1) * seq_len
    return make_plan(config.model, float(tokens), instance, nodes, parallel=config.parallel,
                     micro_batch=config.micro_batch, seq_len=seq_len, global_batch=config.global_batch or None,
                     suggest=False)


def problems(config: TrainConfig, instance: str, nodes: int, where: str = "") -> list[str]:
    """What the artefact's own flags say, re-planned on `nodes` x `instance`: a layout that does not fit with the
    planner's headroom, and a checkpoint interval (in hours of its own predicted step) shorter than one save's upload
    or FAR_FROM_DALY times away from Daly's. `where` starts each line (e.g. "replica 'pods'")."""
    lead = f"{where}: " if where else ""
    try:
        plan = replan(config, instance, nodes)
    except (PlanError, KeyError) as e:
        return [f"{lead}the layout cannot be built on {nodes} x {instance}: {e}"]
    out = []
    lay = plan.parallel
    if not plan.fits:
        out.append(f"{lead}the layout (sharding {lay.label}, tp {lay.tp}, activation checkpointing "
                   f"{lay.activation_checkpointing}) at micro-batch {plan.micro_batch} needs "
                   f"{plan.memory_gb_per_device:.1f} GB per GPU on {nodes} x {instance}, which may use "
                   f"{plan.memory_limit_gb:.1f} (the planner's headroom): render the job from the planned run "
                   "(fmlab.plan.planned.planned_run, fmlab.train.planned.train_config)")
    if config.checkpoint_every > 0:
        step = scenario.step_seconds(plan)
        hours = config.checkpoint_every * step / 3600
        upload = scenario.upload_seconds(plan)
        daly = scenario.daly_interval_hours(plan, async_save=config.async_checkpoint)
        say = (f"{lead}--checkpoint-every {config.checkpoint_every} steps of {step:.2f} s (this artefact's own step "
               f"on {nodes} x {instance}) is a save every {hours:.2f} h")
        if hours * 3600 < upload:
            out.append(f"{say}, shorter than one save's {upload:.0f} s upload to S3: it never completes")
        elif not daly / FAR_FROM_DALY <= hours <= daly * FAR_FROM_DALY:
            every = scenario.checkpoint_every_steps(plan, async_save=config.async_checkpoint)
            out.append(f"{say}, {max(hours / daly, daly / hours):.1f}x from Daly's {daly:.2f} h: use "
                       f"--checkpoint-every {every}")
    return out
