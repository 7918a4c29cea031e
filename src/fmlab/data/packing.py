"""Packing: documents -> token ids + end-of-text -> one stream -> fixed-length training sequences.

    from fmlab.data.packing import pack_documents, count_packed
    rows, stats = pack_documents([[5, 6, 7], [8, 9]], eot_id=0, seq_len=4)
    # stream 5 6 7 0 8 9 0 -> one sequence [5 6 7 0]; the last 3 tokens are dropped
    count_packed([[3, 2]], seq_len=4)   # the same arithmetic without the tokens: {"sequences": 1, ...}

Every document is followed by the end-of-text token, so the model learns where one text stops and the
next begins; sequences cross document boundaries (no padding is wasted). Each work unit is packed on its
own, and the tail of a unit that does not fill a whole sequence is dropped: at most seq_len - 1 tokens
per unit, which is what lets the units be processed by any number of share-nothing workers.
`SequencePacker` does this as a stream (a unit can be larger than memory); `pack_documents` in memory.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import numpy as np


class SequencePacker:
    """Feed documents' ids with `add`; full [n, seq_len] blocks of rows go to `emit` as they fill up."""

    def __init__(self, seq_len: int, eot_id: int, emit: Callable[[np.ndarray], None], dtype: str = "uint32",
                 flush_tokens: int = 1 << 20):
        if not isinstance(seq_len, int) or seq_len < 2:
            raise ValueError(f"seq_len must be an integer of at least 2 (a model predicts each token from the "
                             f"ones before it), not {seq_len!r}")
        self.seq_len, self.eot_id, self.emit, self.dtype = seq_len, eot_id, emit, dtype
        self.flush_tokens = max(flush_tokens, seq_len)
        self._pending: list[np.ndarray] = []
        self._pending_tokens = 0
        self.documents = self.input_tokens = self.sequences = 0

    def add(self, ids: Sequence[int]) -> None:
        """One document: its ids, then the end-of-text token."""
        self._pending.append(np.asarray(ids, dtype=np.int64))
        self._pending.append(np.array([self.eot_id], dtype=np.int64))
        self._pending_tokens += len(ids) + 1
        self.documents += 1
        self.input_tokens += len(ids) + 1
        if self._pending_tokens >= self.flush_tokens:
            self._flush()

    def _flush(self) -> None:
        stream = np.concatenate(self._pending) if self._pending else np.zeros(0, dtype=np.int64)
        full = len(stream) // self.seq_len
        if full:
            self.emit(stream[: full * self.seq_len].astype(self.dtype).reshape(full, self.seq_len))
            self.sequences += full
        rest = stream[full * self.seq_len:]
        self._pending, self._pending_tokens = [rest], len(rest)

    def finish(self) -> dict:
        """Emit what fills whole rows, drop the tail; return the counts."""
        self._flush()
        dropped = self._pending_tokens
        self._pending, self._pending_tokens = [], 0
        return {"documents": self.documents, "input_tokens": self.input_tokens, "sequences": self.sequences,
                "dropped_tokens": dropped}


def pack_documents(documents: Iterable[Sequence[int]], eot_id: int, seq_len: int,
                   dtype: str = "uint32") -> tuple[np.ndarray, dict]:
    """Join documents' ids with `eot_id` after each, cut into rows of `seq_len`; return (rows, counts)."""
    blocks: list[np.ndarray] = []
    packer = SequencePacker(seq_len, eot_id, blocks.append, dtype)
    for ids in documents:
        packer.add(ids)
    stats = packer.finish()
    rows = np.concatenate(blocks) if blocks else np.zeros((0, seq_len), dtype=dtype)
    return rows, stats


def count_packed(doc_tokens_per_unit: Sequence[Sequence[int]], seq_len: int) -> dict:
    """How many sequences, training tokens and dropped tokens units of documents of these lengths give.

    `doc_tokens_per_unit[u]` lists the token counts (without end-of-text) of unit u's documents."""
    sequences = dropped = 0
    for unit in doc_tokens_per_unit:
        stream = sum(int(n) + 1 for n in unit)  # +1: the end-of-text token after each document
        sequences += stream // seq_len
        dropped += stream % seq_len
    return {"sequences": sequences, "tokens": sequences * seq_len, "dropped_tokens": dropped}
