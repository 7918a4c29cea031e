"""The one ladder rule of modules 7 and 10 (fmlab.plan.gate): at least 10% lower held-out perplexity."""

import math

import pytest

from fmlab.plan import gate


def test_a_phase_must_buy_ten_percent_perplexity():
    previous = math.log(512)
    assert gate.loss_to_beat(previous) == pytest.approx(math.log(0.9 * 512))
    assert gate.improves(math.log(0.9 * 512) - 1e-9, previous)
    assert not gate.improves(previous - 0.05, previous)  # lower, but only 5% in perplexity: not enough
    assert not gate.improves(None, previous) and not gate.improves(float("nan"), previous)
    assert gate.improves(previous - 0.05, previous, min_gain=0.04)
    with pytest.raises(ValueError, match="min_gain"):
        gate.loss_to_beat(previous, 1.0)


def test_module_10_gate_applies_the_same_rule():
    from fmlab.serve.heldout import CheckpointScore, GateRule, decide

    assert (GateRule().min_gain, GateRule().max_rise) == (gate.MIN_GAIN, gate.MAX_RISE)
    base = math.log(512)
    just_short = CheckpointScore(10, base - 0.10)  # 9.5% lower perplexity
    assert not decide([just_short], base).go
    enough = CheckpointScore(10, gate.loss_to_beat(base) - 1e-6)
    assert decide([enough], base).go
