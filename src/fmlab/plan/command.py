"""`fmlab plan`: the planned run from the command line, and the argparse types the `fmlab` command shares.

    fmlab plan --model gpt-30b --tokens 300e9 --instance ml.p4d.24xlarge --count 16          # the planner chooses
    fmlab plan --model gpt-30b --tokens 300e9 --instance ml.p5.48xlarge --count 16 --json   # every field
    fmlab plan --model gpt-30b --tokens 300e9 --instance ml.p4d.24xlarge --count 16 --sharding full \
        --activation-checkpointing full                                                    # a layout of yours
    fmlab plan --published tests/plan/published_runs.json                                  # the model held out

Without layout flags the planner chooses the layout and micro-batch (fmlab.plan.planned.planned_run), as every
notebook, job, script and manifest of the course does; the printed plan and `--json` give the whole planned run:
layout, micro-batch, global batch, predicted step, days, cost, checkpoint interval, saves kept and reservation.
"""

from __future__ import annotations

import argparse
import json
import math
import sys

from fmlab.plan import catalog
from fmlab.plan.compute import PlanError
from fmlab.plan.parallelism import CHECKPOINTING, ParallelConfig, parse_bool

EXIT_DOES_NOT_FIT = 3


def real(text: str) -> float:
    return float(text.replace("_", ""))


def boolean(text: str) -> bool:
    """An argparse type for true/false flags, read as fmlab.train reads them (parse_bool)."""
    try:
        return parse_bool(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def number(kind: type, low: float, what: str, low_ok: bool = False, high: float | None = None):
    """An argparse type: a number of `kind` above `low` (or at it, with low_ok), at most `high`."""
    def parse(text: str):
        try:
            value = kind(real(text)) if kind is float else kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a {'number' if kind is float else 'whole number'}"
                                             ) from None
        too_low = value < low if low_ok else value <= low
        if value in (float("inf"), float("-inf")):
            raise argparse.ArgumentTypeError(f"{text} is not a finite number: {what} must be a number you can train")
        if too_low or (high is not None and value > high) or value != value:
            bound = f"at least {low:g}" if low_ok else f"above {low:g}"
            raise argparse.ArgumentTypeError(f"{text} is out of range: {what} must be {bound}"
                                             + (f" and at most {high:g}" if high is not None else ""))
        return value
    return parse


def add_plan(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plan", help="time, cost and memory per device of a pretraining run")
    p.add_argument("--published", metavar="RUNS.json", default=None,
                   help="predict every run of a published-runs file (docs/published-runs.md) and print predicted "
                        "against reported tokens/s per GPU; the other options are then not used")
    p.add_argument("--model", choices=list(catalog.MODELS), help="model preset")
    p.add_argument("--tokens", type=number(float, 0, "training tokens"), default=None,
                   help="training tokens, e.g. 300e9 (default: Chinchilla-optimal, 20 per parameter)")
    p.add_argument("--instance", choices=list(catalog.INSTANCES), help="SageMaker instance type")
    p.add_argument("--count", type=number(int, 1, "the instance count", low_ok=True),
                   help="number of instances")
    p.add_argument("--mfu", type=number(float, 0, "the utilisation", high=1), default=None,
                   help="a what if: plan at this fraction of peak FLOP/s, in (0, 1], instead of the predicted step "
                        "(it is the MFU without recomputation, and the HFU with it)")
    p.add_argument("--global-batch", type=number(int, 1, "the global batch", low_ok=True), default=None,
                   help="sequences per optimizer step (default: GPT-3's batch for the nearest model size, in whole "
                        "micro-batches per data-parallel rank)")
    p.add_argument("--sharding", default=None,
                   help="none | zero1 | zero2 | full | hybrid (with --hybrid-shard-degree); with no layout flag at all "
                        "the planner chooses the layout and micro-batch (layout.choose: the fastest predicted step "
                        "that fits with headroom), as notebook 07 does")
    p.add_argument("--hybrid-shard-degree", type=number(int, 0, "the hybrid shard degree", low_ok=True), default=None,
                   help="with --sharding hybrid: devices per shard group, e.g. 8 (one node)")
    p.add_argument("--tp", type=number(int, 1, "the tensor-parallel degree", low_ok=True), default=None,
                   help="tensor-parallel degree")
    p.add_argument("--pp", type=number(int, 1, "the pipeline-parallel degree", low_ok=True), default=None,
                   help="pipeline-parallel degree")
    p.add_argument("--micro-batch", type=number(int, 1, "the micro-batch", low_ok=True), default=None,
                   help="sequences per device per step")
    p.add_argument("--seq-len", type=number(int, 1, "the sequence length", low_ok=True), default=None,
                   help="sequence length (default: the preset's context)")
    p.add_argument("--activation-checkpointing", default=None, choices=CHECKPOINTING,
                   help="what each layer recomputes in backward (fmlab.train's flag): selective keeps the matmul "
                        "outputs, full only each layer's input")
    p.add_argument("--activation-offloading", nargs="?", const="true", default=None, type=boolean,
                   metavar="BOOL", help="move what each layer keeps for backward to host memory (fmlab.train's flag)")
    p.add_argument("--attention", default="flash", choices=["flash", "eager"],
                   help="attention kernel: flash (fused, FlashAttention/SDPA: no s x s scores kept) or eager")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_plan)


LAYOUT_FLAGS = ("sharding", "hybrid_shard_degree", "tp", "pp", "micro_batch", "activation_checkpointing",
                "activation_offloading")


def cmd_plan(args: argparse.Namespace) -> int:
    from fmlab.plan import compute
    from fmlab.plan.planned import planned_run

    if args.published:
        return _published(args.published, args.json)
    missing = [f"--{name}" for name in ("model", "instance", "count") if getattr(args, name) is None]
    if missing:
        print(f"error: fmlab plan needs {', '.join(missing)} (or --published RUNS.json)", file=sys.stderr)
        return 2
    tokens = args.tokens or compute.chinchilla_tokens(compute.param_count(catalog.model(args.model)))
    chosen = all(getattr(args, name) is None for name in LAYOUT_FLAGS)
    try:
        run = planned_run(args.model, tokens, args.instance, args.count, mfu=args.mfu, attention=args.attention,
                          parallel=None if chosen else _layout_from_flags(args),
                          micro_batch=None if chosen else args.micro_batch or 1, seq_len=args.seq_len,
                          global_batch=args.global_batch)
    except PlanError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.json:
        whole = run.to_dict()
        if run.step:
            from fmlab.plan import published

            spread = published.error_spread()
            whole["days_range"] = list(spread.days(run.days))
            whole["error_spread"] = {"low": spread.low, "median": spread.median, "high": spread.high,
                                     "runs": spread.runs}
        print(json.dumps(_finite(whole), indent=2))
    else:
        if chosen:
            print("layout       chosen by the planner (no layout flag given): the fastest predicted step that fits "
                  "with headroom, micro-batch 1-8 (fmlab.plan.planned.planned_run)")
        print(format_plan(run))
    return 0 if run.fits else EXIT_DOES_NOT_FIT


def _layout_from_flags(args: argparse.Namespace) -> ParallelConfig:
    """The layout the flags give, the unset ones at ParallelConfig's defaults."""
    sharding, degree = args.sharding or "none", args.hybrid_shard_degree or 0
    old, _, spelled = sharding.partition(":")
    if old == "hybrid" and spelled.isdigit() and not degree:  # the course's old spelling
        print(f"note: --sharding {sharding} is the old spelling: write --sharding hybrid --hybrid-shard-degree "
              f"{spelled} (read as that)", file=sys.stderr)
        sharding, degree = "hybrid", int(spelled)
    return ParallelConfig(sharding=sharding, hybrid_shard_degree=degree, tp=args.tp or 1, pp=args.pp or 1,
                          activation_checkpointing=args.activation_checkpointing or "none",
                          activation_offloading=bool(args.activation_offloading))


def _published(path: str, as_json: bool) -> int:
    """`fmlab plan --published RUNS.json`: every run predicted beside its reported throughput."""
    from fmlab.plan import published

    try:
        rows = published.compare(published.load(path))
    except PlanError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if as_json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{'run':<44} {'GPUs':>6} {'predicted':>10} {'reported':>10} {'ratio':>6} {'MFU':>5}  step: compute "
          "+ recompute + exposed comm + slowed beside hidden comm + bubble + optimizer and fixed (s)")
    for r in rows:
        rest = r["optimizer_s"] + r["fixed_s"]
        print(f"{r['name']:<44} {r['gpus']:>6} {r['predicted_tokens_per_second_per_gpu']:>10,.0f} "
              f"{r['reported_tokens_per_second_per_gpu']:>10,.0f} {r['ratio']:>6.2f} {r['predicted_mfu']:>5.0%}  "
              f"{r['compute_s']:.2f} + {r['recompute_s']:.2f} + {r['exposed_communication_s']:.2f} + "
              f"{r['overlap_slowdown_s']:.2f} + {r['bubble_s']:.2f} + {rest:.2f} = {r['step_s']:.2f}")
    s = published.summary(rows)
    print(f"{s['inside']} of {s['runs']} within {s['within']:.0%} of the reported figure, {s['outside']} beyond "
          f"{s['beyond']:.0%} (a run's "
          f"`unexplained` note, where it has one, says which term is off); the worst: {s['worst']} ({s['worst_off']:.0%} off)")
    return 0


def _dollars(value: float) -> str:
    return f"${value:,.0f}" if math.isfinite(value) else "unknown"


def _finite(value):
    """The plan as strict JSON: an unknown cost (NaN, no published price) becomes null."""
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return None if isinstance(value, float) and not math.isfinite(value) else value


def format_plan(run) -> str:
    """The planned run (fmlab.plan.planned.PlannedRun) as `fmlab plan` prints it."""
    plan, lay, world = run.estimate, run.parallel, run.devices
    saving = lay.activation_checkpointing + (" + offloading" if lay.activation_offloading else "")
    lines = [
        f"model        {plan.model}: {plan.params / 1e9:.2f}B parameters, {plan.tokens / 1e9:,.0f}B tokens",
        f"compute      {plan.train_flops:.3g} FLOPs",
        f"cluster      {plan.instances} x {plan.instance} = {plan.devices} devices at HFU {plan.hfu:.0%}, MFU "
        f"{plan.mfu:.0%}" + (" (recomputation re-runs the forward)" if plan.mfu < plan.hfu else ""),
        f"speed        {plan.speed_basis}",
    ]
    if plan.step:
        st = plan.step
        lines.append(f"  step       {st['step_s']:.3f} s = compute {st['compute_s']:.3f} + recompute "
                     f"{st['recompute_s']:.3f} + exposed communication {st['exposed_communication_s']:.3f} + compute "
                     f"slowed beside hidden communication {st['overlap_slowdown_s']:.3f} + bubble "
                     f"{st['bubble_s']:.3f} + optimizer {st['optimizer_s']:.3f} + fixed {st['fixed_s']:.3f}; "
                     f"{st['tokens_per_second_per_gpu']:,.0f} tokens/s per device")
        lines += [f"  exposed    {name:<26} {seconds:.3f} s" for name, seconds in st["communication"].items()]
        lines.append(f"  hidden     {'behind compute':<26} {st['hidden_communication_s']:.3f} s")
    spread = None
    time_line = f"time         {plan.days:,.1f} days"
    if plan.step:  # a predicted step: the days carry the planner's error on published runs
        from fmlab.plan import published

        spread = published.error_spread()
        low, high = spread.days(plan.days)
        time_line += (f" ({low:,.1f} to {high:,.1f} at the planner's 10th-90th percentile error, predicted / reported "
                      f"{spread.low:.2f}-{spread.high:.2f} over {spread.runs} published runs)")
    lines += [
        time_line,
        f"cost         {_dollars(plan.cost_usd)}  ({plan.price_note})",
        f"layout       dp {lay.dp(world)} x tp {lay.tp} x pp {lay.pp}, sharding {lay.sharding}"
        + (f" (groups of {lay.shard_degree(world)})" if lay.sharding == "hybrid" else "") + ", "
        f"activation checkpointing {saving}, micro-batch {plan.micro_batch} x {plan.seq_len} tokens, "
        f"{plan.grad_accum} per step (global batch {plan.global_batch} sequences)",
        f"memory       {plan.memory_gb_per_device:,.1f} GB per device; it may use {plan.memory_limit_gb:.1f} "
        f"({plan.usable_memory_gb:.0f} usable of a {plan.device_memory_gb:.0f} GB device, less 5% headroom)",
    ]
    lines += [f"  {k:<22} {v:10.2f} GB" for k, v in plan.memory_breakdown_gb.items()]
    lines.append(f"checkpoint   {plan.checkpoint_gb['training']:,.0f} GB training state, "
                 f"{plan.checkpoint_gb['bf16_weights']:,.0f} GB bf16 weights; every {run.checkpoint_every} steps "
                 f"({run.checkpoint_hours:.2f} h: Daly's, asynchronous saves to S3), the newest "
                 f"{run.keep_checkpoints} kept")
    lines.append(f"steps        {run.steps:,} of {run.global_batch_tokens:,} tokens, {run.step_seconds:.2f} s each")
    covers = ""
    if spread:
        from fmlab.plan import capacity

        covers = (f", which covers the planner's slow end x{spread.high:.2f}" if spread.high <= capacity.JOB_MARGIN
                  else f"; the planner's slow end x{spread.high:.2f} is beyond it: reserve more")
    lines.append(f"reserve      {run.reserved_days} days of a training plan (the job x1.2{covers}, its start-up, the "
                 "last 30 minutes)" if run.reserved_days else "reserve      more than one reservation holds: split the run")
    if plan.fits:
        lines.append("fits         yes")
    else:
        lines.append("fits         NO. To make it fit: " + ("; ".join(plan.suggestions) or "see above"))
    return "\n".join(lines)


