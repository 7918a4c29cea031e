"""The `fmlab` command: plan a run, check the environment, run the course.

    fmlab plan --model gpt-30b --tokens 300e9 --instance ml.p4d.24xlarge --count 16 --sharding full --recompute full
    fmlab plan --model llama2-7b --tokens 2e12 --instance ml.p5.48xlarge --count 8 --json
    fmlab env
    fmlab course [--only 01] [--full]
"""

from __future__ import annotations

import argparse
import json
import sys

from fmlab import catalog
from fmlab.planning import PlanError

EXIT_DOES_NOT_FIT = 3


def _float(text: str) -> float:
    return float(text.replace("_", ""))


def _add_plan(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plan", help="time, cost and memory per device of a pretraining run")
    p.add_argument("--model", required=True, choices=list(catalog.MODELS), help="model preset")
    p.add_argument("--tokens", type=_float, default=0.0, help="training tokens, e.g. 300e9 (default: Chinchilla-optimal)")
    p.add_argument("--instance", required=True, choices=list(catalog.INSTANCES), help="SageMaker instance type")
    p.add_argument("--count", type=int, required=True, help="number of instances")
    p.add_argument("--mfu", type=float, default=0.4, help="model FLOPs utilisation, 0-1 (default 0.4)")
    p.add_argument("--sharding", default="none", help="none | zero1 | zero2 | full | hybrid:D")
    p.add_argument("--tp", type=int, default=1, help="tensor-parallel degree")
    p.add_argument("--pp", type=int, default=1, help="pipeline-parallel degree")
    p.add_argument("--micro-batch", type=int, default=1, help="sequences per device per step")
    p.add_argument("--seq-len", type=int, default=0, help="sequence length (default: the preset's context)")
    p.add_argument("--recompute", default="none", choices=["none", "selective", "full", "offload"],
                   help="activation recomputation (offload: checkpoints kept in host memory)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_plan)


def cmd_plan(args: argparse.Namespace) -> int:
    from fmlab import planning
    from fmlab.layout import make_plan

    tokens = args.tokens or planning.chinchilla_tokens(planning.param_count(catalog.model(args.model)))
    try:
        plan = make_plan(args.model, tokens, args.instance, args.count, mfu=args.mfu, sharding=args.sharding,
                         tp=args.tp, pp=args.pp, micro_batch=args.micro_batch, seq_len=args.seq_len or None,
                         recompute=args.recompute)
    except PlanError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(plan.to_dict(), indent=2))
    else:
        print(format_plan(plan))
    return 0 if plan.fits else EXIT_DOES_NOT_FIT


def format_plan(plan) -> str:
    lay = plan.layout
    lines = [
        f"model        {plan.model}: {plan.params / 1e9:.2f}B parameters, {plan.tokens / 1e9:,.0f}B tokens",
        f"compute      {plan.train_flops:.3g} FLOPs",
        f"cluster      {plan.instances} x {plan.instance} = {plan.devices} devices at MFU {plan.mfu:.0%}",
        f"time         {plan.days:,.1f} days",
        f"cost         ${plan.cost_usd:,.0f}  ({plan.price_note})",
        f"layout       dp {lay['dp']} x tp {lay['tp']} x pp {lay['pp']}, sharding {lay['sharding']}, "
        f"recompute {plan.recompute}, micro-batch {plan.micro_batch} x {plan.seq_len} tokens",
        f"memory       {plan.memory_gb_per_device:,.1f} GB per device of {plan.usable_memory_gb:.0f} usable "
        f"({plan.device_memory_gb:.0f} GB device)",
    ]
    lines += [f"  {k:<22} {v:10.2f} GB" for k, v in plan.memory_breakdown_gb.items()]
    lines.append(f"checkpoint   {plan.checkpoint_gb['training']:,.0f} GB training state, "
                 f"{plan.checkpoint_gb['bf16_weights']:,.0f} GB bf16 weights")
    if plan.fits:
        lines.append("fits         yes")
    else:
        lines.append("fits         NO. To make it fit: " + ("; ".join(plan.suggestions) or "see above"))
    return "\n".join(lines)


def _add_env(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("env", help="what this machine has and where the course's jobs will run")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_env)


def cmd_env(args: argparse.Namespace) -> int:
    from fmlab.environment import describe

    info = describe()
    print(json.dumps(info, indent=2) if args.json else "\n".join(f"{k:<18} {v}" for k, v in info.items()))
    return 0


def _add_course(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("course", help="execute every notebook (and lab solution) headless with papermill")
    p.add_argument("--only", action="append", default=[], help="run notebooks whose name contains this (repeatable)")
    p.add_argument("--output", default="build/executed", help="folder for executed notebooks")
    p.add_argument("--no-labs", action="store_true", help="skip the lab solutions")
    p.set_defaults(func=cmd_course)


def cmd_course(args: argparse.Namespace) -> int:
    from fmlab.course import print_table, run_course

    results = run_course(output=args.output, only=args.only, labs=not args.no_labs)
    print_table(results)
    return 0 if all(r.ok for r in results) else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fmlab", description="Pretraining Foundation Models on AWS: course tools")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_plan(sub)
    _add_env(sub)
    _add_course(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
