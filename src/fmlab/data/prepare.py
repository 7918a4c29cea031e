"""Prepare a pretraining dataset: tokenize, pack and shard a corpus with share-nothing parallel workers.

    from fmlab.data import prepare, course_dataset
    manifest = prepare("data/corpus", "s3://fmlab-course/data/shakespeare", seq_len=128, vocab_size=512, workers=2)
    folder = course_dataset()      # the course's default dataset, prepared once into runs/data/ and reused

or from a shell: `fmlab data prepare --input data/corpus --output runs/data/demo --seq-len 128 --workers 2`.

The input files are grouped, in path order, into work units (corpus.plan_work_units). Worker r of W takes
units r, r+W, r+2W, ... (what SageMaker Processing's ShardedByS3Key does across instances), tokenizes and
packs each unit on its own, and writes it as the shard named after the unit. No worker talks to another;
the coordinator only trains the tokenizer first and writes the manifest last. Because a shard depends on
its unit alone, the dataset is byte-identical for any number of workers. Work happens in a hidden staging
folder that replaces the output only once complete, so a crash never leaves a half-written dataset.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import queue as queue_module
import shutil
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing import forkserver
from pathlib import Path

from fmlab import storage
from fmlab.data.corpus import (
    DEFAULT_UNIT_BYTES,
    WorkUnit,
    corpus_slice,
    files_fingerprint,
    list_input_files,
    plan_work_units,
    read_documents,
)
from fmlab.data.errors import DataError
from fmlab.data.manifest import FORMAT, MANIFEST_NAME, TOKENIZER_FOLDER, dumps
from fmlab.data.packing import SequencePacker
from fmlab.data.shards import ShardWriter, token_dtype
from fmlab.data.tokenizer import load_backend, tokenizer_info, train_tokenizer
from fmlab.environment import ROOT, FileLock
from fmlab.progress import progress as tqdm

COURSE_CACHE = ROOT / "runs" / "data"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


@dataclass(frozen=True)
class UnitJob:
    """Everything a worker needs to turn a work unit into a shard (picklable, for spawned processes)."""

    tokenizer_dir: str
    eot_id: int
    seq_len: int
    dtype: str
    out_dir: str


_BACKENDS: dict[str, object] = {}


def process_unit(unit: WorkUnit, job: UnitJob) -> dict:
    """Tokenize and pack one unit into its shard; return the shard's manifest entry."""
    if job.tokenizer_dir not in _BACKENDS:
        _BACKENDS[job.tokenizer_dir] = load_backend(job.tokenizer_dir)
    tokenizer = _BACKENDS[job.tokenizer_dir]
    writer = ShardWriter(Path(job.out_dir) / unit.shard_name, job.dtype, job.seq_len)
    packer = SequencePacker(job.seq_len, job.eot_id, writer.write, job.dtype)
    for path in unit.files:
        for text in read_documents(path):
            # One document per call (no hidden thread pool: a worker is one core); "fast" skips char offsets.
            packer.add(tokenizer.encode_batch_fast([text], add_special_tokens=False)[0].ids)
    counts = packer.finish()
    entry = writer.close()
    entry.update(unit=unit.index, documents=counts["documents"], input_tokens=counts["input_tokens"],
                 dropped_tokens=counts["dropped_tokens"])
    return entry


def _worker_main(rank: int, world: int, units: list[WorkUnit], job: UnitJob, results) -> None:
    """One share-nothing worker: its own slice of the units, its own shards, results through a queue."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # one core per worker, as on one instance each
    try:
        for unit in units[rank::world]:
            results.put(("shard", process_unit(unit, job)))
        results.put(("finished", rank))
    except BaseException:  # report anything, then let the coordinator stop the others
        results.put(("error", rank, traceback.format_exc()))


def run_units(units: Sequence[WorkUnit], job: UnitJob, workers: int = 1, progress: bool = True) -> list[dict]:
    """Process every unit with `workers` processes (1: in this process); entries in unit order."""
    units = list(units)
    workers = max(1, min(workers, len(units)))
    bar = tqdm(total=len(units), unit="shard", desc=f"tokenize + pack, {workers} worker(s)", disable=not progress)
    entries: list[dict] = []
    try:
        if workers == 1:
            for unit in units:
                entries.append(process_unit(unit, job))
                bar.update(1)
        else:
            entries = _run_processes(units, job, workers, bar)
    finally:
        bar.close()
    return sorted(entries, key=lambda e: e["unit"])


def _worker_context():
    """forkserver where the platform has it (fast starts, and safe with torch and tokenizers' threads in the
    parent: workers fork from a clean server process with this module preloaded), else spawn."""
    if "forkserver" in mp.get_all_start_methods():
        context = mp.get_context("forkserver")
        context.set_forkserver_preload([__name__])
        return context
    return mp.get_context("spawn")


def warm_up_workers() -> None:
    """Start the fork server now, so that a timed run measures the work rather than its one-off start."""
    if _worker_context().get_start_method() == "forkserver":
        forkserver.ensure_running()


def _run_processes(units: list[WorkUnit], job: UnitJob, workers: int, bar) -> list[dict]:
    context = _worker_context()
    results = context.Queue()
    processes = [context.Process(target=_worker_main, args=(rank, workers, units, job, results), daemon=True)
                 for rank in range(workers)]
    for p in processes:
        p.start()
    entries: list[dict] = []
    finished = 0
    try:
        while finished < workers:
            try:
                message = results.get(timeout=1.0)
            except queue_module.Empty:
                crashed = [p for p in processes if p.exitcode not in (None, 0)]
                if crashed:
                    raise DataError(f"a data worker died with exit code {crashed[0].exitcode} (out of memory?); "
                                    "try fewer workers or smaller work units") from None
                continue
            if message[0] == "shard":
                entries.append(message[1])
                bar.update(1)
            elif message[0] == "finished":
                finished += 1
            else:
                raise DataError(f"data worker {message[1]} failed:\n{message[2]}")
    finally:
        for p in processes:
            if p.is_alive() and finished < workers:
                p.terminate()
            p.join(timeout=10)
    return entries


def _copy_tokenizer(source: str | os.PathLike, target: Path) -> None:
    source = Path(source).expanduser()
    if source.is_file():
        source = source.parent
    tokenizer_info(source)  # fails early, and clearly, on a folder without tokenizer.json
    target.mkdir(parents=True)
    for name in TOKENIZER_FILES:
        if (source / name).is_file():
            shutil.copy2(source / name, target / name)


def _output_folder(output: str | os.PathLike, backend: str | None) -> Path:
    """The local folder to build the dataset in: the output itself, its local-bucket path, or an S3 cache."""
    if storage.uses_real_s3(str(output), backend):
        return storage.cache_path(str(output))
    return storage.to_local_path(output).resolve()


def _local_inputs(input_path, backend: str | None):
    """Input as local paths; S3 input is mapped (local backend) or downloaded (SageMaker)."""
    items = [input_path] if isinstance(input_path, str | os.PathLike) else list(input_path)
    local = []
    for item in items:
        if storage.is_s3_uri(str(item)) and storage.uses_real_s3(str(item), backend):
            local.append(storage.download(str(item), storage.cache_path(str(item))))
        else:
            local.append(storage.to_local_path(item))
    return local


def validation_unit_indices(units: int, validation_units: int) -> list[int]:
    """Which work units are held out: `validation_units` of them spread evenly over the input, so the held-out
    text has the corpus' mixture (the first and last units are often one source each)."""
    if not isinstance(validation_units, int) or validation_units < 0:
        raise DataError(f"validation_units must be a whole number >= 0, not {validation_units!r}")
    if validation_units and validation_units >= units:
        raise DataError(f"the input makes {units} work unit(s), so at most {units - 1} can be held out for "
                        f"validation (asked for {validation_units}): hold out fewer, or use smaller work units (unit_bytes, --unit-mb)")
    return sorted({int((i + 0.5) * units / validation_units) for i in range(validation_units)})


def prepare(input_path, output: str | os.PathLike, seq_len: int = 128, vocab_size: int | None = 512,
            workers: int = 1, tokenizer: str | os.PathLike | None = None, *, unit_bytes: int = DEFAULT_UNIT_BYTES,
            eot_token: str | None = None, progress: bool = True, backend: str | None = None,
            validation_units: int = 0) -> dict:
    """Tokenize, pack and shard `input_path` into `output` (a folder or s3:// URI); return the manifest.

    tokenizer: None trains a byte-level BPE of `vocab_size` tokens on the input; a folder with a
    tokenizer.json (e.g. GPT-2's or Llama 2's) is used as it is, and then vocab_size may be None.
    validation_units: how many work units to hold out as the validation split (`PackedDataset(...,
    split="validation")`); training never reads them, and a trained tokenizer never sees them."""
    if not isinstance(seq_len, int) or seq_len < 2:
        raise DataError(f"seq_len must be an integer of at least 2, not {seq_len!r}")
    if not isinstance(workers, int) or workers < 1:
        raise DataError(f"workers must be a positive integer, not {workers!r}")
    if tokenizer is None and vocab_size is None:
        raise DataError("give vocab_size (to train a tokenizer) or tokenizer (a folder with tokenizer.json)")
    files = list_input_files(_local_inputs(input_path, backend))
    units = plan_work_units(files, unit_bytes)
    held_out = set(validation_unit_indices(len(units), validation_units))
    target = _output_folder(output, backend)
    if (storage.uses_real_s3(str(output), backend) and storage.exists(str(output), backend)
            and not storage.exists(storage.join(str(output), MANIFEST_NAME), backend)):
        raise DataError(f"{output} already holds objects that are not an fmlab dataset: choose a new prefix")
    if target.exists() and any(target.iterdir()) and not (target / MANIFEST_NAME).is_file():
        raise DataError(f"output {target} exists and is not an fmlab dataset: choose a new or empty folder "
                        "(a dataset folder is replaced as a whole)")
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.parent / f".{target.name}.partial-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    try:
        tokenizer_dir = staging / TOKENIZER_FOLDER
        if tokenizer is None:
            seen = [f for u in units if u.index not in held_out for f in u.files] if held_out else files
            train_tokenizer(seen, vocab_size, tokenizer_dir)
        else:
            _copy_tokenizer(tokenizer, tokenizer_dir)
        info = tokenizer_info(tokenizer_dir, eot_token)
        if tokenizer is not None and vocab_size is not None and vocab_size != info.vocab_size:
            raise DataError(f"the tokenizer in {tokenizer} has {info.vocab_size:,} tokens, not {vocab_size:,}: "
                            f"leave vocab_size out (None) or set it to {info.vocab_size}")
        job = UnitJob(str(tokenizer_dir), info.eot_id, seq_len, token_dtype(info.vocab_size), str(staging))
        entries = run_units(units, job, workers, progress)
        manifest = build_manifest([e for e in entries if e["unit"] not in held_out],
                                  str(output) if storage.is_s3_uri(str(output)) else str(target),
                                  job, info, tokenizer, files, units, unit_bytes)
        if held_out:
            validation = [e for e in entries if e["unit"] in held_out]
            manifest["validation"] = {"shards": validation, "num_sequences": sum(e["sequences"] for e in validation),
                                      "num_tokens": sum(e["tokens"] for e in validation)}
        (staging / MANIFEST_NAME).write_text(dumps(manifest))
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if storage.uses_real_s3(str(output), backend):
        storage.upload(target, str(output), backend)
    return manifest


def build_manifest(entries: list[dict], location: str, job: UnitJob, info, tokenizer, files, units,
                   unit_bytes: int) -> dict:
    return {
        "format": FORMAT,
        "location": location,
        "seq_len": job.seq_len,
        "dtype": job.dtype,
        "vocab_size": info.vocab_size,
        "eot_id": info.eot_id,
        "num_sequences": sum(e["sequences"] for e in entries),
        "num_tokens": sum(e["tokens"] for e in entries),
        "documents": sum(e["documents"] for e in entries),
        "input_tokens": sum(e["input_tokens"] for e in entries),
        "dropped_tokens": sum(e["dropped_tokens"] for e in entries),
        "input": {"files": len(files), "bytes": sum(Path(f).stat().st_size for f in files),
                  "fingerprint": files_fingerprint(files), "work_units": len(units), "unit_bytes": unit_bytes},
        "tokenizer": {"folder": TOKENIZER_FOLDER, "sha256": info.sha256, "vocab_size": info.vocab_size,
                      "eot_token": info.eot_token, "source": "trained on the input (byte-level BPE)"
                      if tokenizer is None else f"given: {Path(tokenizer).name}"},
        "shards": entries,
    }


def course_dataset(seq_len: int = 128, vocab_size: int = 512, max_bytes: float | None = None, workers: int = 1,
                   cache_dir: str | os.PathLike = COURSE_CACHE, progress: bool = False,
                   validation_units: int = 0) -> Path:
    """The course's dataset (the shipped corpus, or a slice of it), prepared once into `cache_dir`; its folder.

    The folder name carries the settings and a fingerprint of the corpus files, so a changed corpus or
    setting prepares a new dataset, and a second call (from any notebook) returns at once."""
    files = corpus_slice(max_bytes)
    held_out = f"-H{validation_units}" if validation_units else ""
    folder = Path(cache_dir) / f"course-L{seq_len}-V{vocab_size}{held_out}-{files_fingerprint(files)}"
    if (folder / MANIFEST_NAME).is_file():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(folder.parent / f".{folder.name}.lock"):
        if not (folder / MANIFEST_NAME).is_file():  # another process may have made it while we waited
            prepare(files, folder, seq_len, vocab_size, workers, progress=progress, validation_units=validation_units)
    return folder
