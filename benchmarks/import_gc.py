"""What Python's garbage collector costs a training worker while it imports: CPU seconds with it on and off.

    .venv/bin/python benchmarks/import_gc.py              # 8 rounds, the two ways interleaved
    .venv/bin/python benchmarks/import_gc.py --rounds 4 --json out.json

Each round starts two fresh interpreters that import what a worker of `python -m fmlab.train` imports before its
first step (fmlab.train.loop and transformers' Llama), one with the collector on and one with it off (the entry
scripts' `gc.disable()`, fmlab.train.collector), and reads their user + system CPU seconds from the kernel. The
two ways alternate, so a busy moment of the machine falls on both.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

IMPORTS = "import fmlab.train.loop\nfrom transformers import LlamaForCausalLM\n"
WAYS = {"collector on": "", "collector off": "import gc\ngc.disable()\n"}


def child_cpu_seconds(code: str) -> float:
    """User + system CPU seconds of one fresh interpreter running `code` (its own, read after it exits)."""
    before = os.times()
    subprocess.run([sys.executable, "-c", code], check=True)
    after = os.times()
    return (after.children_user - before.children_user) + (after.children_system - before.children_system)


def measure(rounds: int) -> dict[str, list[float]]:
    seconds: dict[str, list[float]] = {way: [] for way in WAYS}
    for _ in range(rounds):
        for way, prefix in WAYS.items():
            seconds[way].append(child_cpu_seconds(prefix + IMPORTS))
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    seconds = measure(args.rounds)
    print(f"{platform.node()}: {os.cpu_count()} cores, Python {platform.python_version()}, {args.rounds} rounds, "
          f"load average {os.getloadavg()[0]:.2f}")
    for way, values in seconds.items():
        print(f"  {way:14} mean {statistics.mean(values):.2f} CPU s, median {statistics.median(values):.2f} "
              f"(min {min(values):.2f}, max {max(values):.2f})")
    on, off = (statistics.mean(seconds[w]) for w in WAYS)
    print(f"  the collector costs {on - off:.2f} CPU s per worker start ({(on - off) / on:.0%})")
    if args.json:
        args.json.write_text(json.dumps(seconds, indent=1))


if __name__ == "__main__":
    main()
