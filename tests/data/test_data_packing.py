"""Packing and preparation: exact counts, shard contents, byte-identical output for 1, 2 and 4 workers."""

import hashlib

import numpy as np
import pytest

from fmlab.data import (
    DataError,
    PackedDataset,
    corpus_slice,
    count_packed,
    pack_documents,
    plan_work_units,
    prepare,
    read_documents,
    token_dtype,
    train_tokenizer,
)
from fmlab.data.manifest import FORMAT, MANIFEST_NAME
from fmlab.data.tokenizer import load_backend

SEQ_LEN = 64
UNIT_BYTES = 8 * 1024  # 4 work units from the slice below


@pytest.fixture(scope="module")
def slice_files():
    return corpus_slice(400_000)  # 9 files: plays and Python documentation, about 0.3 MB


@pytest.fixture(scope="module")
def tokenizer_dir(slice_files, tmp_path_factory):
    return train_tokenizer(slice_files, 300, tmp_path_factory.mktemp("tok") / "t300")


@pytest.fixture(scope="module")
def prepared(slice_files, tokenizer_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("prepared") / "ds"
    manifest = prepare(slice_files, out, SEQ_LEN, None, 1, tokenizer=tokenizer_dir, unit_bytes=UNIT_BYTES,
                       progress=False)
    return out, manifest


def test_pack_documents_small_example():
    rows, stats = pack_documents([[5, 6, 7], [8, 9], [10]], eot_id=0, seq_len=4)
    # stream: 5 6 7 0 8 9 0 10 0 -> two rows, one token dropped
    assert rows.tolist() == [[5, 6, 7, 0], [8, 9, 0, 10]]
    assert stats == {"documents": 3, "input_tokens": 9, "sequences": 2, "dropped_tokens": 1}


def test_count_packed_matches_packing_for_random_lengths():
    rng = np.random.default_rng(0)
    for _ in range(20):
        seq_len = int(rng.integers(2, 50))
        units = [[int(n) for n in rng.integers(0, 120, size=rng.integers(1, 8))] for _ in range(rng.integers(1, 5))]
        expected = {"sequences": 0, "tokens": 0, "dropped_tokens": 0}
        for unit in units:
            rows, stats = pack_documents([[1] * n for n in unit], eot_id=0, seq_len=seq_len)
            expected["sequences"] += len(rows)
            expected["tokens"] += rows.size
            expected["dropped_tokens"] += stats["dropped_tokens"]
        assert count_packed(units, seq_len) == expected


def test_token_dtype_boundaries():
    assert token_dtype(512) == token_dtype(50_257) == token_dtype(65_536) == "uint16"  # ids 0..65535
    assert token_dtype(65_537) == token_dtype(128_256) == "uint32"  # e.g. Llama 3's vocabulary


def test_manifest_counts_match_an_independent_tokenization(prepared, slice_files, tokenizer_dir):
    out, m = prepared
    tok = load_backend(tokenizer_dir)
    units = plan_work_units(slice_files, UNIT_BYTES)
    doc_tokens = [[len(tok.encode(text, add_special_tokens=False).ids) for f in u.files for text in read_documents(f)]
                  for u in units]
    expected = count_packed(doc_tokens, SEQ_LEN)
    assert m["format"] == FORMAT and m["dtype"] == "uint16" and m["seq_len"] == SEQ_LEN
    assert len(m["shards"]) == len(units) >= 4
    assert m["num_sequences"] == expected["sequences"] == sum(s["sequences"] for s in m["shards"])
    assert m["num_tokens"] == expected["tokens"] == m["num_sequences"] * SEQ_LEN
    assert m["dropped_tokens"] == expected["dropped_tokens"]
    assert m["input_tokens"] == sum(map(sum, doc_tokens)) + m["documents"]
    assert m["documents"] == len(slice_files) and m["location"] == str(out.resolve())
    for s in m["shards"]:
        assert (out / s["file"]).stat().st_size == s["bytes"] == 32 + 2 * s["tokens"]
        assert hashlib.sha256((out / s["file"]).read_bytes()).hexdigest() == s["sha256"]


def test_shard_holds_the_units_documents_joined_by_end_of_text(prepared, slice_files, tokenizer_dir):
    out, m = prepared
    tok = load_backend(tokenizer_dir)
    unit = plan_work_units(slice_files, UNIT_BYTES)[0]
    stream = []
    for f in unit.files:
        for text in read_documents(f):
            stream += tok.encode(text, add_special_tokens=False).ids + [m["eot_id"]]
    ds = PackedDataset(out)
    first = m["shards"][0]["sequences"]
    got = np.concatenate([ds.tokens(i) for i in range(first)])
    assert got.tolist() == stream[: first * SEQ_LEN]
    assert len(stream) - first * SEQ_LEN == m["shards"][0]["dropped_tokens"] < SEQ_LEN
    assert ds[0].dtype.is_floating_point is False and tuple(ds[0].shape) == (SEQ_LEN,)


def test_output_is_byte_identical_for_1_2_and_4_workers(slice_files, tokenizer_dir, tmp_path):
    """Share-nothing workers: shards depend on their work unit only, never on the worker count."""
    out = tmp_path / "ds"
    snapshots = {}
    for workers in (1, 2, 4):
        prepare(slice_files, out, SEQ_LEN, None, workers, tokenizer=tokenizer_dir, unit_bytes=UNIT_BYTES,
                progress=False)
        snapshots[workers] = {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*"))
                              if p.is_file()}
    assert len([n for n in snapshots[1] if n.startswith("shard-")]) >= 4  # enough units for 4 workers
    assert snapshots[1] == snapshots[2] == snapshots[4]
    assert not list(tmp_path.glob(".ds.partial-*"))  # the staging folder is gone


def test_prepare_trains_a_tokenizer_when_none_is_given(tmp_path):
    m = prepare(corpus_slice(200_000), tmp_path / "ds", 32, 300, 1, progress=False)
    assert m["vocab_size"] == 300 and m["tokenizer"]["source"].startswith("trained")
    assert (tmp_path / "ds" / "tokenizer" / "tokenizer.json").is_file()
    assert PackedDataset(tmp_path / "ds").tokenizer().decode([m["eot_id"]]) == "<|endoftext|>"


def test_large_vocabulary_existing_tokenizer_gives_uint32(tmp_path):
    """A Hugging Face folder with more than 65,536 tokens (as Llama 3's 128,256) is stored as uint32."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = sorted({w for f in corpus_slice(200_000) for t in read_documents(f) for w in t.split()})
    fillers = [f"<filler_{i}>" for i in range(70_000 - 2 - len(words))]
    names = ["<unk>", "</s>", *fillers, *words]  # the words get ids above 65,535
    vocab = {name: i for i, name in enumerate(names)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="</s>", unk_token="<unk>").save_pretrained(
        str(tmp_path / "big"))
    with pytest.raises(DataError, match="has 70,000 tokens, not 512"):
        prepare(corpus_slice(200_000), tmp_path / "x", 16, 512, 1, tokenizer=tmp_path / "big", progress=False)
    m = prepare(corpus_slice(200_000), tmp_path / "ds", 16, None, 1, tokenizer=tmp_path / "big", progress=False)
    assert (m["dtype"], m["vocab_size"], m["eot_id"]) == ("uint32", 70_000, 1)
    ds = PackedDataset(tmp_path / "ds")
    assert all(s["bytes"] == 32 + 4 * s["tokens"] for s in m["shards"])
    ids = np.concatenate([ds.tokens(i) for i in range(len(ds))])
    assert (ids == 1).any() and ids.max() > 65_535 and ids.max() < 70_000  # uint16 would have wrapped these


def test_bad_settings_are_refused_clearly(tmp_path):
    files = corpus_slice(200_000)
    with pytest.raises(DataError, match="seq_len"):
        prepare(files, tmp_path / "a", 1, 300, 1)
    with pytest.raises(DataError, match="workers"):
        prepare(files, tmp_path / "a", 16, 300, 0)
    with pytest.raises(DataError, match="does not exist"):
        prepare(tmp_path / "nothing", tmp_path / "a", 16, 300, 1)
    (tmp_path / "precious").mkdir()
    (tmp_path / "precious" / "notes.md").write_text("keep me")
    with pytest.raises(DataError, match="not an fmlab dataset"):
        prepare(files, tmp_path / "precious", 16, 300, 1, progress=False)
    assert (tmp_path / "precious" / "notes.md").read_text() == "keep me"
    assert not (tmp_path / "a" / MANIFEST_NAME).exists()
