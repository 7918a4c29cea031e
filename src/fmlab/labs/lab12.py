"""Checks for labs/lab_12_capstone_plan.ipynb: the learner's planner, graded on briefs drawn when the check runs.

    lab12.check_named(plan_run)                 # ex1: the two briefs of notebook 12, every decision with a reason
    lab12.check_drawn(plan_run)                 # ex2: briefs drawn now (model, tokens, platforms, chances, deadline,
                                                #      budget), so no constant plan passes them all
    lab12.summary()                             # raises LabIncomplete while any check fails

The learner writes `plan_run(brief)`, which returns an `fmlab.plan.capstone.RunPlan` with every decision of
`capstone.DECISIONS` made and a reason for each (`reasons`, printed back). A plan is refused if it cannot work
(`capstone.problems`: it must fit, be buyable, run on its platform, save no faster than its upload and keep saves from
before a spike), then simulated under SEEDS, `capstone.RUNS` runs each: P(miss the deadline) at most
`capstone.MAX_MISS` and the 90th-percentile cost within the budget, under the worst seed.

The drawn briefs: each assumption of `capstone.LEDGER` anywhere in its range, the platforms a random subset, the
deadline a random stretch of the run's days and the budget a little above the cheapest plan the check's own search
finds (`search`) with P(miss) within DRAW_MISS, so every drawn brief can be met with the room the lab asks a learner
to leave. The learner's plan_run runs apart (`_apart`): in a forked child, on its own copy of the brief, where the
check's search refuses; nothing it changes reaches the process that grades, and no frame it can reach holds the
search's plan (the draw keeps only its cost). At least one drawn brief is one the course's fixed-margin
`capstone.reference_plan` fails: reusing it fails by what it does, not by its name. Each passing plan is ranked by
its P90 cost against the cheapest the search found.
"""

from __future__ import annotations

import contextlib
import copy
import io
import math
import multiprocessing as mp
import os
import pickle
import secrets
import warnings
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from fmlab.labs import Lab
from fmlab.plan import capacity, capstone, platforms
from fmlab.plan.compute import PlanError
from fmlab.plan.planned import planned_run

LAB = Lab("lab 12", ["ex1_named_briefs", "ex2_drawn_briefs"])
SEEDS = (2027, 4242)  # not the notebook's: a plan tuned to one seed's luck does not pass for it
DRAWN = 3  # briefs per check of ex2
# What a brief is drawn for: the model, its tokens before the draw scales them, and the most instances the brief
# allows. The 70B run reaches 2,048 accelerators: several training plans (HyperPod only) and a failure every few hours,
# where the recovery option decides the days reserved.
FAMILIES = {"gpt-30b": (300e9, 64), "llama3.1-8b": (2e12, 64), "llama3.1-70b": (1.5e12, 256)}
SEARCH_RUNS = 1_000  # runs per seed while the search sizes reservations (the final grade uses capstone.RUNS)
# A drawn brief's deadline and budget come from the search's cheapest plan sized to P(miss) within this, below the
# grade's capstone.MAX_MISS: the room the lab tells a learner to leave (sizing to 8% on seeds of their own). Sized to
# the grade's own 10%, the brief left no room: a learner following the lab's method failed 19 of 200 seeds' draws.
DRAW_MISS = 0.06


def _line(label: str, run: capstone.RunPlan, g: capstone.Grade) -> str:
    figures = (f"P(miss) {g.p_miss:.1%}, P{capstone.P_COST} ${g.cost_p90:,.0f}, goodput {g.goodput:.2%}"
               if not g.problems else "refused")
    return (f"  {label:9} {run.platform}, {run.nodes} x {run.instance}, {run.parallel.label}, {run.reserved_days} "
            f"days, {run.recovery}, keep {run.keep_checkpoints}, {run.detector}, {run.fallback}: {figures}")


class SearchRefused(RuntimeError):
    """plan_run called the check's own search."""


def search(brief: capstone.Brief, seeds=SEEDS, runs: int = capstone.RUNS):
    """The check's own planner: every plan of `candidates` (each allowed platform, count, recovery option and
    fallback, sized to the fewest days that keep P(miss) within bounds), and of those the one `best_of` chooses, with
    its grade (None, None when none passes). Called from a learner's plan_run while the check grades it, it refuses
    (SearchRefused), however it was imported: plan_run runs in a process of its own, where the search does not."""
    return _search(brief, seeds, runs)


def _home_only(search_fn):
    """`search_fn`, refusing in any process but the one that imported the check (the learner's plan_run runs in a
    child of it: _apart). The home process is held in the closure, not in a module switch a learner could flip."""
    home = os.getpid()

    def guarded(*args, **kwargs):
        if os.getpid() != home:
            raise SearchRefused("plan_run called lab12.search, the check's own planner: make the decisions yourself")
        return search_fn(*args, **kwargs)
    guarded.__doc__ = search_fn.__doc__
    return guarded


# P90 costs within this share of the cheapest are a tie: less than any drawn run's reserved day, the luck of the
# on-demand tail. Among tied plans the simplest wins (`simplicity`) unless more machinery lowers P(miss) by at least
# MISS_POINT: a percentage point, about four standard errors of a P(miss) near 5% over two seeds of 4,000 runs.
TIE_BAND = 0.01
MISS_POINT = 0.01


def simplicity(run: capstone.RunPlan) -> tuple:
    """How much machinery a plan runs, least first: the platform (training jobs, then HyperPod Slurm, then EKS), the
    recovery option (S3, tiered, checkpointless), fewer instances, then on-demand before an extension."""
    return (list(platforms.PLATFORMS).index(run.platform),
            platforms.PLATFORMS["HyperPod EKS"].recoveries.index(run.recovery), run.nodes, run.fallback != "on-demand")


def best_of(found: list) -> tuple:
    """The plan to choose of `found` (run, grade) pairs: the cheapest at P90, or, among those within TIE_BAND of it,
    the simplest, unless more machinery lowers P(miss) by MISS_POINT or more (then that one, and so on up). Pay for a
    platform or recovery only where it buys a reserved day or a point of P(miss). (None, None) if none."""
    if not found:
        return None, None
    cheapest = min(g.cost_p90 for _, g in found)
    tied = sorted(((run, g) for run, g in found if g.cost_p90 <= cheapest * (1 + TIE_BAND)),
                  key=lambda pair: (simplicity(pair[0]), pair[1].cost_p90))
    best = tied[0]
    for run, g in tied[1:]:
        if g.p_miss <= best[1].p_miss - MISS_POINT:
            best = (run, g)
    return best


@_home_only
def _candidates(brief: capstone.Brief, seeds=SEEDS, runs: int = capstone.RUNS, max_miss: float = capstone.MAX_MISS):
    """Every plan the search builds that passes within `max_miss`, as (run, grade): each allowed platform, count (8
    or more, up to the brief's), recovery option and fallback, with the planned run's layout and batch, both
    detectors, Daly's interval, the saves the detector needs, and the fewest days that keep P(miss) within
    `max_miss` on the first seed (DRAW_MISS when the draw sets a brief's deadline and budget: room for a learner who
    sizes on seeds of their own). It refuses in any process but the one that imported the check: the learner's
    plan_run runs in a child of it."""
    found = []
    for platform in brief.platforms:
        for instance in brief.instances:
            regions = sorted(r for i, r in capacity.RESERVED_RATE if i == instance)
            for nodes in (n for n in capstone.NODE_COUNTS if 8 <= n <= brief.max_nodes and regions):
                try:
                    planned = planned_run(brief.model, brief.tokens, instance, nodes)
                except PlanError:
                    continue
                for option in platforms.platform(platform).recoveries:
                    for fallback in ("on-demand", "extend"):
                        run = capstone.RunPlan(instance, nodes, regions[0], planned.parallel, planned.global_batch, 1,
                                               micro_batch=planned.micro_batch, platform=platform, recovery=option,
                                               fallback=fallback)
                        interval = capstone.scenario_of(run, brief).interval_hours
                        run = replace(run, keep_checkpoints=capstone.keep_needed(
                            interval, capstone.detection_hours(run, brief)))
                        if capstone.problems(replace(run, reserved_days=capacity.PLAN_DAYS[1]), brief):
                            continue  # refused whatever the days (a count one platform cannot reserve, a replica)
                        try:
                            run = replace(run, reserved_days=capstone.days_for_miss(
                                run, brief, seeds=seeds[:1], runs=SEARCH_RUNS, max_miss=max_miss))
                        except PlanError:
                            continue
                        g = capstone.grade(run, brief, seeds=seeds, runs=runs)
                        if g.passed and g.p_miss <= max_miss:
                            found.append((run, g))
    return found


def candidates(brief: capstone.Brief, seeds=SEEDS, runs: int = capstone.RUNS, max_miss: float = capstone.MAX_MISS):
    """Every passing plan the check's search builds for `brief`, with its grade (notebook 12's map reads them).
    Refuses (SearchRefused) inside a learner's plan_run, as `search` does."""
    return _candidates(brief, seeds, runs, max_miss)


def _search(brief: capstone.Brief, seeds=SEEDS, runs: int = capstone.RUNS, max_miss: float = capstone.MAX_MISS):
    """The best of `_candidates` (`best_of`): it refuses where they do."""
    return best_of(_candidates(brief, seeds, runs, max_miss))


def draw_brief(rng: np.random.Generator, hard: bool = False) -> capstone.Brief:
    """A brief nobody has seen: a model and its tokens, the allowed platforms, and every ledger assumption anywhere in
    its range (`hard`: the unkind end of each, where a fixed margin fails). Its deadline and budget are set by
    `draw` from the search."""
    model = str(rng.choice(list(FAMILIES)))
    base_tokens, max_nodes = FAMILIES[model]
    names = list(platforms.PLATFORMS)
    chosen = tuple(n for n in names if rng.random() < 0.6) or (names[int(rng.integers(len(names)))],)
    chances = {}
    for name, a in capstone.LEDGER.items():
        if name == "node_mtbf_hours":  # a rate over a sixfold range: drawn on a log scale
            value = float(np.exp(rng.uniform(math.log(a.low), math.log(a.high))))
        else:
            value = float(rng.uniform(a.low, a.high))
        chances[name] = value
    if hard:
        chances.update(node_mtbf_hours=capstone.LEDGER["node_mtbf_hours"].low,
                       fallback_wait_mean_hours=capstone.LEDGER["fallback_wait_mean_hours"].high,
                       late_probability=capstone.LEDGER["late_probability"].high)
    tokens = float(base_tokens * rng.uniform(0.6, 1.4))
    return capstone.Brief(f"drawn: {model}, {tokens:.3g} tokens", model, tokens, deadline_days=1.0, budget_usd=1.0,
                          platforms=chosen, max_nodes=max_nodes, **chances)


def reference_fails(brief: capstone.Brief) -> str:
    """Why the course's fixed-margin reference plan fails `brief` under SEEDS ('' when it passes)."""
    try:
        g = capstone.grade(capstone.reference_plan(brief), brief, seeds=SEEDS)
    except PlanError as e:
        return str(e)
    return "; ".join(g.problems + g.failed)


def draw(seed: int, count: int = DRAWN) -> list[tuple[capstone.Brief, float]]:
    """`count` briefs the search can meet, at least one of which the reference plan fails, each with the P90 cost of
    the cheapest passing plan the search found (the plan itself is not kept: nothing the learner's plan_run could
    reach holds it while it runs)."""
    rng = np.random.default_rng(seed)
    out, reference_failed = [], False
    for _ in range(40):
        if len(out) == count and reference_failed:
            break
        hard = len(out) == count - 1 and not reference_failed
        brief = draw_brief(rng, hard=hard)
        days = planned_run(brief.model, brief.tokens, brief.instances[0], brief.max_nodes // 2).days
        brief = replace(brief, deadline_days=float(math.ceil(days * rng.uniform(1.3, 1.8))), budget_usd=1e12)
        best, g = _search(brief, max_miss=DRAW_MISS)
        if best is None:
            continue
        brief = replace(brief, budget_usd=float(round(g.cost_p90 * rng.uniform(1.1, 1.3), -3)))
        fails = bool(reference_fails(brief))
        if hard and not fails:
            continue
        if len(out) < count or fails:
            if len(out) == count:
                out.pop()
            out.append((brief, float(g.cost_p90)))
            reference_failed = reference_failed or fails
    if not reference_failed:
        raise RuntimeError(f"seed {seed}: no brief the reference plan fails was drawn; run the check again")
    return out


def _apart(plan_run: Callable, brief: capstone.Brief, timeout: float = 600.0):
    """plan_run(a copy of brief) in a forked child process: whatever it changes there (the brief, the check's modules,
    any switch) never reaches the process that grades, and the check's search refuses there. Returns its RunPlan (or
    None) and what went wrong (''), printing what it printed."""
    ctx = mp.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)

    def child():
        printed = io.StringIO()
        try:
            with contextlib.redirect_stdout(printed):
                run = plan_run(copy.deepcopy(brief))
            message = (pickle.dumps(run), "")
        except BaseException as e:  # noqa: BLE001 - every error of the learner's is reported, never raised here
            message = (None, f"{type(e).__name__}: {e}")
        try:
            send.send((*message, printed.getvalue()))
        except Exception as e:  # noqa: BLE001 - an unpicklable answer
            send.send((None, f"plan_run must return a capstone.RunPlan ({type(e).__name__}: {e})", printed.getvalue()))
        os._exit(0)

    process = ctx.Process(target=child, daemon=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # Python 3.12+: fork from the kernel's threads
        process.start()
    send.close()
    try:
        if not receive.poll(timeout):
            return None, f"plan_run took over {timeout:.0f} s"
        payload, error, printed = receive.recv()
    except EOFError:
        return None, "plan_run ended its process without an answer"
    finally:
        process.join(5)
        if process.is_alive():
            process.kill()
    if printed:
        print(printed, end="")
    return (pickle.loads(payload) if payload is not None else None), error


def _grade_one(plan_run: Callable, brief: capstone.Brief):
    """The learner's plan for one brief (made apart: _apart), refused with a reason printed when it is not a plan
    with reasons; graded against the check's own brief."""
    if not callable(plan_run):
        print(f"  plan_run must be a function of the brief, not {type(plan_run).__name__}")
        return None, None
    run, error = _apart(plan_run, brief)
    if error:
        print(f"  {error}")
        return None, None
    if not isinstance(run, capstone.RunPlan):
        print(f"  plan_run must return a capstone.RunPlan, not {type(run).__name__}")
        return None, None
    missing = capstone.reasons_missing(run)
    if missing:
        print(f"  give a reason (a few words each) in RunPlan.reasons for: {', '.join(missing)}")
        return run, None
    return run, capstone.grade(run, brief, seeds=SEEDS)


def _say(run: capstone.RunPlan, g: capstone.Grade) -> None:
    for decision in capstone.DECISIONS:
        print(f"    {decision:12} {run.reasons[decision]}")
    for line in g.problems + g.failed:
        print("  " + line)


def _named_one(plan_run: Callable, brief: capstone.Brief) -> bool | None:
    run, g = _grade_one(plan_run, brief)
    if g is None:
        return None
    print(_line("yours", run, g))
    _say(run, g)
    return g.passed


def check_named(plan_run: Callable) -> bool:
    """Ex1, a warm-up: notebook 12's two briefs, which are public (a plan typed for them passes here, and fails
    exercise 2's drawn briefs); every decision with a reason, and a pass under SEEDS."""
    def test(fn):
        print("  a warm-up on notebook 12's two public briefs; exercise 2 draws briefs nobody has seen")
        ok = True
        for brief in capstone.BRIEFS.values():
            print(f"  {brief.name}: {brief.deadline_days:g} days, ${brief.budget_usd:,.0f}, on "
                  f"{', '.join(brief.platforms)}; seeds {SEEDS}")
            passed = _named_one(fn, brief)
            if passed is None:
                return False
            ok = ok and passed
        return ok
    return LAB.check("ex1_named_briefs", plan_run, test,
                     "both briefs met, every decision with a reason",
                     "for each allowed platform and count: planned_run(...) for the layout and batch, a recovery the "
                     "platform runs, a detector, the saves to keep (capstone.keep_needed), the days "
                     "(capstone.days_for_miss); keep the cheapest P90 that passes capstone.grade")


def _drawn_one(plan_run: Callable, brief: capstone.Brief, best_cost: float) -> bool:
    """One drawn brief: the learner's plan graded, ranked against the search's cheapest P90 cost (a plan of their
    own lingers in no frame of the check's while the next brief's plan_run runs)."""
    print(f"  {brief.name}: {brief.deadline_days:g} days, ${brief.budget_usd:,.0f}, on "
          f"{', '.join(brief.platforms)}; failures every {brief.node_mtbf_hours:,.0f} node-hours, "
          f"{brief.spikes_per_run:.1f} spikes, fallback wait {brief.fallback_wait_mean_hours / 24:.1f} days")
    run, g = _grade_one(plan_run, brief)
    if g is None:
        return False
    print(_line("yours", run, g))
    if not g.passed:  # found now, after plan_run has returned: no frame held it while plan_run ran
        best, best_grade = _search(brief, max_miss=DRAW_MISS)
        print(_line("search", best, best_grade))
    why = reference_fails(brief)
    if why:
        print(f"  the course's fixed-margin reference plan fails this brief: {why}")
    _say(run, g)
    if g.passed:
        print(f"  cost: {g.cost_p90 / best_cost - 1:+.1%} against the cheapest passing plan the search found")
    return g.passed


def check_drawn(plan_run: Callable, count: int = DRAWN, seed: int | None = None) -> bool:
    """Ex2: `count` briefs drawn now (or from `seed`, to replay a failure); every one met, each plan's P90 cost
    ranked against the cheapest passing plan the check's search found."""
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= 10:
        raise TypeError(f"count must be a whole number of briefs from 1 to 10, not {count!r}")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise TypeError(f"seed must be a whole number (the one a check printed) or None, not {seed!r}")

    def test(fn):
        drawn_seed = secrets.randbelow(10**6) if seed is None else seed
        print(f"  drawing {count} briefs (seed {drawn_seed}; check_drawn(plan_run, seed={drawn_seed}) replays them)")
        ok = True
        for brief, best_cost in draw(drawn_seed, count):
            ok = _drawn_one(fn, brief, best_cost) and ok
        return ok
    return LAB.check("ex2_drawn_briefs", plan_run, test,
                     f"{count} briefs drawn at check time, every one met",
                     "a brief's chances change the answer: size the reservation from P(miss) (capstone.days_for_miss), "
                     "not a fixed margin, and compare platforms, recoveries and fallbacks by P90 cost")


def summary() -> None:
    LAB.summary()
