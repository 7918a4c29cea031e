"""A simulator scenario from the course's own plan: every rate read from the module that owns it, none typed twice.

    from fmlab.plan import capacity, scenario, simulate
    from fmlab.plan.layout import make_plan
    plan = make_plan("gpt-30b", 300e9, "ml.p5.48xlarge", 16, parallel=layout)
    held = capacity.reservation(plan.days)                               # module 11: what to reserve
    s = scenario.scenario_for(plan, scenario.Chances(), reserved_days=held.days, region="us-east-1")   # a brief's chances
    simulate.simulate(s).summary(deadline_hours=20 * 24)

Where each input comes from:
- the work: the planner's days (module 1's arithmetic at its MFU) and layout (module 6's memory rule);
- failures: Llama 3's per-node rate (`reliability.LLAMA3_405B`), detection of a hang: module 8's collective timeout
  (`reliability.hang_detection_hours`);
- the recovery option, its save, restart and memory: module 11 (`recovery.options` and its `Assumptions`); an
  asynchronous save stalls `simulate.SYNC_OVER_ASYNC_STALL` times less (module 8's measurement);
- the checkpoint interval: Daly's optimum for that save and rate unless given (module 8);
- loss spikes: `spikes_per_run` of them on average (PaLM 540B saw about 20, `simulate.PALM_SPIKES`; the caller
  says how many it expects), caught by module 10's held-out gate every `eval_every_hours` (each evaluation of
  `eval_tokens` costs forward passes at a third of a training step's cost per token), or after
  `simulate.UNWATCHED_HOURS` without one;
- the job chain: `job_days`, e.g. SageMaker's 28-day limit (`fmlab.service.rules.MAX_RUNTIME_SECONDS`, passed in by
  the caller: the plan floor does not import the service layer), and the start-up allowance
  (`capacity.START_UP_HOURS`); HyperPod runs one long job (`job_days=None`, the default);
- the reservation: module 11's `capacity.reservation` (whole days, the 30-minute end), its price
  `capacity.RESERVED_RATE` for the counts the plans sell (`instances_bought`), and EC2's on-demand price after it
  (`capacity.EC2_ON_DEMAND_AT_PRICE_DATE`): one basis, EC2's prices of one date (`capacity.PRICE_BASIS`); on a
  platform, what it costs beside its instances (`platforms.Platform.cluster_usd_per_hour`) on every hour of both.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace

from fmlab.plan import capacity, platforms, published, recovery, reliability
from fmlab.plan.compute import PlanError
from fmlab.plan.layout import checkpoint_gb
from fmlab.plan.simulate import PALM_SPIKES, SYNC_OVER_ASYNC_STALL, UNWATCHED_HOURS, Scenario

ASSUMPTIONS = recovery.Assumptions()  # module 11's, until the learner gives their own


def step_seconds(plan, global_batch_tokens: float | None = None) -> float:
    """Seconds per optimizer step at the plan's speed: the global batch's tokens over the run's tokens per second
    (default batch: the plan's global batch, or one micro-batch per data-parallel rank where it has none)."""
    sequences = plan.global_batch or plan.parallel.dp(plan.devices) * plan.micro_batch
    tokens = global_batch_tokens or sequences * plan.seq_len
    return tokens / (plan.tokens / (plan.days * 86400))


def synced_restore_hours(plan, keep: int, assumptions: recovery.Assumptions = ASSUMPTIONS) -> float:
    """A SageMaker training job's checkpoint download at its start: the whole checkpoint_s3_uri prefix (`keep` saves
    of the whole training state) to every instance at the node's S3 read rate (module 8)."""
    return reliability.transfer_hours(keep * plan.checkpoint_gb["training"], assumptions.s3_read_gb_per_s_per_node)


def recovery_option(plan, name: str, assumptions: recovery.Assumptions = ASSUMPTIONS,
                    global_batch_tokens: float | None = None, platform: str | None = None,
                    keep: int = 1, node_mtbf_hours: float = reliability.LLAMA3_405B.node_mtbf_hours) -> recovery.Option:
    """Module 11's option `name` for this plan's state and nodes; on a platform, with its restart: a SageMaker
    training job's restart is a new job (its start-up, then the whole synced prefix of `keep` saves to every
    instance); HyperPod's is module 11's node replacement, each node reading its own shard."""
    state_gb = plan.checkpoint_gb["training"]
    found = {o.name: o for o in recovery.options(state_gb, plan.instances, step_seconds(plan, global_batch_tokens),
                                                 assumptions, node_mtbf_hours)}
    if name not in found:
        raise PlanError(f"no recovery option {name!r}: choose one of {', '.join(found)}")
    option = found[name]
    if platform is not None and platforms.platform(platform).restart_is_new_job:
        restore = synced_restore_hours(plan, keep, assumptions) if platforms.platform(platform).synced_checkpoints \
            else reliability.transfer_hours(state_gb / plan.instances, assumptions.s3_read_gb_per_s_per_node)
        option = replace(option, restart_hours=capacity.START_UP_HOURS + restore)
    return option


def upload_seconds(plan, option: str = "checkpoint to S3", assumptions: recovery.Assumptions = ASSUMPTIONS) -> float:
    """How long one save takes to reach its store, stall or no stall: each node's share of the state at its write
    rate (S3, or host memory for the tiered option). A save every fewer seconds than this never completes."""
    return recovery_option(plan, option, assumptions).save_seconds


def _stall_seconds(option: recovery.Option, async_save: bool, sync_over_async: float = SYNC_OVER_ASYNC_STALL) -> float:
    return option.save_seconds / (sync_over_async if async_save else 1.0)


def _daly_hours(plan, option: recovery.Option, save_seconds: float, spikes_per_hour: float = 0.0,
                node_mtbf_hours: float = reliability.LLAMA3_405B.node_mtbf_hours) -> float:
    """Daly's interval between durable saves, for the events that roll back to one: every failure (for
    checkpointless only the ones it cannot absorb) and every loss spike, their rates added."""
    mtbf = reliability.job_mtbf_hours(plan.instances, node_mtbf_hours)
    rate = (option.unrecoverable_share if option.loses == "step" else 1.0) / mtbf + spikes_per_hour
    return reliability.daly_interval_hours(max(save_seconds, 1e-6) / 3600, 1 / rate)


def daly_interval_hours(plan, option: str = "checkpoint to S3", async_save: bool = True,
                        assumptions: recovery.Assumptions = ASSUMPTIONS, spikes_per_run: float = 0.0,
                        node_mtbf_hours: float = reliability.LLAMA3_405B.node_mtbf_hours) -> float:
    """Module 8's checkpoint interval for this plan: Daly's optimum for the option's save stall (asynchronous saves
    stall SYNC_OVER_ASYNC_STALL times less) and the rate of what rolls back to a save: Llama 3's failures on the
    plan's nodes and, given `spikes_per_run`, the run's loss spikes."""
    chosen = recovery_option(plan, option, assumptions)
    spikes = spikes_per_run / (plan.days * 24) if spikes_per_run > 0 else 0.0
    return max(_daly_hours(plan, chosen, _stall_seconds(chosen, async_save), spikes, node_mtbf_hours),
               chosen.save_seconds / 3600)


def checkpoint_every_steps(plan, option: str = "checkpoint to S3", async_save: bool = True,
                           assumptions: recovery.Assumptions = ASSUMPTIONS) -> int:
    """Daly's interval in optimizer steps at the plan's predicted step: the script's --checkpoint-every (pass
    --async-checkpoint with the default `async_save`, or the interval is too short for the stall it then has)."""
    return max(1, round(daly_interval_hours(plan, option, async_save, assumptions) * 3600 / step_seconds(plan)))


MAX_SPIKES_PER_RUN = 50 * PALM_SPIKES  # far past any published run: a brief beyond it is a typing error


@dataclass(frozen=True, kw_only=True)
class Chances:
    """What a run faces and cannot choose (module 12's ledger, fmlab.plan.capstone.LEDGER, gives each a range and a
    source): how often nodes fail and how a failure shows, capacity that comes late, loss spikes and how well a loss
    alert sees them, what a save and a restart take. A capstone Brief is one, with its goals; QUIET is none of them."""

    node_mtbf_hours: float = reliability.LLAMA3_405B.node_mtbf_hours
    hang_share: float = 0.1  # failures that hang rather than crash (noticed at the collective timeout)
    restart_failure_share: float = 0.05  # restarts that fail and are tried again
    late_probability: float = 0.1  # capacity (or a healthy cluster) not there on the first day
    late_mean_hours: float = 24.0  # how late, on average
    fallback_wait_mean_hours: float = 7 * 24.0  # after the reservation: 16+ instances on demand take days
    spikes_per_run: float = 4.0  # a fifth of PaLM 540B's 20, for far smaller models
    unwatched_hours: float = UNWATCHED_HOURS  # without a gate, until a person notices a spike
    alert_share: float = 0.8  # spikes a loss alert catches ...
    alert_hours: float = 0.25  # ... within this long
    sync_over_async: float = SYNC_OVER_ASYNC_STALL  # how many times less an asynchronous save stalls
    replace_node_minutes: float = ASSUMPTIONS.replace_node_minutes
    restart_minutes: float = ASSUMPTIONS.restart_minutes  # the job's restart: processes, rendezvous, NCCL, loader
    unrecoverable_share: float = ASSUMPTIONS.unrecoverable_share  # failures checkpointless cannot absorb
    checkpointless_overhead: float = ASSUMPTIONS.checkpointless_overhead
    speed_sigma: float = field(default_factory=lambda: published.error_spread().sigma)  # the planner's error

    def __post_init__(self):
        for f in fields(Chances):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
                raise PlanError(f"the brief's {f.name} must be a finite number >= 0, not {value!r}")
        for name in ("hang_share", "late_probability", "alert_share", "unrecoverable_share"):
            if getattr(self, name) > 1:
                raise PlanError(f"the brief's {name} is a share: from 0 to 1, not {getattr(self, name)!r}")
        for name in ("restart_failure_share", "checkpointless_overhead"):
            if getattr(self, name) >= 1:
                raise PlanError(f"the brief's {name} is a share below 1, not {getattr(self, name)!r}")
        if self.sync_over_async < 1:
            raise PlanError(f"the brief's sync_over_async is how many times less an asynchronous save stalls: >= 1, "
                            f"not {self.sync_over_async!r}")
        if self.node_mtbf_hours <= 0:
            raise PlanError(f"the brief's node_mtbf_hours must be > 0, not {self.node_mtbf_hours!r}")
        if self.spikes_per_run > MAX_SPIKES_PER_RUN:
            raise PlanError(f"the brief's spikes_per_run is at most {MAX_SPIKES_PER_RUN:,} (PaLM 540B saw about "
                            f"{PALM_SPIKES} in its whole run; a run that spikes more does not train), not "
                            f"{self.spikes_per_run!r}")

    @property
    def assumptions(self) -> recovery.Assumptions:
        """Module 11's recovery assumptions with these chances' values."""
        return replace(ASSUMPTIONS, replace_node_minutes=self.replace_node_minutes,
                       restart_minutes=self.restart_minutes,
                       unrecoverable_share=max(self.unrecoverable_share, 1e-6),
                       checkpointless_overhead=self.checkpointless_overhead)


# No chances at all: no hangs, late capacity, failed restarts or spikes (the simulator's plain failures-only run).
QUIET = Chances(hang_share=0.0, restart_failure_share=0.0, late_probability=0.0, late_mean_hours=0.0,
                fallback_wait_mean_hours=0.0, spikes_per_run=0.0, alert_share=0.0, alert_hours=0.0, speed_sigma=0.0)


def scenario_for(plan, chances: Chances = QUIET, *, option: str = "checkpoint to S3",
                 interval_hours: float | None = None, async_save: bool = True, reserved_days: int | None = None,
                 region: str = "", fallback: str = "on-demand", platform: str | None = None,
                 job_days: float | None = None, keep: int = 1, eval_every_hours: float | None = None,
                 alert: bool = False, global_batch_tokens: float | None = None, collective_timeout_s: float = 80.0,
                 straggler_loss: float = 0.0, eval_tokens: float = 10e6) -> Scenario:
    """The simulator's scenario for `plan` (a planned run, or the planner's TrainingPlan) under `chances`, with the
    choices a learner makes: recovery option, interval (default: Daly's for failures and spikes together),
    synchronous or asynchronous saves, the days reserved (None: on demand throughout) in `region`, what happens after
    them, the platform (fmlab.plan.platforms: its job limit and restart; a training job's restart downloads the `keep`
    saves of the synced prefix; its on-demand hours at SageMaker's rate) or, without one, a job limit `job_days`
    (None: one job) and EC2's on-demand rate; the held-out gate's interval (None: no gate) and a loss alert."""
    assumptions = chances.assumptions
    chosen = recovery_option(plan, option, assumptions, global_batch_tokens, platform, keep, chances.node_mtbf_hours)
    save = _stall_seconds(chosen, async_save, chances.sync_over_async)
    spikes = chances.spikes_per_run
    spike_hours = plan.days * 24 / spikes if spikes > 0 else math.inf
    if interval_hours is None:
        interval_hours = max(_daly_hours(plan, chosen, save, 1 / spike_hours, chances.node_mtbf_hours),
                             chosen.save_seconds / 3600)
    if platform is not None and job_days is None:
        job_days = platforms.platform(platform).job_days
    prices = capacity.SAGEMAKER_ON_DEMAND_AT_PRICE_DATE if platform else capacity.EC2_ON_DEMAND_AT_PRICE_DATE
    on_demand_rate = prices.get(plan.instance, math.nan) * plan.instances
    window, bought, reserved_rate = math.inf, 0.0, 0.0
    if reserved_days is not None:
        rate = capacity.RESERVED_RATE.get((plan.instance, region))
        if rate is None:
            known = sorted(r for i, r in capacity.RESERVED_RATE if i == plan.instance)
            raise PlanError(f"no published reserved rate for {plan.instance} in {region or '(no Region given)'}: "
                            f"choose one of {', '.join(known) or 'none (this type has no published rate)'}")
        bought = reserved_days * 24.0
        window = bought - capacity.PLAN_END_MINUTES / 60
        reserved_rate = rate * capacity.instances_bought(plan.instances)
    if math.isnan(on_demand_rate) and (reserved_days is None or fallback == "on-demand"):
        raise PlanError(f"no {'SageMaker' if platform else 'EC2'} on-demand price of {capacity.PRICE_DATE} for "
                        f"{plan.instance} to price the on-demand hours with (the reserved rates' date: "
                        "capacity.PRICE_BASIS)")
    cluster = platforms.platform(platform).cluster_usd_per_hour if platform else 0.0  # billed the whole run
    work_hours = plan.days * 24
    tokens_per_hour = plan.tokens / work_hours
    eval_seconds = eval_tokens / (3 * tokens_per_hour / 3600)  # forward only: a third of training's cost per token
    return Scenario(
        work_hours=work_hours, nodes=plan.instances, interval_hours=interval_hours, save_seconds=save,
        restart_hours=chosen.restart_hours, loses=chosen.loses, step_seconds=chosen.step_seconds,
        unrecoverable_share=chosen.unrecoverable_share if chosen.loses == "step" else 1.0,
        durable_restart_hours=chosen.durable_restart_hours, hang_share=chances.hang_share,
        detection_hours=reliability.hang_detection_hours(collective_timeout_s), straggler_loss=straggler_loss,
        job_hours=job_days * 24 if job_days else math.inf, start_up_hours=capacity.START_UP_HOURS,
        window_hours=window, fallback=fallback, fallback_wait_mean_hours=chances.fallback_wait_mean_hours,
        late_probability=chances.late_probability, late_mean_hours=chances.late_mean_hours,
        reserved_usd_per_hour=reserved_rate + cluster, on_demand_usd_per_hour=cluster if math.isnan(on_demand_rate)
        else on_demand_rate + cluster, reserved_hours_bought=bought, spike_mean_hours=spike_hours,
        eval_every_hours=math.inf if eval_every_hours is None else eval_every_hours, eval_seconds=eval_seconds,
        node_mtbf_hours=chances.node_mtbf_hours, restart_failure_share=chances.restart_failure_share,
        alert_share=chances.alert_share if alert else 0.0, alert_hours=chances.alert_hours,
        steady_overhead=chosen.steady_overhead, unwatched_hours=chances.unwatched_hours,
        speed_sigma=chances.speed_sigma)


# ---------------------------------------------------------------- the simulator's two outside references


def young_daly_check() -> tuple[Scenario, float]:
    """Failures only (16 nodes at Llama 3's rate, tau 2 h, delta 3 min, R 15 min, no start-up): the scenario, and the
    share of wall clock Young/Daly's first-order closed form says it wastes (reliability.wasted_fraction)."""
    s = Scenario(work_hours=20_000, nodes=16, interval_hours=2.0, save_seconds=180, restart_hours=0.25,
                 start_up_hours=0.0)
    return s, reliability.wasted_fraction(s.interval_hours, s.save_seconds / 3600, s.mtbf_hours, s.restart_hours)


def llama3_405b(restart_minutes: float | None = None) -> Scenario:
    """Llama 3 405B's published run, failures only: 2,048 nodes, 405B's training state saved to S3 (module 11's
    option) at Daly's interval, the 54-day snapshot's training less a tenth (the paper's "higher than 90%"); the job's
    restart after a replaced node takes `restart_minutes` (default: ASSUMPTIONS'; the paper does not say)."""
    a = ASSUMPTIONS if restart_minutes is None else replace(ASSUMPTIONS, restart_minutes=restart_minutes)
    option = recovery.options(checkpoint_gb(405e9)["training"], 2048, step_seconds=10.0, a=a)[0]
    mtbf = reliability.job_mtbf_hours(2048)
    return Scenario(work_hours=54 * 24 * 0.9, nodes=2048, save_seconds=option.save_seconds,
                    interval_hours=reliability.daly_interval_hours(option.save_seconds / 3600, mtbf),
                    restart_hours=option.restart_hours, start_up_hours=0.0)


def checkpointless_at_scale(nodes: int, params: float = 70e9, step_seconds: float = 10.0,
                            days: float = 30.0) -> Scenario:
    """Checkpointless recovery (module 11's option) for a `params` model on `nodes` nodes at Llama 3's failure rate,
    failures only, its durable S3 saves at Daly's interval for the failures it cannot absorb: the scenario held to
    AWS's "up to 95% training goodput" (recovery.CHECKPOINTLESS_SOURCE)."""
    option = recovery.options(checkpoint_gb(params)["training"], nodes, step_seconds=step_seconds)[2]
    rare = reliability.job_mtbf_hours(nodes) / option.unrecoverable_share
    return Scenario(work_hours=24 * days, nodes=nodes, loses="step", step_seconds=step_seconds,
                    interval_hours=reliability.daly_interval_hours(option.save_seconds / 3600, rare),
                    save_seconds=option.save_seconds, restart_hours=option.restart_hours,
                    unrecoverable_share=option.unrecoverable_share, durable_restart_hours=option.durable_restart_hours,
                    steady_overhead=option.steady_overhead, start_up_hours=0.0)


def held_fixed() -> list[dict]:
    """What every capstone run assumes and the ledger does not vary: each value read from where the simulator takes
    it, with its unit and its source, low and high the value (the capstone's ledger shows them under its ranges)."""
    import inspect

    defaults = inspect.signature(scenario_for).parameters
    rows = [
        {"assumption": "collective_timeout_s", "value": defaults["collective_timeout_s"].default, "unit": "s",
         "source": "a hang is noticed at the collective timeout plus the trace gather (module 8's watchdog setting; "
                   "reliability.hang_detection_hours)"},
        {"assumption": "straggler_loss", "value": defaults["straggler_loss"].default, "unit": "",
         "source": "assumed: no slow node drags the step (0); set it to a measured share if one does"},
        {"assumption": "eval_tokens", "value": defaults["eval_tokens"].default, "unit": "tokens",
         "source": "assumed: module 10's held-out gate reads 10M tokens a time, forward only"},
        {"assumption": "start_up_hours", "value": capacity.START_UP_HOURS, "unit": "h",
         "source": "the course's allowance per job start: instances, image, data and checkpoint (capacity)"},
        {"assumption": "speed_sigma", "value": Chances().speed_sigma, "unit": "",
         "source": "the planner's own error: each simulated run's step is the predicted one times e^N(0, sigma), "
                   "sigma putting the 10th and 90th percentiles at the published runs' predicted / reported "
                   "(published.error_spread, notebook 07)"},
        {"assumption": "s3_gb_per_s_per_node", "value": ASSUMPTIONS.s3_write_gb_per_s_per_node, "unit": "GB/s",
         "source": "module 8's assumption: 10 Gbit/s per node to and from S3, saves and restarts alike "
                   "(recovery.Assumptions)"},
    ]
    return [{**r, "low": r["value"], "high": r["value"], "source": f"held fixed: {r['source']}"} for r in rows]
