"""ResumableSampler and PackedDataset for training: disjoint ranks, full coverage, exact resume, gloo ranks."""

import json

import numpy as np
import pytest
import torch

from fmlab.data import DataError, PackedDataset, ResumableSampler, corpus_slice, prepare


@pytest.fixture(scope="module")
def dataset_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("sampler") / "ds"
    prepare(corpus_slice(200_000), out, 16, 300, 1, unit_bytes=16 * 1024, progress=False)
    return out


@pytest.mark.parametrize("world_size", [1, 2, 4])
@pytest.mark.parametrize("n", [37, 40])
def test_ranks_are_disjoint_and_cover_everything_but_the_remainder(world_size, n):
    for epoch in range(3):
        per_rank = []
        for rank in range(world_size):
            s = ResumableSampler(n, rank, world_size, seed=7)
            s.set_epoch(epoch)
            per_rank.append(list(s))
        assert all(len(r) == n // world_size for r in per_rank)
        seen = [i for r in per_rank for i in r]
        assert len(seen) == len(set(seen))  # disjoint
        assert set(seen) <= set(range(n)) and len(set(range(n)) - set(seen)) == n % world_size


@pytest.mark.parametrize("world_size", [1, 2, 4])
def test_without_drop_last_every_sequence_is_covered_with_equal_rank_lengths(world_size):
    n = 37
    per_rank = [list(ResumableSampler(n, r, world_size, drop_last=False)) for r in range(world_size)]
    assert len({len(r) for r in per_rank}) == 1 and len(per_rank[0]) == -(-n // world_size)
    assert set().union(*per_rank) == set(range(n))


def test_order_is_deterministic_and_changes_per_epoch():
    a, b = ResumableSampler(100, seed=3), ResumableSampler(100, seed=3)
    assert list(a) == list(b)
    a.set_epoch(1)
    epoch1 = list(a)
    assert epoch1 != list(b) and sorted(epoch1) == list(range(100))
    assert list(ResumableSampler(10, 1, 2, shuffle=False)) == [1, 3, 5, 7, 9]
    assert list(ResumableSampler(100, seed=4)) != list(b)


@pytest.mark.parametrize("world_size", [1, 2, 4])
@pytest.mark.parametrize("stop_after", [1, 10, 20, 23, 41])  # 10, 20, 41: an epoch end for 4, 2, 1 ranks
def test_resume_yields_exactly_what_an_uninterrupted_run_would(world_size, stop_after):
    n, epochs = 41, 3
    for rank in range(world_size):
        full = ResumableSampler(n, rank, world_size, seed=11)
        uninterrupted = []
        for epoch in range(epochs):
            full.set_epoch(epoch)
            uninterrupted += list(full)
        first = ResumableSampler(n, rank, world_size, seed=11)
        taken = []
        for epoch in range(epochs):
            first.set_epoch(epoch)
            for index in first:
                taken.append(index)
                if len(taken) == stop_after:
                    break
            if len(taken) == stop_after:
                break
        state = json.loads(json.dumps(first.state_dict()))  # survives a checkpoint file
        resumed = ResumableSampler(n, rank, world_size, seed=11)
        resumed.load_state_dict(state)
        for epoch in range(resumed.epoch, epochs):
            resumed.set_epoch(epoch)
            taken += list(resumed)
        assert taken == uninterrupted


def test_state_at_the_end_of_an_epoch_points_at_the_next():
    s = ResumableSampler(10, 0, 2)
    list(s)
    assert s.state_dict()["epoch"] == 1 and s.state_dict()["offset"] == 0
    s2 = ResumableSampler(10, 0, 2)
    assert s2.state_dict(consumed=5) == s.state_dict()


def test_dataloader_resume_gives_identical_batches(dataset_dir):
    ds = PackedDataset(dataset_dir)

    def batches(sampler, limit=None):
        out = []
        for batch in torch.utils.data.DataLoader(ds, batch_size=4, sampler=sampler):
            out.append(batch)
            if limit and len(out) == limit:
                break
        return out

    reference = ResumableSampler(len(ds), 1, 2, seed=5)
    expected = batches(reference)
    interrupted = ResumableSampler(len(ds), 1, 2, seed=5)
    got = batches(interrupted, limit=3)
    state = interrupted.state_dict(consumed=3 * 4)
    resumed = ResumableSampler(len(ds), 1, 2, seed=5)
    resumed.load_state_dict(state)
    got += batches(resumed)
    assert len(got) == len(expected) > 3
    assert all(torch.equal(a, b) for a, b in zip(got, expected, strict=True))
    assert expected[0].dtype == torch.long and expected[0].shape == (4, ds.seq_len)


def test_mismatched_state_and_bad_arguments_are_refused():
    state = ResumableSampler(40, 0, 2, seed=1).state_dict()
    with pytest.raises(DataError, match="seed was 1 and is now 0"):
        ResumableSampler(40, 0, 2).load_state_dict(state)
    with pytest.raises(DataError, match="num_sequences was 40 and is now 41"):
        ResumableSampler(41, 0, 2, seed=1).load_state_dict(state)
    with pytest.raises(DataError, match="rank must be"):
        ResumableSampler(40, 2, 2)
    with pytest.raises(DataError, match="cannot be split"):
        ResumableSampler(3, 0, 4)


def _global_stream(n, world_size, micro_batch, steps, seed=11, state=None):
    """The global batches (all ranks' micro-batches of a step, rank by rank) of `steps` steps, from `state`."""
    samplers = [ResumableSampler(n, r, world_size, seed=seed) for r in range(world_size)]
    iters = []
    for s in samplers:
        if state is not None:
            s.load_state_dict(state)
        iters.append(_endless(s))
    batches = [[[next(it) for _ in range(micro_batch)] for it in iters] for _ in range(steps)]
    return batches, [s.state_dict() for s in samplers]


def _endless(sampler):
    while True:
        yield from sampler
        sampler.set_epoch(sampler.epoch + 1)


@pytest.mark.parametrize(("before", "after"), [((2, 4), (1, 8)), ((1, 8), (2, 4)), ((4, 2), (2, 4)),
                                               ((2, 3), (3, 2))])
def test_a_state_resumes_on_another_world_size_with_the_same_global_batches(before, after):
    """W ranks x micro-batch b and W' x b' with W b = W' b': the same sequences per step, before and after."""
    (w0, b0), (w1, b1) = before, after
    n = 48  # a multiple of every world size here, so no epoch end drops a different remainder
    reference, _ = _global_stream(n, w0, b0, steps=20)  # past an epoch end (48 / 8 = 6 steps an epoch)
    first, states = _global_stream(n, w0, b0, steps=9)
    assert len({json.dumps({k: v for k, v in st.items() if k != "rank"}) for st in states}) == 1  # ranks agree
    state = json.loads(json.dumps(states[0]))  # rank 0's state, as fmlab.checkpoint reads it
    resumed, _ = _global_stream(n, w1, b1, steps=11, state=state)
    flatten = [sorted(i for part in step for i in part) for step in first + resumed]
    assert flatten == [sorted(i for part in step for i in part) for step in reference]
    # ... and positions r, r+W, ... of the order: the single-process order read in batches of W b
    order = np.concatenate([ResumableSampler(n, 0, 1, seed=11).epoch_order(e) for e in range(4)])
    assert flatten == [sorted(order[i * w0 * b0:(i + 1) * w0 * b0].tolist()) for i in range(20)]


def test_a_position_that_cannot_be_re_split_says_what_to_change():
    s = ResumableSampler(40, 0, 2)
    for _ in range(3):  # 2 ranks x 3 = 6 sequences consumed: not a multiple of 4
        next(iter(s))
    with pytest.raises(DataError, match=r"cannot be re-split: 2 ranks had consumed 6 sequences of epoch 0 "
                                        r"\(3 each\).*divides 6 \(1, 2, 3, 6\).*global batch"):
        ResumableSampler(40, 0, 4).load_state_dict(s.state_dict())
    moved = ResumableSampler(40, 1, 3)
    moved.load_state_dict(s.state_dict())  # 6 = 3 x 2: rank 1 of 3 continues at its 3rd sequence
    assert (moved.epoch, moved.offset) == (0, 2)
    assert list(moved) == ResumableSampler(40, 0, 1).epoch_order(0)[6:39][1::3].tolist()
    end = ResumableSampler(41, 0, 1)
    list(end)
    later = ResumableSampler(41, 0, 2)
    later.load_state_dict(end.state_dict(consumed=40))  # 40 of 41 read: the 2-rank epoch (40) is over
    assert (later.epoch, later.offset) == (1, 0)


def _rank_main(rank, world_size, folder, rendezvous, results):
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank, world_size=world_size)
    ds = PackedDataset(folder)
    sampler = ResumableSampler(len(ds), rank, world_size, seed=1)
    indices, rows = [], []
    for batch_indices in torch.utils.data.BatchSampler(sampler, 2, drop_last=False):
        indices += batch_indices
        rows += [ds[i] for i in batch_indices]
    gathered = [None] * world_size
    dist.all_gather_object(gathered, indices)
    assert all(len(set(gathered[0]) & set(g)) == 0 for g in gathered[1:])  # the ranks agree they are disjoint
    token_sum = int(torch.stack(rows).sum())
    (results / f"rank{rank}.json").write_text(json.dumps({"indices": indices, "token_sum": token_sum}))
    dist.destroy_process_group()


@pytest.mark.distributed
def test_gloo_ranks_split_the_dataset_like_the_single_process_order(dataset_dir, tmp_path):
    world_size = 2
    torch.multiprocessing.spawn(_rank_main, args=(world_size, str(dataset_dir), str(tmp_path / "rdzv"), tmp_path),
                                nprocs=world_size, join=True)
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(world_size)]
    ds = PackedDataset(dataset_dir)
    single = ResumableSampler(len(ds), 0, 1, seed=1).epoch_order(0)
    total = len(ds) // world_size * world_size
    for r, got in enumerate(ranks):
        assert got["indices"] == single[:total][r::world_size].tolist()
        assert got["token_sum"] == int(np.sum([ds.tokens(i).sum() for i in got["indices"]]))
    assert sorted(ranks[0]["indices"] + ranks[1]["indices"]) == sorted(single[:total].tolist())
