"""Shared fixtures of module 10's tests: one short training run, exported trained and untrained (built once)."""

import contextlib
import io

import pytest


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory):
    """A 150-step run of the tiny Llama with checkpoints; its last model exported, and the untrained one."""
    from fmlab.data import course_dataset
    from fmlab.models import build_model
    from fmlab.serve import export, heldout
    from fmlab.train.loop import TrainConfig, train

    root = tmp_path_factory.mktemp("module10")
    data = course_dataset(seq_len=128, vocab_size=512, validation_units=2)
    cfg = TrainConfig(model="tiny", data=str(data), max_steps=150, micro_batch=16, lr=1e-2, warmup_steps=10,
                      log_every=50, tensorboard=False, checkpoint_dir=str(root / "ck"), checkpoint_every=50)
    with contextlib.redirect_stdout(io.StringIO()):
        result = train(cfg)
    model = heldout.load_checkpoint_model(result.checkpoint, "tiny")
    return {"data": data, "result": result, "model": model, "checkpoints": root / "ck",
            "trained": export.export_model(model, root / "trained", data / "tokenizer",
                                           export.ModelCard("test", "the course corpus", 150 * 16 * 128, "CPU")),
            "untrained": export.export_model(build_model("tiny"), root / "untrained", data / "tokenizer")}
