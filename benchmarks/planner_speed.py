"""The planner's predicted step against published runs, and the course's reference runs before and after it.

    .venv/bin/python benchmarks/planner_speed.py            # tables on stdout
    .venv/bin/python benchmarks/planner_speed.py --json out.json

Prints (1) every run of tests/plan/published_runs.json predicted against its reported tokens/s per GPU, the share
within 20%, beyond 35% and the median |log ratio|, every run counted (a run beyond 35% names its missing term in
its `unexplained` note); (2) the
course's reference runs as the planner gave them at a typed 40% MFU (the layout each notebook then chose) and as it
predicts them now (the layout layout.choose takes by predicted speed): days and on-demand cost. Pure arithmetic: a
second on a laptop; no GPU.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from fmlab.plan import compute, published
from fmlab.plan.parallelism import ParallelConfig
from fmlab.plan.planned import planned_run

ROOT = Path(__file__).resolve().parents[1]
# (name, model, tokens, instance, count, the layout the course planned it with at 40% MFU, micro-batch)
REFERENCE_RUNS = [
    ("module 7: gpt-30b, 300B tokens, 16 x p4d", "gpt-30b", 300e9, "ml.p4d.24xlarge", 16,
     ParallelConfig(sharding="hybrid", hybrid_shard_degree=64)),
    ("module 11/12: gpt-30b, 300B tokens, 16 x p5", "gpt-30b", 300e9, "ml.p5.48xlarge", 16,
     ParallelConfig(sharding="hybrid", hybrid_shard_degree=16)),
    ("module 12: llama3.1-8b brief, 2T tokens, 32 x p5", "llama3.1-8b", 2e12, "ml.p5.48xlarge", 32,
     ParallelConfig(sharding="hybrid", hybrid_shard_degree=16)),
    ("module 1: gpt-30b on 16 x p4d, full sharding", "gpt-30b", 300e9, "ml.p4d.24xlarge", 16,
     ParallelConfig(sharding="full")),
]


def reference_rows() -> list[dict]:
    rows = []
    for name, model, tokens, instance, count, old_layout in REFERENCE_RUNS:
        before = compute.estimate_run(model, tokens, instance, count, 0.4, old_layout.recompute)
        after = planned_run(model, tokens, instance, count)
        rows.append({"run": name, "before_layout": old_layout.label, "before_days": before.days,
                     "before_cost_usd": before.cost_usd, "after_layout": f"{after.parallel.label}, recompute "
                     f"{after.parallel.recompute}, micro-batch {after.micro_batch}", "after_mfu": after.mfu,
                     "after_days": after.days, "after_cost_usd": after.cost_usd})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", default=None, help="also write the figures to this file")
    args = parser.parse_args()
    runs = published.compare(published.load(ROOT / "tests/plan/published_runs.json"))
    print(f"{'run':<46} {'GPUs':>6} {'predicted':>10} {'reported':>10} {'ratio':>6}")
    for r in runs:
        mark = "  (beyond 35%: its note names the term)" if abs(r["ratio"] - 1) > 0.35 else ""
        print(f"{r['name']:<46} {r['gpus']:>6} {r['predicted_tokens_per_second_per_gpu']:>10,.1f} "
              f"{r['reported_tokens_per_second_per_gpu']:>10,.1f} {r['ratio']:>6.2f}{mark}")
    s = published.summary(runs)
    spread = published.error_spread()
    print(f"\n{s['inside']} of {s['runs']} within 20%, {s['outside']} beyond 35%, median |log ratio| "
          f"{s['median_abs_log_ratio']:.3f}; worst {s['worst']} ({s['worst_off']:.0%} off); predicted / reported "
          f"{spread.low:.2f} to {spread.high:.2f} (10th-90th percentile)\n")
    ref = reference_rows()
    for r in ref:
        print(f"{r['run']}\n  before (40% typed, {r['before_layout']}): {r['before_days']:.1f} days, "
              f"${r['before_cost_usd']:,.0f}\n  after (predicted, {r['after_layout']}): MFU {r['after_mfu']:.0%}, "
              f"{r['after_days']:.1f} days, ${r['after_cost_usd']:,.0f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"published": runs, "summary": s,
                                               "reference_runs": ref}, indent=2))


if __name__ == "__main__":
    main()
