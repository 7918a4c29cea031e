"""Run a task of fmlab.measure.worker on N local gloo processes with torchrun, and read back what each
rank measured.

    results = run_worker_task("parity", 4, {"presets": ["tiny"], "layouts": [...]})   # one dict per rank

Used by the notebooks (a subprocess, so the kernel never joins a process group) and by the distributed
tests. Rendezvous is on 127.0.0.1 with a free port; OMP_NUM_THREADS=1 so N processes share a laptop's cores.
Each process pays the transformers import (about 4 s on a 2-core laptop), so run several checks per world.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fmlab.environment import free_port, kill_process_tree
from fmlab.progress import progress as tqdm


class WorldFailed(RuntimeError):
    """A spawned world exited with an error; the message carries the end of its output."""


def torchrun_command(task: str, world_size: int, args_file: Path, out_dir: Path) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--nnodes=1", f"--nproc-per-node={world_size}",
            "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{free_port()}", "--local-addr=127.0.0.1",
            "--max-restarts=0", "-m", "fmlab.measure.worker", task, "--args", str(args_file), "--out", str(out_dir)]


def run_worker_task(task: str, world_size: int, args: dict | None = None, timeout: float = 300,
              progress: bool = True) -> list[dict]:
    """Run `task` on `world_size` processes; return each rank's result (rank order), plus "seconds"."""
    if world_size < 1:
        raise ValueError(f"world_size must be at least 1, got {world_size}")
    with tempfile.TemporaryDirectory(prefix=f"fmlab-{task}-") as tmp:
        tmp_path = Path(tmp)
        args_file = tmp_path / "args.json"
        args_file.write_text(json.dumps(args or {}))
        env = {**os.environ, "OMP_NUM_THREADS": "1", "MASTER_ADDR": "127.0.0.1",
               "TORCHELASTIC_ERROR_FILE": str(tmp_path / "error.json")}
        start = time.perf_counter()
        proc = subprocess.Popen(torchrun_command(task, world_size, args_file, tmp_path), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, env=env)
        lines: list[str] = []
        bar = tqdm(total=None, desc=f"{task} on {world_size} processes", unit="check", disable=not progress)
        try:
            for line in proc.stdout:  # rank 0 prints "fmlab-progress i/n" after each check
                lines.append(line)
                if line.startswith("fmlab-progress "):
                    done, total = map(int, line.split()[1].split("/"))
                    bar.total = total
                    bar.update(done - bar.n)
                if time.perf_counter() - start > timeout:
                    kill_process_tree(proc.pid)
                    raise WorldFailed(f"{task} on {world_size} processes ran past {timeout:.0f} s")
            proc.wait()
        finally:
            bar.close()
            if proc.poll() is None:
                kill_process_tree(proc.pid)
        seconds = time.perf_counter() - start
        if proc.returncode != 0:
            tail = _failure_excerpt(lines)
            raise WorldFailed(f"{task} on {world_size} processes failed (exit {proc.returncode}):\n{tail}")
        results = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(world_size)]
    for r in results:
        r["seconds"] = seconds
    return results


def _failure_excerpt(lines: list[str], keep: int = 30) -> str:
    """The end of the first worker's traceback (the agent's own traceback after it says little)."""
    for i, line in enumerate(lines):
        if "Traceback" in line and line.startswith("[rank"):
            prefix = line.split(":", 1)[0] + ":"
            block = [x for x in lines[i:] if x.startswith(prefix)]
            return "".join(block[-keep:])
    return "".join(lines[-keep:])
