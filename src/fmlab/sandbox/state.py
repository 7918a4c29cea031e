"""The sandbox's shared state on disk: where its folder is, how many CPU slots it has, a job's folder and
status file. Both the API (service.py) and the supervisor (supervisor.py) read and write these.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

from fmlab import storage

SANDBOX_VARIABLE = "FMLAB_SANDBOX_DIR"
CPUS_VARIABLE = "FMLAB_SANDBOX_CPUS"
FINAL = ("Completed", "Failed", "Stopped")


class SandboxError(RuntimeError):
    """A request the sandbox cannot run, or a job it does not have."""


def root() -> Path:
    chosen = os.environ.get(SANDBOX_VARIABLE, "").strip()
    return Path(chosen).expanduser().resolve() if chosen else storage.local_bucket_root().parent / "sandbox"


def capacity() -> int:
    """Training processes this machine runs at once (FMLAB_SANDBOX_CPUS, else the CPU count)."""
    chosen = os.environ.get(CPUS_VARIABLE, "").strip()
    if chosen and (not chosen.isdigit() or int(chosen) < 1):
        raise SandboxError(f"{CPUS_VARIABLE} must be a whole number >= 1, not {chosen!r}")
    return int(chosen) if chosen else max(1, os.cpu_count() or 1)


def job_dir(name: str) -> Path:
    return root() / "jobs" / name


def now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")


def write_json(path: Path, data: dict) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str))
    os.replace(tmp, path)


def read_status(name: str) -> dict:
    path = job_dir(name) / "status.json"
    if not path.exists():
        raise SandboxError(f"no sandbox job named {name!r} under {root() / 'jobs'}")
    return json.loads(path.read_text())
