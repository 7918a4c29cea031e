"""A pretraining run simulated under chance: failures, detection, restarts, checkpoints, a job chain, a reserved
window that ends, capacity that comes late. Ten thousand runs at once, vectorised (numpy), for the capstone (module 12).

    from fmlab.plan import simulate
    scenario = simulate.Scenario(work_hours=310, nodes=16, interval_hours=2.0, save_seconds=40, restart_hours=0.3)
    out = simulate.simulate(scenario, runs=10_000, seed=0)
    out.p_miss(deadline_hours=20 * 24), out.cost_percentile(90), out.goodput.mean()

One run, as the simulator plays it (hours of wall clock from the day the capacity is reserved for):
- capacity is late with `late_probability`, by an exponential delay of mean `late_mean_hours` (the reservation's
  clock runs all the same);
- the job trains in cycles of `interval_hours` of training and a save that stalls it `save_seconds` (module 8);
  stragglers slow the training by `straggler_loss`;
- failures come at the job's rate (Llama 3's per-node rate times `nodes`, an exponential clock): a share
  `hang_share` hang and are noticed only when the collective timeout fires (`detection_hours`), the rest at once;
  then the recovery option's restart (`restart_hours`) and, for a checkpoint restart ("interval"), the work since
  the last save is redone. A restart can fail (`restart_failure_share`: tried again in full) or be struck by the
  next failure before it is done (the same exponential clock: at 100,000 nodes a 15-minute restart outlasts the job's
  MTBF), and is then begun again; Checkpointless ("step") absorbs a failure with half a step redone on average, except the
  share `unrecoverable_share`, which restarts from the durable save (`durable_restart_hours`);
- the loss diverges now and then (`spike_mean_hours` of training between spikes); a loss alert on the training loss
  notices a share `alert_share` of them within `alert_hours`, the evaluation gate the rest at its next held-out
  evaluation (every `eval_every_hours`, each stalling training `eval_seconds`; without a gate, after
  `unwatched_hours`), and the run rolls back to the last save before the spike and restarts, skipping the batches
  around the spike as PaLM did (Chowdhery et al. 2022, section 5.1: restarted about 100 steps before the spike and
  skipped 200-500 batches), so the same data does not spike it again;
- a steady overhead (`steady_overhead`: e.g. keeping checkpointless's replica in step) slows all training;
- a job ends at its time limit (`job_hours`: SageMaker's 28 days, or the job's MaxRuntime) after a last save, and
  the next job of the chain pays `start_up_hours`;
- the reserved window ends (`window_hours`: what was bought, less the 30 minutes in which the plan already ends its
  instances) whether or not the run is done: the script saves before it, and the run goes on on demand, or on
  extensions bought `extension_days` at a time at the reserved rate (`fallback`), once that capacity is there (an
  exponential wait of mean `fallback_wait_mean_hours`: 16 p5 on demand are rarely free at once) and after a
  start-up.
The cost is the reservation (paid in full, used or not), the extensions, and the on-demand hours.

Every rate is an input; `scenario_for` reads them from the modules that own them (catalog, reliability, recovery,
capacity). Checked against Young/Daly's closed form (reliability.wasted_fraction) and Llama 3's reported effective
training time (tests/plan/test_simulate.py). Torch-free.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from fmlab.plan import reliability
from fmlab.plan.compute import PlanError

HOURS_PER_DAY = 24.0
# Module 8's measurement: an asynchronous save stalls the saving step 5x (41 MB of state) to 15x (310 MB) less than a
# synchronous one (benchmarks/checkpoint_stall.py on 2 CPU cores, benchmarks/README.md, 2026-11-25); the simulator
# takes the smaller ratio.
SYNC_OVER_ASYNC_STALL = 5.0
LLAMA3_EFFECTIVE_TRAINING = 0.90  # "higher than 90% effective training time" (Llama 3 paper, section 3.3.4)
# Loss spikes: PaLM 540B "observed spikes in the loss roughly 20 times during training" (Chowdhery et al., "PaLM:
# Scaling Language Modeling with Pathways", 2022, section 5.1): the published reference for how many a run may see.
PALM_SPIKES = 20
PALM_SKIPPED_BATCHES = (200, 500)  # section 5.1: batches skipped after each rollback
UNWATCHED_HOURS = 12.0  # assumed: without a gate, a person notices a diverged loss within half a day
MAX_EVENTS = 100_000  # a bound on the loop: more events than this in one run is a scenario that cannot finish
# The events one run may be expected to hold (failures and loss spikes) before the simulator refuses, naming the cause:
# the loop takes about 0.3 ms an event for 4,000 runs on 2 cores, and the run with the most events sets its length,
# so 5,000 keeps every call within a few seconds (benchmarks/simulate_runs.py; 2026-11-29).
EVENT_BUDGET = 5_000
SPEED_STREAM = 63  # the random stream each run's speed is drawn from, apart from the failures' (seeded [seed, 63])


# Limits that `inf` turns off; every other number must be finite (NaN never passes).
_MAY_BE_INFINITE = ("job_hours", "window_hours", "spike_mean_hours", "eval_every_hours")
_NUMBER_FIELDS = ("work_hours", "interval_hours", "save_seconds", "restart_hours", "step_seconds",
                  "unrecoverable_share", "durable_restart_hours", "node_mtbf_hours", "hang_share", "detection_hours",
                  "straggler_loss", "job_hours", "start_up_hours", "window_hours", "fallback_wait_mean_hours",
                  "spike_mean_hours", "eval_every_hours", "eval_seconds", "unwatched_hours", "late_probability",
                  "late_mean_hours", "reserved_usd_per_hour", "on_demand_usd_per_hour", "reserved_hours_bought",
                  "restart_failure_share", "alert_share", "alert_hours", "steady_overhead", "speed_sigma")


def _number(name: str, value) -> float:
    """`value` as a float: a real number (int or float, not bool), finite unless the field is a limit."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise PlanError(f"{name} must be a number, not {value!r}")
    value = float(value)
    if math.isnan(value) or (math.isinf(value) and name not in _MAY_BE_INFINITE):
        limit = "" if name in _MAY_BE_INFINITE else " (only " + ", ".join(_MAY_BE_INFINITE) + " may be inf)"
        raise PlanError(f"{name} must be a finite number{limit}, not {value!r}")
    return value


@dataclass(frozen=True)
class Scenario:
    """Everything one simulated run depends on; hours unless named otherwise. `inf` turns a limit off."""

    work_hours: float  # training time without failures, saves or stragglers (the planner's days x 24)
    nodes: int
    interval_hours: float  # training between two (durable) checkpoints
    save_seconds: float  # what one save stalls training
    restart_hours: float  # from a noticed failure to training again (replace, restart, read the checkpoint)
    loses: str = "interval"  # "interval": back to the last save; "step": checkpointless, half a step redone
    step_seconds: float = 0.0
    unrecoverable_share: float = 1.0  # "step": failures it cannot absorb, restarted from the durable save
    durable_restart_hours: float = 0.0  # "step": the restart of those
    node_mtbf_hours: float = reliability.LLAMA3_405B.node_mtbf_hours
    hang_share: float = 0.0  # failures that hang (noticed after the collective timeout) rather than crash
    detection_hours: float = field(default_factory=reliability.hang_detection_hours)
    straggler_loss: float = 0.0  # share of throughput lost to slow nodes
    job_hours: float = math.inf  # one job's time limit (a chain of jobs beyond it)
    start_up_hours: float = 1.0  # each job of the chain, and each move to other capacity
    window_hours: float = math.inf  # the reserved window's usable hours; inf: on demand from the start
    fallback: str = "on-demand"  # after the window: "on-demand" or "extend"
    extension_days: int = 1
    fallback_wait_mean_hours: float = 0.0  # from the window's end until the fallback's capacity is there
    spike_mean_hours: float = math.inf  # training hours between loss spikes (inf: none)
    eval_every_hours: float = math.inf  # the gate's held-out evaluation interval (inf: no gate)
    eval_seconds: float = 0.0  # what one evaluation stalls training
    unwatched_hours: float = UNWATCHED_HOURS  # without a gate: until a spike is noticed
    late_probability: float = 0.0
    late_mean_hours: float = 0.0
    reserved_usd_per_hour: float = 0.0  # the whole reservation's rate (every instance)
    on_demand_usd_per_hour: float = 0.0  # the same instances on demand
    reserved_hours_bought: float = 0.0  # paid up front (the window plus its last 30 minutes, whole days)
    restart_failure_share: float = 0.0  # restarts that fail and are tried again in full
    alert_share: float = 0.0  # loss spikes a loss alert on the training loss catches ...
    alert_hours: float = 0.0  # ... within this long
    steady_overhead: float = 0.0  # share of training time lost every step (e.g. a replica kept in step)
    speed_sigma: float = 0.0  # each run's step is the planned one times e^N(0, speed_sigma): the planner's error

    def __post_init__(self):
        if isinstance(self.interval_hours, float) and math.isinf(self.interval_hours):
            raise PlanError("interval_hours=inf would mean no checkpoints, which this simulator does not run (every "
                            "failure would restart from the beginning): give an interval, e.g. Daly's "
                            "(fmlab.plan.scenario.daly_interval_hours)")
        for name in _NUMBER_FIELDS:  # every number checked, and stored as a float (numpy needs them so)
            object.__setattr__(self, name, _number(name, getattr(self, name)))
        for name in ("work_hours", "interval_hours", "node_mtbf_hours", "spike_mean_hours", "eval_every_hours",
                     "window_hours", "job_hours"):
            if not getattr(self, name) > 0:
                hint = " (inf: none)" if name in _MAY_BE_INFINITE else ""
                raise PlanError(f"{name} must be > 0{hint}, not {getattr(self, name)!r}")
        for name in _NUMBER_FIELDS:
            if not getattr(self, name) >= 0:
                raise PlanError(f"{name} must be >= 0, not {getattr(self, name)!r}")
        for name in ("hang_share", "late_probability", "unrecoverable_share", "alert_share"):
            if not 0 <= getattr(self, name) <= 1:
                raise PlanError(f"{name} must be a share from 0 to 1, not {getattr(self, name)!r}")
        for name in ("straggler_loss", "restart_failure_share", "steady_overhead"):
            if not 0 <= getattr(self, name) < 1:
                raise PlanError(f"{name} must be in [0, 1), not {getattr(self, name)!r}")
        for name in ("nodes", "extension_days"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
                raise PlanError(f"{name} must be a whole number >= 1, not {value!r}")
            object.__setattr__(self, name, int(value))
        if self.loses not in ("interval", "step"):
            raise PlanError(f"loses must be 'interval' or 'step', not {self.loses!r}")
        if self.fallback not in ("on-demand", "extend"):
            raise PlanError(f"fallback must be 'on-demand' or 'extend', not {self.fallback!r}")
        if not self.job_hours > self.start_up_hours:
            raise PlanError(f"job_hours ({self.job_hours}) must be longer than the start-up ({self.start_up_hours})")
        if self.loses == "step" and not self.step_seconds > 0:
            raise PlanError("step_seconds must be > 0 for checkpointless recovery (it redoes half a step)")

    @property
    def mtbf_hours(self) -> float:
        return reliability.job_mtbf_hours(self.nodes, self.node_mtbf_hours)

    def with_(self, **changes) -> Scenario:
        return replace(self, **changes)


@dataclass
class Outcomes:
    """Per simulated run (arrays of `runs`): finish, cost and where the time went."""

    scenario: Scenario
    finish_hours: np.ndarray  # from the reservation's start to the last step
    cost_usd: np.ndarray
    failures: np.ndarray
    spikes: np.ndarray  # loss spikes rolled back
    lost_hours: np.ndarray  # redone work, detection and restarts
    save_hours: np.ndarray
    start_up_hours: np.ndarray  # the start-ups of the chain's jobs and of each move to other capacity
    late_hours: np.ndarray  # capacity late on the first day
    waited_hours: np.ndarray  # waiting for the fallback's capacity after the window
    on_demand_hours: np.ndarray
    extensions: np.ndarray  # extensions bought (each extension_days)
    speed: np.ndarray | None = None  # each run's real step over the planned one (None: all as planned)

    @property
    def runs(self) -> int:
        return len(self.finish_hours)

    @property
    def finish_days(self) -> np.ndarray:
        return self.finish_hours / HOURS_PER_DAY

    @property
    def goodput(self) -> np.ndarray:
        """New training at full speed over the wall clock once the capacity is there (start-ups, saves, failures
        and stragglers are the rest)."""
        work = self.scenario.work_hours * (1.0 if self.speed is None else self.speed)
        return work / (self.finish_hours - self.late_hours - self.waited_hours)

    def p_miss(self, deadline_hours: float) -> float:
        return float(np.mean(self.finish_hours > deadline_hours))

    def cost_percentile(self, q: float) -> float:
        return float(np.percentile(self.cost_usd, q))

    def summary(self, deadline_hours: float | None = None) -> dict:
        out = {"runs": self.runs, "finish days P50": float(np.median(self.finish_days)),
               "finish days P90": float(np.percentile(self.finish_days, 90)),
               "cost P50 $": float(np.median(self.cost_usd)), "cost P90 $": self.cost_percentile(90),
               "failures mean": float(self.failures.mean()), "spikes mean": float(self.spikes.mean()),
               "goodput mean": float(self.goodput.mean())}
        if deadline_hours is not None:
            out["P(miss deadline)"] = self.p_miss(deadline_hours)
        return out


def _trained(elapsed: np.ndarray, tau: float, cycle: float) -> np.ndarray:
    """Training hours in `elapsed` wall hours of cycles that start at a save point (tau training, then a save)."""
    return tau * np.floor(elapsed / cycle) + np.minimum(np.mod(elapsed, cycle), tau)


def _restarts(rng, restart: np.ndarray, mtbf: float, fail_share: float) -> tuple[np.ndarray, np.ndarray]:
    """Hours until training runs again after restarts of `restart` hours each, and the failures that struck during
    them: an attempt is cut short by the next failure (the job's exponential clock, memoryless) or fails at its end
    (`fail_share`); either way it is begun again. Failed attempts are geometric; one cut short lasts, on average,
    an exponential's mean given it is shorter than the restart."""
    restart = np.asarray(restart, dtype=float)
    p_hit = -np.expm1(-restart / mtbf)
    p_ok = (1 - p_hit) * (1 - fail_share)
    if np.any(p_ok < 1e-6):
        raise PlanError(f"a restart of {restart.max():.2g} h almost never finishes (a failure every {mtbf:.2g} h, "
                        f"{fail_share:.0%} of restarts failing): restart faster, or use fewer nodes")
    failed = rng.geometric(p_ok) - 1
    hit = rng.binomial(failed, np.clip(p_hit / np.maximum(1 - p_ok, 1e-300), 0.0, 1.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        cut = np.where(p_hit > 0, mtbf - restart * np.exp(-restart / mtbf) / np.maximum(p_hit, 1e-300), 0.0)
    return restart + hit * cut + (failed - hit) * restart, hit


def _refuse_what_cannot_finish(s: Scenario, work: float, tau: float, cycle: float, mtbf: float) -> None:
    """PlanError, naming the cause, when one run would hold more than EVENT_BUDGET failures and spikes on average:
    a scenario that would take the simulator minutes is one whose run barely moves (or never finishes)."""
    if s.loses == "interval":  # a checkpoint commits only after a failure-free cycle: e^(cycle/mtbf) - 1 failures
        failures = work / tau * math.expm1(min(cycle / mtbf, 700.0))  # each, on average, before it does
    else:  # checkpointless: every failure over the run's training, and its restart
        failures = (work + s.restart_hours * work / mtbf) / mtbf
    restarts = s.restart_hours / (1 - s.restart_failure_share)
    if s.loses == "interval" and restarts * (1 / mtbf) > 5 and failures > EVENT_BUDGET:  # renewal: restarts lose the race
        raise PlanError(f"the scenario cannot finish: a failure every {60 * mtbf:.1f} min against a restart of "
                        f"{60 * restarts:.1f} min, so almost every restart is struck before it ends: fewer nodes, a "
                        "faster restart, or a higher node_mtbf_hours")
    if failures > EVENT_BUDGET and s.loses == "interval":
        raise PlanError(f"the scenario cannot finish: about {failures:,.0f} failures before the last checkpoint "
                        f"(a failure every {mtbf:.2g} h against {cycle:.2g} h between checkpoints): save more "
                        "often, or check node_mtbf_hours and nodes")
    if failures > EVENT_BUDGET:
        raise PlanError(f"about {failures:,.0f} failures in one run (one every {60 * mtbf:.1f} min over {work:,.0f} h "
                        f"of training): more than the {EVENT_BUDGET:,} events a simulated run may hold, which would take "
                        "minutes. Simulate fewer nodes, or a shorter stretch of the run (goodput is per hour)")
    spikes = 0.0
    if math.isfinite(s.spike_mean_hours):  # each spike redoes about half an interval, where more spikes may come
        redone = min(tau / 2 / s.spike_mean_hours, 1.0)
        spikes = math.inf if redone > 0.95 else work / s.spike_mean_hours / (1 - redone)
    if spikes > EVENT_BUDGET:
        about = "more" if math.isinf(spikes) else f"about {spikes:,.0f}"
        raise PlanError(f"the scenario cannot finish: {about} loss spikes per run (one every "
                        f"{s.spike_mean_hours:.2g} h of training, against {tau:.2g} h between saves), each a rollback: "
                        f"PaLM 540B saw about {PALM_SPIKES} in its whole run; check spikes_per_run")
    if failures + spikes > EVENT_BUDGET:
        raise PlanError(f"the scenario cannot finish in reasonable time: about {failures:,.0f} failures and "
                        f"{spikes:,.0f} loss spikes per run, over {EVENT_BUDGET:,} events")


def simulate(s: Scenario, runs: int = 10_000, seed: int = 0) -> Outcomes:
    """`runs` independent runs of scenario `s`, all advanced together one event at a time (numpy)."""
    if not isinstance(runs, int) or runs < 1:
        raise PlanError(f"runs must be a whole number >= 1, not {runs!r}")
    rng = np.random.default_rng(seed)
    work = s.work_hours / (1 - s.straggler_loss) / (1 - s.steady_overhead)  # the same work at a lower rate
    if math.isfinite(s.eval_every_hours):
        work *= 1 + s.eval_seconds / 3600 / s.eval_every_hours  # the gate's evaluations stall training
    tau, save = s.interval_hours, s.save_seconds / 3600
    cycle, mtbf = tau + save, s.mtbf_hours
    # each run's step as fast or as slow as the planner's error allows: drawn from a stream of its own, so the
    # failures, spikes and waits of every run are those it meets at the planned speed
    speed = (np.exp(np.random.default_rng([seed, SPEED_STREAM]).normal(0.0, s.speed_sigma, runs))
             if s.speed_sigma else None)
    _refuse_what_cannot_finish(s, work * math.exp(3 * s.speed_sigma), tau, cycle, mtbf)
    work = work * speed if speed is not None else np.full(runs, work)

    late = np.where(rng.random(runs) < s.late_probability, rng.exponential(max(s.late_mean_hours, 1e-12), runs), 0.0)
    wall = late + s.start_up_hours  # the first job's start-up
    anchor = np.zeros(runs)  # training hours done at the last save point the cycles count from
    phase = np.zeros(runs)  # wall hours since that save point
    in_job = np.full(runs, s.start_up_hours)
    window_end = np.full(runs, s.window_hours)
    on_demand_from = np.where(np.isinf(window_end), late, np.inf)  # no window: on demand once capacity is there
    failures, extensions = np.zeros(runs, dtype=np.int64), np.zeros(runs, dtype=np.int64)
    spikes = np.zeros(runs, dtype=np.int64)
    spike_mean = s.spike_mean_hours * (1 + save / tau)  # in wall hours of training cycles
    lost, saves, start_ups, waited = np.zeros(runs), np.zeros(runs), np.full(runs, s.start_up_hours), np.zeros(runs)
    active = np.ones(runs, dtype=bool)

    for _ in range(MAX_EVENTS):
        idx = np.flatnonzero(active)
        if idx.size == 0:
            break
        ph = phase[idx]
        remaining = work[idx] - anchor[idx]
        full = np.maximum(np.ceil(remaining / tau - 1e-12) - 1, 0)  # cycles (with their saves) before the last
        to_finish = np.maximum(full * cycle + (remaining - full * tau) - ph, 0.0)
        to_failure = rng.exponential(mtbf, idx.size)
        to_end = np.maximum(np.minimum(s.job_hours - in_job[idx], window_end[idx] - wall[idx]), 0.0)
        to_spike = rng.exponential(spike_mean, idx.size) if math.isfinite(spike_mean) else np.full(idx.size, np.inf)
        dt = np.minimum(np.minimum(np.minimum(to_finish, to_failure), to_end), to_spike)
        event = np.where(dt == to_finish, 0, np.where(dt == to_failure, 1, np.where(dt == to_spike, 3, 2)))
        saves[idx] += np.floor((ph + dt) / cycle) - np.floor(ph / cycle)
        wall[idx] += dt
        in_job[idx] += dt
        phase[idx] = ph + dt
        active[idx[event == 0]] = False

        fail = idx[event == 1]
        if fail.size:
            failures[fail] += 1
            total = phase[fail]
            absorbed = (rng.random(fail.size) >= s.unrecoverable_share) if s.loses == "step" \
                else np.zeros(fail.size, dtype=bool)
            notice = np.where(rng.random(fail.size) < s.hang_share, s.detection_hours, 0.0)
            restart, struck = _restarts(rng, np.where(absorbed, s.restart_hours, s.durable_restart_hours
                                                      if s.loses == "step" else s.restart_hours), mtbf,
                                        s.restart_failure_share)
            failures[fail] += struck
            half_step = np.where(absorbed, rng.random(fail.size) * s.step_seconds / 3600, 0.0)
            back_to = np.floor(total / cycle) * cycle  # the last completed save
            lost[fail] += notice + restart + half_step + np.where(absorbed, 0.0, total - back_to)
            anchor[fail] += np.where(absorbed, 0.0, tau * np.floor(total / cycle))
            phase[fail] = np.where(absorbed, total, 0.0)
            wall[fail] += notice + restart + half_step
            in_job[fail] += notice + restart + half_step

        spiked = idx[event == 3]
        if spiked.size:  # noticed at the next evaluation (or by a person), rolled back to the save before it
            spikes[spiked] += 1
            total = phase[spiked]
            notice = (rng.random(spiked.size) * s.eval_every_hours if math.isfinite(s.eval_every_hours)
                      else np.full(spiked.size, s.unwatched_hours))
            notice = np.where(rng.random(spiked.size) < s.alert_share, s.alert_hours, notice)
            # the work since the save before the spike is redone: the spike, and the training until it is noticed
            back_to = np.floor(total / cycle) * cycle
            restart, struck = _restarts(rng, np.full(spiked.size, s.durable_restart_hours if s.loses == "step"
                                                     else s.restart_hours), mtbf, s.restart_failure_share)
            failures[spiked] += struck
            lost[spiked] += total - back_to + notice + restart
            anchor[spiked] += tau * np.floor(total / cycle)
            phase[spiked] = 0.0
            wall[spiked] += notice + restart
            in_job[spiked] += notice + restart

        ends = idx[event == 2]
        if ends.size:  # the job's time limit or the window's end: a last save, then a new job
            anchor[ends] += _trained(phase[ends], tau, cycle)
            phase[ends] = 0.0
            saves[ends] += 1
            gone = ends[wall[ends] >= window_end[ends] - 1e-9]
            if gone.size:
                wait = rng.exponential(s.fallback_wait_mean_hours, gone.size) if s.fallback_wait_mean_hours else 0.0
                waited[gone] += wait
                wall[gone] += wait
                if s.fallback == "extend":
                    window_end[gone] = wall[gone] + save + s.extension_days * HOURS_PER_DAY
                    extensions[gone] += 1
                else:
                    on_demand_from[gone] = wall[gone]
                    window_end[gone] = np.inf
            wall[ends] += save + s.start_up_hours
            start_ups[ends] += s.start_up_hours
            in_job[ends] = s.start_up_hours
    else:
        raise PlanError(f"more than {MAX_EVENTS:,} events in one simulated run: the scenario cannot finish (a "
                        f"failure every {mtbf:.2f} h against a restart of {s.restart_hours:.2f} h?)")

    on_demand = np.where(np.isinf(on_demand_from), 0.0, np.maximum(wall - on_demand_from, 0.0))
    cost = (s.reserved_usd_per_hour * (s.reserved_hours_bought + extensions * s.extension_days * HOURS_PER_DAY)
            + s.on_demand_usd_per_hour * on_demand)
    return Outcomes(s, wall, cost, failures, spikes, lost, saves * save, start_ups, late, waited, on_demand,
                    extensions, speed)
