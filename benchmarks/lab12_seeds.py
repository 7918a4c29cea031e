"""Lab 12's solved plan_run against the briefs the check draws from many seeds: does the lab's documented method
meet every brief the check can draw? (Issue 62: before the draw left room, it failed 19 of 200 seeds.)

    .venv/bin/python benchmarks/lab12_seeds.py --seeds 0:200 --workers 2     # about 10 minutes on 2 cores
    .venv/bin/python benchmarks/lab12_seeds.py --seeds 8,13,18               # a few

Prints each failing seed with its error and the totals, as JSON with --json. The solution's code is read from
labs/solutions/lab_12_capstone_plan.ipynb (its imports and its plan_run cell), so this measures what learners see.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOLUTION = ROOT / "labs" / "solutions" / "lab_12_capstone_plan.ipynb"


def solution_plan_run():
    """The solved lab's plan_run, defined as the notebook defines it (its set-up cell and its answer cell)."""
    cells = ["".join(c["source"]) for c in json.loads(SOLUTION.read_text())["cells"] if c["cell_type"] == "code"]
    namespace: dict = {}
    with contextlib.redirect_stdout(io.StringIO()):
        for source in cells:
            if "from fmlab.labs import lab12" in source or "def plan_run" in source:
                exec(compile(source, str(SOLUTION), "exec"), namespace)
    return namespace["plan_run"]


def one_seed(seed: int) -> dict:
    """Draw the check's briefs for `seed` and grade the solution on each, as check_drawn does."""
    from fmlab.labs import lab12
    from fmlab.plan import capstone

    plan_run = solution_plan_run()
    started = time.perf_counter()
    failures = []
    for brief, _cost in lab12.draw(seed):
        try:
            g = capstone.grade(plan_run(brief), brief, seeds=lab12.SEEDS)
            if not g.passed:
                failures.append(f"{brief.name}: {'; '.join(g.problems + g.failed)}")
        except Exception as e:  # noqa: BLE001 - every failure is reported, whatever it is
            failures.append(f"{brief.name}: {type(e).__name__}: {e}")
    return {"seed": seed, "failures": failures, "seconds": round(time.perf_counter() - started, 1)}


def parse_seeds(text: str) -> list[int]:
    if ":" in text:
        low, high = text.split(":")
        return list(range(int(low), int(high)))
    return [int(s) for s in text.split(",")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", default="0:200")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    seeds = parse_seeds(args.seeds)
    started = time.perf_counter()
    with ProcessPoolExecutor(args.workers) as pool:
        results = list(pool.map(one_seed, seeds))
    failed = [r for r in results if r["failures"]]
    summary = {"seeds": len(seeds), "briefs": 3 * len(seeds), "failed_seeds": [r["seed"] for r in failed],
               "failures": [f"seed {r['seed']}: {f}" for r in failed for f in r["failures"]],
               "seconds": round(time.perf_counter() - started, 1),
               "seconds_per_seed_max": max(r["seconds"] for r in results)}
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        for line in summary["failures"]:
            print(line)
        print(f"{len(failed)} of {len(seeds)} seeds failed ({summary['briefs']} briefs) in {summary['seconds']} s; "
              f"the slowest seed {summary['seconds_per_seed_max']} s")


if __name__ == "__main__":
    main()
