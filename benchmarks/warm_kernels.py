"""What a notebook kernel costs to start, fresh (jupyter_client's own process) and forked from the zygote
(fmlab.course.warm_kernels): CPU seconds per kernel, for a notebook that imports nothing and one that imports what
most of the course's notebooks import.

    .venv/bin/python benchmarks/warm_kernels.py               # 4 rounds, the two ways interleaved
    .venv/bin/python benchmarks/warm_kernels.py --rounds 2 --json out.json

Each round executes both probe notebooks with papermill (fmlab.course.run.execute) once fresh and once forked.
A kernel's CPU is its own and its children's, read when it ends: from this process's children for a fresh kernel,
from the zygote's report for a forked one. The zygote's own start-up (its imports, paid once per process that runs
notebooks) is reported apart.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import tempfile
from pathlib import Path

import nbformat

from fmlab.course import warm_kernels
from fmlab.course.run import execute

PROBES = {
    "empty": "1 + 1",
    "imports": "import torch, transformers, pandas, matplotlib.pyplot, sagemaker.core.resources\nimport fmlab.models",
}


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime + warm_kernels.counts.cpu


def run(folder: Path, probe: str, warm: bool) -> float:
    source = folder / f"{probe}.ipynb"
    before = children_cpu()
    result = execute(source, folder / f"{probe}.out.ipynb", warm=warm)
    if not result.ok:
        raise SystemExit(f"{probe} failed: {result.error}")
    return children_cpu() - before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="warm-kernels-"))
    for name, code in PROBES.items():
        nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)]), str(folder / f"{name}.ipynb"))

    zygote_start = run(folder, "empty", warm=True)  # starts the zygote: its imports, and one forked kernel
    cpu: dict[tuple[str, str], list[float]] = {}
    for _ in range(args.rounds):
        for probe in PROBES:
            for way, warm in (("fresh", False), ("forked", True)):
                cpu.setdefault((probe, way), []).append(run(folder, probe, warm))
    print(f"{platform.node()}: {os.cpu_count()} cores, {args.rounds} rounds, CPU seconds per kernel (median, range)")
    print(f"zygote start-up and its first kernel: {zygote_start:.2f} CPU s")
    for (probe, way), values in cpu.items():
        print(f"  {probe:8} {way:7} {statistics.median(values):5.2f}  ({min(values):.2f}-{max(values):.2f})")
    if args.json:
        args.json.write_text(json.dumps({"zygote": zygote_start,
                                         "cpu": {f"{p} {w}": v for (p, w), v in cpu.items()}}, indent=1))


if __name__ == "__main__":
    main()
