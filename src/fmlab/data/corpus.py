"""The raw text side of the pipeline: input files, documents, and the work units that workers share out.

    from fmlab.data.corpus import CORPUS_DIR, corpus_slice, list_input_files, plan_work_units
    files = corpus_slice(max_bytes=1_000_000)        # a deterministic slice of the shipped corpus
    units = plan_work_units(files, unit_bytes=256 * 1024)

Input is a file, a folder (searched recursively) or a list of them. A `.txt` file is one document; a
`.jsonl` file holds one document per line in its "text" field (the layout of most public pretraining
corpora). Files are ordered by path, and grouped in that order into work units of about `unit_bytes`:
the units, and so the shards made from them, do not depend on how many workers share them out.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from fmlab.data.errors import DataError
from fmlab.environment import ROOT

CORPUS_DIR = ROOT / "data" / "corpus"
DOCUMENT_SUFFIXES = (".txt", ".jsonl")
DEFAULT_UNIT_BYTES = 256 * 1024


@dataclass(frozen=True)
class WorkUnit:
    """A fixed group of consecutive input files, processed as one and written as one shard."""

    index: int
    files: tuple[str, ...] = field(default_factory=tuple)
    bytes: int = 0

    @property
    def shard_name(self) -> str:
        return f"shard-{self.index:05d}.bin"


def list_input_files(inputs: str | os.PathLike | Sequence[str | os.PathLike]) -> list[Path]:
    """Every document file in `inputs` (files, or folders searched recursively), in a fixed order."""
    items = [inputs] if isinstance(inputs, str | os.PathLike) else list(inputs)
    if not items:
        raise DataError("no input given: pass a file, a folder or a list of files")
    found: list[Path] = []
    for item in items:
        path = Path(item).expanduser()
        if path.is_dir():
            found += sorted((p for p in path.rglob("*") if p.is_file() and p.suffix in DOCUMENT_SUFFIXES),
                            key=lambda p: p.relative_to(path).as_posix())
        elif path.is_file():
            if path.suffix not in DOCUMENT_SUFFIXES:
                raise DataError(f"{path} is not a .txt or .jsonl file; convert it to one of those first")
            found.append(path)
        else:
            raise DataError(f"input {path} does not exist")
    if not found:
        raise DataError(f"no .txt or .jsonl files found in {', '.join(map(str, items))}")
    return found


def read_documents(path: str | os.PathLike) -> Iterator[str]:
    """The documents of one file: the whole text of a .txt, or each line's "text" of a .jsonl."""
    path = Path(path)
    try:
        if path.suffix == ".jsonl":
            with path.open(encoding="utf-8") as lines:
                for number, line in enumerate(lines, 1):
                    if not line.strip():
                        continue
                    record = json.loads(line)
                    if not isinstance(record, dict) or not isinstance(record.get("text"), str):
                        raise DataError(f"{path}:{number}: each line must be a JSON object with a string "
                                        "'text' field")
                    yield record["text"]
        else:
            yield path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise DataError(f"{path} is not UTF-8 text ({e}); re-encode it as UTF-8") from e
    except json.JSONDecodeError as e:
        raise DataError(f"{path}: a line is not valid JSON ({e})") from e


def plan_work_units(files: Sequence[str | os.PathLike], unit_bytes: int = DEFAULT_UNIT_BYTES) -> list[WorkUnit]:
    """Group files, in order, into units of at least `unit_bytes` (a larger file is a unit of its own)."""
    if unit_bytes <= 0:
        raise DataError(f"unit_bytes must be positive, not {unit_bytes}")
    units: list[WorkUnit] = []
    group: list[str] = []
    size = 0
    for f in files:
        group.append(str(f))
        size += Path(f).stat().st_size
        if size >= unit_bytes:
            units.append(WorkUnit(len(units), tuple(group), size))
            group, size = [], 0
    if group:
        units.append(WorkUnit(len(units), tuple(group), size))
    return units


def corpus_sources(root: Path = CORPUS_DIR) -> dict[str, list[Path]]:
    """The shipped corpus by source folder (e.g. "shakespeare", "python-docs"), each list in path order."""
    sources = {d.name: list_input_files(d) for d in sorted(root.iterdir()) if d.is_dir()}
    if not sources:
        raise DataError(f"no corpus found under {root}: the repository's data/corpus folder is missing")
    return sources


def corpus_slice(max_bytes: float | None = None, root: Path = CORPUS_DIR) -> list[Path]:
    """The first files of each source, each source keeping its share of the bytes, up to about `max_bytes`.

    None gives the whole corpus. The slice is deterministic, and every source contributes at least one file,
    so a small slice keeps the corpus' mixture of plays and documentation."""
    sources = corpus_sources(root)
    if max_bytes is None:
        return [f for files in sources.values() for f in files]
    if max_bytes <= 0:
        raise DataError(f"max_bytes must be positive (or None for the whole corpus), not {max_bytes}")
    sizes = {name: sum(f.stat().st_size for f in files) for name, files in sources.items()}
    total = sum(sizes.values())
    chosen: list[Path] = []
    for name, files in sources.items():
        budget = max_bytes * sizes[name] / total
        taken = 0
        for f in files:
            if taken and taken + f.stat().st_size > budget:
                break
            chosen.append(f)
            taken += f.stat().st_size
    return chosen


def files_fingerprint(files: Sequence[str | os.PathLike]) -> str:
    """A short sha256 of the files' names and contents: a cache key that changes when the corpus does."""
    digest = hashlib.sha256()
    for f in files:
        digest.update(Path(f).name.encode() + b"\0" + Path(f).read_bytes() + b"\0")
    return digest.hexdigest()[:12]
