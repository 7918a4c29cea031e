"""Which checkpoints a folder holds: the names, the COMPLETE marker, and whether the files still check out.

    from fmlab.checkpoint import latest, complete_checkpoints, verify
    latest("/opt/ml/checkpoints")            # the newest complete checkpoint, or None
    verify(path)                             # CheckpointInfo, or CheckpointError naming the damaged file

Reading only: nothing here writes, and nothing needs a process group (fmlab.checkpoint.checkpointer saves and loads;
its `newest_intact` is the collective that sets a damaged checkpoint aside).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from fmlab.checkpoint.format import CheckpointError

PREFIX = "step_"
INCOMPLETE = ".incomplete-"
CORRUPT = "corrupt-"  # a complete checkpoint whose files no longer check out, set aside by `newest_intact`
MARKER = "COMPLETE"
TRAINER_FILE = "trainer.json"


@dataclass(frozen=True)
class CheckpointInfo:
    """A complete checkpoint on disk."""

    path: Path
    step: int
    world_size: int
    files: dict[str, int]  # file name -> size in bytes

    @property
    def bytes(self) -> int:
        return sum(self.files.values())


def step_of(path: Path) -> int | None:
    name = path.name
    if not name.startswith(PREFIX):
        return None
    try:
        return int(name[len(PREFIX):])
    except ValueError:
        return None


def read_marker(path: str | Path) -> CheckpointInfo:
    """The COMPLETE marker of one checkpoint; CheckpointError if it is missing or unreadable."""
    path = Path(path)
    marker = path / MARKER
    if not marker.is_file():
        raise CheckpointError(f"{path} is not a complete checkpoint (no {MARKER} marker: the save did not finish). "
                              f"Resume from an earlier step_* folder; this one is never picked automatically")
    try:
        info = json.loads(marker.read_text())
        return CheckpointInfo(path, int(info["step"]), int(info["world_size"]), dict(info["files"]))
    except (ValueError, KeyError, TypeError) as e:
        raise CheckpointError(f"{marker} is unreadable ({e}): treat {path} as incomplete and resume from an "
                              f"earlier checkpoint") from None


def damage(info: CheckpointInfo) -> list[str]:
    """What differs from the marker: files missing, or of another size than was written."""
    problems = []
    for name, size in sorted(info.files.items()):
        f = info.path / name
        if not f.is_file():
            problems.append(f"{name} is missing")
        elif f.stat().st_size != size:
            problems.append(f"{name} is {f.stat().st_size:,} bytes, {size:,} were written")
    return problems


def verify(path: str | Path) -> CheckpointInfo:
    """Check that every file the marker lists is there with its recorded size; raise CheckpointError if not."""
    info = read_marker(path)
    problems = damage(info)
    if problems:
        earlier = [c.path.name for c in complete_checkpoints(info.path.parent) if c.step < info.step]
        raise CheckpointError(
            f"checkpoint {info.path} is corrupt: {'; '.join(problems[:4])}. Nothing was deleted. Copy it back "
            f"intact (e.g. from its S3 prefix), or move this folder aside to resume from the previous complete "
            f"checkpoint ({earlier[-1] if earlier else 'there is none'})")
    return info


def complete_checkpoints(folder: str | Path) -> list[CheckpointInfo]:
    """Every checkpoint in `folder` with a readable COMPLETE marker, oldest first (files are not re-checked)."""
    folder = Path(folder)
    found = []
    if folder.is_dir():
        for p in folder.iterdir():
            if p.is_dir() and step_of(p) is not None and (p / MARKER).is_file():
                try:
                    found.append(read_marker(p))
                except CheckpointError:
                    continue
    return sorted(found, key=lambda i: i.step)


def latest(folder: str | Path) -> Path | None:
    """The newest complete checkpoint in `folder`, or None."""
    found = complete_checkpoints(folder)
    return found[-1].path if found else None
