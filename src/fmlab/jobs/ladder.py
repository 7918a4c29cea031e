"""The phased scaling ladder, run for real: each rung is a job, and a gate decides whether the next one starts.

    rungs = [Rung("base", run.shrink(model="tiny-gpt", instances=1, processes_per_host=1, max_steps=40)),
             Rung("medium", run.shrink(model="small-gpt", instances=2, processes_per_host=2, hybrid_shard_degree=2))]
    results = climb(rungs, data_uri, "s3://bucket/ladder", plan=lambda run, earlier: 20_000.0)  # tokens/s
    gate_table(results)

A rung passes its gate when
1. its final checkpoint loads (DCP, resharded onto this one process) and, loaded, scores the held-out loss the
   job reported: the checkpoint is the model that was trained, complete and readable, before anything is
   built on it;
2. its held-out perplexity is at least 10% below the rung before's (the first rung: the untrained model's,
   about the vocabulary size): the one ladder rule of `fmlab.plan.gate`, which module 10's gate applies too;
3. its throughput is at least the plan's divided by `factor`: a rung far below plan has a problem (data
   loading, communication, a bad layout) to fix before a 10x larger rung multiplies its cost.
A rung whose job fails, or whose gate fails, ends the climb: the next rung is not launched.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from fmlab import storage
from fmlab.jobs.job import Job, launch
from fmlab.jobs.sharded import ShardedRun
from fmlab.plan import gate

DEFAULT_FACTOR = 4.0  # a rung may run this many times slower than planned and still pass


@dataclass(frozen=True)
class Rung:
    """One step of the ladder: a name and the (shrunk) run to launch."""

    name: str
    run: ShardedRun


@dataclass
class GateResult:
    """What one rung did and the gate's verdict on it."""

    rung: str
    job: str
    status: str
    model: str
    processes: int
    sharding: str
    steps: int
    checkpoint: str = ""
    reported_val_loss: float | None = None
    reloaded_val_loss: float | None = None
    previous_val_loss: float | None = None
    tokens_per_s: float = 0.0
    planned_tokens_per_s: float | None = None
    factor: float = DEFAULT_FACTOR
    checks: dict[str, bool] = field(default_factory=dict)
    reasons: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(self.checks.values())

    def row(self) -> dict:
        """One line of the gate table."""
        return {"rung": self.rung, "model": self.model, "processes": self.processes, "sharding": self.sharding,
                "steps": self.steps, "job": self.status,
                "checkpoint loads": self.checks.get("checkpoint"),
                "held-out loss": self.reported_val_loss, "reloaded": self.reloaded_val_loss,
                "to beat": gate.loss_to_beat(self.previous_val_loss), "beats it": self.checks.get("improves"),
                "tokens/s": self.tokens_per_s, "planned tokens/s": self.planned_tokens_per_s,
                "within plan": self.checks.get("throughput"), "gate": "PASS" if self.passed else "FAIL",
                "why": "; ".join(self.reasons)}


def sharding_of(run: ShardedRun) -> str:
    if run.processes == 1:
        return "one process"
    if run.config.parallel.sharding == "hybrid":
        degree = run.config.parallel.hybrid_shard_degree
        return f"hybrid {run.processes // degree}x{degree}"
    return f"full over {run.processes}"


def local_checkpoints(uri: str, backend: str) -> Path:
    """A local folder with the checkpoints at `uri` (the local bucket's folder, or a download from S3)."""
    if storage.uses_real_s3(uri, backend):
        return storage.download(uri, storage.cache_path(uri), backend=backend)
    return storage.to_local_path(uri)


def reload_and_evaluate(checkpoint_folder: str | Path, run: ShardedRun, data: str) -> tuple[str, float]:
    """Load the newest complete checkpoint of `checkpoint_folder` into one process (model, optimizer and LR
    schedule, resharded by DCP) and return (its path, its held-out loss). The data position is left out: it
    belongs to the world size that saved it (module 8 resumes on another world size)."""
    from fmlab.checkpoint import Checkpointer, CheckpointError, latest
    from fmlab.data import PackedDataset
    from fmlab.models import build_model
    from fmlab.train.evaluate import heldout_loss
    from fmlab.train.step import build_optimizer

    path = latest(checkpoint_folder)
    if path is None:
        raise CheckpointError(f"no complete checkpoint in {checkpoint_folder}: the job wrote none, or none was "
                              "committed (a save killed half-way leaves only .incomplete-*)")
    cfg = run.config
    model = build_model(cfg.model)
    optimizer, scheduler = build_optimizer(model, cfg)
    with warnings.catch_warnings():  # "saved by N processes, loaded by 1": expected here, and what is tested
        warnings.simplefilter("ignore", UserWarning)
        Checkpointer(Path(path).parent).load(path, model, optimizer, scheduler)
    loss = heldout_loss(model, PackedDataset(data, split="validation"), cfg.eval_sequences, cfg.micro_batch)
    return str(path), loss


def untrained_loss(run: ShardedRun, data: str) -> float:
    """The held-out loss of the freshly initialised model: what the first rung must beat (about ln(vocab))."""
    from fmlab.data import PackedDataset
    from fmlab.models import build_model
    from fmlab.train.evaluate import heldout_loss

    cfg = run.config
    return heldout_loss(build_model(cfg.model), PackedDataset(data, split="validation"), cfg.eval_sequences,
                        cfg.micro_batch)


def job_figures(job: Job) -> tuple[float | None, float]:
    """(final held-out loss, steady tokens/s) from the job's metric lines: tokens/s averages every logged window
    after the first (which pays for start-up)."""
    metrics = job.metrics()
    if metrics.empty:
        return None, 0.0
    val = metrics["val_loss"].dropna() if "val_loss" in metrics else []
    rates = metrics["tokens_per_s"].dropna() if "tokens_per_s" in metrics else []
    steady = rates.iloc[1:] if len(rates) > 1 else rates
    return (float(val.iloc[-1]) if len(val) else None), (float(steady.mean()) if len(steady) else 0.0)


def check_gate(rung: Rung, job: Job, data: str, checkpoint_uri: str, previous_val_loss: float,
               planned_tokens_per_s: float | None, factor: float = DEFAULT_FACTOR) -> GateResult:
    """The gate's verdict on a rung whose job has ended."""
    from fmlab.checkpoint import CheckpointError

    run = rung.run
    status = job.describe()["TrainingJobStatus"]
    result = GateResult(rung.name, job.name, status, run.config.model, run.processes, sharding_of(run), run.config.max_steps,
                        previous_val_loss=previous_val_loss, planned_tokens_per_s=planned_tokens_per_s, factor=factor)
    result.reported_val_loss, result.tokens_per_s = job_figures(job)
    if status != "Completed":
        result.checks["job"] = False
        result.reasons.append(f"the job ended {status}: {job.describe().get('FailureReason', 'see its log')}")
        return result
    try:
        result.checkpoint, result.reloaded_val_loss = reload_and_evaluate(
            local_checkpoints(checkpoint_uri, job.backend), run, data)
        agree = result.reported_val_loss is not None and math.isclose(
            result.reloaded_val_loss, result.reported_val_loss, rel_tol=1e-3, abs_tol=1e-3)
        result.checks["checkpoint"] = agree
        if not agree:
            result.reasons.append(f"the reloaded checkpoint scores {result.reloaded_val_loss:.4f} on the held-out "
                                  f"split, the job reported {result.reported_val_loss}: it is not the trained model")
    except CheckpointError as e:
        result.checks["checkpoint"] = False
        result.reasons.append(f"checkpoint does not load: {e}")
    improves = gate.improves(result.reported_val_loss, previous_val_loss)
    result.checks["improves"] = improves
    if not improves:
        result.reasons.append(f"held-out loss {result.reported_val_loss} is not {gate.MIN_GAIN:.0%} lower in "
                              f"perplexity than {previous_val_loss:.4f}: it must reach "
                              f"{gate.loss_to_beat(previous_val_loss):.4f} (fmlab.plan.gate)")
    if planned_tokens_per_s:
        fast_enough = result.tokens_per_s >= planned_tokens_per_s / factor
        result.checks["throughput"] = fast_enough
        if not fast_enough:
            result.reasons.append(f"{result.tokens_per_s:,.0f} tokens/s is below the plan's "
                                  f"{planned_tokens_per_s:,.0f} / {factor:g}")
    return result


def climb(rungs: list[Rung], data_uri: str, checkpoint_prefix: str,
          plan: Callable[[ShardedRun, list[GateResult]], float] | None = None,
          factor: float = DEFAULT_FACTOR, backend: str | None = None, on_job: Callable[[Job], None] | None = None,
          **spec_overrides) -> list[GateResult]:
    """Run the rungs in order, each as a job, and stop at the first gate that fails.

    `plan(run, earlier_results)` gives a rung's planned tokens/s (it may calibrate on what earlier rungs
    measured); `on_job(job)` is called while a rung's job runs (e.g. to draw its live loss curve) and must
    return when the job has ended. `spec_overrides` go to every JobSpec."""
    from fmlab.data import has_validation

    data = str(storage.to_local_path(data_uri)) if not storage.uses_real_s3(data_uri, backend) else data_uri
    if not has_validation(data):
        raise ValueError(f"{data_uri} has no held-out split to gate on: prepare it with validation_units >= 1")
    results: list[GateResult] = []
    previous = untrained_loss(rungs[0].run, data)
    for rung in rungs:
        checkpoint_uri = storage.join(checkpoint_prefix, rung.name)
        spec = rung.run.job_spec(data_uri, checkpoint_uri, **spec_overrides)
        job = launch(spec, backend=backend, quiet=True)
        if on_job is not None:
            on_job(job)
        job.wait()
        result = check_gate(rung, job, data, checkpoint_uri, previous,
                            plan(rung.run, list(results)) if plan is not None else None, factor)
        results.append(result)
        if not result.passed:
            break
        previous = result.reported_val_loss
    return results


def gate_table(results: list[GateResult]):
    """The gate's verdicts as a DataFrame, one row per rung."""
    import pandas as pd

    return pd.DataFrame([r.row() for r in results]).set_index("rung")
