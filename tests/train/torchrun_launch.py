"""Running a script under torchrun from a test: every output line timed as it arrives, the whole tree killed on time.

    from torchrun_launch import ENTRY, torchrun
    run = torchrun(2, ENTRY, "--data", dataset, "--max-steps", "4", cwd=tmp_path, timeout=90)
    assert run.returncode == 0, run.text[-3000:]
    seconds, line = run.first("[fault]")

torchrun starts each worker in a session of its own, so a timeout kills the tree (fmlab.environment
.kill_process_tree), not torchrun's process group: a frozen worker would otherwise outlive the test.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from fmlab.environment import kill_process_tree

ENTRY = Path(__file__).resolve().parents[2] / "entrypoints" / "train.py"  # the SageMaker entry script


@dataclass
class Launch:
    returncode: int
    seconds: float
    lines: list[tuple[float, str]]  # (seconds since the start, line) of stdout and stderr as they arrived

    @property
    def text(self) -> str:
        return "\n".join(line for _, line in self.lines)

    def first(self, start: str) -> tuple[float, str]:
        return next((t, line) for t, line in self.lines if line.startswith(start))


def torchrun(nproc: int, script: Path, *args: str, cwd: Path, max_restarts: int = 0, timeout: float = 90,
             until: str = "") -> Launch:
    """torchrun `script` on `nproc` processes, one thread each; the whole tree dies on timeout (the test fails), or
    as soon as a line starts with `until` (a frozen worker would keep torchrun in its 30 s grace period)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc),
           "--max-restarts", str(max_restarts), str(script), *args]
    start = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    lines: list[tuple[float, str]] = []

    def read(stream):
        for line in stream:
            lines.append((time.monotonic() - start, line.rstrip("\n")))

    readers = [threading.Thread(target=read, args=(s,), daemon=True) for s in (proc.stdout, proc.stderr)]
    for r in readers:
        r.start()
    try:
        while until and proc.poll() is None and time.monotonic() - start < timeout:
            if any(line.startswith(until) for _, line in list(lines)):
                time.sleep(0.5)  # the rest of the line's burst
                kill_process_tree(proc.pid)
                break
            time.sleep(0.1)
        proc.wait(timeout=max(1.0, timeout - (time.monotonic() - start)))
    except subprocess.TimeoutExpired:
        kill_process_tree(proc.pid)  # torchrun and every worker it started
        proc.wait()
        pytest.fail(f"torchrun did not finish in {timeout} s:\n" + "\n".join(line for _, line in lines[-40:]))
    seconds = time.monotonic() - start
    for r in readers:
        r.join(timeout=10)
    return Launch(proc.returncode, seconds, sorted(lines))
