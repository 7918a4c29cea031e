"""A deterministic, resumable sampler that splits sequences across data-parallel ranks without overlap.

    from fmlab.data import ResumableSampler
    sampler = ResumableSampler(len(ds), rank=rank, world_size=world, seed=0)
    loader = DataLoader(ds, batch_size=8, sampler=sampler)
    for epoch in range(sampler.epoch, epochs):
        sampler.set_epoch(epoch)
        for batch in loader:
            ...
            checkpoint["sampler"] = sampler.state_dict()     # {"epoch": 0, "offset": 96, ...}
    # after a restart: sampler.load_state_dict(checkpoint["sampler"]) gives exactly the remaining indices

Each epoch is one permutation of all sequences, drawn from (seed, epoch) alone, so every rank computes
the same permutation without talking to the others. With drop_last=True it is cut to a multiple of the
world size and rank r takes positions r, r+W, r+2W, ...: ranks are disjoint, equally long, and together
cover every sequence but the remainder (fewer than W). With drop_last=False the permutation is padded
with its own first indices (as torch's DistributedSampler does) so every rank still takes the same number
of steps; then a few sequences are seen twice per epoch. `offset` counts the sequences this rank has
already handed out in this epoch; a state saved at the very end of an epoch reads as (next epoch, 0).

Another world size can resume a state (a 2-process checkpoint on 1 process, or 1 on 2): since the order
depends only on (seed, epoch) and rank r takes positions r, r+W, ..., a state at offset k of W ranks means
the first k x W positions of the epoch are consumed, on every rank alike. The new world takes over at that
global position when it can split it evenly (k x W divisible by the new world size; it is whenever the global
batch, micro_batch x grad_accum x ranks, is the same before and after); else load_state_dict says what to
change. With the same global batch, the resumed run reads the very sequences the old world would have read.
One difference remains at epoch ends: with drop_last the last num_sequences % W sequences of each epoch are
left out, and that remainder depends on W.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from fmlab.data.errors import DataError

_IDENTITY = ("num_sequences", "world_size", "seed", "shuffle", "drop_last")
_SAME_ORDER = ("num_sequences", "seed", "shuffle", "drop_last")  # what must match to resume; world_size may not


class ResumableSampler:
    """Indices of this rank's sequences, epoch by epoch, resumable from (epoch, offset)."""

    def __init__(self, num_sequences: int, rank: int = 0, world_size: int = 1, seed: int = 0, shuffle: bool = True,
                 drop_last: bool = True):
        if not isinstance(world_size, int) or world_size < 1:
            raise DataError(f"world_size must be a positive integer, not {world_size!r}")
        if not isinstance(rank, int) or not 0 <= rank < world_size:
            raise DataError(f"rank must be an integer in 0..{world_size - 1} for world_size {world_size}, not {rank!r}")
        if not isinstance(num_sequences, int) or num_sequences < 0:
            raise DataError(f"num_sequences must be a non-negative integer, not {num_sequences!r}")
        if drop_last and num_sequences < world_size:
            raise DataError(f"{num_sequences} sequences cannot be split across {world_size} ranks with drop_last: "
                            "prepare more data, use fewer ranks, or set drop_last=False")
        self.num_sequences, self.rank, self.world_size = num_sequences, rank, world_size
        self.seed, self.shuffle, self.drop_last = seed, shuffle, drop_last
        if drop_last:
            self.num_samples = num_sequences // world_size
        else:
            self.num_samples = -(-num_sequences // world_size)
        self.total = self.num_samples * world_size
        self.epoch = 0
        self.offset = 0

    def epoch_order(self, epoch: int) -> np.ndarray:
        """The global order of epoch `epoch` (length num_samples x world_size), the same on every rank."""
        if self.shuffle:
            order = np.random.Generator(np.random.PCG64([self.seed, epoch])).permutation(self.num_sequences)
        else:
            order = np.arange(self.num_sequences)
        if self.total > len(order):  # drop_last=False: pad with the first indices again
            order = np.concatenate([order, np.resize(order, self.total - len(order))])
        return order[: self.total]

    def rank_indices(self, epoch: int | None = None) -> np.ndarray:
        """All of this rank's indices for an epoch (default: the current one), in order."""
        return self.epoch_order(self.epoch if epoch is None else epoch)[self.rank:: self.world_size]

    def set_epoch(self, epoch: int) -> None:
        """Start epoch `epoch` (a no-op if it is the current epoch, so a resumed position is kept)."""
        if epoch != self.epoch:
            self.epoch, self.offset = epoch, 0

    def __iter__(self) -> Iterator[int]:
        if self.offset >= self.num_samples:  # iterating a finished epoch again starts it over
            self.offset = 0
        indices = self.rank_indices()
        while self.offset < self.num_samples:
            index = int(indices[self.offset])
            self.offset += 1
            yield index

    def __len__(self) -> int:
        return self.num_samples

    @property
    def remaining(self) -> int:
        return self.num_samples - self.offset

    def state_dict(self, consumed: int | None = None) -> dict:
        """{"epoch", "offset", ...}: where this rank is. `consumed` overrides the offset with the number of
        sequences the training loop really used this epoch (DataLoader workers prefetch ahead of it)."""
        offset = self.offset if consumed is None else consumed
        if not 0 <= offset <= self.num_samples:
            raise DataError(f"consumed must be within 0..{self.num_samples}, not {offset}")
        epoch = self.epoch
        if offset == self.num_samples:
            epoch, offset = epoch + 1, 0
        return {"epoch": epoch, "offset": offset, "rank": self.rank,
                **{k: getattr(self, k) for k in _IDENTITY}}

    def load_state_dict(self, state: dict) -> None:
        """Continue from a saved position, also one saved by another world size when the global position splits
        evenly over this one (see the module's docstring); refuses a state from another dataset or seed."""
        different = {k: (state[k], getattr(self, k)) for k in _SAME_ORDER
                     if k in state and state[k] != getattr(self, k)}
        if different:
            detail = ", ".join(f"{k} was {saved} and is now {now}" for k, (saved, now) in different.items())
            raise DataError(f"this sampler state cannot resume here: {detail}. Resume with the same dataset, "
                            "seed and shuffle setting, or start a new epoch without the state")
        epoch, offset = int(state["epoch"]), int(state["offset"])
        saved_world = int(state.get("world_size", self.world_size))
        if saved_world != self.world_size:
            epoch, offset = self._resplit(epoch, offset, saved_world)
        if not 0 <= offset <= self.num_samples:
            raise DataError(f"offset {offset} is outside 0..{self.num_samples}")
        self.epoch, self.offset = epoch, offset

    def _resplit(self, epoch: int, offset: int, saved_world: int) -> tuple[int, int]:
        """(epoch, offset) on this world of the position `offset` of each of `saved_world` ranks."""
        if saved_world < 1:
            raise DataError(f"the saved world_size must be a positive integer, not {saved_world}")
        consumed = offset * saved_world  # global positions 0..consumed-1 of the epoch's order are used
        if consumed % self.world_size:
            options = [w for w in range(1, min(consumed, 64) + 1) if consumed % w == 0]
            raise DataError(
                f"this sampler state cannot be re-split: {saved_world} ranks had consumed {consumed} sequences of "
                f"epoch {epoch} ({offset} each), which {self.world_size} ranks cannot share equally ({consumed} is "
                f"not a multiple of {self.world_size}). Resume on a number of data-parallel ranks that divides "
                f"{consumed} ({', '.join(map(str, options[:12]))}), or from a checkpoint whose global position "
                f"divides: keep the global batch (micro_batch x grad_accum x ranks) the same, a multiple of both "
                f"world sizes")
        if consumed > self.total:
            raise DataError(f"this sampler state cannot be re-split: {consumed} sequences of epoch {epoch} were "
                            f"consumed, more than the {self.total} an epoch of {self.world_size} ranks has")
        offset = consumed // self.world_size
        return (epoch + 1, 0) if offset == self.num_samples else (epoch, offset)
