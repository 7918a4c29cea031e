"""The dataset manifest: manifest.json beside the shards says what they hold and how to check them.

    from fmlab.data.manifest import load_manifest
    manifest, folder = load_manifest("s3://fmlab-course/data/shakespeare")  # or a folder, or manifest.json

A manifest records the format, where the dataset was written (`location`), the sequence length, the
token dtype, the vocabulary size and end-of-text id, the tokenizer's sha256 (the tokenizer itself is in
the `tokenizer/` subfolder), totals, and one entry per shard: file, sequences, tokens, bytes, sha256.
A dataset prepared with held-out units also has `validation`: its shards and totals, never trained on.
It holds nothing that depends on how the dataset was made (no worker count, no timing, no host name), so
the same input and settings always give the same bytes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from fmlab import storage
from fmlab.data.errors import ManifestError
from fmlab.data.shards import DTYPES, token_dtype

FORMAT = "fmlab.packed-tokens/1"
MANIFEST_NAME = "manifest.json"
TOKENIZER_FOLDER = "tokenizer"
REQUIRED = ("format", "location", "seq_len", "dtype", "vocab_size", "eot_id", "num_sequences", "num_tokens",
            "tokenizer", "shards")


def dumps(manifest: dict) -> str:
    """The manifest's canonical text (sorted keys, fixed indentation): equal manifests give equal bytes."""
    return json.dumps(manifest, indent=2, sort_keys=True) + "\n"


def validate(manifest: dict, where: str = "manifest") -> dict:
    """Raise ManifestError unless the manifest is complete and self-consistent; return it."""
    missing = [k for k in REQUIRED if k not in manifest]
    if missing:
        raise ManifestError(f"{where} lacks {', '.join(missing)}: it is not an fmlab dataset manifest "
                            "(make one with fmlab data prepare)")
    if manifest["format"] != FORMAT:
        raise ManifestError(f"{where} has format {manifest['format']!r}; this fmlab reads {FORMAT!r}. "
                            "Prepare the dataset again with this version.")
    dtype, vocab = manifest["dtype"], manifest["vocab_size"]
    if dtype not in DTYPES:
        raise ManifestError(f"{where} gives dtype {dtype!r}; expected one of {sorted(DTYPES)}")
    if DTYPES[dtype] < DTYPES[token_dtype(vocab)]:
        raise ManifestError(f"{where}: a vocabulary of {vocab:,} tokens does not fit in {dtype}")
    if not 0 <= manifest["eot_id"] < vocab:
        raise ManifestError(f"{where}: eot_id {manifest['eot_id']} is outside the vocabulary of {vocab}")
    shards = manifest["shards"]
    if sum(s["sequences"] for s in shards) != manifest["num_sequences"]:
        raise ManifestError(f"{where}: the shards' sequences do not add up to num_sequences")
    if manifest["num_tokens"] != manifest["num_sequences"] * manifest["seq_len"]:
        raise ManifestError(f"{where}: num_tokens is not num_sequences x seq_len")
    validation = manifest.get("validation")
    if validation is not None:
        if not isinstance(validation, dict) or not isinstance(validation.get("shards"), list):
            raise ManifestError(f"{where}: 'validation' must hold a list of shards")
        if sum(s["sequences"] for s in validation["shards"]) != validation.get("num_sequences"):
            raise ManifestError(f"{where}: the validation shards' sequences do not add up to its num_sequences")
        shards = shards + validation["shards"]
    names = [s["file"] for s in shards]
    if len(set(names)) != len(names) or any("/" in n or "\\" in n or n.startswith(".") for n in names):
        raise ManifestError(f"{where}: shard file names must be unique plain names in the dataset folder")
    return manifest


def _local_folder(location: str | os.PathLike) -> Path:
    """A local folder holding the dataset at `location` (an S3 URI is mapped, or downloaded on SageMaker)."""
    if not storage.is_s3_uri(location):
        return Path(location).expanduser()
    if storage.uses_real_s3(str(location), None):
        cache = storage.cache_path(str(location))
        if not (cache / MANIFEST_NAME).exists():
            storage.download(str(location), cache)
        return cache
    return storage.to_local_path(location)


def load_manifest(source: str | os.PathLike | dict) -> tuple[dict, Path]:
    """(manifest, local folder of the shards) for a dataset folder, its manifest.json, an S3 URI, or a dict."""
    if isinstance(source, dict):
        return validate(source), _local_folder(source["location"])
    folder = _local_folder(source)
    if folder.name == MANIFEST_NAME and folder.is_file():
        folder = folder.parent
    path = folder / MANIFEST_NAME
    if not path.is_file():
        raise ManifestError(f"no {MANIFEST_NAME} in {folder}: prepare the dataset first "
                            "(fmlab data prepare --input ... --output ...) or give the folder that has it")
    try:
        manifest = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ManifestError(f"{path} is not valid JSON ({e}); prepare the dataset again") from e
    return validate(manifest, str(path)), folder
