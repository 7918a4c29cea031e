"""Byte-level BPE tokenizers: train one on a corpus, or use an existing Hugging Face tokenizer folder.

    from fmlab.data import train_tokenizer, load_tokenizer
    folder = train_tokenizer(files, vocab_size=512, out_dir="runs/tokenizer")  # tokenizer.json + config
    tok = load_tokenizer(folder)          # a transformers.PreTrainedTokenizerFast
    tok.decode(tok.encode("To be, or not to be"))

Byte-level BPE (GPT-2's scheme) starts from the 256 byte values, so any UTF-8 text round-trips exactly
and nothing is ever "unknown"; training adds the most frequent merges until the vocabulary is full. The
folder is in the standard form (`tokenizer.json`, `tokenizer_config.json`) that
`transformers.AutoTokenizer.from_pretrained(folder)` loads. A real run uses an existing tokenizer instead
(GPT-2's, Llama 2's): pass its local folder wherever a tokenizer is taken; nothing is downloaded.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from fmlab.data.corpus import read_documents
from fmlab.data.errors import DataError

END_OF_TEXT = "<|endoftext|>"
BYTE_ALPHABET = 256
MIN_VOCAB = BYTE_ALPHABET + 1  # every byte, plus the end-of-text token
# Names that end-of-text (end-of-sequence) tokens go by in common tokenizers, most specific first.
KNOWN_END_TOKENS = ("<|endoftext|>", "</s>", "<|end_of_text|>", "<eos>", "<|eot_id|>")


@dataclass(frozen=True)
class TokenizerInfo:
    """What the pipeline needs to know about a tokenizer folder."""

    folder: Path
    vocab_size: int
    eot_token: str
    eot_id: int
    sha256: str  # of tokenizer.json: the manifest records it, so data and tokenizer cannot drift apart


def _text_batches(files: Sequence[str | os.PathLike]) -> Iterable[str]:
    for f in files:
        yield from read_documents(f)


def train_tokenizer(files: Sequence[str | os.PathLike], vocab_size: int, out_dir: str | os.PathLike,
                    max_length: int = 1024) -> Path:
    """Train a byte-level BPE tokenizer of `vocab_size` tokens on `files`; save it to `out_dir` and return it.

    Token 0 is the end-of-text token "<|endoftext|>". Training is deterministic for the same files."""
    from transformers import PreTrainedTokenizerFast

    if not isinstance(vocab_size, int) or vocab_size < MIN_VOCAB:
        raise DataError(f"vocab_size must be an integer of at least {MIN_VOCAB} (256 bytes + end-of-text), "
                        f"not {vocab_size!r}")
    if not files:
        raise DataError("train_tokenizer needs at least one input file")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[END_OF_TEXT], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(_text_batches(files), trainer)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=END_OF_TEXT, bos_token=END_OF_TEXT,
                                   unk_token=None, model_max_length=max_length, clean_up_tokenization_spaces=False)
    fast.save_pretrained(str(out))
    # The generic class name loads with transformers 4.x as well as 5.x.
    config_path = out / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config["tokenizer_class"] = "PreTrainedTokenizerFast"
    config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    return out


def _tokenizer_json(folder: str | os.PathLike) -> Path:
    folder = Path(folder).expanduser()
    if folder.is_file() and folder.name == "tokenizer.json":
        folder = folder.parent
    if not folder.is_dir():
        raise DataError(f"tokenizer folder {folder} does not exist: pass a local folder with a tokenizer.json "
                        "(nothing is downloaded; save one with AutoTokenizer.from_pretrained(...).save_pretrained)")
    path = folder / "tokenizer.json"
    if not path.is_file():
        hint = (" It has tokenizer.model (SentencePiece): write tokenizer.json once with "
                "AutoTokenizer.from_pretrained(folder).save_pretrained(folder).") if (folder / "tokenizer.model").exists() else ""
        raise DataError(f"{folder} has no tokenizer.json, the fast-tokenizer file this pipeline reads.{hint}")
    return path


def _configured_eos(folder: Path) -> str | None:
    for name in ("tokenizer_config.json", "special_tokens_map.json"):
        path = folder / name
        if path.is_file():
            eos = json.loads(path.read_text()).get("eos_token")
            if isinstance(eos, dict):
                eos = eos.get("content")
            if isinstance(eos, str) and eos:
                return eos
    return None


def tokenizer_info(folder: str | os.PathLike, eot_token: str | None = None) -> TokenizerInfo:
    """Vocabulary size, end-of-text token and checksum of a tokenizer folder (trained here or Hugging Face's)."""
    path = _tokenizer_json(folder)
    tok = Tokenizer.from_file(str(path))
    candidates = [eot_token] if eot_token else [_configured_eos(path.parent), *KNOWN_END_TOKENS]
    for name in candidates:
        if name and tok.token_to_id(name) is not None:
            return TokenizerInfo(path.parent, tok.get_vocab_size(with_added_tokens=True), name,
                                 tok.token_to_id(name), hashlib.sha256(path.read_bytes()).hexdigest())
    raise DataError(f"no end-of-text token found in {path}" + (f" (no token {eot_token!r})" if eot_token else
                    f" (looked for its eos_token and {', '.join(KNOWN_END_TOKENS)})") +
                    ": pass eot_token='...' naming the token that separates documents")


def load_backend(folder: str | os.PathLike):
    """The fast `tokenizers.Tokenizer` of a folder: what the workers encode with."""
    return Tokenizer.from_file(str(_tokenizer_json(folder)))


def load_tokenizer(folder: str | os.PathLike):
    """The folder's tokenizer as a `transformers.PreTrainedTokenizerFast`, from local files only."""
    from transformers import PreTrainedTokenizerFast

    path = _tokenizer_json(folder)
    eos = _configured_eos(path.parent)
    return PreTrainedTokenizerFast(tokenizer_file=str(path), eos_token=eos, clean_up_tokenization_spaces=False)
