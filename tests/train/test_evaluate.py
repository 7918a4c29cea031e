"""Held-out evaluation in the training engine: the same sequences every time, shared evenly by the data-parallel
ranks, logged as `step=N val_loss=...`, and the same loss whether 1 or 2 processes compute it."""

import math

import pytest

from fmlab.data import PackedDataset, course_dataset
from fmlab.jobs import parse_metrics
from fmlab.models import build_model
from fmlab.train import TrainConfig, train
from fmlab.train.evaluate import eval_indices, heldout_loss
from fmlab.train.log import VALIDATION_METRIC_DEFINITIONS


@pytest.fixture(scope="module")
def dataset() -> str:
    return str(course_dataset(seq_len=128, vocab_size=512, validation_units=2))


def test_ranks_share_the_same_first_sequences():
    assert eval_indices(8, 100) == list(range(8))
    assert eval_indices(8, 100, 1, 2) == [1, 3, 5, 7]
    assert sorted(eval_indices(9, 100, 0, 2) + eval_indices(9, 100, 1, 2)) == list(range(8))  # equal shares
    with pytest.raises(ValueError, match="cannot be shared by 4"):
        eval_indices(3, 100, 0, 4)


def test_an_untrained_model_scores_about_the_uniform_loss(dataset):
    """An untrained model predicts close to uniformly over its 512 tokens: loss near ln 512 = 6.238."""
    loss = heldout_loss(build_model("tiny-gpt"), PackedDataset(dataset, split="validation"), 16, 8)
    assert loss == pytest.approx(math.log(512), abs=0.1)


def test_training_logs_held_out_loss_that_falls(dataset, capsys):
    result = train(TrainConfig(model="tiny-gpt", data=dataset, max_steps=12, micro_batch=8, lr=3e-3, warmup_steps=2,
                               eval_sequences=16, eval_every=6, log_every=3, tensorboard=False))
    assert sorted(result.val_losses) == [6, 12] and result.val_loss == result.val_losses[12]
    assert result.val_losses[12] < result.val_losses[6] < math.log(512)
    log = capsys.readouterr().out
    assert "step=12 val_loss=" in log
    metrics = parse_metrics(log)
    assert metrics.set_index("step").loc[12, "val_loss"] == pytest.approx(result.val_loss, abs=1e-4)
    assert metrics.set_index("step").loc[12, "loss"] > 0  # the step's training and validation lines merge
    import re

    regex = VALIDATION_METRIC_DEFINITIONS[0]["Regex"]
    assert float(re.search(regex, log).group(1)) == pytest.approx(result.val_losses[6], abs=1e-4)


def test_evaluation_without_a_held_out_split_is_refused(tmp_path):
    from fmlab.train.config import TrainConfigError

    plain = course_dataset(seq_len=128, vocab_size=512)
    with pytest.raises(Exception, match="no validation split"):
        train(TrainConfig(model="tiny-gpt", data=str(plain), max_steps=1, eval_sequences=4, tensorboard=False))
    with pytest.raises(TrainConfigError, match="eval-sequences"):
        train(TrainConfig(model="tiny-gpt", data=str(plain), max_steps=1, eval_sequences=-1, tensorboard=False))
