"""The data loader against the training step (module 4): how long each step waits for its batch, when the batches
are read from pre-tokenized shards and when they are tokenized on the fly, with 0, 1 or 2 loader workers.

    from fmlab.data.loader_wait import measure_loader_wait
    rows = measure_loader_wait()   # one row per (source, workers): wait and step in ms, the wait's share

A step that waits for data leaves the accelerator idle, whatever the collectives do. The course prepares its data
offline (module 2): training only reads memory-mapped token shards, and the wait is a fraction of a percent. A
pipeline that tokenizes (or decodes images, audio) in the training job pays that CPU work per batch, and the
accelerator waits unless loader workers make batches ahead of the step. On a GPU node the step is faster and
the CPU work the same, so a wait a laptop hides can dominate there: compare the wait with YOUR step time.

The on-the-fly source tokenizes the first 8,000 characters of each document, as a naive pipeline that reads whole
records does, then keeps the first `seq_len` tokens. Both sources feed the same tiny model for the same steps; the first batch (the workers' start)
is not counted.
"""

from __future__ import annotations

import time
from pathlib import Path

import torch
from torch.utils.data import DataLoader, Dataset

from fmlab.data.corpus import corpus_slice, read_documents
from fmlab.data.dataset import PackedDataset
from fmlab.data.prepare import course_dataset
from fmlab.data.tokenizer import load_backend
from fmlab.models import build_model

SOURCES = ("pre-tokenized shards", "tokenized on the fly")


class OnTheFly(Dataset):
    """Raw documents, tokenized when a batch asks for them (the CPU work a prepared dataset does once, offline)."""

    def __init__(self, tokenizer_folder: str | Path, seq_len: int, chars: int = 8000):
        self.documents = [d for f in corpus_slice() for d in read_documents(f)]
        self.tokenizer_folder, self.seq_len, self.chars = str(tokenizer_folder), seq_len, chars
        self._tokenizer = None

    def __len__(self) -> int:
        return 100 * len(self.documents)  # the corpus read again and again: the measure needs batches, not epochs

    def __getitem__(self, i: int) -> torch.Tensor:
        if self._tokenizer is None:  # each worker process loads its own
            self._tokenizer = load_backend(self.tokenizer_folder)
        text = self.documents[i % len(self.documents)][: self.chars]  # a page of text for 128 tokens: as wasteful
        ids = self._tokenizer.encode(text).ids                          # as a naive pipeline that reads whole records
        ids = (ids * (self.seq_len // max(len(ids), 1) + 1))[: self.seq_len]
        return torch.tensor(ids, dtype=torch.long)


class _Packed(Dataset):
    def __init__(self, folder: Path):
        self.data = PackedDataset(folder)

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, i: int) -> torch.Tensor:
        return self.data[i]


def _run(loader: DataLoader, model, optimizer, steps: int) -> tuple[float, float]:
    """Seconds waiting for batches and seconds in steps, over `steps` steps after the first."""
    waited = stepped = 0.0
    batches = iter(loader)
    for n in range(steps + 1):
        start = time.perf_counter()
        tokens = next(batches)
        got = time.perf_counter()
        loss = model(input_ids=tokens, labels=tokens).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        done = time.perf_counter()
        if n:  # the first batch waits for the workers to start
            waited, stepped = waited + got - start, stepped + done - got
    return waited, stepped


def measure_loader_wait(workers: tuple[int, ...] = (0, 1, 2), steps: int = 12, batch: int = 8,
                        seq_len: int = 128) -> list[dict]:
    """The wait for data against the step, per source and loader workers, on the course's tiny model."""
    folder = course_dataset(seq_len=seq_len, vocab_size=512)
    sources = {SOURCES[0]: _Packed(folder), SOURCES[1]: OnTheFly(folder / "tokenizer", seq_len)}
    torch.manual_seed(0)
    model = build_model("tiny")
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    rows = []
    for source, dataset in sources.items():
        for w in workers:
            loader = DataLoader(dataset, batch_size=batch, shuffle=False, num_workers=w,
                                prefetch_factor=2 if w else None, persistent_workers=False)
            waited, stepped = _run(loader, model, optimizer, steps)
            rows.append({"source": source, "workers": w, "wait ms per step": 1000 * waited / steps,
                         "step ms": 1000 * stepped / steps, "wait share": waited / (waited + stepped)})
    return rows
