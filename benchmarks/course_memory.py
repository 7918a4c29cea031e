"""Peak memory of the course as `make course` runs it: two notebooks at a time, each in its own process tree.

Run: .venv/bin/python benchmarks/course_memory.py [--jobs 2] [--json build/course-memory.json] [--only 07_ 10_]

Each notebook (and lab solution) runs in a subprocess (`fmlab.course.run.execute`, as `make course`'s workers run
them), `--jobs` at a time, the longest first as `make course` orders them. A sampler reads every 0.5 s the
proportional set size (PSS: shared pages split between the processes that map them, so torch's libraries are not
counted once per process) of every process in each notebook's tree: the kernel, torchrun, its workers, servers.
Reported: each notebook's peak, and the peak of all of them together with the sampler's own interpreter left out:
what a SageMaker Studio instance must hold besides JupyterLab itself. Never asserted (the machine is shared); the
figures go in docs/instructor.md.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil

from fmlab.course.run import _expected_seconds, course_notebooks
from fmlab.environment import ROOT

GIB = 1024**3


def tree_pss(pid: int) -> int:
    """Bytes of PSS in the process `pid` and every descendant (0 once it is gone)."""
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0
    total = 0
    for p in procs:
        try:
            total += p.memory_full_info().pss
        except psutil.Error:
            pass
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--json", default="build/course-memory.json")
    parser.add_argument("--only", nargs="*", default=[])
    parser.add_argument("--output", default="build/memory-executed")
    args = parser.parse_args()
    chosen = [nb for nb in course_notebooks() if not args.only or any(o in nb.name for o in args.only)]
    order = sorted(chosen, key=lambda nb: -_expected_seconds(nb))
    running: dict[str, int] = {}  # notebook -> pid of its subprocess
    peaks: dict[str, int] = {}
    seconds: dict[str, float] = {}
    together = {"peak": 0, "at": ""}
    done = threading.Event()
    lock = threading.Lock()

    def sample() -> None:
        while not done.is_set():
            with lock:
                now = dict(running)
            sizes = {name: tree_pss(pid) for name, pid in now.items()}
            for name, size in sizes.items():
                peaks[name] = max(peaks.get(name, 0), size)
            total = sum(sizes.values())
            if total > together["peak"]:
                together.update(peak=total, at=" + ".join(sorted(sizes)))
            time.sleep(0.5)

    def run(nb: Path) -> None:
        out = Path(args.output) / ("labs" if nb.parent.name == "solutions" else "notebooks") / nb.name
        code = ("import sys; from pathlib import Path; from fmlab.course.run import execute; "
                f"r = execute(Path({str(nb)!r}), Path({str(out)!r})); sys.exit(0 if r.ok else 1)")
        start = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, env={**__import__("os").environ,
                                                                "OMP_NUM_THREADS": str(max(1, 2 // args.jobs))})
        with lock:
            running[nb.name] = proc.pid
        rc = proc.wait()
        with lock:
            running.pop(nb.name)
        seconds[nb.name] = time.perf_counter() - start
        print(f"{nb.name:45} {'ok' if rc == 0 else 'FAILED'} {seconds[nb.name]:6.1f} s, peak "
              f"{peaks.get(nb.name, 0) / GIB:.2f} GiB", flush=True)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    started = time.perf_counter()
    with ThreadPoolExecutor(args.jobs) as pool:
        list(pool.map(run, order))
    done.set()
    sampler.join()
    wall = time.perf_counter() - started
    heaviest = sorted(peaks.items(), key=lambda kv: -kv[1])
    print(f"\nall {len(order)} in {wall:.0f} s, {args.jobs} at a time: peak together {together['peak'] / GIB:.2f} GiB "
          f"({together['at']})")
    for name, size in heaviest[:5]:
        print(f"  {name:45} {size / GIB:.2f} GiB")
    result = {"jobs": args.jobs, "wall_seconds": round(wall), "peak_together_gib": round(together["peak"] / GIB, 2),
              "peak_together_at": together["at"], "date": time.strftime("%Y-%m-%d"),
              "machine": f"{psutil.cpu_count()} cores, {psutil.virtual_memory().total / GIB:.0f} GiB",
              "notebooks": {name: {"peak_gib": round(size / GIB, 2), "seconds": round(seconds.get(name, 0), 1)}
                            for name, size in heaviest}}
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
