"""fmlab.train.cache: a run trained once per content, then copied; a changed setting trains afresh.

Run: .venv/bin/pytest tests/train/test_train_cache.py -q   (a second; the training is a stand-in that writes a file)
"""

from pathlib import Path

import pytest

from fmlab.train import cache
from fmlab.train.config import TrainConfig


@pytest.fixture
def trained(monkeypatch):
    """A stand-in for train(): writes one checkpoint file and counts its calls."""
    calls = []

    def fake_train(cfg):
        calls.append(cfg)
        folder = Path(cfg.checkpoint_dir) / "step_000002"
        folder.mkdir(parents=True)
        (folder / "COMPLETE").write_text(f"lr={cfg.lr}")

    monkeypatch.setattr("fmlab.train.loop.train", fake_train)
    return calls


def test_a_run_is_trained_once_and_copied_to_every_folder(tmp_path, trained):
    first = TrainConfig(model="tiny", max_steps=2, checkpoint_dir=str(tmp_path / "a" / "ckpt"))
    second = TrainConfig(model="tiny", max_steps=2, checkpoint_dir=str(tmp_path / "b" / "ckpt"),
                         output_dir=str(tmp_path / "b" / "out"))
    entry = cache.train_cached(first, cache=tmp_path / "cache")
    assert cache.train_cached(second, cache=tmp_path / "cache") == entry  # the folders are not part of the key
    assert len(trained) == 1 and str(tmp_path / "cache") in trained[0].checkpoint_dir
    for cfg in (first, second):
        assert (Path(cfg.checkpoint_dir) / "step_000002" / "COMPLETE").read_text() == "lr=0.003"
    assert not (entry / ".staging").exists()


def test_a_changed_setting_or_package_is_another_run(tmp_path, trained, monkeypatch):
    base = TrainConfig(model="tiny", max_steps=2, checkpoint_dir=str(tmp_path / "ckpt"))
    changed = TrainConfig(model="tiny", max_steps=2, lr=1.0, checkpoint_dir=str(tmp_path / "ckpt"))
    assert cache.run_key(base) != cache.run_key(changed)
    cache.train_cached(base, cache=tmp_path / "cache")
    cache.train_cached(changed, cache=tmp_path / "cache")
    assert (tmp_path / "ckpt" / "step_000002" / "COMPLETE").read_text() == "lr=1.0"  # the folder holds the new run
    key = cache.run_key(base)
    monkeypatch.setattr(cache, "package_fingerprint", lambda: "edited")
    assert cache.run_key(base) != key
    assert len(trained) == 2


def test_a_failed_training_leaves_no_entry(tmp_path, monkeypatch):
    def broken(cfg):
        Path(cfg.checkpoint_dir).mkdir(parents=True)
        raise RuntimeError("loss is nan")

    monkeypatch.setattr("fmlab.train.loop.train", broken)
    cfg = TrainConfig(model="tiny", max_steps=2, checkpoint_dir=str(tmp_path / "ckpt"))
    with pytest.raises(RuntimeError, match="nan"):
        cache.train_cached(cfg, cache=tmp_path / "cache")
    assert not (tmp_path / "cache" / cache.run_key(cfg) / "checkpoints").exists()


def test_no_checkpoint_folder_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="checkpoint_dir"):
        cache.train_cached(TrainConfig(model="tiny"), cache=tmp_path / "cache")


def test_only_the_most_recently_used_entries_are_kept(tmp_path, trained):
    import os

    old = []
    for i in range(cache.KEEP + 3):
        entry = tmp_path / "cache" / f"old{i:02d}"
        entry.mkdir(parents=True)
        os.utime(entry, (1000 + i, 1000 + i))  # long ago, oldest first
        old.append(entry)
    entry = cache.train_cached(TrainConfig(model="tiny", max_steps=2, checkpoint_dir=str(tmp_path / "ckpt")),
                               cache=tmp_path / "cache")
    kept = sorted(p.name for p in (tmp_path / "cache").iterdir())
    assert entry.name in kept and len(kept) == cache.KEEP
    assert kept == sorted([entry.name] + [p.name for p in old[-(cache.KEEP - 1):]])  # the newest of the old ones


def test_a_runs_losses_are_trained_once_and_read_back(tmp_path, monkeypatch):
    calls = []

    def fake_train(cfg):
        calls.append(cfg)
        return type("Result", (), {"losses": {1: 6.2, 2: 5.9 - cfg.lr}})()

    monkeypatch.setattr("fmlab.train.loop.train", fake_train)
    cfg = TrainConfig(model="tiny", max_steps=2, output_dir=str(tmp_path / "mine"))
    first = cache.losses_cached(cfg, cache=tmp_path / "cache")
    again = cache.losses_cached(TrainConfig(model="tiny", max_steps=2), cache=tmp_path / "cache")  # folders: no part
    assert first == again == {1: 6.2, 2: 5.9 - 0.003} and len(calls) == 1
    assert not calls[0].checkpoint_dir and str(tmp_path / "cache") in calls[0].output_dir  # nothing of the caller's
    assert cache.losses_cached(TrainConfig(model="tiny", max_steps=2, lr=0.1), cache=tmp_path / "cache")[2] == pytest.approx(5.8)
    assert len(calls) == 2
    assert not list((tmp_path / "cache").glob("*/.staging"))
