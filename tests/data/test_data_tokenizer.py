"""Byte-level BPE tokenizer: exact round trip on the whole corpus, transformers loading, determinism, errors."""

import json

import pytest

from fmlab.data import (
    DataError,
    corpus_slice,
    load_tokenizer,
    read_documents,
    tokenizer_info,
    train_tokenizer,
)
from fmlab.data.tokenizer import END_OF_TEXT, load_backend


@pytest.fixture(scope="module")
def corpus_tokenizer(tmp_path_factory):
    """The course tokenizer: vocabulary 512, trained on the whole shipped corpus."""
    return train_tokenizer(corpus_slice(), 512, tmp_path_factory.mktemp("tok") / "course")


@pytest.mark.slow
def test_round_trip_on_the_whole_corpus(corpus_tokenizer):
    documents = [text for f in corpus_slice() for text in read_documents(f)]
    assert len(documents) == 121 and any(ord(c) > 127 for d in documents for c in d)  # non-ASCII is in there
    tok = load_backend(corpus_tokenizer)
    encodings = tok.encode_batch_fast(documents, add_special_tokens=False)
    decoded = tok.decode_batch([e.ids for e in encodings], skip_special_tokens=False)
    mismatched = [i for i, (a, b) in enumerate(zip(documents, decoded, strict=True)) if a != b]
    assert not mismatched, f"documents {mismatched[:5]} do not round-trip"
    total_tokens = sum(len(e.ids) for e in encodings)
    bytes_per_token = sum(len(d.encode()) for d in documents) / total_tokens
    assert 1.5 < bytes_per_token < 3.0  # 255 merges on top of the bytes compress English about 2x


def test_trained_folder_loads_with_transformers(corpus_tokenizer):
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    text = "To be, or not to be: that is the question.\n  Whether 'tis nobler… “quoted” 3.11\n"
    direct = PreTrainedTokenizerFast(tokenizer_file=str(corpus_tokenizer / "tokenizer.json"))
    auto = AutoTokenizer.from_pretrained(str(corpus_tokenizer), local_files_only=True)
    ours = load_tokenizer(corpus_tokenizer)
    ids = load_backend(corpus_tokenizer).encode(text, add_special_tokens=False).ids
    for tok in (direct, auto, ours):
        assert tok.encode(text, add_special_tokens=False) == ids
        assert tok.decode(ids) == text
    assert len(auto) == 512 and auto.eos_token == END_OF_TEXT and auto.eos_token_id == 0
    config = json.loads((corpus_tokenizer / "tokenizer_config.json").read_text())
    assert config["tokenizer_class"] == "PreTrainedTokenizerFast"


def test_info_reports_vocab_eot_and_checksum(corpus_tokenizer):
    info = tokenizer_info(corpus_tokenizer)
    assert (info.vocab_size, info.eot_token, info.eot_id) == (512, END_OF_TEXT, 0)
    assert len(info.sha256) == 64


def test_training_is_deterministic(tmp_path):
    files = corpus_slice(200_000)
    a = train_tokenizer(files, 300, tmp_path / "a")
    b = train_tokenizer(files, 300, tmp_path / "b")
    assert (a / "tokenizer.json").read_bytes() == (b / "tokenizer.json").read_bytes()
    assert tokenizer_info(a).vocab_size == 300


def test_vocabulary_must_hold_every_byte_and_end_of_text(tmp_path):
    with pytest.raises(DataError, match="at least 257"):
        train_tokenizer(corpus_slice(200_000), 256, tmp_path / "t")


def test_existing_folder_errors_say_what_to_do(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        tokenizer_info(tmp_path / "missing")
    (tmp_path / "sp").mkdir()
    (tmp_path / "sp" / "tokenizer.model").write_bytes(b"\0")
    with pytest.raises(DataError, match="save_pretrained"):
        tokenizer_info(tmp_path / "sp")


def test_existing_tokenizer_with_another_end_token(tmp_path):
    """A Llama-style folder: end-of-sequence is "</s>", named in tokenizer_config.json."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, "hello": 3, "world": 4}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="</s>", bos_token="<s>",
                            unk_token="<unk>").save_pretrained(str(tmp_path))
    info = tokenizer_info(tmp_path)
    assert (info.eot_token, info.eot_id, info.vocab_size) == ("</s>", 2, 5)
    with pytest.raises(DataError, match="no end-of-text token"):
        tokenizer_info(tmp_path, eot_token="<|endoftext|>")
