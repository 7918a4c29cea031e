"""The end of a training plan's capacity (fmlab.train.capacity_end): the expiration variable read in every form, and
a run that saves and stops before the plan starts ending its instances, then resumes.

Run: .venv/bin/pytest tests/train/test_capacity_end.py -q   (a few seconds: the tiny model, one process)
"""

from __future__ import annotations

import time

import pytest

from fmlab.checkpoint import latest
from fmlab.train.capacity_end import (
    EXPIRATION_VARIABLE,
    MIN_RESERVE_S,
    CapacityEnd,
    CapacityEndError,
    parse_expiration,
    reserve_seconds,
)
from fmlab.train.config import TrainConfig
from fmlab.train.loop import train

TINY = dict(model="tiny", seq_len=32, micro_batch=2, log_every=1, tensorboard=False)


def test_the_expiration_is_read_in_seconds_milliseconds_or_iso_and_0_means_none():
    assert parse_expiration("0") is None and parse_expiration("") is None
    assert parse_expiration("1767268800") == parse_expiration("1767268800000") == 1767268800.0
    assert parse_expiration("2026-01-01T12:00:00Z") == 1767268800.0
    with pytest.raises(CapacityEndError, match=f"{EXPIRATION_VARIABLE}='soon' is neither"):
        parse_expiration("soon")
    assert CapacityEnd.from_env({}) is None


def test_the_run_stops_30_minutes_and_a_save_before_the_end():
    end = CapacityEnd(expires_at=10_000.0)
    assert end.stop_by == 10_000.0 - 30 * 60  # the developer guide: instances start ending 30 minutes before
    assert not end.must_stop(now=end.stop_by - 3600, reserve_s=1200)
    assert end.must_stop(now=end.stop_by - 1000, reserve_s=1200)
    assert reserve_seconds(step_seconds=1.0, save_seconds=None) == MIN_RESERVE_S
    assert reserve_seconds(step_seconds=400.0, save_seconds=300.0) == 1100.0


@pytest.mark.slow
def test_a_run_on_an_ending_plan_saves_stops_and_the_next_job_resumes(tmp_path, monkeypatch):
    # the plan starts ending instances in just under 10 minutes: too little for another step and a save
    monkeypatch.setenv(EXPIRATION_VARIABLE, str(time.time() + 30 * 60 + MIN_RESERVE_S - 5))
    first = train(TrainConfig(**TINY, max_steps=6, checkpoint_dir=str(tmp_path)))
    assert first.interrupted and first.steps == 1 and latest(tmp_path).name.endswith("00000001")
    monkeypatch.setenv(EXPIRATION_VARIABLE, "0")  # the next job, on demand or on the next plan
    second = train(TrainConfig(**TINY, max_steps=6, checkpoint_dir=str(tmp_path)))
    assert second.start_step == 1 and second.steps == 6 and not second.interrupted


def test_a_fixed_global_batch_sets_the_accumulation(capsys):
    """--global-batch 8 at micro-batch 2 on one process: 4 passes per step, 8 x 32 tokens per step."""
    result = train(TrainConfig(**TINY, max_steps=2, global_batch=8))
    assert "global batch 8 sequences = 1 replicas x micro-batch 2 x 4 accumulated passes" in capsys.readouterr().out
    assert result.records[-1]["tokens"] == 8 * 32
