"""Where `make test`'s time goes: CPU seconds per test file and per test, from a run with FMLAB_CPU_REPORT set.

    FMLAB_CPU_REPORT=/tmp/cpu.jsonl make test        # tests/conftest.py appends one line per test
    .venv/bin/python benchmarks/suite_cpu.py /tmp/cpu.jsonl [--top 25] [--json out.json] [--before old.jsonl]

On the 2-core machine the suite is CPU-bound (three workers keep both cores about 90% busy), so the wall clock is
about the CPU seconds divided by 1.8: a test's wall seconds, taken while two other workers compete for the cores,
overstate what it costs, and its CPU seconds (its own, and those of the processes it started and waited for:
notebook kernels, torchrun's workers, sandbox jobs, servers) say what removing or speeding it would save. Processes
no test waits for (the Slurm jobs slurmd starts) are not counted.
"""

from __future__ import annotations

import argparse
import collections
import json
from pathlib import Path


def load(path: Path) -> list[dict]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    for r in rows:
        r["cpu"] = r["cpu_self"] + r["cpu_children"]
    return rows


def by_file(rows: list[dict]) -> list[tuple[str, float, float, int]]:
    cpu, wall, count = collections.Counter(), collections.Counter(), collections.Counter()
    for r in rows:
        name = r["test"].split("::")[0]
        cpu[name] += r["cpu"]
        wall[name] += r["wall"]
        count[name] += 1
    return [(name, cpu[name], wall[name], count[name]) for name, _ in cpu.most_common()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", type=Path, help="the FMLAB_CPU_REPORT file of one run")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--json", type=Path, help="write the per-file table here")
    parser.add_argument("--before", type=Path, help="another run's report: both runs' CPU s, file by file")
    args = parser.parse_args()
    rows = load(args.report)
    total = sum(r["cpu"] for r in rows)
    kinds = collections.Counter()
    for r in rows:
        name = r["test"]
        kinds["notebooks and labs" if ("notebook" in name or "test_labs" in name) else "other tests"] += r["cpu"]
    print(f"{len(rows)} tests, {total:,.0f} CPU s ({sum(r['cpu_self'] for r in rows):,.0f} in the test workers, "
          f"{sum(r['cpu_children'] for r in rows):,.0f} in processes they started), "
          f"{sum(r['wall'] for r in rows):,.0f} s of test wall time")
    print("  " + ", ".join(f"{k}: {v:,.0f} CPU s ({v / total:.0%})" for k, v in kinds.most_common()))
    files = by_file(rows)
    if args.before:
        before = {name: cpu for name, cpu, _, _ in by_file(load(args.before))}
        print(f"\n{'before':>7} {'after':>7}  CPU s per file, every file of either run (before: {args.before})")
        for name in sorted(set(before) | {n for n, *_ in files}, key=lambda n: -max(
                before.get(n, 0), next((c for f, c, *_ in files if f == n), 0))):
            after = next((c for f, c, *_ in files if f == name), None)
            print(f"{before.get(name, 0):7.1f} {after or 0:7.1f}  {name}" + ("  (gone)" if after is None else
                  "  (new)" if name not in before else ""))
        print(f"{sum(before.values()):7.0f} {total:7.0f}  in all")
    print(f"\n{'CPU s':>7} {'wall s':>7} {'tests':>5}  file (top {args.top})")
    for name, cpu, wall, count in files[: args.top]:
        print(f"{cpu:7.1f} {wall:7.1f} {count:5d}  {name}")
    print(f"\n{'CPU s':>7} {'wall s':>7}  test (top {args.top})")
    for r in sorted(rows, key=lambda r: -r["cpu"])[: args.top]:
        print(f"{r['cpu']:7.1f} {r['wall']:7.1f}  {r['test'][:120]}")
    if args.json:
        args.json.write_text(json.dumps([{"file": n, "cpu_s": round(c, 1), "wall_s": round(w, 1), "tests": k}
                                         for n, c, w, k in files], indent=1))


if __name__ == "__main__":
    main()
