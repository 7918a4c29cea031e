"""Start fmlab's training script on N local processes with torchrun, the way a notebook cell does it.

    run = torchrun_train(2, ["--model", "tiny", "--max-steps", "10"], output_dir="runs/dp2").check()
    run.seconds, run.metrics[-1]["loss"], run.summary["tokens_per_s"]

It runs `python -m torch.distributed.run --standalone --nproc-per-node N entrypoints/train.py ...` in a
subprocess (a fresh rendezvous port each time, so runs never collide), with OMP_NUM_THREADS threads per
process, and kills the whole process group if it overruns its time limit. SageMaker starts the very same
script (fmlab.jobs); only the launcher differs.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from fmlab.environment import ROOT, kill_process_tree
from fmlab.train.log import read_metrics

ENTRY_SCRIPT = ROOT / "entrypoints" / "train.py"


@dataclass
class LocalRun:
    """One finished torchrun launch of the training script."""

    processes: int
    command: list[str]
    returncode: int
    seconds: float  # wall clock of the whole launch, process start-up included
    stdout: str
    stderr: str
    output_dir: Path

    def check(self) -> LocalRun:
        """self, or a RuntimeError with the end of the log if the launch failed."""
        if self.returncode != 0:
            tail = "\n".join((self.stdout + "\n" + self.stderr).strip().splitlines()[-25:])
            raise RuntimeError(f"torchrun with {self.processes} processes exited with {self.returncode}:\n{tail}")
        return self

    @property
    def metrics(self) -> list[dict]:
        return read_metrics(self.output_dir)

    @property
    def summary(self) -> dict:
        return json.loads((self.output_dir / "summary.json").read_text())

    @property
    def resumed_at(self) -> list[int]:
        """The steps the script resumed from, in order (one per start that found a checkpoint)."""
        return [int(m.group(1)) for m in re.finditer(r"^resumed from \S+ at step (\d+)", self.stdout, re.M)]

    @property
    def log_lines(self) -> list[str]:
        """The parseable `step=... loss=...` lines rank 0 printed."""
        return [line for line in self.stdout.splitlines() if line.startswith("step=")]


def torchrun_train(processes: int, args: list[str], output_dir: str | Path, threads_per_process: int = 1,
                   timeout: float = 300, max_restarts: int = 0) -> LocalRun:
    """Run entrypoints/train.py on `processes` gloo processes; metrics land in `output_dir`.

    max_restarts > 0 lets torchrun's agent restart every worker after one fails (elastic restart), up to that
    many times; the script then resumes from its newest complete checkpoint."""
    if processes < 1:
        raise ValueError(f"processes must be at least 1, got {processes}")
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "metrics.jsonl").unlink(missing_ok=True)  # a rerun of the cell starts a fresh log
    if max_restarts < 0:
        raise ValueError(f"max_restarts must be 0 or more, got {max_restarts}")
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={processes}",
               f"--max-restarts={max_restarts}", str(ENTRY_SCRIPT), *args, "--output-dir", str(out)]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads_per_process), "PYTHONUNBUFFERED": "1"}
    start = time.perf_counter()
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_process_tree(proc.pid)  # torchrun and every worker it started (each in a session of its own)
        stdout, stderr = proc.communicate()
        stderr += f"\n(killed after {timeout:.0f} s)"
    return LocalRun(processes, command, proc.returncode, time.perf_counter() - start, stdout, stderr, out)
