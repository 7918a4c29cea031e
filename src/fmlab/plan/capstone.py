"""The capstone's brief, the plan a learner hands in, and how it is graded (module 12).

    from fmlab.plan import capstone
    brief = capstone.BRIEFS["gpt-30b"]                    # model, tokens, deadline, budget, platforms, the chances
    capstone.ledger(brief)                                # every assumption: value, range, source; then those held fixed
    plan = capstone.reference_plan(brief)                 # the course's simple rule (fixed margin), made with its tools
    capstone.problems(plan, brief)                        # [] when it fits, can be bought, saves and keeps what it must
    grade = capstone.grade(plan, brief, seeds=(1, 2))     # simulated: P(miss the deadline), P90 cost, verdict
    capstone.days_for_miss(plan, brief)                   # the fewest reserved days that keep P(miss) within MAX_MISS
    capstone.sensitivity(plan, brief)                     # P(miss) and P90 cost at each assumption's low and high

A plan is the team's decisions (`DECISIONS`), each with a reason: the platform (SageMaker training jobs, HyperPod
Slurm or EKS: `fmlab.plan.platforms`, what each allows), the instances and layout (modules 1, 5-7: it must fit, by the
planner), the global batch (module 6's limit), the reservation (module 11: a count and days that can be bought, in a
Region with a published rate), the checkpoint interval and how many saves are kept (module 8), the recovery option
(module 11), the detector of a loss spike (a loss alert, module 10's held-out gate, or both) and the fallback after the
reservation. `problems` refuses what cannot work before any chance (a platform that cannot run the recovery or use
the reservation, saves faster than their upload, too few kept); `grade` simulates the run and passes it when P(miss)
is at most `MAX_MISS` and the P90 cost is within the budget. Torch-free.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from fmlab.plan import capacity, catalog, platforms, reliability, scenario, simulate
from fmlab.plan.compute import PlanError
from fmlab.plan.layout import GLOBAL_BATCH_LIMIT_TOKENS
from fmlab.plan.parallelism import ParallelConfig
from fmlab.plan.planned import PlannedRun, keep_needed, planned_run

MAX_MISS = 0.10  # a plan may miss its deadline in at most this share of simulated runs
P_COST = 90  # and its cost at this percentile must be within the budget
RUNS = 4_000  # simulated runs per seed
DETECTORS = ("loss alert", "held-out gate", "both", "none")
# Counts a plan is searched over: one training plan's, then several plans of 64 (HyperPod only: fmlab.plan.platforms)
NODE_COUNTS = capacity.PLAN_COUNTS + (128, 256, 512)
DECISIONS = ("platform", "nodes", "layout", "global batch", "reservation", "interval", "retention", "recovery",
             "detector", "fallback")  # what a plan's `reasons` must say something about


@dataclass(frozen=True)
class Assumption:
    """One line of a brief's ledger: the range it may take and where the value comes from."""

    low: float
    high: float
    source: str  # a citation, a measurement, or "assumed: ..."
    unit: str = ""


# The ledger: every chance the simulation rests on. Sourced ones say where from; "assumed" ones are the course's
# guesses, and their ranges are what lab 12 draws briefs from and notebook 12's sensitivity chart moves.
LEDGER: dict[str, Assumption] = {
    "node_mtbf_hours": Assumption(*reliability.node_mtbf_range_hours(),
                                  "Llama 3's dedicated run (high) to Meta's research clusters' RSC-1 rate (low): "
                                  "reliability.LLAMA3_405B, reliability.RESEARCH_CLUSTERS", "node-hours per failure"),
    "hang_share": Assumption(0.0, 0.3, "assumed: failures that hang rather than crash (noticed at the collective "
                             "timeout)"),
    "restart_failure_share": Assumption(0.0, 0.2, "assumed: restarts that fail (a bad replacement node, a rendezvous "
                                        "that times out) and are tried again"),
    "late_probability": Assumption(0.0, 0.3, "assumed: capacity (or a healthy cluster) not there on the first day"),
    "late_mean_hours": Assumption(6.0, 72.0, "assumed: how late, on average", "h"),
    "fallback_wait_mean_hours": Assumption(24.0, 14 * 24.0, "assumed: after the reservation, days to find 16+ "
                                           "instances on demand or an extension", "h"),
    "spikes_per_run": Assumption(0.0, float(simulate.PALM_SPIKES), "PaLM 540B saw about 20 loss spikes "
                                 "(simulate.PALM_SPIKES); a smaller model fewer: assumed"),
    "unwatched_hours": Assumption(2.0, 24.0, "assumed: without a gate, until a person notices a spike the alert "
                                  "missed", "h"),
    "alert_share": Assumption(0.5, 1.0, "assumed: spikes a loss alert on the training loss catches (a slow "
                              "divergence passes under its threshold)"),
    "alert_hours": Assumption(0.05, 0.5, "assumed: a loss alert's delay (a window of logged steps)", "h"),
    "sync_over_async": Assumption(5.0, 15.0, "module 8's measurement: an asynchronous save stalls 5x (41 MB) to 15x "
                                  "(310 MB) less, on 2 CPU cores (benchmarks/checkpoint_stall.py)", "x"),
    "replace_node_minutes": Assumption(5.0, 30.0, "assumed: detect, replace, rejoin (recovery.Assumptions)", "min"),
    "restart_minutes": Assumption(5.0, 20.0, "the job's restart after the node is back (processes, rendezvous, NCCL, "
                                  "data loader; checkpointless skips it): with a 10-minute replacement, AWS's '15-30 "
                                  "minutes or more' for a checkpoint-based recovery (recovery.CHECKPOINTLESS_SOURCE)",
                                  "min"),
    "unrecoverable_share": Assumption(0.0, 0.3, "assumed: failures checkpointless cannot absorb whatever its replicas "
                                      "(a second failure among a shard's replicas is added by recovery.options)"),
    "checkpointless_overhead": Assumption(0.0, 0.1, "assumed: a per-step upkeep no AWS page publishes; its mechanism "
                                          "(a second optimizer instance) adds no periodic save, so 0 unless measured"),
}


@dataclass(frozen=True)
class Brief(scenario.Chances):
    """What the run must achieve, within what, on which platforms; and the chances it runs under (scenario.Chances,
    each of the LEDGER's assumptions, keyword-only)."""

    name: str
    model: str
    tokens: float
    deadline_days: float  # from the first reserved day to the last step
    budget_usd: float  # the P_COST-th percentile cost must be within it
    instances: tuple[str, ...] = ("ml.p5.48xlarge",)  # the types the team may use
    max_nodes: int = 64
    platforms: tuple[str, ...] = ("training jobs",)  # where the team may run (fmlab.plan.platforms)

    def __post_init__(self):
        super().__post_init__()
        for name in ("tokens", "deadline_days", "budget_usd"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
                raise PlanError(f"the brief's {name} must be a finite number > 0, not {value!r}")
        if isinstance(self.max_nodes, bool) or not isinstance(self.max_nodes, int) or self.max_nodes < 1:
            raise PlanError(f"the brief's max_nodes must be a whole number >= 1, not {self.max_nodes!r}")
        unknown = [p for p in self.platforms if p not in platforms.PLATFORMS]
        if not self.platforms or unknown or isinstance(self.platforms, str):
            raise PlanError(f"the brief's platforms must be a tuple of {', '.join(platforms.PLATFORMS)}, not "
                            f"{self.platforms!r}")

    @property
    def deadline_hours(self) -> float:
        return self.deadline_days * 24


def ledger(brief: Brief) -> list[dict]:
    """The brief's assumptions (value, range, source), then what is held fixed (scenario.held_fixed: not varied)."""
    return [{"assumption": name, "value": getattr(brief, name), "low": a.low, "high": a.high, "unit": a.unit,
             "source": a.source} for name, a in LEDGER.items()] + scenario.held_fixed()


BRIEFS = {
    "gpt-30b": Brief("module 7's 30B run, today", "gpt-30b", 300e9, deadline_days=14, budget_usd=225_000),
    "llama3.1-8b": Brief("an 8B model on 2T tokens in under three weeks", "llama3.1-8b", 2e12, deadline_days=18,
                         budget_usd=500_000, platforms=tuple(platforms.PLATFORMS)),
}


@dataclass(frozen=True)
class RunPlan:
    """What a learner hands in: the decisions (DECISIONS), and a reason for each in `reasons`."""

    instance: str
    nodes: int
    region: str
    parallel: ParallelConfig
    global_batch: int  # sequences per optimizer step, every replica together
    reserved_days: int  # days bought (a training plan)
    micro_batch: int = 1
    platform: str = "training jobs"
    reservation_kind: str = "training plan"
    recovery: str = "checkpoint to S3"
    interval_hours: float | None = None  # None: Daly's optimum for the option's save, failures and spikes together
    async_save: bool = True
    keep_checkpoints: int = 3  # saves kept (module 8 keeps the last 3)
    detector: str = "both"  # how a loss spike is noticed: DETECTORS
    eval_every_hours: float | None = 1.0  # module 10's held-out gate, when the detector has one
    fallback: str = "on-demand"  # after the reservation: "on-demand" or "extend"
    reasons: dict = field(default_factory=dict, compare=False)  # DECISIONS -> one line each: why


def _plan_of(run: RunPlan, brief: Brief) -> PlannedRun:
    """The learner's run as the course plans a run (fmlab.plan.planned.planned_run of its layout and micro-batch), its
    days predicted at the run's own global batch (when that batch is whole micro-batches on every replica; problems()
    says so when it is not)."""
    batch = run.global_batch
    try:
        per_pass = run.parallel.dp(run.nodes * catalog.instance(run.instance).accelerators) * run.micro_batch
    except (KeyError, ZeroDivisionError):
        per_pass = 0
    whole = isinstance(batch, int) and per_pass and batch >= per_pass and batch % per_pass == 0
    return planned_run(brief.model, brief.tokens, run.instance, run.nodes, parallel=run.parallel,
                       micro_batch=run.micro_batch, global_batch=batch if whole else None)


def problems(run: RunPlan, brief: Brief) -> list[str]:
    """What makes the plan impossible before any chance: it must fit, hold its batch, be buyable, run on its
    platform, and save and keep its checkpoints as physics allows."""
    out = [f"{name} must be a whole number >= 1, not {getattr(run, name)!r}"
           for name in ("nodes", "reserved_days", "global_batch", "micro_batch")
           if isinstance(getattr(run, name), bool) or not isinstance(getattr(run, name), int) or getattr(run, name) < 1]
    if out:
        return out
    if run.instance not in brief.instances:
        out.append(f"{run.instance} is not one of the brief's instance types ({', '.join(brief.instances)})")
    if run.nodes > brief.max_nodes:
        out.append(f"{run.nodes} nodes: the brief allows at most {brief.max_nodes}")
    try:
        plan = _plan_of(run, brief)
    except PlanError as e:
        return out + [f"the layout cannot be built: {e}"]
    if not plan.fits:
        out.append(f"does not fit: {plan.memory_gb_per_device:.1f} GB per device against {plan.usable_memory_gb:.1f} "
                   f"usable on {run.instance} (re-planned with fmlab.plan.layout.make_plan)")
    replicas = run.parallel.dp(plan.devices)
    per_pass = replicas * run.micro_batch
    if run.global_batch < per_pass or run.global_batch % per_pass:
        out.append(f"global batch {run.global_batch} sequences: a multiple of {per_pass} (replicas {replicas} x "
                   f"micro-batch {run.micro_batch}), the accumulation a whole number")
    tokens = run.global_batch * plan.seq_len
    if tokens > GLOBAL_BATCH_LIMIT_TOKENS:
        out.append(f"global batch of {tokens:,} tokens: above module 6's limit of {GLOBAL_BATCH_LIMIT_TOKENS:,}")
    if not capacity.reservable(run.nodes):
        out.append(f"{run.nodes} instances cannot be reserved: a plan holds {capacity.PLAN_COUNTS}, and more than "
                   f"{capacity.PLAN_COUNTS[-1]} are several plans ({' + '.join(map(str, capacity.plans_for(run.nodes)))}"
                   f" = {capacity.instances_bought(run.nodes)})")
    if (run.instance, run.region) not in capacity.RESERVED_RATE:
        regions = sorted(r for i, r in capacity.RESERVED_RATE if i == run.instance)
        out.append(f"no published reserved rate for {run.instance} in {run.region!r}: {', '.join(regions) or 'none'}")
    try:
        buyable = capacity.buyable_days(run.reserved_days, run.reservation_kind)
        if buyable != run.reserved_days or not isinstance(run.reserved_days, int):
            out.append(f"{run.reserved_days} days of {run.reservation_kind} cannot be bought: {buyable} can")
    except PlanError as e:
        out.append(str(e))
    if run.reserved_days * 24 < plan.days * 24 + capacity.START_UP_HOURS + capacity.PLAN_END_MINUTES / 60:
        out.append(f"{run.reserved_days} days cannot hold even the run's {plan.days:.2f} days, its start-up and the "
                   f"plan's last {capacity.PLAN_END_MINUTES} minutes")
    return out + _platform_problems(run, brief) + _checkpoint_problems(run, brief, plan)


def _platform_problems(run: RunPlan, brief: Brief) -> list[str]:
    out = []
    if run.platform not in brief.platforms:
        out.append(f"{run.platform!r} is not one of the brief's platforms ({', '.join(brief.platforms)})")
    out += platforms.problems(run.platform, recovery=run.recovery, reservation=run.reservation_kind,
                              instances=run.nodes)
    if run.detector not in DETECTORS:
        out.append(f"detector {run.detector!r}: choose one of {', '.join(DETECTORS)}")
    elif run.detector in ("held-out gate", "both"):
        every = run.eval_every_hours
        if isinstance(every, bool) or not isinstance(every, int | float) or not 0 < every < math.inf:
            out.append(f"the held-out gate needs eval_every_hours, a finite number of hours > 0, not {every!r}")
    if run.fallback not in ("on-demand", "extend"):
        out.append(f"fallback {run.fallback!r}: 'on-demand' or 'extend'")
    return out


def detection_hours(run: RunPlan, brief: Brief) -> float:
    """The longest a loss spike can go unnoticed under the plan's detector: the gate's interval when there is a gate
    (it catches what the alert misses), else the brief's unwatched hours (a loss alert misses a slow divergence)."""
    every = run.eval_every_hours
    gate = run.detector in ("held-out gate", "both") and isinstance(every, int | float) and 0 < every < math.inf
    return float(every) if gate else brief.unwatched_hours


def _checkpoint_problems(run: RunPlan, brief: Brief, plan) -> list[str]:
    out = []
    keep = run.keep_checkpoints
    if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
        return [f"keep_checkpoints must be a whole number >= 1, not {keep!r}"]
    if run.interval_hours is not None:
        hours = run.interval_hours
        if isinstance(hours, bool) or not isinstance(hours, int | float) or not 0 < hours < math.inf:
            return [f"interval_hours must be a finite number of hours > 0, or None for Daly's, not {hours!r}"]
    try:
        option = scenario.recovery_option(plan, run.recovery, brief.assumptions)
        s = scenario_of(run, brief)
    except PlanError as e:
        return [str(e)]
    upload = option.save_seconds
    if s.interval_hours * 3600 < upload:
        out.append(f"a save every {s.interval_hours * 3600:.0f} s never completes: each node's {option.name} save "
                   f"takes {upload:.0f} s to upload (its share of the state at its write rate); save at most every "
                   f"{upload:.0f} s")
    window = detection_hours(run, brief)
    need = keep_needed(s.interval_hours, window) if brief.spikes_per_run > 0 else 1
    if keep < need:
        out.append(f"keeping {keep} save(s) every {s.interval_hours:.2f} h cannot reach back past a spike noticed up "
                   f"to {window:g} h later ({run.detector}): keep at least {need}")
    if option.memory_where == "GPU":
        per_device = option.memory_gb_per_node / catalog.instance(run.instance).accelerators
        if plan.memory_gb_per_device + per_device > plan.usable_memory_gb:
            out.append(f"checkpointless keeps a replica of {per_device:.1f} GB per GPU in GPU memory: with the "
                       f"layout's {plan.memory_gb_per_device:.1f} GB it is over the {plan.usable_memory_gb:.1f} "
                       "usable; shard further or use more nodes")
    return out


def scenario_of(run: RunPlan, brief: Brief) -> simulate.Scenario:
    """The simulator's scenario for the plan under the brief's chances, on the plan's platform."""
    plan = _plan_of(run, brief)
    gate = run.detector in ("held-out gate", "both")
    return scenario.scenario_for(
        plan, brief, option=run.recovery, interval_hours=run.interval_hours, async_save=run.async_save,
        reserved_days=run.reserved_days, region=run.region, fallback=run.fallback, platform=run.platform,
        keep=run.keep_checkpoints, eval_every_hours=run.eval_every_hours if gate else None,
        alert=run.detector in ("loss alert", "both"), global_batch_tokens=run.global_batch * plan.seq_len)


@dataclass
class Grade:
    brief: str
    problems: list[str]
    p_miss: float = math.nan
    cost_p90: float = math.nan
    finish_days_p90: float = math.nan
    goodput: float = math.nan
    failed: list[str] = field(default_factory=list)  # what the simulation found wrong

    @property
    def passed(self) -> bool:
        return not self.problems and not self.failed


def grade(run: RunPlan, brief: Brief, seeds=(1, 2), runs: int = RUNS) -> Grade:
    """Refuse what cannot work, then simulate under each seed: the worst seed decides."""
    found = problems(run, brief)
    if found:
        return Grade(brief.name, found)
    s = scenario_of(run, brief)
    try:
        outs = [simulate.simulate(s, runs=runs, seed=seed) for seed in seeds]
    except PlanError as e:  # a run the simulator refuses (it cannot finish): refused with its cause
        return Grade(brief.name, [str(e)])
    p_miss = max(o.p_miss(brief.deadline_hours) for o in outs)
    cost = max(o.cost_percentile(P_COST) for o in outs)
    g = Grade(brief.name, [], p_miss, cost, max(float(np.percentile(o.finish_days, 90)) for o in outs),
              min(float(o.goodput.mean()) for o in outs))
    if p_miss > MAX_MISS:
        g.failed.append(f"misses the {brief.deadline_days:g}-day deadline in {p_miss:.0%} of runs (at most "
                        f"{MAX_MISS:.0%})")
    if cost > brief.budget_usd:
        g.failed.append(f"P{P_COST} cost ${cost:,.0f} is over the budget of ${brief.budget_usd:,.0f}")
    return g


def plan_for(brief: Brief, instance: str, nodes: int, region: str, margin: float = capacity.JOB_MARGIN,
             kind: str = "training plan", platform: str | None = None) -> RunPlan:
    """The course's simple rule for `nodes` x `instance`: the planned run (fmlab.plan.planned.planned_run: module 7's
    layout, micro-batch and global batch), module 11's reservation at a fixed `margin`, S3 checkpoints at Daly's
    interval kept as the detector needs, a loss alert and the hourly gate; on `platform` (default: the brief's first).
    PlanError when nothing fits or cannot be bought. A fixed margin is not sized from the chances: `days_for_miss` is."""
    platform = platform or brief.platforms[0]
    planned = planned_run(brief.model, brief.tokens, instance, nodes)
    days = capacity.reservation(planned.days, margin=margin, kind=kind).days
    run = RunPlan(instance, nodes, region, planned.parallel, planned.global_batch, days,
                  micro_batch=planned.micro_batch, reservation_kind=kind, platform=platform)
    interval = scenario_of(run, brief).interval_hours
    return replace(run, keep_checkpoints=keep_needed(interval, detection_hours(run, brief)))


def reference_plan(brief: Brief, margin: float = capacity.JOB_MARGIN) -> RunPlan:
    """The course's simple plan: `plan_for` each allowed type and reservable count on the brief's first platform, in
    the first Region with a published rate; the cheapest up front that meets the deadline. It sizes the margin by a
    fixed rule and never looks at the chances: a brief with frequent failures or a slow fallback can fail it."""
    best, best_cost, tried = None, math.inf, []
    for name in brief.instances:
        regions = sorted(r for i, r in capacity.RESERVED_RATE if i == name)
        if not regions:
            tried.append(f"{name}: no published reserved rate")
            continue
        for nodes in (n for n in NODE_COUNTS if n <= brief.max_nodes):
            try:
                run = plan_for(brief, name, nodes, regions[0], margin)
            except PlanError as e:
                tried.append(f"{nodes} x {name}: {e}")
                continue
            if run.reserved_days > brief.deadline_days:
                tried.append(f"{nodes} x {name}: {run.reserved_days} days reserved > {brief.deadline_days:g}")
                continue
            cost = capacity.RESERVED_RATE[(name, run.region)] * nodes * 24 * run.reserved_days
            if cost < best_cost:
                best, best_cost = run, cost
    if best is None:
        raise PlanError(f"no plan meets the brief '{brief.name}': {'; '.join(tried[-4:])}")
    return best


def days_for_miss(run: RunPlan, brief: Brief, seeds=(1,), runs: int = 2_000, max_miss: float = MAX_MISS) -> int:
    """The fewest days of the plan's reservation kind that keep P(miss the deadline) within `max_miss` under the
    brief's chances: the margin sized from the simulation, not a fixed x1.2. PlanError when none within the
    deadline does."""
    plan = _plan_of(run, brief)
    days = capacity.buyable_days(plan.days + (capacity.START_UP_HOURS + capacity.PLAN_END_MINUTES / 60) / 24,
                                 run.reservation_kind)
    while days <= math.ceil(brief.deadline_days):
        g = grade(replace(run, reserved_days=days), brief, seeds=seeds, runs=runs)
        if g.problems:
            raise PlanError("; ".join(g.problems))
        if g.p_miss <= max_miss:
            return days
        days = capacity.buyable_days(days + 1, run.reservation_kind)
    raise PlanError(f"no reservation within the {brief.deadline_days:g}-day deadline keeps P(miss) within "
                    f"{max_miss:.0%} for {run.nodes} x {run.instance} on {run.platform}")


def sensitivity(run: RunPlan, brief: Brief, seed: int = 1, runs: int = 2_000) -> list[dict]:
    """Each assumption of the ledger at its low and its high, the others as the brief has them: P(miss) and the
    P90 cost at each end (a tornado chart's bars), sorted by how far P(miss) swings. The plan's decisions stay as
    they are, its interval included (Daly's for the brief as given), so only the chances move."""
    run = replace(run, interval_hours=scenario_of(run, brief).interval_hours)
    base = grade(run, brief, seeds=(seed,), runs=runs)
    rows = []
    for name, a in LEDGER.items():
        ends = {}
        for end in ("low", "high"):
            g = grade(run, replace(brief, **{name: getattr(a, end)}), seeds=(seed,), runs=runs)
            ends[end] = g
        rows.append({"assumption": name, "value": getattr(brief, name), "low": a.low, "high": a.high,
                     "P(miss) at low": ends["low"].p_miss, "P(miss) at high": ends["high"].p_miss,
                     f"P{P_COST} cost at low $": ends["low"].cost_p90,
                     f"P{P_COST} cost at high $": ends["high"].cost_p90,
                     "P(miss)": base.p_miss, f"P{P_COST} cost $": base.cost_p90,
                     "refused": "; ".join(ends["low"].problems + ends["high"].problems), "source": a.source})
    return sorted(rows, key=lambda r: -float(np.nan_to_num(abs(r["P(miss) at high"] - r["P(miss) at low"]), nan=1.0)))


def variations(run: RunPlan, brief: Brief, seed: int = 1, runs: int = RUNS) -> list[dict]:
    """What each decision bought: the plan, then one decision changed at a time, each simulated under the same seed
    (P(miss), P90 cost, mean goodput, and the reserved days and dollars paid up front)."""
    plan = _plan_of(run, brief)
    changes = [("the plan as it is", {})]
    for margin in (1.0, 1.5):
        try:
            days = capacity.reservation(plan.days, margin=margin, kind=run.reservation_kind).days
        except PlanError:
            continue
        changes.append((f"reservation at margin x{margin:g} ({days} days)", {"reserved_days": days}))
    daly = scenario_of(run, brief).interval_hours
    for hours in (daly / 4, daly * 4):
        keep = keep_needed(hours, detection_hours(run, brief))
        changes.append((f"checkpoint every {hours:.2f} h (Daly: {daly:.2f} h), keep {keep}",
                        {"interval_hours": hours, "keep_checkpoints": keep}))
    changes.append(("synchronous saves", {"async_save": False}))
    if run.detector != "loss alert":
        keep = keep_needed(daly, brief.unwatched_hours)
        changes.append((f"loss alert only (no gate), keep {keep}", {"detector": "loss alert",
                                                                     "keep_checkpoints": keep}))
    changes.append(("no detector (a person notices a spike)",
                    {"detector": "none", "keep_checkpoints": keep_needed(daly, brief.unwatched_hours)}))
    for option in ("tiered: memory, then S3", "checkpointless"):
        if option != run.recovery:
            changes.append((f"recovery: {option}", {"recovery": option}))
    changes.append((f"fallback: {'extend' if run.fallback == 'on-demand' else 'on-demand'}",
                    {"fallback": "extend" if run.fallback == "on-demand" else "on-demand"}))
    rows = []
    for label, change in changes:
        changed = replace(run, **change)
        g = grade(changed, brief, seeds=(seed,), runs=runs)
        rate = capacity.RESERVED_RATE.get((changed.instance, changed.region), math.nan)
        rows.append({"choice": label, "passes": g.passed, "P(miss)": g.p_miss, f"P{P_COST} cost $": g.cost_p90,
                     "goodput": g.goodput, "reserved days": changed.reserved_days,
                     "paid up front $": rate * changed.nodes * 24 * changed.reserved_days,
                     "why not": "; ".join(g.problems + g.failed)})
    return rows


def reasons_missing(run: RunPlan) -> list[str]:
    """The decisions the plan gives no reason for (each needs a line of its own, not an empty string)."""
    reasons = run.reasons if isinstance(run.reasons, dict) else {}
    return [d for d in DECISIONS if not (isinstance(reasons.get(d), str) and len(reasons[d].split()) >= 3)]

