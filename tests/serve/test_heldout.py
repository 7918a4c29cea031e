"""The gate between phases (fmlab.serve.heldout): go on an improving curve, stop on every kind of failure."""

import math

import pytest

from fmlab.serve.heldout import CheckpointScore, GateError, checkpoint_curve, decide

BASE = math.log(512)  # an untrained model over a vocabulary of 512: perplexity 512


def curve(*losses, every=10):
    return [CheckpointScore(every * (i + 1), loss) for i, loss in enumerate(losses)]


def test_an_improving_run_goes_on():
    v = decide(curve(5.5, 5.0, 4.6, 4.4), BASE)
    assert v.go and v.checks == {"finite": True, "beats baseline": True, "not diverging": True}
    assert "fell from 512.0" in v.reason


def test_a_run_that_rises_after_its_best_checkpoint_stops():
    v = decide(curve(5.5, 5.2, 5.3, 6.0), BASE)  # perplexity up 2.2x from its best at step 20
    assert not v.go and not v.checks["not diverging"] and v.best.step == 20
    assert "diverging" in v.reason and "step 20" in v.reason


def test_a_small_wobble_is_not_divergence():
    assert decide(curve(5.5, 5.0, 5.03, 4.9), BASE).go  # +3% after the best, under the 5% allowed


def test_a_run_that_does_not_beat_the_baseline_by_enough_stops():
    v = decide(curve(6.3, 6.2, 6.19), BASE)  # perplexity 488 against 512: 5% better, 10% needed
    assert not v.go and not v.checks["beats baseline"] and "train this phase longer" in v.reason


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_a_run_whose_loss_is_not_finite_stops(bad):
    v = decide(curve(5.0, 4.5, bad), BASE)
    assert not v.go and not v.checks["finite"] and "step 30" in v.reason


def test_an_empty_curve_or_a_run_without_checkpoints_is_an_error(tmp_path):
    with pytest.raises(GateError, match="at least one"):
        decide([], BASE)
    with pytest.raises(GateError, match="no complete checkpoint"):
        checkpoint_curve(tmp_path, "tiny", tmp_path)


def test_a_dataset_without_a_held_out_split_is_refused(tmp_path):
    from fmlab.data import course_dataset

    (tmp_path / "step_00000010").mkdir()
    (tmp_path / "step_00000010" / "COMPLETE").write_text('{"step": 10, "world_size": 1, "files": {}}')
    with pytest.raises(GateError, match="validation_units"):
        checkpoint_curve(tmp_path, "tiny", course_dataset(seq_len=128, vocab_size=512))
