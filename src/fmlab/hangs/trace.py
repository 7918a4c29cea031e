"""Each rank's last collectives, kept cheaply while training and written out when a collective fails.

    from fmlab.hangs.trace import CollectiveTrace
    trace = CollectiveTrace(entries=2000, folder="out/collective-traces")   # before the process group forms
    trace.at_step(5)                       # the training loop marks each step's start (a list append)
    written = trace.on_failure(error)      # on a failed collective: this rank's rank-N.json, shared, analyzed
    print(written.report)                  # "rank 1 stopped at step 5: never entered collective #37 ..."

The recording is PyTorch's Flight Recorder, which in torch 2.13 records gloo as well as NCCL (checked in the
installed torch 2.13.0+cpu: with TORCH_FR_BUFFER_SIZE=100, the ring buffer's size, default 0 = off, a 2-process
gloo group's collectives come back from `torch._C._distributed_c10d._dump_fr_trace_json` as entries with
`profiling_name` "gloo:all_reduce", input/output sizes, `process_group` ["0", "default_pg"],
`collective_seq_id` 1, 2, 3 ... and `time_created_ns`; torch/distributed/flight_recorder holds the analyzer
of NCCL's dump files, `torchfrtrace`). What the recorder does not know is added here: the training step each collective was
issued in (from the step marks, `at_step`), and the error the rank failed with. Checked on gloo in torch
2.13: a collective that timed out is still marked `retired` with state "scheduled" and no completion time, so
a gloo trace cannot say by itself which collective hung; the cross-rank comparison (fmlab.hangs.analysis) can.

On a failure every surviving rank (1) writes rank-N.json to `folder` (fast: nothing waits on a peer), (2)
publishes a copy under `fmlab/attempt-A/trace/rank-N` in the job's rendezvous store (torchrun's agent holds it,
so it outlives a frozen worker and reaches across nodes), (3) waits up to `gather_seconds` (1 to 5 s) for the other
ranks' copies, and (4) names the rank that stopped from what it has (a rank that never publishes is dead,
frozen or hung). Every step is bounded in time and none raises: the original error always wins.

On NCCL, PyTorch writes its own dumps as well when asked: TORCH_NCCL_DUMP_ON_TIMEOUT=1 and
TORCH_FR_DUMP_TEMP_FILE=<folder>/nccl_rank_ make the watchdog dump every rank's buffer on a timeout (the
watchdog may abort the process before Python sees an error, so these files can be the only record); read
them with `torchfrtrace <folder>` (torch.distributed.flight_recorder.fr_trace, installed with torch).
`enable()` sets both when the backend is NCCL and the user has not.
"""

from __future__ import annotations

import datetime
import json
import os
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch.distributed as dist

from fmlab.hangs.analysis import HangReport, analyze
from fmlab.parallel.mesh import restart_attempt

BUFFER_VARIABLE = "TORCH_FR_BUFFER_SIZE"
NCCL_DUMP_VARIABLES = ("TORCH_NCCL_DUMP_ON_TIMEOUT", "TORCH_FR_DUMP_TEMP_FILE")
STORE_PREFIX = "fmlab/attempt-{attempt}/trace/rank-{rank}"
KEEP = 200  # entries per rank written on a failure (the newest); the buffer may hold more


@dataclass
class Failure:
    """What on_failure left behind."""

    path: Path | None  # this rank's trace file (None without a folder)
    traces: list[dict]  # this rank's trace and those gathered from the others
    report: HangReport | None  # None when the analysis itself failed


@dataclass
class CollectiveTrace:
    """This rank's collective trace: the Flight Recorder's buffer plus the training step of each entry."""

    entries: int = 2000  # the Flight Recorder's ring buffer, per rank; 0: off
    folder: str = ""  # where rank-N.json goes on a failure ("" : shared through the store only)
    gather_seconds: float | None = None  # how long a survivor waits for the others' traces; None: a tenth of
    # the timeout, 1 to 5 s (survivors time out within moments of each other: they wait on the same peer)
    step_marks: list[tuple[int, int]] = field(default_factory=list)  # (step, time_ns at its start), newest last
    step: int = 0
    timeout_s: float | None = None  # the collective timeout in force (set by the training loop)
    phase: str = "first step"  # "first step" (the long timeout), then "training" (the short one)

    def enable(self, backend: str = "gloo", env=None) -> bool:
        """Turn the Flight Recorder on for the process groups created after this (the user's own setting wins);
        True if it records."""
        env = os.environ if env is None else env
        if self.entries > 0:
            env.setdefault(BUFFER_VARIABLE, str(self.entries))
            if backend == "nccl" and self.folder:
                Path(self.folder).mkdir(parents=True, exist_ok=True)
                env.setdefault(NCCL_DUMP_VARIABLES[0], "1")
                env.setdefault(NCCL_DUMP_VARIABLES[1], str(Path(self.folder) / "nccl_rank_"))
        try:
            return int(env.get(BUFFER_VARIABLE, "0") or 0) > 0
        except ValueError:
            return False

    def at_step(self, step: int) -> None:
        """Mark the start of `step` (the loop calls it before the step's first collective)."""
        self.step = step
        self.step_marks.append((step, time.time_ns()))
        if len(self.step_marks) > 4 * KEEP:
            del self.step_marks[: 2 * KEEP]

    def step_at(self, time_ns: int) -> int:
        """The step that was running at `time_ns` (0: before the first step)."""
        found = 0
        for step, started in self.step_marks:
            if started > time_ns:
                break
            found = step
        return found

    def snapshot(self, rank: int, world: int, error: BaseException | str = "") -> dict:
        """This rank's trace now: its newest KEEP collectives, each with its step, and the error it failed with."""
        raw = flight_recorder_dump()
        entries = [{"seq": e.get("collective_seq_id", 0) if not e.get("is_p2p") else e.get("p2p_seq_id", 0),
                    "op": e.get("profiling_name", "?"),
                    "sizes": e.get("input_sizes", []),
                    "out_sizes": e.get("output_sizes", []),
                    "group": (e.get("process_group") or ["?", "?"])[1] or str(e.get("pg_id")),
                    "p2p": bool(e.get("is_p2p")),
                    "created_ns": int(e.get("time_created_ns", 0)),
                    "state": e.get("state", ""),
                    "step": self.step_at(int(e.get("time_created_ns", 0)))}
                   for e in raw.get("entries", [])][-KEEP:]

        return {"version": 1, "rank": rank, "world": world, "host": socket.gethostname(), "pid": os.getpid(),
                "attempt": restart_attempt(),
                "step": self.step, "timeout_s": self.timeout_s, "phase": self.phase, "recorder": "torch flight recorder" if raw else "none",
                "failure": {"error": str(error)[:600], "at_ns": time.time_ns()}, "entries": entries}

    def on_failure(self, error: BaseException | str, rank: int | None = None, world: int | None = None) -> Failure:
        """Write, share and analyze this rank's trace after a failed collective. Never raises."""
        try:
            if rank is None:
                rank = dist.get_rank() if dist.is_initialized() else 0
                world = dist.get_world_size() if dist.is_initialized() else 1
            trace = self.snapshot(rank, world or 1, error)
        except Exception as e:  # noqa: BLE001  (the original error must win)
            return Failure(None, [], HangReport("none", [], "", None, lines=[f"no trace: {e}"]))
        path = None
        if self.folder:
            try:
                path = write_trace(trace, self.folder)
            except OSError:
                path = None
        gather = self.gather_seconds if self.gather_seconds is not None else \
            min(5.0, max(1.0, (self.timeout_s or 50.0) / 10))
        traces = exchange(trace, gather)
        try:
            report = analyze(traces, world)
        except Exception:  # noqa: BLE001
            report = None
        return Failure(path, traces, report)


def flight_recorder_dump() -> dict:
    """PyTorch's Flight Recorder buffer of this process, as a dict ({} where torch has none or it is off)."""
    try:
        from torch._C._distributed_c10d import _dump_fr_trace_json
    except ImportError:
        return {}
    try:
        return json.loads(_dump_fr_trace_json(True, True))  # include completed entries; only active groups
    except Exception:  # noqa: BLE001  (a recorder that is off or unsupported answers with an error)
        return {}


def write_trace(trace: dict, folder: str | Path) -> Path:
    """rank-N.json in `folder`, written whole or not at all (a rename)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"rank-{trace['rank']}.json"
    part = path.with_suffix(f".{os.getpid()}.part")
    part.write_text(json.dumps(trace))
    part.replace(path)
    return path


def exchange(trace: dict, gather_seconds: float, attempt: int | None = None) -> list[dict]:
    """Publish `trace` in the job's store and collect the other ranks' for up to `gather_seconds`; only `trace`
    when there is no store or it does not answer."""
    attempt = restart_attempt() if attempt is None else attempt
    world, rank = int(trace["world"]), int(trace["rank"])
    if world < 2 or not dist.is_initialized():
        return [trace]
    try:
        store = dist.distributed_c10d._get_default_store()
        store.set_timeout(datetime.timedelta(seconds=max(1.0, gather_seconds)))
        store.set(STORE_PREFIX.format(attempt=attempt, rank=rank), json.dumps(trace))
    except Exception:  # noqa: BLE001
        return [trace]
    found = {rank: trace}
    deadline = time.monotonic() + gather_seconds
    while len(found) < world:
        for other in range(world):
            key = STORE_PREFIX.format(attempt=attempt, rank=other)
            if other in found:
                continue
            try:
                if store.check([key]):
                    found[other] = json.loads(store.get(key))
            except Exception:  # noqa: BLE001
                return list(found.values())
        if len(found) == world or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    return [found[r] for r in sorted(found)]
