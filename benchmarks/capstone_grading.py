"""What module 12's grading costs and what it finds: the figures of issue 55's closing note.

Run: .venv/bin/python benchmarks/capstone_grading.py [--draws 5]

1. seconds to grade one plan, to search a brief (lab 12's own planner) and to draw lab 12's briefs; how many drawn
   briefs the course's fixed-margin reference plan fails, and why;
2. the margin sized from P(miss) against module 11's fixed x1.2, on both named briefs;
3. the sensitivity of the 30B plan sized from P(miss): P(miss) at each assumption's low and high;
4. checkpointless goodput, simulated, at 256, 2,048 and 16,384 nodes (AWS: "up to 95%");
5. the first-order waste against renewal theory's exact expectation (module 8).
Printed, never asserted (the machine is shared); the agreements are tests (tests/plan, tests/course/test_lab12.py).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

from fmlab.labs import lab12
from fmlab.plan import capstone, reliability, scenario, simulate


def timed(fn, *args, **kwargs):
    start = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=5)
    args = parser.parse_args()

    print("1. grading")
    for key, brief in capstone.BRIEFS.items():
        ref = capstone.reference_plan(brief)
        g, seconds = timed(capstone.grade, ref, brief)
        (best, best_grade), search_s = timed(lab12.search, brief)
        print(f"  {key}: grade {1000 * seconds:.0f} ms (2 x {capstone.RUNS:,} runs); search {search_s:.1f} s -> "
              f"{best.platform}, {best.nodes} nodes, {best.reserved_days} days, {best.recovery}: P90 "
              f"${best_grade.cost_p90:,.0f} against the reference's ${g.cost_p90:,.0f}")
    fails = 0
    for seed in range(args.draws):
        drawn, seconds = timed(lab12.draw, seed)
        why = [lab12.reference_fails(b) for b, _ in drawn]
        fails += sum(bool(w) for w in why)
        print(f"  draw seed {seed}: {seconds:.1f} s, the reference fails {sum(bool(w) for w in why)} of {len(drawn)}: "
              + " | ".join(w[:70] for w in why if w))
    print(f"  the reference plan failed {fails} of {args.draws * lab12.DRAWN} drawn briefs")

    print("2. the margin sized from P(miss)")
    for key, brief in capstone.BRIEFS.items():
        ref = capstone.reference_plan(brief)
        sized = capstone.days_for_miss(ref, brief, seeds=(1, 2), runs=4000)
        g = capstone.grade(replace(ref, reserved_days=sized), brief)
        print(f"  {key}: x1.2 -> {ref.reserved_days} days; sized -> {sized} days, P(miss) {g.p_miss:.1%}")

    print("3. sensitivity of the 30B plan sized from P(miss)")
    brief = capstone.BRIEFS["gpt-30b"]
    ref = capstone.reference_plan(brief)
    edge = replace(ref, reserved_days=capstone.days_for_miss(ref, brief))
    rows, seconds = timed(capstone.sensitivity, edge, brief, runs=2000)
    for r in rows[:6]:
        print(f"  {r['assumption']:26} {r['low']:>9g} .. {r['high']:<9g} P(miss) {r['P(miss) at low']:.1%} .. "
              f"{r['P(miss) at high']:.1%}")
    print(f"  ({len(rows)} assumptions in {seconds:.2f} s)")

    print("4. checkpointless goodput, simulated (70B's state, 10 s steps)")
    for nodes in (256, 2048, 16_384):
        s = scenario.checkpointless_at_scale(nodes)
        print(f"  {nodes:6,} nodes ({8 * nodes:,} GPUs): {simulate.simulate(s, runs=500, seed=0).goodput.mean():.1%}")

    print("5. first order against exact (module 8)")
    for tau, delta, mtbf, restart in ((2.0, 0.05, 396.0, 0.25), (0.5, 0.01, 3.0, 0.25), (1.0, 0.2, 1.0, 0.25)):
        first = reliability.wasted_fraction(tau, delta, mtbf, restart)
        exact = reliability.expected_wasted_fraction(tau, delta, mtbf, restart)
        print(f"  tau {tau} h, delta {delta} h, MTBF {mtbf} h, R {restart} h: first {first:.2%}, exact {exact:.2%}, "
              f"x{first / exact:.2f}")


if __name__ == "__main__":
    main()
