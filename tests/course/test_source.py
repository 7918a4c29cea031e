"""fmlab.course.source: notebooks 04-06 print the PyTorch calls they teach from the files that run."""

import pytest

from fmlab.course.source import show_source, source_of
from fmlab.parallel.ddp import apply_ddp
from fmlab.parallel.fsdp import apply_fsdp
from fmlab.parallel.tensor import apply_tp


def test_source_of_is_the_code_that_runs():
    text = source_of(apply_ddp, apply_fsdp, apply_tp)
    assert "DistributedDataParallel(model" in text
    assert "fully_shard(layer, mesh=dp_mesh" in text
    assert "parallelize_module(model, tp_mesh" in text
    assert text.count("\ndef ") == 2 and text.startswith("def apply_ddp")


def test_show_source_prints_outside_jupyter(capsys):
    show_source(apply_ddp)
    assert "def apply_ddp" in capsys.readouterr().out


def test_nothing_to_show_is_an_error():
    with pytest.raises(ValueError, match="at least one"):
        source_of()
