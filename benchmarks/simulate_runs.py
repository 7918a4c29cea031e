"""How fast the run simulator is (module 12): simulated runs per second for three scenarios of the course.

Run: .venv/bin/python benchmarks/simulate_runs.py [--runs 10000] [--repeats 3] [--json out.json]

1. the 30B run on 16 p5 (about one failure per run), module 11's reservation, 28-day jobs;
2. the same plan on 2,048 nodes (hundreds of failures per run: the event loop's worst case here);
3. Llama 3 405B's training state on 2,048 nodes for 54 days with S3 checkpoints (the published check).
Reported: the best of `--repeats` wall times, runs per second, failures per run. Never asserted (the machine is
shared); the closed-form and published-figure agreement are tests (tests/plan/test_simulate.py).
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace

from fmlab.plan import capacity, scenario, simulate
from fmlab.plan.planned import planned_run


def scenarios() -> dict[str, simulate.Scenario]:
    plan = planned_run("gpt-30b", 300e9, "ml.p5.48xlarge", 16)  # module 11's planned run
    held = capacity.reservation(plan.days)
    p5 = scenario.scenario_for(plan, replace(scenario.QUIET, hang_share=0.1), reserved_days=held.days,
                               region="us-east-1", job_days=28)
    llama = scenario.llama3_405b()
    return {"30B on 16 p5, reserved": p5, "30B plan on 2,048 nodes": p5.with_(nodes=2048, window_hours=float("inf"),
                                                                             reserved_hours_bought=0.0),
            "Llama 3 405B, 54 days": llama,
            "checkpointless, 16,384 nodes": scenario.checkpointless_at_scale(16_384),
            "30B, 1,000 spikes at Daly's": scenario.scenario_for(plan, replace(scenario.QUIET, spikes_per_run=1_000)),
            "checkpointless, 100,000 nodes": scenario.checkpointless_at_scale(100_000),
            "30B, 10,000 spikes": p5.with_(spike_mean_hours=plan.days * 24 / 10_000)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    results = {}
    for name, s in scenarios().items():
        best, out, refused = float("inf"), None, ""
        for repeat in range(args.repeats):
            start = time.perf_counter()
            try:
                out = simulate.simulate(s, runs=args.runs, seed=repeat)
            except simulate.PlanError as e:  # refused, its cause named: the time it took to say so
                refused = str(e)
            best = min(best, time.perf_counter() - start)
        if refused:
            results[name] = {"seconds": round(best, 4), "refused": refused}
            print(f"{name:30} {best:6.3f} s: refused: {refused[:110]}")
            continue
        results[name] = {"seconds": round(best, 3), "runs_per_second": round(args.runs / best),
                         "failures_per_run": round(float(out.failures.mean()), 1),
                         "goodput": round(float(out.goodput.mean()), 4)}
        print(f"{name:30} {best:6.3f} s for {args.runs:,} runs = {args.runs / best:10,.0f} runs/s, "
              f"{out.failures.mean():6.1f} failures per run, goodput {out.goodput.mean():.2%}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
