"""The capstone's brief, the plan a learner hands in, and how it is graded (module 12).

    from fmlab.plan import capstone
    brief = capstone.BRIEFS["gpt-30b"]                    # model, tokens, deadline, budget, what may be used
    plan = capstone.reference_plan(brief)                 # the course's own decisions, made with its tools
    capstone.problems(plan, brief)                        # [] when it fits, can be bought and holds its batch
    grade = capstone.grade(plan, brief, seeds=(1, 2))     # simulated: P(miss the deadline), P90 cost, verdict

A plan is six decisions: the instances and layout (modules 1, 5-7: it must fit, by the planner), the global batch
(module 6's limit), the reservation (module 11: a count and days that can be bought, in a Region with a published
rate), the checkpoint interval and the recovery option (modules 8 and 11), and the evaluation gate (modules 7 and
10: how often the held-out loss is checked, so that a loss spike is rolled back early). `grade` simulates the run
(`fmlab.plan.simulate`) under the brief's chances and passes it when P(miss the deadline) is at most
`MAX_MISS` and the 90th-percentile cost is within the budget. Torch-free.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from fmlab.plan import capacity, catalog, scenario, simulate
from fmlab.plan.compute import PlanError
from fmlab.plan.layout import GLOBAL_BATCH_LIMIT_TOKENS, candidates, choose, make_plan
from fmlab.plan.parallelism import ParallelConfig

MAX_MISS = 0.10  # a plan may miss its deadline in at most this share of simulated runs
P_COST = 90  # and its cost at this percentile must be within the budget
RUNS = 4_000  # simulated runs per seed
# Chances no one publishes for a given run: the course's assumptions, stated in every brief (change them).
HANG_SHARE = 0.1  # failures that hang (noticed at the collective timeout) rather than crash
LATE_PROBABILITY, LATE_MEAN_HOURS = 0.1, 24.0  # capacity (or a healthy cluster) not there on the first day
FALLBACK_WAIT_MEAN_HOURS = 7 * 24.0  # after the reservation: 16+ instances on demand, or an extension, take days
SPIKES_PER_RUN = 4.0  # loss spikes to roll back in one run: a fifth of PaLM 540B's 20, for far smaller models


@dataclass(frozen=True)
class Brief:
    """What the run must achieve, and within what."""

    name: str
    model: str
    tokens: float
    deadline_days: float  # from the first reserved day to the last step
    budget_usd: float  # the P_COST-th percentile cost must be within it
    instances: tuple[str, ...] = ("ml.p5.48xlarge",)  # the types the team may use
    max_nodes: int = 64
    job_days: float | None = 28.0  # SageMaker training jobs (service.rules.MAX_RUNTIME_SECONDS); None on HyperPod
    hang_share: float = HANG_SHARE
    late_probability: float = LATE_PROBABILITY
    late_mean_hours: float = LATE_MEAN_HOURS
    fallback_wait_mean_hours: float = FALLBACK_WAIT_MEAN_HOURS
    spikes_per_run: float = SPIKES_PER_RUN

    def __post_init__(self):
        for name in ("tokens", "deadline_days", "budget_usd"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
                raise PlanError(f"the brief's {name} must be a finite number > 0, not {value!r}")
        if self.job_days is not None and not (isinstance(self.job_days, int | float) and 0 < self.job_days < math.inf):
            raise PlanError(f"the brief's job_days must be a finite number > 0, or None (HyperPod: one long job), "
                            f"not {self.job_days!r}")
        if isinstance(self.max_nodes, bool) or not isinstance(self.max_nodes, int) or self.max_nodes < 1:
            raise PlanError(f"the brief's max_nodes must be a whole number >= 1, not {self.max_nodes!r}")

    @property
    def deadline_hours(self) -> float:
        return self.deadline_days * 24


BRIEFS = {
    "gpt-30b": Brief("module 7's 30B run, today", "gpt-30b", 300e9, deadline_days=16, budget_usd=260_000),
    "llama3.1-8b": Brief("an 8B model on 2T tokens in under three weeks", "llama3.1-8b", 2e12, deadline_days=18,
                         budget_usd=500_000),
}


@dataclass(frozen=True)
class RunPlan:
    """What a learner hands in: the six decisions."""

    instance: str
    nodes: int
    region: str
    parallel: ParallelConfig
    global_batch: int  # sequences per optimizer step, every replica together
    reserved_days: int  # days bought (a training plan, or Capacity Blocks)
    micro_batch: int = 1
    reservation_kind: str = "training plan"
    recovery: str = "checkpoint to S3"
    interval_hours: float | None = None  # None: Daly's optimum for the option's save
    async_save: bool = True
    fallback: str = "on-demand"  # after the reservation: "on-demand" or "extend"
    eval_every_hours: float | None = 1.0  # module 10's held-out gate during the run (None: no gate)
    notes: dict = field(default_factory=dict, compare=False)  # what the learner wants to say about it


def _plan_of(run: RunPlan, brief: Brief):
    """The planner's plan of the learner's run, its days predicted at the run's own global batch (when that batch
    is whole micro-batches on every replica; problems() says so when it is not)."""
    batch = run.global_batch
    try:
        per_pass = run.parallel.dp(run.nodes * catalog.instance(run.instance).accelerators) * run.micro_batch
    except (KeyError, ZeroDivisionError):
        per_pass = 0
    whole = isinstance(batch, int) and per_pass and batch >= per_pass and batch % per_pass == 0
    return make_plan(brief.model, brief.tokens, run.instance, run.nodes, parallel=run.parallel,
                     micro_batch=run.micro_batch, suggest=False, global_batch=batch if whole else None)


def problems(run: RunPlan, brief: Brief) -> list[str]:
    """What makes the plan impossible before any chance: it must fit, hold its batch, and be buyable."""
    out = []
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
    if run.nodes not in capacity.PLAN_COUNTS:
        out.append(f"{run.nodes} instances cannot be reserved: counts are {capacity.PLAN_COUNTS}")
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
    return out


def scenario_of(run: RunPlan, brief: Brief) -> simulate.Scenario:
    """The simulator's scenario for the plan under the brief's chances."""
    plan = _plan_of(run, brief)
    return scenario.scenario_for(
        plan, option=run.recovery, interval_hours=run.interval_hours, async_save=run.async_save,
        reserved_days=run.reserved_days, region=run.region, fallback=run.fallback, job_days=brief.job_days,
        global_batch_tokens=run.global_batch * plan.seq_len, hang_share=brief.hang_share,
        late_probability=brief.late_probability, late_mean_hours=brief.late_mean_hours,
        fallback_wait_mean_hours=brief.fallback_wait_mean_hours, eval_every_hours=run.eval_every_hours,
        spikes_per_run=brief.spikes_per_run)


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
    outs = [simulate.simulate(s, runs=runs, seed=seed) for seed in seeds]
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
             kind: str = "training plan") -> RunPlan:
    """The course's decisions for `nodes` x `instance`: module 6's layout (`choose`), its smallest global batch, and
    module 11's reservation (`capacity.reservation` at `margin`); PlanError when nothing fits or cannot be bought."""
    row = choose(candidates(brief.model, brief.tokens, instance, nodes))
    layout = row["parallel"]
    plan = make_plan(brief.model, brief.tokens, instance, nodes, parallel=layout, suggest=False,
                     global_batch=layout.dp(nodes * catalog.instance(instance).accelerators))
    days = capacity.reservation(plan.days, margin=margin, kind=kind).days
    return RunPlan(instance, nodes, region, layout, plan.global_batch, days, reservation_kind=kind)


def reference_plan(brief: Brief, margin: float = capacity.JOB_MARGIN) -> RunPlan:
    """The course's own plan: `plan_for` each allowed type and reservable count, in the first Region with a published
    rate, S3 checkpoints saved asynchronously at Daly's interval; the cheapest that meets the deadline."""
    best, best_cost, tried = None, math.inf, []
    for name in brief.instances:
        regions = sorted(r for i, r in capacity.RESERVED_RATE if i == name)
        if not regions:
            tried.append(f"{name}: no published reserved rate")
            continue
        for nodes in (n for n in capacity.PLAN_COUNTS if n <= brief.max_nodes):
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
        changes.append((f"checkpoint every {hours:.2f} h (Daly: {daly:.2f} h)", {"interval_hours": hours}))
    changes.append(("synchronous saves", {"async_save": False}))
    changes.append(("no evaluation gate (a person notices a spike)", {"eval_every_hours": None}))
    changes.append(("evaluation gate every 8 h", {"eval_every_hours": 8.0}))
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
