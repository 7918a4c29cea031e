"""Verification on open: a corrupted, truncated, foreign-dtype or missing shard is refused with a clear error."""

import json
import shutil

import numpy as np
import pytest

from fmlab.cli import main
from fmlab.data import ManifestError, PackedDataset, ShardError, corpus_slice, prepare
from fmlab.data.shards import HEADER_BYTES, write_shard


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    out = tmp_path_factory.mktemp("pristine") / "ds"
    prepare(corpus_slice(300_000), out, 32, 300, 1, unit_bytes=4 * 1024, progress=False)
    return out


@pytest.fixture
def dataset(pristine, tmp_path):
    """A fresh copy of the prepared dataset for each test to damage."""
    return shutil.copytree(pristine, tmp_path / "ds")


def _manifest(folder):
    return json.loads((folder / "manifest.json").read_text())


def test_a_good_dataset_opens(dataset):
    ds = PackedDataset(dataset)
    m = _manifest(dataset)
    assert len(ds) == m["num_sequences"] > 0 and len(m["shards"]) >= 3
    assert ds.seq_len == 32 and ds.vocab_size == 300 and ds.manifest == m


def test_flipped_byte_is_found_by_its_checksum(dataset):
    PackedDataset(dataset)  # verified once: the cache must not hide a later change
    victim = _manifest(dataset)["shards"][1]["file"]
    data = bytearray((dataset / victim).read_bytes())
    data[HEADER_BYTES + 7] ^= 0x01
    (dataset / victim).write_bytes(bytes(data))
    with pytest.raises(ShardError, match=f"shard {victim} is corrupt: its sha256"):
        PackedDataset(dataset)
    PackedDataset(dataset, verify=False)  # sizes and dtypes still match: the quick mode cannot see it


def test_truncated_shard_is_refused(dataset):
    victim = dataset / _manifest(dataset)["shards"][0]["file"]
    victim.write_bytes(victim.read_bytes()[:-2])
    with pytest.raises(ShardError, match="truncated"):
        PackedDataset(dataset, verify=False)


def test_shard_of_another_dtype_is_refused(dataset):
    entry = _manifest(dataset)["shards"][0]
    tokens = np.zeros((entry["sequences"], 32), dtype=np.uint32)
    write_shard(dataset / entry["file"], tokens, "uint32")
    with pytest.raises(ShardError, match="holds uint32 tokens but the manifest says uint16"):
        PackedDataset(dataset, verify=False)


def test_missing_shard_and_bad_manifest(dataset):
    m = _manifest(dataset)
    (dataset / m["shards"][-1]["file"]).unlink()
    with pytest.raises(ShardError, match="missing"):
        PackedDataset(dataset)
    m["dtype"] = "uint8"
    (dataset / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(ManifestError, match="dtype 'uint8'"):
        PackedDataset(dataset)
    with pytest.raises(ManifestError, match="no manifest.json"):
        PackedDataset(dataset / "tokenizer")


def test_inspect_command_reports_and_refuses(dataset, capsys):
    assert main(["data", "inspect", str(dataset), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["sequences"] == _manifest(dataset)["num_sequences"] and info["checksums"] == "verified"
    assert len(info["sample"]) > 0
    victim = dataset / _manifest(dataset)["shards"][0]["file"]
    data = bytearray(victim.read_bytes())
    data[-1] ^= 0xFF
    victim.write_bytes(bytes(data))
    assert main(["data", "inspect", str(dataset)]) == 2
    assert "corrupt" in capsys.readouterr().err
