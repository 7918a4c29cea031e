"""The one rule that lets the next phase of a scaling ladder start, used by module 7's ladder gate
(`fmlab.jobs.ladder.check_gate`) and module 10's gate (`fmlab.serve.heldout.decide`).

    from fmlab.plan.gate import improves, MIN_GAIN
    improves(loss=5.1, previous_loss=5.3)   # True: perplexity fell by 18%, at least MIN_GAIN

The phase's held-out perplexity, exp(mean cross-entropy on text training never reads), must be at least
MIN_GAIN (10%) below the previous phase's (the untrained model's, ln(vocabulary), before the first phase): in
loss, at least -ln(1 - MIN_GAIN) = 0.105 nats lower. Module 10 adds, over a run's whole curve, that no
evaluation after the best rises more than MAX_RISE above it (a run that is diverging). The thresholds are the
course's own choice, not a published standard: a phase that cannot buy 10% perplexity is not ready for ten
times the compute.
"""

from __future__ import annotations

import math

MIN_GAIN = 0.10  # the newest perplexity must be at least 10% below the previous phase's
MAX_RISE = 0.05  # no evaluation after the best may be more than 5% above it


def loss_to_beat(previous_loss: float, min_gain: float = MIN_GAIN) -> float:
    """The held-out loss (nats per token) a phase must reach: ln((1 - min_gain) x previous perplexity)."""
    if not 0 <= min_gain < 1:
        raise ValueError(f"min_gain must be in [0, 1), got {min_gain}")
    return previous_loss + math.log(1 - min_gain)


def improves(loss: float | None, previous_loss: float, min_gain: float = MIN_GAIN) -> bool:
    """True when `loss` is finite and its perplexity at least `min_gain` below the previous phase's."""
    return loss is not None and math.isfinite(loss) and loss <= loss_to_beat(previous_loss, min_gain) + 1e-12
