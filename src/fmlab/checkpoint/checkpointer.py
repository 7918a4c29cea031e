"""Training checkpoints: sharded with torch.distributed.checkpoint, committed atomically, resumed exactly.

    from fmlab.checkpoint import Checkpointer, export_hf
    ckpt = Checkpointer("/opt/ml/checkpoints", keep_last=3)
    ckpt.save(step, model, optimizer, scheduler, sampler)   # every rank calls it: it is a collective
    ckpt.save(step, model, optimizer, asynchronous=True)    # returns once the state is copied to CPU memory
    ckpt.finish()                                            # end of run: commit the save still in flight
    state = ckpt.resume(model, optimizer, scheduler, sampler)  # the newest complete checkpoint, or None
    export_hf(model, "/opt/ml/model")                        # config.json + model.safetensors for transformers

One checkpoint is one folder; each rank writes only its own shards, whatever the layout (DDP, FSDP2, TP):
```
step_00000020/
  .metadata, __0_0.distcp, __1_0.distcp   model and optimizer tensors (DCP, each rank its own shards)
  trainer.json                            step, optimizer hyper-parameters, LR scheduler, caller's extras
  rank_00000.json, rank_00001.json        each rank's data position (sampler state) and RNG states
  COMPLETE                                written last: every file with its size
.incomplete-step_00000030/                a save in progress, or killed mid-way: never picked
corrupt-step_00000040/                    complete once, damaged since (e.g. a partial S3 sync): set aside, kept
```
A save goes to `.incomplete-step_N`, is renamed to `step_N` once every rank has written, and only then gets its
COMPLETE marker; a job killed mid-save resumes from the previous checkpoint. `resume` loads the newest complete
checkpoint and stops with a clear error if its files do not check out; `newest_intact` (intact.py, what `fmlab.train
--resume auto` uses) instead sets such a damaged checkpoint aside and falls back to the newest one that checks out. Older checkpoints beyond `keep_last` are deleted only after a newer one
is complete. Nothing is ever deleted when a checkpoint fails to load.

Asynchronous saves (`save(..., asynchronous=True)` or `save_async`, built on DCP's `async_save`): training
waits only while the tensors are copied to CPU memory (DCP's staging); a background thread writes the files
and, once every rank's write has finished, commits (rename, COMPLETE, pruning) over a gloo process group of its
own, so the training thread's collectives never interleave with the checkpoint's. The commit is the same as a
synchronous save's: a job killed mid-write leaves `.incomplete-step_N` and resumes from the previous checkpoint.
One save is in flight at a time (the next save waits for it); call `finish()` before the run ends.

Safety: loading never unpickles arbitrary objects. Tensors are read with `torch.load(weights_only=True)`
(DCP's reader), the DCP index (`.metadata`) with an unpickler that admits only DCP's own metadata classes, and
everything else is JSON. A state that is not all tensors is refused at save time rather than pickled.
Run the tests: `.venv/bin/pytest tests/train/test_checkpoint.py`.
"""

from __future__ import annotations

import json
import shutil
import time
import warnings
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch.distributed.checkpoint as dcp  # dcp.save/async_save looked up per call: fmlab.train.faults wraps them
from torch.distributed.checkpoint.api import CheckpointException
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

from fmlab.checkpoint.folder import (
    INCOMPLETE,
    MARKER,
    PREFIX,
    TRAINER_FILE,
    complete_checkpoints,
    latest,
    step_of,
    verify,
)
from fmlab.checkpoint.format import (
    CheckpointError,
    json_ready,
    quiet_single_process,
    require_tensors,
    restore_groups,
    rng_state,
    safe_reader,
    set_rng_state,
    write_json,
)
from fmlab.checkpoint.ranks import barrier as _barrier
from fmlab.checkpoint.ranks import dist_or_none as _dist
from fmlab.checkpoint.ranks import from_rank0
from fmlab.checkpoint.ranks import gather as _gather
from fmlab.checkpoint.ranks import node_leader as _node_leader
from fmlab.checkpoint.ranks import rank as _rank
from fmlab.checkpoint.ranks import world as _world

# ---------------------------------------------------------------- save and load


@dataclass(eq=False)
class PendingSave:
    """An asynchronous save in flight: its tensors are already copied, its files are being written.

    `path` is the folder it will have once committed (until then it is `.incomplete-step_N`). Times are
    `time.perf_counter()` values: `started`/`returned` bound the stall of the training step that saved (waiting
    for an earlier save still in flight, the state dict, JSON files, and DCP's copy of the tensors to CPU
    memory); `written` is when every rank's files were written, `committed` when COMPLETE was written and old
    checkpoints pruned. `result()` waits for the commit on this rank only; use `Checkpointer.wait()`.
    """

    step: int
    path: Path
    started: float
    returned: float = 0.0
    written: float | None = None
    committed: float | None = None
    future: Future | None = field(default=None, repr=False)

    @property
    def stall_seconds(self) -> float:
        return self.returned - self.started

    @property
    def total_seconds(self) -> float | None:
        """From the call to the commit: what a synchronous save would have stalled (less the overlap)."""
        return None if self.committed is None else self.committed - self.started

    def done(self) -> bool:
        return self.future is None or self.future.done()

    def result(self, timeout: float | None = None) -> Path:
        return self.path if self.future is None else self.future.result(timeout)

    def __fspath__(self) -> str:
        return str(self.path)


def _write_files(folder: Path, files: dict[str, Any]) -> None:
    """This rank's JSON files of a save, written once its tensors are (they are part of what is committed)."""
    for name, content in files.items():
        write_json(folder / name, content)


def _quiet_background_saves() -> None:
    """DCP's writer thread warns, for a world of 1, that it assumes one process: that is what we asked for.
    (A `catch_warnings` block cannot reach a thread that runs after it has exited, hence a global filter.)"""
    warnings.filterwarnings("ignore", message="torch.distributed is disabled")


@dataclass
class Checkpointer:
    """Save, prune and resume the checkpoints of one training run in `folder`."""

    folder: str | Path
    keep_last: int = 3
    saved: list[Path] = field(default_factory=list)
    pending: PendingSave | None = field(default=None, init=False, repr=False)  # the async save in flight
    _group: Any = field(default=None, init=False, repr=False)  # gloo group of the background collectives
    _worker: ThreadPoolExecutor | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.folder = Path(self.folder)
        if self.keep_last < 1:
            raise CheckpointError(f"keep_last must be at least 1 (the checkpoint you resume from), got {self.keep_last}")

    def path_for(self, step: int) -> Path:
        return self.folder / f"{PREFIX}{step:08d}"

    def save(self, step: int, model, optimizer, scheduler=None, sampler=None, extra: dict | None = None, *,
             asynchronous: bool = False) -> Path:
        """Write a checkpoint of this step on every rank, commit it atomically, prune old ones; returns its path.

        `asynchronous=True` returns once the state is copied to CPU memory and finishes in the background
        (`save_async`; call `finish()` at the end of the run); the path returned is the folder the checkpoint
        will have once committed. Either way, a save still in flight is committed first.
        """
        if asynchronous:
            return self.save_async(step, model, optimizer, scheduler, sampler, extra).path
        self.wait()  # checkpoints commit in step order
        begun = self._begin(step, model, optimizer, scheduler, sampler, extra)
        if begun is None:
            return self.path_for(step)
        tensors, tmp, files = begun
        with quiet_single_process():
            dcp.save(tensors, storage_writer=dcp.FileSystemWriter(tmp), no_dist=_dist() is None)
        _write_files(tmp, files)
        return self._commit(step, tmp)

    def save_async(self, step: int, model, optimizer, scheduler=None, sampler=None,
                   extra: dict | None = None) -> PendingSave:
        """Start a checkpoint of this step; return as soon as its tensors are copied to CPU memory.

        Every rank calls it at the same step (a collective). DCP's `async_save` copies ("stages") this rank's
        tensors before it returns, so the next optimizer step cannot change what is saved; a background thread
        then writes the shards and, once every rank's write has finished, commits exactly as `save` does
        (rename, COMPLETE, pruning) over a gloo process group of its own. Until then the folder is
        `.incomplete-step_N`, never picked: a job killed meanwhile resumes from the previous checkpoint. One
        save is in flight at a time: the next `save`/`save_async` first waits for this one, and `finish()`
        (at the end of the run, before exporting) waits for the last. Costs one CPU copy of this rank's state.
        """
        started = time.perf_counter()
        self.wait()
        pending = PendingSave(step, self.path_for(step), started)
        begun = self._begin(step, model, optimizer, scheduler, sampler, extra)
        if begun is None:  # already complete on disk
            pending.returned = pending.written = pending.committed = time.perf_counter()
            return pending
        tensors, tmp, files = begun
        group = self._checkpoint_group()
        _quiet_background_saves()
        response = dcp.async_save(tensors, storage_writer=dcp.FileSystemWriter(tmp), process_group=group,
                                  no_dist=_dist() is None)
        staging = getattr(response, "staging_completion", None)
        if staging is not None:  # a stager that copies in the background: training must not go on before it ends
            staging.result()
        upload = getattr(response, "upload_completion", response)
        if self._worker is None:
            self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fmlab-checkpoint")
        pending.future = self._worker.submit(self._commit_when_written, pending, upload, tmp, files, group)
        pending.returned = time.perf_counter()
        self.pending = pending
        return pending

    def wait(self) -> Path | None:
        """Block until the save in flight, if any, is committed; returns its path (None if there was none).

        Every rank calls it at the same point. Raises CheckpointError if that save failed: its folder stays
        `.incomplete-step_N` and the previous complete checkpoint is what resumes."""
        pending, self.pending = self.pending, None
        if pending is None:
            return None
        try:
            return pending.result()
        except CheckpointError:
            raise
        except (Exception, CheckpointException) as e:  # CheckpointException is a BaseException
            failures = getattr(e, "failures", None)
            reason = ("; ".join(f"rank {r}: {type(x).__name__}: {x}" for r, (x, _) in failures.items())
                      if failures else f"{type(e).__name__}: {e}")
            raise CheckpointError(f"the asynchronous save of step {pending.step} failed: {reason.strip()[:400]}. It "
                                  f"was not committed (it stays {INCOMPLETE}{pending.path.name}); the previous "
                                  f"complete checkpoint is what resumes") from e

    def finish(self) -> Path | None:
        """End of a run: commit the save in flight (`wait`), then stop the background thread and release the
        checkpoint process group. Every rank calls it; the Checkpointer can save again afterwards."""
        try:
            return self.wait()
        finally:
            if self._worker is not None:
                self._worker.shutdown(wait=True)
                self._worker = None
            d = _dist()
            if self._group is not None and d is not None:
                _barrier()  # every rank's background commit has ended before the group goes away
                d.destroy_process_group(self._group)
            self._group = None

    def _checkpoint_group(self):
        """The gloo group the background write and commit use (None in a world of 1). A group of its own, since
        collectives issued from two threads on one group would interleave; created on first use by every rank."""
        d = _dist()
        if d is None:
            return None
        if self._group is None:
            try:
                self._group = d.new_group(backend="gloo")
            except Exception as e:
                raise CheckpointError(f"asynchronous checkpoints need a gloo process group for their background "
                                      f"collectives and this backend could not create one ({type(e).__name__}: "
                                      f"{e}): save synchronously (asynchronous=False)") from e
        return self._group

    def _commit_when_written(self, pending: PendingSave, upload: Future, tmp: Path, files: dict, group) -> Path:
        """The background thread: wait for DCP's write (done on every rank once it returns), write the JSON
        files taken at the saving step, then commit."""
        upload.result()
        _write_files(tmp, files)
        pending.written = time.perf_counter()
        path = self._commit(pending.step, tmp, group)
        pending.committed = time.perf_counter()
        return path

    def _begin(self, step: int, model, optimizer, scheduler, sampler, extra) -> tuple[dict, Path, dict] | None:
        """Collect the state and prepare `.incomplete-step_N`; returns the tensors to write, that folder and the
        JSON files to write after the tensors (name -> content, taken now), or None when this step is already
        safely on disk (e.g. the last periodic save equals the final one)."""
        final, tmp = self.path_for(step), self.folder / f"{INCOMPLETE}{PREFIX}{step:08d}"
        rank, world = _rank(), _world()
        # Rank 0's disk decides: on a multi-instance job each instance has its own /opt/ml/checkpoints and only
        # algo-1 holds the COMPLETE marker, so a local check would send the ranks different ways and hang them.
        if from_rank0((final / MARKER).is_file()):
            return None
        model_state, optim_state = get_state_dict(model, optimizer)
        tensors = {"model": model_state, "optim": optim_state["state"]}
        require_tensors(tensors, "state")
        trainer = json_ready({"step": step, "world_size": world, "saved_at": time.time(),
                               "param_groups": optim_state["param_groups"],
                               "scheduler": scheduler.state_dict() if scheduler is not None else None,
                               "extra": extra or {}}, "trainer")
        per_rank = json_ready({"rank": rank, "sampler": sampler.state_dict() if sampler is not None else None,
                                "rng": rng_state()}, f"rank {rank}")
        if _node_leader():
            shutil.rmtree(tmp, ignore_errors=True)  # leftovers of a save that was killed
            if final.exists():
                shutil.rmtree(final)  # a folder without its marker was never complete
            tmp.mkdir(parents=True, exist_ok=True)
        _barrier()
        files = {f"rank_{rank:05d}.json": per_rank, **({TRAINER_FILE: trainer} if rank == 0 else {})}
        return tensors, tmp, files

    def _commit(self, step: int, tmp: Path, group=None) -> Path:
        """Once every rank has written `tmp`: rename it to step_N, write COMPLETE, prune. A collective over
        `group` (the default group for a synchronous save, the checkpoint group in the background)."""
        final, rank, world = self.path_for(step), _rank(), _world()
        mine = {p.name: p.stat().st_size for p in tmp.iterdir()
                if p.name.startswith(f"__{rank}_") or p.name == f"rank_{rank:05d}.json"
                or (rank == 0 and p.name in (".metadata", TRAINER_FILE))}
        files = {k: v for part in _gather(mine, group) for k, v in part.items()}
        _barrier(group)
        if _node_leader() and tmp.exists():
            try:
                tmp.rename(final)  # atomic on one file system
            except FileNotFoundError:
                pass  # another node's leader renamed the shared folder first
        _barrier(group)
        doomed: list[str] = []
        if rank == 0:
            write_json(final / MARKER, {"step": step, "world_size": world, "files": files}, atomic=True)
            doomed = self._to_prune(step)
        doomed = _gather(doomed, group)[0]  # rank 0's decision, so every machine prunes its own copy alike
        if _node_leader():
            for name in doomed:
                shutil.rmtree(self.folder / name, ignore_errors=True)
        _barrier(group)
        self.saved.append(final)
        return final

    def _to_prune(self, newest: int) -> list[str]:
        """Folders to delete once checkpoint `newest` is complete: complete ones beyond keep_last, and saves
        that were killed before it (they hold nothing that was ever complete)."""
        done = complete_checkpoints(self.folder)
        names = [info.path.name for info in done[:-self.keep_last]]
        for p in self.folder.glob(f"{INCOMPLETE}{PREFIX}*"):
            step = step_of(Path(p.name[len(INCOMPLETE):]))
            if step is not None and step < newest:
                names.append(p.name)
        return names

    def load(self, path: str | Path, model, optimizer, scheduler=None, sampler=None) -> dict:
        """Restore everything from checkpoint `path` in place; returns trainer.json (step, extra, ...)."""
        info = verify(path)
        trainer = json.loads((info.path / TRAINER_FILE).read_text())
        model_state, optim_state = get_state_dict(model, optimizer)
        tensors = {"model": model_state, "optim": optim_state["state"]}
        reader = safe_reader(info.path)
        reader.read_metadata()  # the restricted unpickler: a refusal surfaces here, not wrapped by DCP
        try:
            with quiet_single_process():
                dcp.load(tensors, storage_reader=reader, no_dist=_dist() is None)
        except CheckpointError:
            raise
        except Exception as e:  # DCP wraps per-rank failures; say which checkpoint and what to do
            raise CheckpointError(f"could not load {info.path}: {type(e).__name__}: {str(e).strip()[:400]}. Nothing "
                                  f"was deleted; check the model and layout match the checkpointed run, or resume "
                                  f"from an earlier checkpoint") from e
        optim_state = {"state": tensors["optim"],
                       "param_groups": restore_groups(trainer["param_groups"], optim_state["param_groups"])}
        set_state_dict(model, optimizer, model_state_dict=tensors["model"], optim_state_dict=optim_state)
        if scheduler is not None and trainer.get("scheduler") is not None:
            scheduler.load_state_dict(trainer["scheduler"])
        rank, world = _rank(), _world()
        rank_file = info.path / f"rank_{rank:05d}.json"
        if world == info.world_size:
            per_rank = json.loads(rank_file.read_text())
            set_rng_state(per_rank["rng"])
        else:
            # Resharding onto a different world: model and optimizer reshard (DCP), the data position of the
            # sampler is taken from rank 0 when the sampler can re-split it, and RNG streams start afresh.
            per_rank = json.loads((info.path / "rank_00000.json").read_text())
            if rank == 0:
                warnings.warn(f"{info.path} was saved by {info.world_size} processes and is loaded by {world}: model "
                              f"and optimizer are resharded; data position from rank 0; RNG not restored", stacklevel=2)
        if sampler is not None and per_rank.get("sampler") is not None:
            sampler.load_state_dict(per_rank["sampler"])
        return trainer

    def resume(self, model, optimizer, scheduler=None, sampler=None) -> dict | None:
        """Load the newest complete checkpoint of `folder`, if any; returns its trainer.json or None."""
        path = latest(self.folder)
        if path is None:
            return None
        return self.load(path, model, optimizer, scheduler, sampler)
