"""The held-out split (module 7's gates, module 10's evaluation): units set aside, never trained on or seen by the
tokenizer, checked like every other shard."""

import json

import pytest

from fmlab.cli import main
from fmlab.data import DataError, PackedDataset, corpus_slice, has_validation, prepare
from fmlab.data.prepare import validation_unit_indices


@pytest.fixture(scope="module")
def held_out(tmp_path_factory):
    out = tmp_path_factory.mktemp("held") / "ds"
    manifest = prepare(corpus_slice(300_000), out, 32, 300, 2, unit_bytes=4 * 1024, progress=False,
                       validation_units=2)
    return out, manifest


def test_held_out_units_are_spread_evenly_and_bounded():
    assert validation_unit_indices(17, 2) == [4, 12]
    assert validation_unit_indices(10, 1) == [5]
    assert validation_unit_indices(10, 0) == []
    with pytest.raises(DataError, match="at most 3 can be held out"):
        validation_unit_indices(4, 4)
    with pytest.raises(DataError, match="whole number"):
        validation_unit_indices(4, -1)


def test_the_validation_split_is_apart_from_training(held_out):
    folder, manifest = held_out
    train, val = PackedDataset(folder), PackedDataset(folder, split="validation")
    assert has_validation(folder) and len(manifest["validation"]["shards"]) == 2
    train_units = {e["unit"] for e in manifest["shards"]}
    val_units = {e["unit"] for e in manifest["validation"]["shards"]}
    assert not train_units & val_units and len(train_units) + 2 == manifest["input"]["work_units"]
    assert len(train) == manifest["num_sequences"] and len(val) == manifest["validation"]["num_sequences"] > 0
    assert "split='validation'" in repr(val)


def test_a_damaged_validation_shard_is_refused(held_out, tmp_path):
    import shutil

    folder = shutil.copytree(held_out[0], tmp_path / "ds")
    victim = folder / json.loads((folder / "manifest.json").read_text())["validation"]["shards"][0]["file"]
    victim.write_bytes(victim.read_bytes()[:-64])
    PackedDataset(folder)  # the training split is intact
    with pytest.raises(DataError):
        PackedDataset(folder, split="validation")


def test_a_dataset_without_validation_says_how_to_make_one(tmp_path):
    out = tmp_path / "plain"
    prepare(corpus_slice(100_000), out, 32, 300, 1, unit_bytes=16 * 1024, progress=False)
    assert not has_validation(out)
    with pytest.raises(DataError, match="validation_units=1"):
        PackedDataset(out, split="validation")
    with pytest.raises(DataError, match="'train' or 'validation'"):
        PackedDataset(out, split="test")


def test_the_command_line_holds_units_out(tmp_path, capsys):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i, path in enumerate(corpus_slice(100_000)):
        (corpus / f"{i:02d}.txt").write_text(path.read_text())
    assert main(["data", "prepare", "--input", str(corpus), "--output", str(tmp_path / "ds"), "--seq-len", "32",
                 "--vocab-size", "300", "--unit-mb", "0.001", "--validation-units", "1"]) == 0
    assert "held out for validation" in capsys.readouterr().out
    assert has_validation(tmp_path / "ds")


def test_the_tokenizer_is_trained_on_the_training_units_only(tmp_path, monkeypatch):
    import importlib

    prepare_module = importlib.import_module("fmlab.data.prepare")  # the module, not the function

    seen = []
    original = prepare_module.train_tokenizer

    def spy(files, *args, **kwargs):
        seen.extend(str(f) for f in files)
        return original(files, *args, **kwargs)

    monkeypatch.setattr(prepare_module, "train_tokenizer", spy)
    manifest = prepare(corpus_slice(300_000), tmp_path / "ds", 32, 300, 1, unit_bytes=4 * 1024, progress=False,
                       validation_units=1)
    held = manifest["validation"]["shards"][0]["unit"]
    from fmlab.data.corpus import list_input_files, plan_work_units

    units = plan_work_units(list_input_files(corpus_slice(300_000)), 4 * 1024)
    assert set(units[held].files).isdisjoint(seen) and len(seen) > 0
