"""Shared fixtures of module 10's tests: one short training run, exported trained and untrained (built once).

The run is trained once per content (fmlab.train.cache: same code, settings and data), so the test workers that
run these files, and later test runs, share it instead of training it each.
"""

import pytest


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory):
    """A 150-step run of the tiny Llama with checkpoints; its last model exported, and the untrained one."""
    from fmlab.checkpoint import latest
    from fmlab.data import course_dataset
    from fmlab.models import build_model
    from fmlab.serve import export, heldout
    from fmlab.train.cache import train_cached
    from fmlab.train.loop import TrainConfig

    root = tmp_path_factory.mktemp("module10")
    data = course_dataset(seq_len=128, vocab_size=512, validation_units=2)
    cfg = TrainConfig(model="tiny", data=str(data), max_steps=150, micro_batch=16, lr=1e-2, warmup_steps=10,
                      log_every=50, tensorboard=False, checkpoint_dir=str(root / "ck"), checkpoint_every=50)
    train_cached(cfg)
    last = latest(root / "ck")
    assert last.name.endswith("150"), f"the run should end with its step-150 checkpoint, not {last.name}"
    model = heldout.load_checkpoint_model(last, "tiny")
    return {"data": data, "model": model, "checkpoints": root / "ck",
            "trained": export.export_model(model, root / "trained", data / "tokenizer",
                                           export.ModelCard("test", "the course corpus", 150 * 16 * 128, "CPU")),
            "untrained": export.export_model(build_model("tiny"), root / "untrained", data / "tokenizer")}
