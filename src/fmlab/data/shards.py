"""The token shard file: a 32-byte header, then sequences of token ids as little-endian uint16 or uint32.

    from fmlab.data.shards import check_shard, memmap_shard, token_dtype, write_shard
    entry = write_shard("shard-00000.bin", tokens, "uint16")  # tokens: a [sequences, seq_len] integer array
    check_shard("shard-00000.bin", entry, "uint16", seq_len=128)   # raises ShardError on any mismatch
    array = memmap_shard("shard-00000.bin", "uint16", 128, entry["sequences"])   # read-only np.memmap

Header (little-endian): magic b"FMLBTOK1" (8 bytes), bytes per token (uint32), sequence length
(uint32), number of sequences (uint64), 8 reserved bytes. The header makes each shard self-describing, so a
shard of the wrong dtype or length is refused even before its checksum is computed. After the header the
file is exactly what `np.memmap` needs: tokens in rows of `seq_len`, 2 bytes each when the vocabulary fits
in 65,536 ids (uint16) and 4 bytes otherwise (uint32).
"""

from __future__ import annotations

import hashlib
import os
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fmlab.data.errors import ShardError

MAGIC = b"FMLBTOK1"
HEADER = struct.Struct("<8sIIQ8x")
HEADER_BYTES = HEADER.size  # 32
DTYPES = {"uint16": 2, "uint32": 4}


def token_dtype(vocab_size: int) -> str:
    """The smallest dtype that holds every token id: "uint16" up to 65,536 tokens, else "uint32"."""
    if vocab_size <= 0:
        raise ValueError(f"vocab_size must be positive, not {vocab_size}")
    if vocab_size <= 2**16:
        return "uint16"
    if vocab_size <= 2**32:
        return "uint32"
    raise ValueError(f"a vocabulary of {vocab_size:,} tokens does not fit in uint32")


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 22) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            digest.update(block)
    return digest.hexdigest()


@dataclass(frozen=True)
class ShardHeader:
    itemsize: int
    seq_len: int
    sequences: int

    @property
    def data_bytes(self) -> int:
        return self.itemsize * self.seq_len * self.sequences


class ShardWriter:
    """Write a shard row block by row block; `close()` fills in the header and returns the manifest entry."""

    def __init__(self, path: str | os.PathLike, dtype: str, seq_len: int):
        if dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {sorted(DTYPES)}, not {dtype!r}")
        self.path, self.dtype, self.seq_len = Path(path), dtype, seq_len
        self.sequences = 0
        self._file = open(self.path, "wb")  # closed by close()
        self._file.write(bytes(HEADER_BYTES))

    def write(self, rows: np.ndarray) -> None:
        if rows.ndim != 2 or rows.shape[1] != self.seq_len:
            raise ValueError(f"rows must have shape [n, {self.seq_len}], not {rows.shape}")
        self._file.write(np.ascontiguousarray(rows, dtype=np.dtype(self.dtype).newbyteorder("<")).tobytes())
        self.sequences += rows.shape[0]

    def close(self) -> dict:
        self._file.seek(0)
        self._file.write(HEADER.pack(MAGIC, DTYPES[self.dtype], self.seq_len, self.sequences))
        self._file.close()
        return {"file": self.path.name, "sequences": self.sequences, "tokens": self.sequences * self.seq_len,
                "bytes": self.path.stat().st_size, "sha256": sha256_file(self.path)}


def write_shard(path: str | os.PathLike, tokens: np.ndarray, dtype: str) -> dict:
    """Write a [sequences, seq_len] array as a shard; return its manifest entry (file, counts, bytes, sha256)."""
    if tokens.ndim != 2:
        raise ValueError(f"tokens must be a [sequences, seq_len] array, not shape {tokens.shape}")
    writer = ShardWriter(path, dtype, tokens.shape[1])
    writer.write(tokens)
    return writer.close()


def read_header(path: str | os.PathLike) -> ShardHeader:
    path = Path(path)
    with open(path, "rb") as f:
        raw = f.read(HEADER_BYTES)
    if len(raw) < HEADER_BYTES or raw[:8] != MAGIC:
        raise ShardError(f"{path} is not an fmlab token shard (no {MAGIC.decode()} header): it is corrupt or "
                         "was written by another tool; prepare the dataset again")
    _, itemsize, seq_len, sequences = HEADER.unpack(raw)
    return ShardHeader(itemsize, seq_len, sequences)


def check_shard(path: str | os.PathLike, entry: dict, dtype: str, seq_len: int, checksum: bool = True) -> None:
    """Raise ShardError unless the shard at `path` matches its manifest entry (dtype, shape, size, sha256)."""
    path = Path(path)
    redo = "Prepare the dataset again (fmlab data prepare) or copy this shard again from its source."
    if not path.is_file():
        raise ShardError(f"shard {entry['file']} is listed in the manifest but missing from {path.parent}. {redo}")
    header = read_header(path)
    if header.itemsize != DTYPES[dtype]:
        found = next((k for k, v in DTYPES.items() if v == header.itemsize), f"{header.itemsize}-byte")
        raise ShardError(f"shard {entry['file']} holds {found} tokens but the manifest says {dtype}: it belongs to "
                         f"another dataset or was rewritten. {redo}")
    if header.seq_len != seq_len or header.sequences != entry["sequences"]:
        raise ShardError(f"shard {entry['file']} holds {header.sequences} sequences of {header.seq_len} tokens, but "
                         f"the manifest says {entry['sequences']} of {seq_len}. {redo}")
    size = path.stat().st_size
    if size != HEADER_BYTES + header.data_bytes or size != entry["bytes"]:
        raise ShardError(f"shard {entry['file']} is {size:,} bytes, but its header and manifest need "
                         f"{entry['bytes']:,}: it is truncated or padded. {redo}")
    if checksum:
        actual = sha256_file(path)
        if actual != entry["sha256"]:
            raise ShardError(f"shard {entry['file']} is corrupt: its sha256 is {actual[:16]}..., the manifest says "
                             f"{entry['sha256'][:16]}.... {redo}")


def memmap_shard(path: str | os.PathLike, dtype: str, seq_len: int, sequences: int) -> np.ndarray:
    """The shard's tokens as a read-only [sequences, seq_len] memory map (nothing is read until indexed)."""
    if sequences == 0:
        return np.zeros((0, seq_len), dtype=np.dtype(dtype).newbyteorder("<"))
    return np.memmap(path, dtype=np.dtype(dtype).newbyteorder("<"), mode="r", offset=HEADER_BYTES,
                     shape=(sequences, seq_len))
