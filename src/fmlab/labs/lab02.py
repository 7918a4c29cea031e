"""Checks for labs/lab_02_data.ipynb: packing counts, storage bytes, a corrupted shard, a rank split.

    from fmlab.labs import lab02
    lab02.check_counts({"sequences": ..., "tokens": ..., "dropped_tokens": ...})
    folder = lab02.make_damaged_dataset("runs/lab02")   # a small dataset with one shard damaged
    lab02.summary()                                     # raises LabIncomplete while any check fails
"""

from __future__ import annotations

import os
import random
from pathlib import Path

from fmlab.labs import Lab, close

LAB = Lab("lab 02", ["ex1_counts", "ex2_storage", "ex3_corrupt_shard", "ex4_rank_split"])

# The questions' inputs live here so that the notebook and its checks cannot drift apart.
# Token counts (without the end-of-text token) of the documents of three work units.
EX1 = dict(doc_tokens_per_unit=[[900, 55, 3000], [1200, 1200], [40]], seq_len=256)
# Datasets as the Llama 2 and Llama 3 papers describe them: tokens and vocabulary size.
EX2 = dict(llama2=dict(tokens=2e12, vocab=32_000), llama3=dict(tokens=15e12, vocab=128_256))
EX4 = dict(world_sizes=(1, 2, 4), num_sequences=(37, 40), epochs=(0, 1))


def check_counts(answer: dict) -> bool:
    from fmlab.data import count_packed

    expected = count_packed(EX1["doc_tokens_per_unit"], EX1["seq_len"])
    return LAB.check("ex1_counts", answer, lambda a: {k: a[k] for k in expected} == expected,
                     f"{expected['sequences']} sequences, {expected['tokens']:,} tokens, "
                     f"{expected['dropped_tokens']} tokens dropped",
                     "each document gains one end-of-text token; each unit is packed on its own: "
                     "sequences = stream // seq_len, dropped = stream % seq_len, summed over units")


def check_storage(answer: dict) -> bool:
    from fmlab.data import token_dtype

    nbytes = {"uint16": 2, "uint32": 4}
    expected = {k: v["tokens"] * nbytes[token_dtype(v["vocab"])] / 1e9 for k, v in EX2.items()}
    return LAB.check("ex2_storage", answer, lambda a: all(close(float(a[k]), expected[k], 0.01) for k in expected),
                     ", ".join(f"{k}: {v:,.0f} GB" for k, v in expected.items()),
                     "ids below 65,536 fit in uint16 (2 bytes); a larger vocabulary needs uint32 (4 bytes); "
                     "GB = tokens x bytes per token / 1e9")


def make_damaged_dataset(folder: str | os.PathLike) -> Path:
    """Prepare a small dataset in `folder`/damaged and flip one byte in one shard, chosen at random."""
    from fmlab.data import corpus_slice, prepare

    target = Path(folder) / "damaged"
    manifest = prepare(corpus_slice(300_000), target, 64, 300, 1, unit_bytes=16 * 1024, progress=False)
    victim = target / random.SystemRandom().choice(manifest["shards"])["file"]
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0x20
    victim.write_bytes(bytes(data))
    return target


def _corrupted_shards(folder: Path) -> list[str]:
    import json

    from fmlab.data import sha256_file

    manifest = json.loads((folder / "manifest.json").read_text())
    return [s["file"] for s in manifest["shards"] if sha256_file(folder / s["file"]) != s["sha256"]]


def check_corrupt_shard(answer: str, folder: str | os.PathLike) -> bool:
    bad = _corrupted_shards(Path(folder))
    return LAB.check("ex3_corrupt_shard", answer, lambda a: bad == [Path(str(a)).name], f"{bad} is the damaged shard",
                     "recompute each shard's sha256 (fmlab.data.sha256_file) and compare it with the manifest's")


def check_split(split) -> bool:
    """`split(num_sequences, rank, world_size, epoch, seed=0)` must return this rank's indices for the epoch."""

    def valid(fn) -> bool:
        for n in EX4["num_sequences"]:
            for world in EX4["world_sizes"]:
                orders = {}
                for epoch in EX4["epochs"]:
                    shares = [list(fn(n, rank, world, epoch)) for rank in range(world)]
                    if shares != [list(fn(n, rank, world, epoch)) for rank in range(world)]:
                        raise ValueError("not deterministic: two calls gave different indices")
                    if any(len(s) != n // world for s in shares):
                        raise ValueError(f"with {n} sequences and {world} ranks each rank needs {n // world}")
                    seen = [int(i) for s in shares for i in s]
                    if len(set(seen)) != len(seen) or not set(seen) <= set(range(n)):
                        raise ValueError(f"ranks overlap or go out of range (n={n}, world_size={world})")
                    orders[epoch] = seen
                if n >= 10 and orders[0] == orders[1]:
                    raise ValueError("every epoch has the same order: shuffle with a seed that includes the epoch")
        return True

    return LAB.check("ex4_rank_split", split, lambda fn: callable(fn) and valid(fn),
                     "disjoint, equal, deterministic and reshuffled each epoch",
                     "permute range(n) with np.random.default_rng([seed, epoch]), keep the first n // W * W, "
                     "and give rank r the positions r, r+W, r+2W, ...")


def summary() -> None:
    LAB.summary()
