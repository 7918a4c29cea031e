"""Held-out perplexity of every checkpoint of a run, and the gate that decides whether the next phase starts.

    curve = checkpoint_curve("runs/ck", "tiny", data)          # [CheckpointScore(step, loss, perplexity), ...]
    verdict = decide(curve, baseline_loss=untrained_loss("tiny", data))
    verdict.go, verdict.reason                                  # True, "held-out perplexity fell from 512 to 73..."

Every complete checkpoint (`step_*` with its COMPLETE marker, fmlab.checkpoint) is loaded into one
process (DCP reshards whatever world size saved it) and scored with `fmlab.train.evaluate.heldout_loss` on the
same first `sequences` sequences of the dataset's validation split, which module 2's `prepare(...,
validation_units=N)` holds out and training never reads. The gate (`decide`) is the rule a phased run applies
before spending 10x more compute on the next phase (module 7's ladder gates on the same held-out loss):

1. the newest checkpoint beats the baseline (the untrained model: perplexity about the vocabulary size, or the
   previous phase's final figure) by at least `min_gain` (relative perplexity);
2. the curve is not diverging: no evaluation after the best one is more than `max_rise` (relative) above it,
   and every loss is finite;
3. it is still improving or has converged on purpose: either of the two is a reason to go on; a rise is not.

tests/serve/test_heldout.py checks it on a run that improves and one that diverges (a learning rate 100x too high).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from fmlab.checkpoint import Checkpointer, complete_checkpoints
from fmlab.data import PackedDataset, has_validation
from fmlab.models import build_model
from fmlab.plan import gate
from fmlab.train.config import TrainConfig
from fmlab.train.evaluate import heldout_loss
from fmlab.train.step import build_optimizer


class GateError(ValueError):
    """A run that cannot be gated (no complete checkpoint, no held-out split), with what to do about it."""


@dataclass(frozen=True)
class CheckpointScore:
    """One checkpoint's held-out figures."""

    step: int
    loss: float  # mean next-token cross-entropy (nats) on the held-out sequences
    path: str = ""

    @property
    def perplexity(self) -> float:
        return math.exp(self.loss) if math.isfinite(self.loss) and self.loss < 700 else math.inf


@dataclass(frozen=True)
class GateRule:
    """The thresholds of the gate between two phases."""

    min_gain: float = gate.MIN_GAIN  # the newest perplexity at least 10% below the baseline's (plan.gate)
    max_rise: float = gate.MAX_RISE  # no evaluation after the best more than 5% above it (divergence)


@dataclass
class Verdict:
    """The gate's answer: go on or stop, and why."""

    go: bool
    reason: str
    baseline_perplexity: float
    best: CheckpointScore | None = None
    last: CheckpointScore | None = None
    checks: dict[str, bool] = field(default_factory=dict)


def _model_and_optimizer(model_name: str):
    model = build_model(model_name)
    optimizer, _ = build_optimizer(model, TrainConfig(model=model_name))
    return model, optimizer


def load_checkpoint_model(path: str | Path, model_name: str):
    """The model of one complete checkpoint, on this one process (its optimizer state is read and dropped)."""
    model, optimizer = _model_and_optimizer(model_name)
    with warnings.catch_warnings():  # "saved by N processes, loaded by 1": expected here
        warnings.simplefilter("ignore", UserWarning)
        Checkpointer(Path(path).parent).load(path, model, optimizer)
    return model


def _validation(data: str | Path):
    if not has_validation(data):
        raise GateError(f"{data} has no held-out split to evaluate on: prepare it with validation_units >= 1 "
                        "(course_dataset(validation_units=2), fmlab data prepare --validation-units 2)")
    return PackedDataset(data, split="validation")


def untrained_loss(model_name: str, data: str | Path, sequences: int = 64, micro_batch: int = 16) -> float:
    """The held-out loss of the freshly initialised model (seed 0): about ln(vocabulary)."""
    return heldout_loss(build_model(model_name), _validation(data), sequences, micro_batch)


def checkpoint_curve(checkpoint_dir: str | Path, model_name: str, data: str | Path, sequences: int = 64,
                     micro_batch: int = 16) -> list[CheckpointScore]:
    """The held-out loss of every complete checkpoint in `checkpoint_dir`, oldest first."""
    found = complete_checkpoints(checkpoint_dir)
    if not found:
        raise GateError(f"no complete checkpoint in {checkpoint_dir}: train with --checkpoint-dir and "
                        "--checkpoint-every, and let at least one save finish (its COMPLETE marker)")
    dataset = _validation(data)
    return [CheckpointScore(info.step, heldout_loss(load_checkpoint_model(info.path, model_name), dataset,
                                                    sequences, micro_batch), str(info.path))
            for info in found]


def decide(curve: list[CheckpointScore], baseline_loss: float, rule: GateRule = GateRule()) -> Verdict:
    """Whether the next phase may start, from a run's held-out curve and the loss it must beat."""
    if not curve:
        raise GateError("an empty curve: evaluate at least one checkpoint")
    baseline = math.exp(baseline_loss)
    last = curve[-1]
    finite = all(math.isfinite(c.loss) for c in curve)
    best = min((c for c in curve if math.isfinite(c.loss)), key=lambda c: c.loss, default=None)
    verdict = Verdict(False, "", baseline, best, last)
    verdict.checks["finite"] = finite
    verdict.checks["beats baseline"] = finite and gate.improves(last.loss, baseline_loss, rule.min_gain)
    after_best = [c for c in curve if best is not None and c.step > best.step]
    rise = max((c.perplexity / best.perplexity - 1 for c in after_best), default=0.0) if best else math.inf
    verdict.checks["not diverging"] = finite and rise <= rule.max_rise
    verdict.go = all(verdict.checks.values())
    if not finite:
        verdict.reason = (f"the loss became {'nan' if any(math.isnan(c.loss) for c in curve) else 'inf'} at step "
                          f"{next(c.step for c in curve if not math.isfinite(c.loss))}: the run diverged; lower the "
                          "learning rate or resume from an earlier checkpoint")
    elif not verdict.checks["not diverging"]:
        verdict.reason = (f"held-out perplexity rose {100 * rise:.0f}% above its best ({best.perplexity:.1f} at step "
                          f"{best.step}) to {last.perplexity:.1f} at step {last.step}: diverging; stop, lower the "
                          "learning rate and resume from the best checkpoint")
    elif not verdict.checks["beats baseline"]:
        verdict.reason = (f"held-out perplexity {last.perplexity:.1f} is not {100 * rule.min_gain:.0f}% below the "
                          f"baseline's {baseline:.1f}: train this phase longer before scaling up")
    else:
        verdict.reason = (f"held-out perplexity fell from {baseline:.1f} to {last.perplexity:.1f} (best "
                          f"{best.perplexity:.1f} at step {best.step}) and is not rising: start the next phase")
    return verdict


__all__ = ["CheckpointScore", "GateError", "GateRule", "Verdict", "checkpoint_curve", "decide",
           "load_checkpoint_model", "untrained_loss"]
