"""Checks for labs/lab_08_checkpoint_recovery.ipynb: a sharded, atomic checkpoint written by hand, the newest
complete one found again, and an exact resume, each attacked with real faults on 2 gloo processes.

    lab08.check_save(save_checkpoint, work)             # ex1: rank 1 SIGKILLed mid-write, rank 0 after its rename
    lab08.check_latest(latest_checkpoint, work)         # ex2: truncated, unmarked, missing, staged checkpoints
    lab08.check_resume(train, work, latest_checkpoint)  # ex3: killed while saving and mid-training; losses
    lab08.summary()                                     # raises LabIncomplete while any check fails

The run in one process is forked (warm: the parent imports once what the children need) in about 0.1 s; the
solved lab's checks take about 5 s on 2 cores, with 11 runs of 2 processes.

The given pieces of the lab live here, so that the notebook and its checks cannot drift apart: the model,
optimizer and LR schedule (`make_training`), the data (`batch`: the data position is the step) and the
checkpoint format the checks read (`PREFIX`, `MARKER`, `problems`). `reference_train`, `reference_save` and
`reference_latest` are the lab's own solution: the uninterrupted run the resumed losses are compared with.

Every run forks 2 processes from this one with the lab harness (`fmlab.labs.world`: its own process group,
one thread, gloo on 127.0.0.1 with a 20 s collective timeout, stdout/stderr in `<logs>/rank<r>.log`). A fault
is injected inside the victim through hooks on `batch` (which step runs), `torch.save` (write half of the
bytes, then SIGKILL itself) and `os.rename`/`os.replace` (rename a folder, then SIGKILL itself). When a process
dies the other is killed at once, as torchrun's agent tears a job down; a run past WORLD_TIMEOUT is killed whole.
Resumed losses are compared exactly (tolerance 0): fixed seeds, one thread and a 2-rank all-reduce on CPU make
every step reproducible bit for bit.
"""

from __future__ import annotations

import io
import json
import math
import os
import shutil
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.distributed as dist

from fmlab.labs import Lab, fresh_folder, world
from fmlab.labs.world import World

LAB = Lab("lab 08", ["ex1_atomic_save", "ex2_latest_checkpoint", "ex3_resume"])

# The run every check trains: 12 steps on 2 processes, a checkpoint every 4 steps.
WORLD = 2
STEPS = 12
EVERY = 4
SEED = 0
FEATURES, HIDDEN, BATCH = 8, 32, 16
LR, WARMUP = 0.03, 4
# The checkpoint format the checks read: final folders step_<N> (any zero padding), a JSON marker listing
# {"files": {name: size in bytes}}. A staging folder is anything not named step_<N>, e.g. .incomplete-step_<N>.
PREFIX = "step_"
MARKER = "COMPLETE"
# Bounds on every run: the whole world, and one collective waiting for a peer.
WORLD_TIMEOUT = 60.0
COLLECTIVE_TIMEOUT = 20.0
SLOW_SAVE = 0.2  # seconds rank 1 waits before each torch.save in exercise 1: a slow writer, as ranks are


# ---------------------------------------------------------------- the given pieces: model, schedule, data


def lr_factor(step: int) -> float:
    """The LR schedule: linear warm-up over WARMUP steps, then a cosine decay to 10% at STEPS."""
    warm = min(1.0, (step + 1) / WARMUP)
    return warm * (0.1 + 0.45 * (1 + math.cos(math.pi * min(step, STEPS) / STEPS)))


def make_training():
    """The model, optimizer and LR schedule a run starts from: the same initial weights on every rank."""
    torch.manual_seed(SEED)
    model = torch.nn.Sequential(torch.nn.Linear(FEATURES, HIDDEN), torch.nn.Tanh(), torch.nn.Dropout(0.1),
                                torch.nn.Linear(HIDDEN, 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_factor)
    return model, optimizer, scheduler


def batch(step: int, rank: int, world_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Rank `rank`'s batch of step `step` (from 1): the data position is the step, so a step reads the same
    data whenever it runs, like a resumable sampler restored to its position."""
    g = torch.Generator().manual_seed(SEED * 1_000_003 + step * world_size + rank)
    x = torch.randn(BATCH, FEATURES, generator=g)
    target = torch.linspace(-1.0, 1.0, FEATURES).unsqueeze(1)
    return x, torch.sin(x @ target) + 0.05 * torch.randn(BATCH, 1, generator=g)


# ---------------------------------------------------------------- the format, and the lab's own solution


def step_of(path: Path) -> int | None:
    """N for a folder named step_N, else None (a staging folder, or anything else)."""
    name = Path(path).name
    if not name.startswith(PREFIX):
        return None
    try:
        return int(name[len(PREFIX):])
    except ValueError:
        return None


def problems(path: str | os.PathLike) -> list[str]:
    """Why a step_N folder is not a complete checkpoint ([] if it is): its MARKER must exist, list its files,
    and every listed file must have the size written in it."""
    path = Path(path)
    try:
        files = json.loads((path / MARKER).read_text())["files"]
        listed = {str(k): int(v) for k, v in files.items()}
    except FileNotFoundError:
        return [f"no {MARKER}"]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        return [f"{MARKER} unreadable ({type(e).__name__}): it must be JSON with \"files\": {{name: size}}"]
    if not listed:
        return [f"{MARKER} lists no files"]
    out = []
    for name, size in sorted(listed.items()):
        f = path / name
        if not f.is_file():
            out.append(f"{name} missing")
        elif f.stat().st_size != size:
            out.append(f"{name} is {f.stat().st_size:,} bytes, {MARKER} says {size:,}")
    return out


def complete_steps(folder: str | os.PathLike) -> list[int]:
    """The steps of the complete checkpoints in `folder`, oldest first."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    return sorted(s for p in folder.iterdir() if p.is_dir() and (s := step_of(p)) is not None and not problems(p))


def reference_save(folder, step, model, optimizer, scheduler, rank, world_size) -> None:
    """The lab's solution to exercise 1 (every rank calls it)."""
    folder = Path(folder)
    stage, final = folder / f".incomplete-{PREFIX}{step:06d}", folder / f"{PREFIX}{step:06d}"
    stage.mkdir(parents=True, exist_ok=True)
    state = {"step": step, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
             "scheduler": scheduler.state_dict(), "rng": torch.get_rng_state()}
    torch.save(state, stage / f"rank{rank}.pt.tmp")
    os.replace(stage / f"rank{rank}.pt.tmp", stage / f"rank{rank}.pt")
    dist.barrier()
    if rank == 0:
        if final.exists():
            os.rename(final, folder / f"aside-{final.name}-{time.time_ns()}")
        os.rename(stage, final)
        files = {p.name: p.stat().st_size for p in sorted(final.glob("rank*.pt"))}
        (final / f"{MARKER}.tmp").write_text(json.dumps({"step": step, "world_size": world_size, "files": files}))
        os.replace(final / f"{MARKER}.tmp", final / MARKER)


def reference_latest(folder) -> Path | None:
    """The lab's solution to exercise 2: the complete step_N folder with the highest N, as a number."""
    folder = Path(folder)
    found = [p for p in folder.iterdir() if p.is_dir() and step_of(p) is not None and not problems(p)] \
        if folder.is_dir() else []
    return max(found, key=step_of) if found else None


def reference_train(folder, steps, rank, world_size, every=EVERY, save=None, resume=True, start=0) -> dict:
    """The lab's training loop with its solution to exercise 3. `save` replaces the save (exercise 1's check
    runs the learner's save in it); `resume=False, start=N` starts at step N from fresh weights, loading
    nothing: how a resumed run would go on saving, for a check of the save alone."""
    save = save or reference_save
    model, optimizer, scheduler = make_training()
    torch.manual_seed(1000 + rank)  # each rank its own dropout masks
    found = reference_latest(folder) if resume else None
    if found is not None:
        state = torch.load(found / f"rank{rank}.pt", weights_only=True)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        torch.set_rng_state(state["rng"])
        start = state["step"]
    losses = {}
    for step in range(start + 1, steps + 1):
        x, y = batch(step, rank, world_size)
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad /= world_size
        optimizer.step()
        scheduler.step()
        losses[step] = loss.item()
        if step % every == 0:
            save(folder, step, model, optimizer, scheduler, rank, world_size)
    return losses


# ---------------------------------------------------------------- running 2 processes, with faults


def _arm(faults: list[dict], rank: int, logs: Path) -> None:
    """Install this rank's faults inside its own process: hooks on batch, torch.save, os.rename, os.replace."""
    mine = [f for f in faults if f["rank"] == rank]
    if not mine:
        return
    now = {"step": 0}
    real_batch, real_save = globals()["batch"], torch.save

    def die(what: str) -> None:
        (logs / f"rank{rank}.fault").write_text(what)
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)

    def hooked_batch(step, rank_, world_size):
        now["step"] = step
        if any(f["kind"] == "mid-training" and f["step"] == step for f in mine):
            die(f"rank {rank} SIGKILLed at the start of step {step}")
        return real_batch(step, rank_, world_size)

    def hooked_save(obj, f, *args, **kwargs):
        for fault in mine:
            if fault["kind"] == "slow-save":
                time.sleep(fault["seconds"])
        if any(x["kind"] == "mid-write" and x["step"] == now["step"] for x in mine):
            buffer = io.BytesIO()
            real_save(obj, buffer, *args, **kwargs)
            data = buffer.getvalue()
            half = data[: len(data) // 2]
            if hasattr(f, "write"):
                f.write(half)
                f.flush()
                name = getattr(f, "name", "a file object")
            else:
                Path(f).write_bytes(half)
                name = f"{Path(f).parent.name}/{Path(f).name}"
            die(f"rank {rank} SIGKILLed writing {name} of step {now['step']} ({len(half):,} of {len(data):,} bytes "
                "written)")
        return real_save(obj, f, *args, **kwargs)

    def renamer(real):
        def hooked(src, dst, *args, **kwargs):
            result = real(src, dst, *args, **kwargs)
            if os.path.isdir(dst) and any(x["kind"] == "after-rename" and x["step"] == now["step"] for x in mine):
                die(f"rank {rank} SIGKILLed right after renaming {Path(src).name} to {Path(dst).name} at step "
                    f"{now['step']}")
            return result
        return hooked

    globals()["batch"] = hooked_batch  # what lab08.batch(...) finds in this process from now on
    torch.save = hooked_save
    os.rename, os.replace = renamer(os.rename), renamer(os.replace)


_WARM: list[bool] = []


def _warm_up() -> None:
    """Import here, once, what the first optimizer step and torch.save/load import lazily (torch._dynamo among
    them: seconds), so that every forked process inherits it instead of importing it again."""
    if _WARM:
        return
    with torch.random.fork_rng():
        model, optimizer, scheduler = make_training()
        x, y = batch(1, 0, 1)
        torch.nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
        scheduler.step()
        buffer = io.BytesIO()
        torch.save({"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict()}, buffer)
        buffer.seek(0)
        torch.load(buffer, weights_only=True)
    _WARM.append(True)


def run_world(fn: Callable[[int, int], object], logs: str | os.PathLike, faults: list[dict] | None = None,
              timeout: float = WORLD_TIMEOUT) -> World:
    """Run fn(rank, world_size) on WORLD forked gloo processes (the lab harness), the faults armed in each."""
    _warm_up()
    faults = list(faults or [])
    return world.run_world(fn, logs, WORLD, timeout, prepare=lambda rank, logs_: _arm(faults, rank, logs_),
                           collective_timeout=COLLECTIVE_TIMEOUT)


def listing(folder: str | os.PathLike) -> str:
    """What a checkpoint folder holds, one line per sub-folder: its files and whether it is complete."""
    folder = Path(folder)
    if not folder.is_dir():
        return f"{folder}: does not exist"
    lines = []
    for d in sorted(p for p in folder.iterdir() if p.is_dir()):
        files = ", ".join(f"{f.name} {f.stat().st_size:,} B" for f in sorted(d.iterdir()) if f.is_file())
        if step_of(d) is None:
            state = "not named step_N: never a checkpoint"
        else:
            found = problems(d)
            state = "complete" if not found else "incomplete: " + "; ".join(found)
        lines.append(f"  {d.name}/  [{state}]  {files or 'no files'}")
    return "\n".join([f"{folder}:"] + (lines or ["  (empty)"]))


def show_disk(folder: str | os.PathLike) -> None:
    """Print `listing` of every checkpoints folder under `folder` (what the checks' attacks left)."""
    found = sorted(Path(folder).rglob("checkpoints")) if Path(folder).is_dir() else []
    print("\n".join(listing(f) for f in found) if found else f"no checkpoints under {folder} (the checks write them)")


_REFERENCE: dict[str, dict] = {}


def reference(work) -> dict:
    """The uninterrupted run of the lab's solution (cached): each rank's {step: loss}, and its checkpoints."""
    folder = Path(work) / "reference"
    cached = _REFERENCE.get(str(folder))
    if cached and complete_steps(cached["checkpoints"]) == list(range(EVERY, STEPS + 1, EVERY)):
        return cached
    shutil.rmtree(folder, ignore_errors=True)
    checkpoints = folder / "checkpoints"
    world = run_world(lambda rank, ws: reference_train(checkpoints, STEPS, rank, ws), folder / "logs")
    if not world.ok:
        raise RuntimeError(f"the lab's own reference run failed: {world.failure()}")
    _REFERENCE[str(folder)] = {"losses": [{int(k): v for k, v in r.items()} for r in world.results],
                               "checkpoints": checkpoints}
    return _REFERENCE[str(folder)]


def _name(step: int | None) -> str:
    return "nothing (start over)" if step is None else f"{PREFIX}{step:06d}"


# ---------------------------------------------------------------- exercise 1: the atomic save


def _save_run(save_checkpoint, base: Path, scenario: str, label: str, start: int, faults: list[dict]):
    folder = base / scenario / "checkpoints"

    def fn(rank, world_size):
        return reference_train(folder, STEPS, rank, world_size, save=save_checkpoint, resume=False, start=start)

    return folder, run_world(fn, base / scenario / f"logs-{label}", faults)


def _save_problems(save_checkpoint, base: Path) -> tuple[list[str], list[str]]:
    slow = {"rank": 1, "kind": "slow-save", "seconds": SLOW_SAVE}
    rows: list[str] = []
    # 1. rank 1 writes slowly, and is killed half-way through its file of step 8
    folder, world = _save_run(save_checkpoint, base, "killed-writing", "attack", 0,
                              [slow, {"rank": 1, "kind": "mid-write", "step": 8}])
    if world.unanswered():
        return ["not answered yet: save_checkpoint still raises NotImplementedError"], rows
    if not world.fault:
        return [f"the run failed before the attack at step 8: {world.failure()}" if world.failure() else
                "rank 1 was to be killed while it wrote its file of step 8, but it never called torch.save then: "
                "every rank writes its own file(s) with torch.save"], rows
    done = complete_steps(folder)
    if done != [4]:
        why = (f": {_name(8)} counts as complete although rank 1 never finished its file; commit only after a "
               "barrier, once every rank has written" if 8 in done else "")
        return [f"{world.fault}; afterwards the complete checkpoints on disk are "
                f"{[_name(s) for s in done] or 'none'}, expected only {_name(4)}{why}", listing(folder)], rows
    marker = json.loads((folder / _name(4) / MARKER).read_text())
    if len(marker["files"]) < WORLD:
        return [f"{_name(4)}/{MARKER} lists {len(marker['files'])} file(s): every rank's file must be in it, so wait "
                "(dist.barrier) until all ranks have written before rank 0 commits", listing(folder)], rows
    staged = [d.name for d in folder.iterdir() if d.is_dir() and step_of(d) is None]
    rows.append(f"  {world.fault}: {_name(4)} is still the newest complete checkpoint"
                + (f"; {', '.join(staged)} is left, never counted" if staged else ""))
    # 2. the same run started again from step 4 saves step 8 over that leftover
    again = _save_run(save_checkpoint, base, "killed-writing", "rerun", 4, [slow])[1]
    if not again.ok or complete_steps(folder) != [4, 8, 12]:
        return [f"after {world.fault}, a run started again from step 4 could not save steps 8 and 12 over what was "
                f"left: {again.failure() or 'complete now: ' + str([_name(s) for s in complete_steps(folder)])}. A "
                "leftover staging folder of the same step may already exist", listing(folder)], rows
    # 3. rank 0 is killed right after its rename of step 8, before the marker
    folder, world = _save_run(save_checkpoint, base, "killed-committing", "attack", 0,
                              [{"rank": 0, "kind": "after-rename", "step": 8}])
    if not world.fault:
        return [f"the run failed before the attack at step 8: {world.failure()}" if world.failure() else
                "rank 0 was to be killed right after it renamed step 8's staging folder, but it renamed no folder: "
                f"commit by renaming the staging folder to {_name(8)} (os.rename or os.replace), then write "
                f"{MARKER}"], rows
    done = complete_steps(folder)
    if done not in ([4], [4, 8]):
        return [f"{world.fault}; afterwards the complete checkpoints are {[_name(s) for s in done] or 'none'}, "
                f"expected {_name(4)} (and {_name(8)} only if its {MARKER} was already written)",
                listing(folder)], rows
    rows.append(f"  {world.fault}: " + (f"{_name(8)} has no {MARKER}, so {_name(4)} is the newest complete one"
                                         if done == [4] else f"{_name(8)} was already complete"))
    again = _save_run(save_checkpoint, base, "killed-committing", "rerun", 4, [])[1]
    if not again.ok or complete_steps(folder) != [4, 8, 12]:
        return [f"after {world.fault}, a run started again from step 4 could not save steps 8 and 12: "
                f"{again.failure() or 'complete now: ' + str([_name(s) for s in complete_steps(folder)])}. The "
                f"killed commit left {_name(8)} without {MARKER}: set it aside (or remove it) before renaming",
                listing(folder)], rows
    rows.append("  both runs started again from step 4 saved steps 8 and 12 over those leftovers")
    return [], rows


SAVE_HINT = ("each rank writes its file(s) into a staging folder (torch.save to a temporary name, then os.replace), "
             "dist.barrier(), then rank 0 renames the staging folder to step_N and writes COMPLETE, listing every "
             "file with its size, last")


def check_save(save_checkpoint, work) -> bool:
    ex = "ex1_atomic_save"
    if not callable(save_checkpoint):
        return LAB.report(ex, False, "give the function save_checkpoint itself (no parentheses)")
    base = fresh_folder(work, "ex1")
    out, rows = _save_problems(save_checkpoint, base)
    if out:
        detail = f"\n{out[1]}" if len(out) > 1 else ""
        return LAB.report(ex, False, f"{out[0]}. Hint: {SAVE_HINT}{detail}")
    return LAB.report(ex, True, "the save survived both kills (the losses of a resume are exercise 3's):\n"
                      + "\n".join(rows))


# ---------------------------------------------------------------- exercise 2: the newest complete checkpoint


def _truncate(path: Path) -> None:
    with open(path, "r+b") as f:
        f.truncate(path.stat().st_size // 2)


# (what happened, the damage: (action, step, file or new name), the step (or folder name) expected, or None)
DAMAGE = [
    ("three intact checkpoints", [], 12),
    ("step 12's rank1.pt cut to half its size (a partial copy from S3)", [("cut", 12, "rank1.pt")], 8),
    (f"step 12 without its {MARKER} (killed before the marker)", [("unmark", 12, None)], 8),
    (f"step 12's {MARKER} empty (its upload cut short)", [("empty-marker", 12, None)], 8),
    ("step 12's rank0.pt missing", [("delete", 12, "rank0.pt")], 8),
    ("a save of step 16 killed mid-way (.incomplete-step_000016)", [("staged", 16, None)], 12),
    (f"step 12's rank1.pt cut and step 8 without {MARKER}", [("cut", 12, "rank1.pt"), ("unmark", 8, None)], 4),
    ("every checkpoint damaged", [("cut", 12, "rank1.pt"), ("unmark", 8, None), ("delete", 4, "rank1.pt")], None),
    ("folders named step_9 and step_10 (no zero padding): 10 is newer, though 'step_10' < 'step_9' as text",
     [("rename", 8, "step_9"), ("rename", 12, "step_10")], "step_10"),
    ("an empty folder (a job's first start)", [("empty", 0, None)], None),
    ("a folder that does not exist yet", [("missing", 0, None)], None),
]


def _damaged(template: Path, folder: Path, actions) -> None:
    shutil.copytree(template, folder)
    for action, step, file in actions:
        d = folder / _name(step)
        if action == "cut":
            _truncate(d / file)
        elif action == "unmark":
            (d / MARKER).unlink()
        elif action == "empty-marker":
            (d / MARKER).write_text("")
        elif action == "delete":
            (d / file).unlink()
        elif action == "staged":
            staged = folder / f".incomplete-{_name(step)}"
            staged.mkdir()
            shutil.copy2(folder / _name(12) / "rank0.pt", staged / "rank0.pt")
        elif action == "rename":  # file: the new name
            d.rename(folder / file)
        elif action == "empty":
            shutil.rmtree(folder)
            folder.mkdir()
        elif action == "missing":
            shutil.rmtree(folder)


def check_latest(latest_checkpoint, work) -> bool:
    ex = "ex2_latest_checkpoint"
    if not callable(latest_checkpoint):
        return LAB.report(ex, False, "give the function latest_checkpoint itself (no parentheses)")
    template = reference(work)["checkpoints"]
    base = fresh_folder(work, "ex2")
    wrong, rows = [], []
    for i, (what, actions, want) in enumerate(DAMAGE):
        folder = base / f"case{i}" / "checkpoints"
        folder.parent.mkdir()
        _damaged(template, folder, actions)
        try:
            got = latest_checkpoint(folder)
        except NotImplementedError:
            return LAB.report(ex, False, "not answered yet: latest_checkpoint still raises NotImplementedError. Hint: "
                              f"go through the step_N folders, newest first; return the first whose {MARKER} exists "
                              "and whose listed files all have their sizes")
        except Exception as e:  # a bug in the answer is a failed case, not a crash
            wrong.append(f"with {what}, latest_checkpoint raised {type(e).__name__}: {e}")
            continue
        expected = None if want is None else folder / (want if isinstance(want, str) else _name(want))
        try:
            same = (got is None and expected is None) or (
                got is not None and expected is not None and Path(got).resolve() == expected.resolve())
            picked = "None" if got is None else Path(got).name
        except TypeError:
            wrong.append(f"with {what}, latest_checkpoint returned {got!r}: return the folder's path, or None")
            continue
        if same:
            rows.append(f"  {what}: {picked}")
        else:
            wrong.append(f"with {what}, latest_checkpoint picked {picked}, expected "
                         f"{'None' if expected is None else expected.name}")
    if wrong:
        return LAB.report(ex, False, f"{len(wrong)} of {len(DAMAGE)} cases differ: " + "; ".join(wrong)
                          + f". Hint: a checkpoint counts only if it is named step_N, its {MARKER} reads as JSON, and "
                          f"every file it lists exists with the listed size; take the highest N (as a number) that "
                          f"counts, or None. The cases are in {base}")
    return LAB.report(ex, True, "the newest complete checkpoint, whatever was damaged:\n" + "\n".join(rows))


# ---------------------------------------------------------------- exercise 3: resume, exactly


ATTACKS = [
    dict(name="killed-writing", faults=[{"rank": 1, "kind": "mid-write", "step": 8}], resume=(4,)),
    dict(name="killed-committing", faults=[{"rank": 0, "kind": "after-rename", "step": 8}], resume=(4, 8)),
    dict(name="killed-training", faults=[{"rank": 1, "kind": "mid-training", "step": 10}], resume=(8,)),
]


def _compare(got: list[dict], want: list[dict], first: int) -> tuple[list[str], float]:
    """Differences between each rank's losses (steps first..STEPS) and the reference's; the largest |diff|."""
    out, worst = [], 0.0
    for rank, (mine, ref) in enumerate(zip(got, want, strict=True)):
        steps = sorted(mine)
        if steps != list(range(first, STEPS + 1)):
            span = f"steps {steps[0]}-{steps[-1]}" if steps else "no steps"
            out.append(f"rank {rank} returned losses for {span}, expected steps {first}-{STEPS}: "
                       + ("it started over instead of resuming" if steps and steps[0] == 1 else
                          "resume at the step saved in the checkpoint, plus one"))
            continue
        for step in steps:
            diff = abs(mine[step] - ref[step])
            worst = max(worst, diff)
            if diff > 0 and len(out) < 2:
                out.append(f"rank {rank}, step {step}: loss {mine[step]:.9g}, the uninterrupted run's "
                           f"{ref[step]:.9g} (differs by {diff:.3g})")
    return out, worst


def _losses(world: World) -> list[dict]:
    try:
        return [{int(k): float(v) for k, v in r.items()} for r in world.results]
    except (AttributeError, TypeError, ValueError):
        raise ValueError("train must return this rank's losses as {step: loss}") from None


def _calling(train, folder: Path) -> Callable[[int, int], object]:
    return lambda rank, world_size: train(folder, STEPS, rank, world_size)


def _resume_problems(train, latest_checkpoint, base: Path, ref: dict) -> tuple[list[str], list[str], float]:
    rows: list[str] = []
    worst = 0.0
    for attack in ATTACKS:
        folder = base / attack["name"] / "checkpoints"
        world = run_world(_calling(train, folder), base / attack["name"] / "logs-attack", attack["faults"])
        if world.unanswered():
            return ["not answered yet: train still raises NotImplementedError. Hint: found = "
                    "latest_checkpoint(folder); if there is one, torch.load this rank's file, load the model, optimizer "
                    "and scheduler state dicts, torch.set_rng_state, and start = the saved step"], rows, worst
        if not world.fault:
            fault = attack["faults"][0]
            if world.failure():
                why = (f"the run failed before the attack ({fault['kind']} on rank {fault['rank']} at step "
                       f"{fault['step']}): {world.failure()}")
            else:
                why = (f"the attack {fault} never fired: keep the given loop (lab08.batch every step, save_checkpoint "
                       "every `every` steps) and exercise 1's save (torch.save on every rank, a folder rename)")
            return [why], rows, worst
        done = complete_steps(folder)
        truth = done[-1] if done else None
        if truth not in attack["resume"]:
            return [f"{world.fault}; the newest complete checkpoint on disk is then {_name(truth)}, expected "
                    f"{' or '.join(_name(s) for s in attack['resume'])}: exercise 1's save first",
                    listing(folder)], rows, worst
        if latest_checkpoint is not None:
            try:
                picked = latest_checkpoint(folder)
                picked = None if picked is None else Path(picked).name
            except Exception as e:
                picked = f"an error ({type(e).__name__}: {e})"
            if picked != (None if truth is None else _name(truth)):
                return [f"{world.fault}; your latest_checkpoint then picks {picked}, but the newest complete "
                        f"checkpoint is {_name(truth)}: exercise 2 first", listing(folder)], rows, worst
        again = run_world(_calling(train, folder), base / attack["name"] / "logs-resumed")
        if not again.ok:
            return [f"{world.fault}; the restarted run failed: {again.failure()}", listing(folder)], rows, worst
        try:
            got = _losses(again)
        except ValueError as e:
            return [str(e)], rows, worst
        diffs, diff = _compare(got, ref["losses"], truth + 1)
        if diffs:
            return [f"{world.fault}; resumed from {_name(truth)}: " + "; ".join(diffs)
                    + ". Restore the model, the optimizer (Adam's moments and step count), the LR scheduler and this "
                    "rank's RNG state (dropout), and continue at the saved step"], rows, worst
        worst = max(worst, diff)
        rows.append(f"  {world.fault} -> resumed from {_name(truth)}: steps {truth + 1}-{STEPS} equal the "
                    f"uninterrupted run's on both ranks")
    return [], rows, worst


def check_resume(train, work, latest_checkpoint=None) -> bool:
    """`latest_checkpoint`, if given, is also asked which checkpoint it picks after each attack."""
    ex = "ex3_resume"
    if not callable(train):
        return LAB.report(ex, False, "give the function train itself (no parentheses)")
    ref = reference(work)
    base = fresh_folder(work, "ex3")
    out, rows, worst = _resume_problems(train, latest_checkpoint, base, ref)
    if out:
        detail = f"\n{out[1]}" if len(out) > 1 else ""
        left = "" if out[0].startswith("not answered") else f"\n(what each attack left: {base})"
        return LAB.report(ex, False, out[0] + detail + left)
    return LAB.report(ex, True, f"every resume is exact (tolerance 0; largest |difference| {worst:g}):\n"
                      + "\n".join(rows))


def summary() -> None:
    LAB.summary()
