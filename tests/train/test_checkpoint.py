"""fmlab.checkpoint in one process: exact resume, atomic commit, keep-last-N, corruption, no pickles, HF export.

Run: .venv/bin/pytest tests/train/test_checkpoint.py   (sharded saves on 2 processes: tests/train/test_train.py)
"""

from __future__ import annotations

import pickle
import shutil

import pytest
import torch

from fmlab.checkpoint import (
    Checkpointer,
    CheckpointError,
    complete_checkpoints,
    export_hf,
    latest,
    verify,
)
from fmlab.data import ResumableSampler
from fmlab.models import build_model

VOCAB, SEQ = 512, 16


class Corpus:
    """A fixed random token table standing in for a PackedDataset: sequence i is row i."""

    def __init__(self, n: int = 40):
        self.rows = torch.randint(0, VOCAB, (n, SEQ), generator=torch.Generator().manual_seed(7))

    def batch(self, sampler: ResumableSampler, size: int = 4) -> torch.Tensor:
        it = iter(sampler)
        return self.rows[[next(it) for _ in range(size)]]


def make_run(preset: str = "tiny", seed: int = 0):
    model = build_model(preset, seed=seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95), weight_decay=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / 4))
    sampler = ResumableSampler(40, rank=0, world_size=1, seed=3)
    return model, optimizer, scheduler, sampler


def train_steps(run, corpus: Corpus, steps: int) -> list[float]:
    model, optimizer, scheduler, sampler = run
    losses = []
    for _ in range(steps):
        x = corpus.batch(sampler)
        # randomness inside the step, so that restoring the RNG state matters
        noise = torch.randn(()) * 1e-3
        loss = model(input_ids=x, labels=x).loss + noise
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        scheduler.step()
        losses.append(loss.item())
    return losses


@pytest.fixture(scope="module")
def corpus():
    return Corpus()


def test_resume_reproduces_the_uninterrupted_run_exactly(tmp_path, corpus):
    torch.manual_seed(1)
    run = make_run()
    train_steps(run, corpus, 3)
    ckpt = Checkpointer(tmp_path / "ck")
    path = ckpt.save(3, *run)
    uninterrupted = train_steps(run, corpus, 4)  # crosses the 40-sequence epoch boundary (10 batches)...

    torch.manual_seed(999)  # a fresh process would start from another RNG state
    fresh = make_run(seed=5)  # ...and from other weights: all of it must come from the checkpoint
    state = Checkpointer(tmp_path / "ck").resume(*fresh)
    assert state["step"] == 3 and latest(tmp_path / "ck") == path
    assert fresh[3].state_dict()["offset"] == 12
    resumed = train_steps(fresh, corpus, 4)
    assert resumed == uninterrupted  # exactly: same weights, moments, LR, data position and RNG
    assert fresh[1].param_groups[0]["betas"] == (0.9, 0.95)  # hyper-parameters keep their types


def test_a_half_written_checkpoint_is_never_picked(tmp_path, corpus):
    run = make_run()
    ckpt = Checkpointer(tmp_path, keep_last=5)
    good = ckpt.save(2, *run)
    train_steps(run, corpus, 1)
    newer = ckpt.save(4, *run)
    # a save killed before its marker, and one killed before the rename
    (newer / "COMPLETE").unlink()
    shutil.copytree(good, tmp_path / ".incomplete-step_00000006")
    assert latest(tmp_path) == good
    with pytest.raises(CheckpointError, match="not a complete checkpoint"):
        ckpt.load(newer, *make_run())
    # saving that step again replaces the incomplete folder instead of failing
    assert ckpt.save(4, *run) == newer and latest(tmp_path) == newer


def test_keep_last_n_prunes_only_after_a_newer_checkpoint_is_complete(tmp_path, corpus):
    run = make_run()
    ckpt = Checkpointer(tmp_path, keep_last=2)
    (tmp_path / ".incomplete-step_00000001").mkdir(parents=True)  # debris of an older crash
    for step in (2, 4, 6, 8):
        train_steps(run, corpus, 1)
        ckpt.save(step, *run)
    assert [c.step for c in complete_checkpoints(tmp_path)] == [6, 8]
    assert not (tmp_path / ".incomplete-step_00000001").exists()
    with pytest.raises(CheckpointError, match="keep_last"):
        Checkpointer(tmp_path, keep_last=0)


def test_a_corrupt_checkpoint_gives_a_clear_error_and_nothing_is_lost(tmp_path, corpus):
    run = make_run()
    ckpt = Checkpointer(tmp_path)
    ckpt.save(1, *run)
    train_steps(run, corpus, 1)
    bad = ckpt.save(2, *run)
    shard = next(bad.glob("__0_*.distcp"))
    data = shard.read_bytes()
    shard.write_bytes(data[: len(data) // 2])  # a truncated upload
    before = sorted(p.name for p in tmp_path.rglob("*"))
    with pytest.raises(CheckpointError, match=r"is corrupt: __0_0\.distcp is .* bytes.*step_00000001"):
        ckpt.resume(*make_run())
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # nothing deleted or rewritten
    with pytest.raises(CheckpointError, match="corrupt"):
        verify(bad)


def test_loading_never_unpickles_arbitrary_objects(tmp_path):
    run = make_run()
    path = Checkpointer(tmp_path).save(1, *run)
    victim = tmp_path / "pwned"

    class Payload:
        def __reduce__(self):
            import os

            return (os.makedirs, (str(victim),))

    (path / ".metadata").write_bytes(pickle.dumps(Payload()))
    marker = path / "COMPLETE"  # make the sizes agree so the loader gets as far as the index
    import json

    info = json.loads(marker.read_text())
    info["files"][".metadata"] = (path / ".metadata").stat().st_size
    marker.write_text(json.dumps(info))
    with pytest.raises(CheckpointError, match="refusing to load"):
        Checkpointer(tmp_path).load(path, *make_run())
    assert not victim.exists()


def test_state_that_would_need_pickling_is_refused_at_save(tmp_path):
    model, optimizer, scheduler, _ = make_run()

    class OddSampler:
        def state_dict(self):
            return {"epoch": 0, "offset": 3, "rng": object()}

    with pytest.raises(CheckpointError, match="never pickles"):
        Checkpointer(tmp_path).save(1, model, optimizer, scheduler, OddSampler())
    assert latest(tmp_path) is None


@pytest.mark.parametrize("preset", ["tiny", "tiny-gpt"])  # Llama, and OPT with its tied LM head
def test_hf_export_loads_in_transformers_with_the_same_logits(tmp_path, corpus, preset):
    import transformers

    run = make_run(preset)
    train_steps(run, corpus, 2)
    model = run[0].eval()
    out = export_hf(model, tmp_path / "hf")
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "model.safetensors"]
    loaded = transformers.AutoModelForCausalLM.from_pretrained(out).eval()
    x = corpus.rows[:2]
    with torch.no_grad():
        assert torch.equal(loaded(input_ids=x).logits, model(input_ids=x).logits)
