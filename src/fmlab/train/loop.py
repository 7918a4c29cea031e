"""THE training entry point: the same script on a laptop CPU under torchrun and inside a SageMaker training job.

    python -m fmlab.train --model tiny --max-steps 20                       # one process
    torchrun --nproc-per-node 2 -m fmlab.train --model tiny --sharding full # two gloo processes on a CPU
    # SageMaker: entrypoints/train.py (SourceCode's entry script) calls main(); see fmlab.jobs

Where it reads its settings, later winning: the TrainConfig defaults; the SageMaker contract when present
(SM_CHANNEL_TRAIN -> data, SM_MODEL_DIR -> model_dir, SM_OUTPUT_DATA_DIR -> output_dir, /opt/ml/checkpoints
or SM_CHECKPOINT_DIR / FMLAB_CHECKPOINT_DIR -> checkpoint_dir, SM_HPS -> any field); the command line, where
both `--max-steps` and SageMaker's `--max_steps` spellings work. Arguments it does not know (SageMaker adds
some) are reported and ignored. `--mp_parameters` (SMP v2's JSON) sets the parallel layout
(fmlab.parallel.from_mp_parameters).

It logs loss, learning rate, tokens/s, model TFLOP/s per device and MFU (fmlab.train.log), checkpoints every
`--checkpoint-every` steps (fmlab.checkpoint: sharded, atomic, resumable), resumes from the newest complete
checkpoint, and exports the final model as a Hugging Face folder to the model dir.

Failures (module 8): collectives time out in two phases, as torchtitan's do: `--init-timeout` (300 s) while the
group forms and through the first step (compilation, a large first forward), then `--collective-timeout` (80 s)
for every later collective (fmlab.parallel.mesh.set_collective_timeout). A collective that waits that long for a
dead or hung peer, or whose peer died, ends the run with the rank that stopped, the collective and the step named
(exit status 1; collective traces and the job's failure file: fmlab.train.failure). Under `torchrun
--max-restarts N` every restart attempt gets its own process-group keys (fmlab.parallel.mesh) and resumes from
the newest complete checkpoint, also on another number of processes when the data position re-splits
(fmlab.data.sampler). Drills: `--fault kill|hang|freeze|kill-save|spike --fault-step N --fault-rank R`
(fmlab.train.faults). A loss spike (module 12): `--loss-alert 2` stops the run with LossSpike when a logged loss is
twice the mean of the few before it, before the diverged model is saved, naming the checkpoint to roll back to. One optimizer step, its optimizer and its batches: fmlab.train.step.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as tdist

from fmlab import checkpoint
from fmlab.checkpoint import CheckpointError
from fmlab.data import DataError, PackedDataset, ResumableSampler, course_dataset
from fmlab.hangs.trace import CollectiveTrace
from fmlab.models import build_model, use_pretraining_attention
from fmlab.parallel import DistInfo, init_distributed, parallelize
from fmlab.parallel.mesh import CollectiveTimeout, resolve_backend, restart_attempt, set_collective_timeout
from fmlab.parallel.smp import smp_available
from fmlab.plan import catalog, compute
from fmlab.plan.catalog import ModelPreset
from fmlab.plan.compute import PlanError
from fmlab.train import collector
from fmlab.train import log as train_log  # StepTimer looked up per run: benchmarks/gpu_step.py patches it
from fmlab.train.capacity_end import CapacityEnd, reserve_seconds
from fmlab.train.config import (
    TrainConfig,
    TrainConfigError,
    accumulation_for,
    adopt_mpi_environment,
    compile_wanted,
    parse_config,
    phase_timeouts,
    sagemaker_defaults,
)
from fmlab.train.evaluate import heldout_loss
from fmlab.train.failure import collective_failure, exit_process, trace_dir, write_failure_file
from fmlab.train.faults import Faults
from fmlab.train.loss import use_chunked_loss_where_layout_allows
from fmlab.train.step import batches, build_optimizer, first_gradients_hook, train_step

__all__ = ["TrainConfig", "TrainConfigError", "TrainResult", "parse_config", "sagemaker_defaults", "train", "main"]


@dataclass
class TrainResult:
    """What a run did, for notebooks and tests (rank 0 has the full picture)."""

    steps: int  # the last step trained
    start_step: int  # 0, or the step the run resumed from
    losses: dict[int, float]  # step -> mean loss over all data-parallel ranks (log steps only)
    records: list[dict]
    tokens_per_s: float  # steady state: every step after the first of this run
    tflops_per_device: float
    mfu: float | None
    world_size: int
    seconds: float
    interrupted: bool = False
    checkpoint: str = ""
    model_dir: str = ""
    val_loss: float | None = None  # held-out loss at the last step (when --eval-sequences > 0)
    val_losses: dict[int, float] = dataclasses.field(default_factory=dict)  # step -> held-out loss


def open_dataset(cfg: TrainConfig, vocab: int, split: str = "train"):
    """The packed dataset to train on (or its held-out split), checked against the model's vocabulary."""
    path = cfg.data or course_dataset(seq_len=cfg.seq_len, vocab_size=vocab,
                                      validation_units=2 if cfg.eval_sequences else 0)
    ds = PackedDataset(path, split=split)
    if ds.vocab_size > vocab:
        raise TrainConfigError(f"the dataset {path} uses a vocabulary of {ds.vocab_size} tokens, more than the "
                               f"model's {vocab}: pick a model preset with a larger vocabulary or re-tokenize the data")
    return ds


@dataclass
class Run:
    """The live objects of one run on this process."""

    cfg: TrainConfig
    dist: DistInfo
    preset: ModelPreset
    ds: PackedDataset
    sampler: ResumableSampler
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    ckpt: checkpoint.Checkpointer | None
    faults: Faults
    start_step: int = 0
    val_ds: PackedDataset | None = None  # the held-out split, when the run evaluates
    trace: CollectiveTrace | None = None  # this rank's last collectives, written out when one fails


def _setup(cfg: TrainConfig, trace: CollectiveTrace) -> Run:
    """Join the world (with the first phase's long timeout and the collective trace on), check the layout, open
    the data, build and parallelize the model, resume if asked."""
    cfg.check()
    preset = catalog.model(cfg.model)
    adopt_mpi_environment()
    trace.enable(resolve_backend(cfg.parallel))
    dist = init_distributed(cfg.parallel, timeout=trace.timeout_s)
    cfg.check(dist.world_size)
    if cfg.global_batch:  # the batch is fixed in sequences: the accumulation follows the world
        cfg = dataclasses.replace(cfg, grad_accum=accumulation_for(cfg, dist.dp_size))
        if dist.rank == 0:
            print(f"note: global batch {cfg.global_batch} sequences = {dist.dp_size} replicas x micro-batch "
                  f"{cfg.micro_batch} x {cfg.grad_accum} accumulated passes", flush=True)
    faults = Faults.from_config(cfg, dist.rank, dist.world_size)
    if dist.rank == 0 and cfg.ignored:
        print(f"note: ignoring arguments fmlab.train does not use: {' '.join(cfg.ignored)}", flush=True)
    if dist.rank == 0 and restart_attempt():
        print(f"note: restart attempt {restart_attempt()} (TORCHELASTIC_RESTART_COUNT) on {dist.world_size} "
              f"processes", flush=True)
    ds = open_dataset(cfg, preset.vocab)
    val_ds = open_dataset(cfg, preset.vocab, split="validation") if cfg.eval_sequences else None
    if val_ds is not None and min(cfg.eval_sequences, len(val_ds)) < dist.dp_size:
        raise TrainConfigError(f"--eval-sequences {cfg.eval_sequences} cannot be shared by {dist.dp_size} "
                               f"data-parallel ranks (the held-out split has {len(val_ds)}): use at least {dist.dp_size}")
    if ds.seq_len > preset.seq_len:
        raise TrainConfigError(f"sequences of {ds.seq_len} tokens are longer than {preset.name}'s context of "
                               f"{preset.seq_len}: use --seq-len {preset.seq_len} or a preset with a longer context")
    sampler = ResumableSampler(len(ds), dist.dp_rank, dist.dp_size, seed=cfg.seed, shuffle=cfg.shuffle,
                               drop_last=True)
    if len(sampler) < cfg.micro_batch:
        raise TrainConfigError(f"each of the {dist.dp_size} data-parallel ranks gets {len(sampler)} sequences, fewer "
                               f"than one micro-batch of {cfg.micro_batch}: lower --micro-batch or use more data")
    model = _build_model(preset, cfg, dist)
    optimizer, scheduler = build_optimizer(model, cfg)
    run = Run(cfg, dist, preset, ds, sampler, model, optimizer, scheduler, None, faults, val_ds=val_ds, trace=trace)
    _resume(run)
    return run


def _build_model(preset: ModelPreset, cfg: TrainConfig, dist: DistInfo) -> torch.nn.Module:
    """The preset's model with the pretraining attention (whole rows need no mask; SMP v2's transform brings its
    own attention), laid out as cfg.parallel says."""
    model = build_model(preset, seed=cfg.seed)
    if not smp_available():
        use_pretraining_attention(model)
    compiled = compile_wanted(cfg, dist.device.type)
    if cfg.loss == "chunked":
        why = use_chunked_loss_where_layout_allows(model, cfg.parallel, compiled)
        if why and dist.rank == 0:
            print(f"note: --loss chunked does not apply ({why}): the full loss runs", flush=True)
    return parallelize(model, cfg.parallel, dist, compile=compiled)


def _resume(run: Run) -> None:
    """Open the checkpoint folder and load the checkpoint --resume names (auto: the newest intact one)."""
    cfg, rank = run.cfg, run.dist.rank
    run.ckpt = checkpoint.Checkpointer(cfg.checkpoint_dir, cfg.keep_checkpoints) if cfg.checkpoint_dir else None
    resume_from = ""
    if cfg.resume not in ("auto", "none", ""):
        resume_from = cfg.resume
    elif cfg.resume == "auto" and run.ckpt is not None:
        intact, set_aside = checkpoint.newest_intact(cfg.checkpoint_dir)  # damaged newer ones are set aside
        resume_from = str(intact or "")
        for note in set_aside if rank == 0 else []:
            print(f"warning: {note}", file=sys.stderr, flush=True)
        for partial in sorted(Path(cfg.checkpoint_dir).glob(f"{checkpoint.INCOMPLETE}*")) if rank == 0 else []:
            print(f"note: {partial.name} is a save that never finished ({len(list(partial.iterdir()))} files): not "
                  f"resumed from; the next save removes it", flush=True)
    if resume_from:
        loader = run.ckpt or checkpoint.Checkpointer(Path(resume_from).parent)
        run.start_step = int(loader.load(resume_from, run.model, run.optimizer, run.scheduler, run.sampler)["step"])
        if rank == 0:
            print(f"resumed from {resume_from} at step {run.start_step}", flush=True)


def train(cfg: TrainConfig) -> TrainResult:
    """Run (or resume) training as `cfg` says, on this process's share of the world; returns what happened."""
    logging.getLogger("torch.distributed.tensor._redistribute").setLevel(logging.ERROR)  # clip's 2-D norm notice
    created_group = not (tdist.is_available() and tdist.is_initialized())
    trace = CollectiveTrace(cfg.trace_collectives, trace_dir(cfg), timeout_s=phase_timeouts(cfg)[0])
    try:
        started = time.perf_counter()
        run = _setup(cfg, trace)
        with collector.scheduled():  # what setup made is frozen; a collection every GC_EVERY steps, not at random
            return _loop(run, started)
    except RuntimeError as e:
        failure = collective_failure(e, cfg, trace)
        if failure is e:
            raise
        raise failure from e
    finally:
        if created_group and tdist.is_available() and tdist.is_initialized():
            tdist.destroy_process_group()


def _loop(run: Run, started: float) -> TrainResult:
    """The training steps; between them logging, evaluation and checkpoints."""
    cfg, dist = run.cfg, run.dist
    flops = compute.flops_per_token(run.preset, run.ds.seq_len)
    log = train_log.TrainLog(cfg.output_dir or None, flops, dist.world_size,
                             train_log.peak_tflops_of(dist.device, cfg.peak_tflops), dist.rank, cfg.tensorboard)
    timer, tokens_per_step = train_log.StepTimer(), cfg.micro_batch * run.ds.seq_len * cfg.grad_accum * dist.dp_size
    data = batches(run.ds, run.sampler, cfg.micro_batch, dist.device)
    last_step = cfg.stop_after if 0 < cfg.stop_after < cfg.max_steps else cfg.max_steps
    saved, losses, val_losses, window_loss = "", {}, {}, 0.0
    capacity_end, save_s, step_started = CapacityEnd.from_env(), None, time.perf_counter()
    run.model.train()
    for step in range(run.start_step + 1, last_step + 1):
        run.trace.at_step(step)
        run.faults.before_step(step)
        with timer.data():
            micro_batches = [next(data) for _ in range(cfg.grad_accum)]
        lr = run.optimizer.param_groups[0]["lr"]
        run.faults.spiking(step, run.model)
        with run.faults.skipping(step, run.model):
            window_loss = window_loss + train_step(run.model, run.optimizer, run.scheduler, micro_batches,
                                                   cfg.grad_clip, first_gradients_hook(cfg, step, dist.rank))
        timer.step_done()
        collector.after_step(step)
        if step == run.start_step + 1:
            _enter_training_phase(run)
        if step % cfg.log_every == 0 or step == last_step:
            losses[step] = _log_window(log, timer, step, window_loss, lr, tokens_per_step, dist)
            window_loss = 0.0
            if cfg.loss_alert:
                _alert_on_spike(run, losses, step, saved)
        if run.val_ds is not None and ((cfg.eval_every and step % cfg.eval_every == 0) or step == last_step):
            t0 = time.perf_counter()
            val_losses[step] = heldout_loss(run.model, run.val_ds, cfg.eval_sequences, cfg.micro_batch, dist)
            log.validation(step, val_losses[step], timer.exclude(since=t0))
        if run.ckpt is not None and cfg.checkpoint_every and step % cfg.checkpoint_every == 0:
            t0 = time.perf_counter()
            saved, save_s = _save(run, step), time.perf_counter() - t0
        if capacity_end is not None:
            now = time.perf_counter()
            step_s, step_started = now - step_started, now
            if _capacity_ends(capacity_end, reserve_seconds(step_s, save_s), dist):
                saved, last_step = _stop_for_capacity(run, step, saved, capacity_end), step
                break
    tokens_per_s = timer.steady_rate(tokens_per_step)
    return _finish(run, log, last_step, saved, losses, val_losses, tokens_per_s, flops, started)


class LossSpike(RuntimeError):
    """The logged loss jumped past --loss-alert times its recent mean: the run stops before it saves a diverged
    model (module 12's loss alert; every rank sees the same all-reduced loss, so every rank stops)."""


ALERT_WINDOWS = 5  # the logged losses the alert compares with (it waits for 3 of them)


def _alert_on_spike(run: Run, losses: dict, step: int, saved: str) -> None:
    """Raise LossSpike when the loss just logged is --loss-alert times the mean of the windows before it (or not a
    number), naming the newest checkpoint saved before the spike, the one to roll back to."""
    steps = sorted(losses)
    before = [losses[s] for s in steps[:-1][-ALERT_WINDOWS:]]
    loss = losses[step]
    if len(before) < 3 and math.isfinite(loss):
        return
    mean = sum(before) / len(before) if before else math.nan
    if math.isfinite(loss) and not loss > run.cfg.loss_alert * mean:
        return
    if run.ckpt is not None:
        run.ckpt.finish()  # an asynchronous save in flight is from before the spike: let it commit
    back = f"roll back to {saved}" if saved else "no checkpoint was saved before it: restart from the start"
    raise LossSpike(f"loss alert: step {step}'s loss {loss:.3f} is {loss / mean:.1f}x the mean of the {len(before)} "
                    f"logged before it ({mean:.3f}; --loss-alert {run.cfg.loss_alert:g}): stopping before a diverged "
                    f"model is saved; {back} and skip the batches around step {step}, as PaLM did")


def _enter_training_phase(run: Run) -> None:
    """After the first step: every collective from now on gets the short --collective-timeout."""
    first, second = phase_timeouts(run.cfg)
    if run.dist.world_size > 1 and second < first:
        set_collective_timeout(second)
        if run.dist.rank == 0:
            print(f"note: collective timeout {first:g} s -> {second:g} s after the first step (--init-timeout, "
                  f"--collective-timeout)", flush=True)
    run.trace.timeout_s, run.trace.phase = second, "training"


def _log_window(log, timer, step: int, window_loss, lr: float, tokens_per_step: int, dist: DistInfo) -> float:
    """Log the steps since the last log line: their mean loss over every rank and their throughput."""
    mean_loss = window_loss / timer.window_steps
    if dist.world_size > 1:
        tdist.all_reduce(mean_loss)
        mean_loss = mean_loss / dist.world_size
    loss = mean_loss.item()  # waits for the device, so the window's clock stops after the work
    steps, seconds, data_seconds = timer.take_window()
    return log.step(step, loss, lr, tokens_per_step * steps, seconds, data_seconds, steps)["loss"]


def _capacity_ends(end: CapacityEnd, reserve_s: float, dist: DistInfo) -> bool:
    """Whether the training plan's capacity ends too soon for another step and a save, as every rank agrees (one
    all-reduce of the verdict: no rank stops alone)."""
    verdict = torch.tensor([float(end.must_stop(time.time(), reserve_s))], device=dist.device)
    if dist.world_size > 1:
        tdist.all_reduce(verdict, op=tdist.ReduceOp.MAX)
    return bool(verdict.item())


def _stop_for_capacity(run: Run, step: int, saved: str, end: CapacityEnd) -> str:
    """Save at `step` (unless that checkpoint was just written) before the plan ends the instances."""
    if run.dist.rank == 0:
        minutes = end.seconds_left(time.time()) / 60
        print(f"note: the training plan starts ending its instances in {minutes:.0f} min (less than a step and a save "
              f"before its instances start ending): saving step {step} and stopping; the next job resumes from it",
              flush=True)
    if run.ckpt is not None and not saved.endswith(f"{step:08d}"):
        saved = _save(run, step)
    return saved


def _save(run: Run, step: int) -> str:
    with run.faults.saving(step):
        return str(run.ckpt.save(step, run.model, run.optimizer, run.scheduler, run.sampler,
                                 {"model": run.cfg.model}, asynchronous=run.cfg.async_checkpoint))


def _finish(run: Run, log, last_step: int, saved: str, losses: dict, val_losses: dict, tokens_per_s: float,
            flops: float, started: float) -> TrainResult:
    """The final checkpoint and export, and what the run did (rank 0 also writes summary.json)."""
    cfg, dist = run.cfg, run.dist
    interrupted = last_step < cfg.max_steps
    if not interrupted and run.ckpt is not None and last_step > run.start_step:
        saved = _save(run, last_step)
    if run.ckpt is not None:
        run.ckpt.finish()  # commit an asynchronous save still in flight (every rank; a no-op otherwise)
    run.faults.disarm()  # a kill-save hook that never fired leaves torch as it found it
    exported = ""
    if not interrupted and cfg.model_dir:
        exported = str(checkpoint.export_hf(run.model, cfg.model_dir) or cfg.model_dir)
    log.close()
    tflops = flops * tokens_per_s / dist.world_size / 1e12
    result = TrainResult(steps=last_step, start_step=run.start_step, losses=losses, records=log.records,
                         tokens_per_s=tokens_per_s, tflops_per_device=tflops,
                         mfu=tflops / log.peak_tflops if log.peak_tflops else None, world_size=dist.world_size,
                         seconds=time.perf_counter() - started, interrupted=interrupted, checkpoint=saved,
                         model_dir=exported, val_loss=val_losses.get(last_step), val_losses=val_losses)
    if dist.rank == 0 and cfg.output_dir:
        summary = {k: v for k, v in dataclasses.asdict(result).items() if k != "records"}
        summary["config"] = dataclasses.asdict(cfg)
        (Path(cfg.output_dir) / "summary.json").write_text(json.dumps(summary, indent=1))
    return result


def main(argv: list[str] | None = None) -> int:
    """Command-line entry: parse flags and the SageMaker environment, train; 0 on success, 2 on a bad setting,
    1 when a collective timed out (a dead or hung peer: torchrun's --max-restarts then restarts the workers)."""
    try:
        train(parse_config(argv))
    except (PlanError, CheckpointError, DataError, TrainConfigError) as e:
        print(f"error: {e}", file=sys.stderr, flush=True)
        return 2
    except CollectiveTimeout as e:
        print(f"error: {e}", file=sys.stderr, flush=True)
        write_failure_file(getattr(e, "summary", "") or str(e))
        return 1
    return 0


if __name__ == "__main__":
    exit_process(main())
