"""Trained runs cached by content: a run that several notebooks or tests train the same way is trained once.

    from fmlab.train.cache import train_cached
    train_cached(cfg)   # afterwards cfg.checkpoint_dir holds the run's checkpoints, trained here or copied

The key hashes everything that decides what the run writes: the configuration (every field but the two
folders it writes to), the dataset's manifest, the versions of torch and transformers, and the source of the
fmlab package (any edit to it trains afresh). Entries live in build/cache/runs/<key>/ (losses_cached's in
build/cache/losses/<key>/); the KEEP most recently used stay (`make clean` removes them all). A run is trained
into a staging folder and renamed into place only when complete, under a file lock, so two processes asking for
the same run at once (two test workers) train it once: the second waits and copies.
Lab 10's two runs use it, so its solved and unsolved notebooks (and `make course`) share one training;
losses_cached() keeps only a run's losses ({step: loss}), for the slides' learning-rate sweep.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import json
import os
import shutil
from importlib.metadata import version
from pathlib import Path

from fmlab.data.manifest import MANIFEST_NAME
from fmlab.environment import ROOT, FileLock
from fmlab.train import loop

CACHE = ROOT / "build" / "cache" / "runs"
LOSSES = ROOT / "build" / "cache" / "losses"  # losses_cached's entries: a small JSON file each
PACKAGE = Path(__file__).resolve().parents[1]  # src/fmlab
WRITTEN_TO = ("checkpoint_dir", "output_dir")  # where a run writes: not part of what it computes
KEEP = 8  # entries kept (the most recently used): every edit of the package makes new ones, ~12 MB each for lab 10
KEEP_LOSSES = 64  # the slides' sweep alone is 8 runs


def package_fingerprint(package: Path = PACKAGE) -> str:
    """A hash of every .py file of the fmlab package, path and text."""
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(str(path.relative_to(package)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def run_key(cfg) -> str:
    """The content key of a TrainConfig's run (16 hex digits)."""
    fields = {k: v for k, v in dataclasses.asdict(cfg).items() if k not in WRITTEN_TO}
    manifest = Path(cfg.data) / MANIFEST_NAME
    material = {"config": fields, "manifest": manifest.read_text() if manifest.is_file() else cfg.data,
                "torch": version("torch"), "transformers": version("transformers"),
                "fmlab": package_fingerprint()}
    return hashlib.sha256(json.dumps(material, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _made_once(entry: Path, name: str, make) -> Path:
    """entry/name, made the first time by make(staging), which writes staging/name; renamed into place only when
    complete, under the entry's lock, so a second process asking at once waits and then finds it. Marks the entry
    used (for prune) and returns entry/name."""
    done = entry / name
    if not done.exists():
        entry.mkdir(parents=True, exist_ok=True)
        with FileLock(entry / ".lock"):
            if not done.exists():  # another process may have made it while this one waited
                staging = entry / ".staging"
                shutil.rmtree(staging, ignore_errors=True)
                staging.mkdir()
                make(staging)
                (staging / name).rename(done)
                shutil.rmtree(staging, ignore_errors=True)
    os.utime(entry)  # used now
    return done


def train_cached(cfg, cache: Path | None = None) -> Path:
    """Make cfg.checkpoint_dir hold the checkpoints of cfg's run: copied from the cache, or trained once into it.

    Returns the cache entry's folder. Only the checkpoints are kept: the run's step lines are not printed and
    cfg.output_dir gets nothing, so use it where a notebook or test needs a trained model, not the run's own figures."""
    if not cfg.checkpoint_dir:
        raise ValueError("train_cached needs cfg.checkpoint_dir: the folder the cached checkpoints are copied to")

    def make(staging: Path) -> None:
        run = dataclasses.replace(cfg, checkpoint_dir=str(staging / "checkpoints"), output_dir=str(staging / "out"))
        with contextlib.redirect_stdout(io.StringIO()):
            loop.train(run)  # looked up per call: tests stand a fake in for fmlab.train.loop.train

    done = _made_once(Path(cache or CACHE) / run_key(cfg), "checkpoints", make)
    target = Path(cfg.checkpoint_dir)
    shutil.rmtree(target, ignore_errors=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(done, target)
    prune(done.parent.parent)
    return done.parent


def losses_cached(cfg, cache: Path | None = None) -> dict[int, float]:
    """{step: loss} of cfg's run: read from the cache, or trained once (its checkpoints and logs not kept).

    For a figure or check that needs only the curve (the slides' learning-rate sweep is drawn by `make lab`, by
    `make slides` and by three tests, each in a process of its own)."""

    def make(staging: Path) -> None:
        run = dataclasses.replace(cfg, checkpoint_dir="", output_dir=str(staging / "out"))
        with contextlib.redirect_stdout(io.StringIO()):
            losses = loop.train(run).losses
        (staging / "losses.json").write_text(json.dumps({str(k): v for k, v in losses.items()}))

    done = _made_once(Path(cache or LOSSES) / run_key(cfg), "losses.json", make)
    prune(done.parent.parent, KEEP_LOSSES)
    return {int(k): v for k, v in json.loads(done.read_text()).items()}


def prune(cache: Path, keep: int = KEEP) -> list[Path]:
    """Delete all but the `keep` most recently used entries of `cache`; returns those deleted."""
    entries = sorted((p for p in cache.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in entries[keep:]:
        shutil.rmtree(old, ignore_errors=True)
    return entries[keep:]
