"""Which checkpoint a resume starts from when some are damaged: the newest one whose files check out.

    chosen, notes = newest_intact("/opt/ml/checkpoints")   # every rank calls it: a collective

A checkpoint can be complete once and damaged since (a partial S3 sync, a disk error). `fmlab.train --resume auto`
asks `newest_intact`: rank 0 checks the complete checkpoints from the newest down (fmlab.checkpoint.folder.damage),
every machine's leader renames each damaged one to corrupt-step_N (kept for inspection, never resumed or pruned),
and every rank gets the same answer. `Checkpointer.resume` instead stops with a clear error on a damaged newest
checkpoint. Tested by tests/train (the damaged-checkpoint resumes) and lab 08b's failure zoo.
"""

from __future__ import annotations

import time
from pathlib import Path

from fmlab.checkpoint.folder import CORRUPT, complete_checkpoints, damage
from fmlab.checkpoint.format import CheckpointError
from fmlab.checkpoint.ranks import barrier, from_rank0, node_leader, rank


def newest_intact(folder: str | Path) -> tuple[Path | None, list[str]]:
    """The newest complete checkpoint whose files check out, and a note for each damaged newer one set aside.

    Rank 0 decides (machines' disks may differ) and every machine's leader renames each damaged checkpoint to
    corrupt-step_N: kept for inspection, never resumed or pruned, and its step can be saved again. A collective:
    every rank calls it. Raises CheckpointError when checkpoints exist but none checks out."""
    folder = Path(folder)
    decision = None
    if rank() == 0:
        chosen, damaged = None, []
        for info in reversed(complete_checkpoints(folder)):
            problems = damage(info)
            if not problems:
                chosen = info.path
                break
            damaged.append((info.path.name, f"checkpoint {info.path} is corrupt: {'; '.join(problems[:4])}"))
        decision = (str(chosen) if chosen else None, damaged)
    chosen, damaged = from_rank0(decision)
    notes = []
    if node_leader():
        for name, _ in damaged:
            target = folder / f"{CORRUPT}{name}"
            if target.exists():
                target = folder / f"{CORRUPT}{name}-{int(time.time())}"
            if (folder / name).exists():
                (folder / name).rename(target)
    barrier()
    for name, reason in damaged:
        notes.append(f"{reason}; set aside as {CORRUPT}{name} (kept, not deleted)")
    if damaged and chosen is None:
        raise CheckpointError(f"every checkpoint in {folder} is damaged: " + " | ".join(notes)
                              + ". Restore one from its S3 copy, or start over with --resume none")
    return (Path(chosen) if chosen else None), notes
