"""The training side: a memory-mapped, verified dataset of packed sequences.

    from fmlab.data import PackedDataset, ResumableSampler
    ds = PackedDataset("runs/data/course-L128-V512-...")   # a folder, its manifest.json, an s3:// URI or a dict
    len(ds), ds.seq_len, ds.vocab_size                       # sequences, tokens per sequence, vocabulary
    ds[0]                                                    # torch.LongTensor [seq_len]: inputs = labels
    loader = torch.utils.data.DataLoader(ds, batch_size=8, sampler=ResumableSampler(len(ds), rank, world))

Opening checks every shard against the manifest: header dtype and shape, and file size, always; the sha256
once per shard file per process (a shard that changed on disk is checked again). `verify=False` skips the
checksums for a quick look. Shards are memory-mapped, so opening a terabyte dataset reads nothing but
headers, and DataLoader workers share the page cache instead of copying tokens. torch is imported only
when a sequence is first read, so data-preparation workers never pay for it.
"""

from __future__ import annotations

import bisect
import os
from pathlib import Path

import numpy as np

from fmlab.data.errors import DataError
from fmlab.data.manifest import TOKENIZER_FOLDER, load_manifest
from fmlab.data.shards import check_shard, memmap_shard
from fmlab.data.tokenizer import load_tokenizer

_VERIFIED: set[tuple[str, int, int, str]] = set()  # (path, size, mtime_ns, sha256) already checksummed here


def has_validation(source: str | os.PathLike | dict) -> bool:
    """Whether the dataset was prepared with a held-out validation split."""
    return "validation" in load_manifest(source)[0]


def split_shards(manifest: dict, split: str, folder) -> list[dict]:
    """The shard entries of `split` ("train" or "validation")."""
    if split == "train":
        return manifest["shards"]
    if split == "validation":
        if "validation" not in manifest:
            raise DataError(f"the dataset in {folder} has no validation split: prepare it with held-out units "
                            "(prepare(..., validation_units=1), fmlab data prepare --validation-units 1, or "
                            "course_dataset(validation_units=1))")
        return manifest["validation"]["shards"]
    raise DataError(f"split must be 'train' or 'validation', not {split!r}")


class PackedDataset:
    """Packed token sequences from a prepared dataset; `ds[i]` is a LongTensor of shape [seq_len]."""

    def __init__(self, source: str | os.PathLike | dict, verify: bool = True, split: str = "train"):
        self.manifest, self.folder = load_manifest(source)
        self.split = split
        self.seq_len: int = self.manifest["seq_len"]
        self.vocab_size: int = self.manifest["vocab_size"]
        self.dtype: str = self.manifest["dtype"]
        self.eot_id: int = self.manifest["eot_id"]
        self._shards = split_shards(self.manifest, split, self.folder)
        for entry in self._shards:
            path = self.folder / entry["file"]
            stat = path.stat() if path.exists() else None
            key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns, entry["sha256"]) if stat else None
            checksum = verify and key not in _VERIFIED
            check_shard(path, entry, self.dtype, self.seq_len, checksum=checksum)
            if checksum:
                _VERIFIED.add(key)
        self._starts = np.cumsum([0] + [e["sequences"] for e in self._shards]).tolist()
        self._maps: list[np.ndarray] | None = None

    def __len__(self) -> int:
        return self._starts[-1]

    @property
    def num_tokens(self) -> int:
        return len(self) * self.seq_len

    def _open(self) -> list[np.ndarray]:
        if self._maps is None:
            self._maps = [memmap_shard(self.folder / e["file"], self.dtype, self.seq_len, e["sequences"])
                          for e in self._shards]
        return self._maps

    def tokens(self, index: int) -> np.ndarray:
        """Sequence `index` as a numpy int64 array (no torch needed)."""
        n = len(self)
        if not isinstance(index, int | np.integer):
            raise TypeError(f"index must be an integer, not {type(index).__name__}")
        if not -n <= index < n:
            raise IndexError(f"sequence {index} is out of range: this dataset has {n} sequences")
        index = int(index) % n
        shard = bisect.bisect_right(self._starts, index) - 1
        return np.asarray(self._open()[shard][index - self._starts[shard]], dtype=np.int64)

    def __getitem__(self, index: int):
        import torch

        return torch.from_numpy(self.tokens(index))

    def tokenizer(self):
        """The dataset's tokenizer (a transformers.PreTrainedTokenizerFast), from its tokenizer/ folder."""
        return load_tokenizer(self.folder / self.manifest["tokenizer"].get("folder", TOKENIZER_FOLDER))

    def decode(self, index: int) -> str:
        return self.tokenizer().decode(self.tokens(index).tolist())

    # Memory maps are reopened in each DataLoader worker instead of being pickled (and copied) into it.
    def __getstate__(self) -> dict:
        return {**self.__dict__, "_maps": None}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)

    def __repr__(self) -> str:
        split = "" if self.split == "train" else f", split={self.split!r}"
        return (f"PackedDataset({str(self.folder)!r}{split}: {len(self):,} sequences x {self.seq_len} tokens, "
                f"vocab {self.vocab_size:,}, {len(self._shards)} shards, {self.dtype})")


def describe_dataset(source: str | os.PathLike | dict, verify: bool = True, sample_chars: int = 300) -> dict:
    """What `fmlab data inspect` shows: counts, sizes, the tokenizer, and the start of a decoded sample."""
    ds = PackedDataset(source, verify=verify)
    m = ds.manifest
    info = {
        "location": m["location"],
        "folder": str(Path(ds.folder)),
        "sequences": len(ds),
        "seq_len": ds.seq_len,
        "tokens": ds.num_tokens,
        "shards": len(m["shards"]),
        "dtype": ds.dtype,
        "bytes": sum(s["bytes"] for s in m["shards"]),
        "vocab_size": ds.vocab_size,
        "tokenizer_sha256": m["tokenizer"]["sha256"],
        "documents": m.get("documents"),
        "dropped_tokens": m.get("dropped_tokens"),
        "checksums": "verified" if verify else "not checked (sizes and dtypes only)",
    }
    if "validation" in m:
        info["validation_sequences"] = m["validation"]["num_sequences"]
        info["validation_shards"] = len(m["validation"]["shards"])
    if len(ds):
        info["sample"] = ds.decode(0)[:sample_chars]
    return info
