"""Lab 02's checks: right answers pass, and plausible wrong answers fail (a check that cannot fail is a defect)."""

import numpy as np
import pytest

from fmlab.data import PackedDataset, ShardError, count_packed
from fmlab.labs import lab02


def test_counts_check():
    right = count_packed(lab02.EX1["doc_tokens_per_unit"], lab02.EX1["seq_len"])
    assert lab02.check_counts(right)
    # forgetting the end-of-text tokens, or packing all units as one stream, gives other numbers
    no_eot = count_packed([[n - 1 for n in u] for u in lab02.EX1["doc_tokens_per_unit"]], lab02.EX1["seq_len"])
    one_stream = count_packed([[n for u in lab02.EX1["doc_tokens_per_unit"] for n in u]], lab02.EX1["seq_len"])
    assert not lab02.check_counts(no_eot) and not lab02.check_counts(one_stream)


def test_storage_check():
    assert lab02.check_storage({"llama2": 4_000, "llama3": 60_000})
    assert not lab02.check_storage({"llama2": 4_000, "llama3": 30_000})  # uint16 would wrap Llama 3's ids
    assert not lab02.check_storage({"llama2": 8_000, "llama3": 60_000})


def test_damaged_dataset_and_its_check(tmp_path):
    folder = lab02.make_damaged_dataset(tmp_path)
    bad = lab02._corrupted_shards(folder)
    assert len(bad) == 1
    with pytest.raises(ShardError, match=bad[0]):
        PackedDataset(folder)
    assert lab02.check_corrupt_shard(bad[0], folder)
    others = [p.name for p in folder.glob("shard-*.bin") if p.name != bad[0]]
    assert others and not lab02.check_corrupt_shard(others[0], folder)


def test_split_check():
    def good(n, rank, world, epoch, seed=0):
        order = np.random.default_rng([seed, epoch]).permutation(n)
        return order[: n // world * world][rank::world].tolist()

    def overlapping(n, rank, world, epoch, seed=0):
        return list(range(n // world))  # every rank takes the same indices

    def same_every_epoch(n, rank, world, epoch, seed=0):
        return list(range(n // world * world))[rank::world]

    def uneven(n, rank, world, epoch, seed=0):
        return np.random.default_rng(epoch).permutation(n)[rank::world].tolist()  # no drop of the remainder

    assert lab02.check_split(good)
    for wrong in (overlapping, same_every_epoch, uneven):
        assert not lab02.check_split(wrong), wrong.__name__
