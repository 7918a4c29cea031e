"""The `fmlab` command: plan a run, check the environment, run the course.

    fmlab plan --model gpt-30b --tokens 300e9 --instance ml.p4d.24xlarge --count 16 --sharding full \
        --activation-checkpointing full
    fmlab plan --model llama2-7b --tokens 2e12 --instance ml.p5.48xlarge --count 8 --json
    fmlab env
    fmlab train --max-steps 20            (the training entry point; torchrun -m fmlab.train for several processes)
    fmlab course [--only 01] [--jobs 2] [--report build/course-report.html]
    fmlab slides [--source slides] [--output build/slides]
    fmlab data prepare --input data/corpus --output s3://bucket/data/v1 --seq-len 128 --vocab-size 512 --workers 2
    fmlab data inspect s3://bucket/data/v1
    fmlab job run|list|logs|describe|cleanup   (see fmlab.jobs.cli)
    fmlab hangs out/collective-traces     (which rank stopped, in which collective, at which step)
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time

from fmlab.plan import catalog
from fmlab.plan.compute import PlanError
from fmlab.plan.parallelism import CHECKPOINTING, ParallelConfig, parse_bool

EXIT_DOES_NOT_FIT = 3


def _float(text: str) -> float:
    return float(text.replace("_", ""))


def _boolean(text: str) -> bool:
    """An argparse type for true/false flags, read as fmlab.train reads them (parse_bool)."""
    try:
        return parse_bool(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _number(kind: type, low: float, what: str, low_ok: bool = False, high: float | None = None):
    """An argparse type: a number of `kind` above `low` (or at it, with low_ok), at most `high`."""
    def parse(text: str):
        try:
            value = kind(_float(text)) if kind is float else kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a {'number' if kind is float else 'whole number'}"
                                             ) from None
        too_low = value < low if low_ok else value <= low
        if too_low or (high is not None and value > high) or value != value:
            bound = f"at least {low:g}" if low_ok else f"above {low:g}"
            raise argparse.ArgumentTypeError(f"{text} is out of range: {what} must be {bound}"
                                             + (f" and at most {high:g}" if high is not None else ""))
        return value
    return parse


def _add_plan(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plan", help="time, cost and memory per device of a pretraining run")
    p.add_argument("--published", metavar="RUNS.json", default=None,
                   help="predict every run of a published-runs file (docs/published-runs.md) and print predicted "
                        "against reported tokens/s per GPU; the other options are then not used")
    p.add_argument("--model", choices=list(catalog.MODELS), help="model preset")
    p.add_argument("--tokens", type=_number(float, 0, "training tokens"), default=None,
                   help="training tokens, e.g. 300e9 (default: Chinchilla-optimal, 20 per parameter)")
    p.add_argument("--instance", choices=list(catalog.INSTANCES), help="SageMaker instance type")
    p.add_argument("--count", type=_number(int, 1, "the instance count", low_ok=True),
                   help="number of instances")
    p.add_argument("--mfu", type=_number(float, 0, "the utilisation", high=1), default=None,
                   help="a what if: plan at this fraction of peak FLOP/s, in (0, 1], instead of the predicted step "
                        "(it is the MFU without recomputation, and the HFU with it)")
    p.add_argument("--global-batch", type=_number(int, 1, "the global batch", low_ok=True), default=None,
                   help="sequences per optimizer step (default: GPT-3's batch for the nearest model size, in whole "
                        "micro-batches per data-parallel rank)")
    p.add_argument("--sharding", default=None,
                   help="none | zero1 | zero2 | full | hybrid (with --hybrid-shard-degree); with no layout flag at all "
                        "the planner chooses the layout and micro-batch (layout.choose: the fastest predicted step "
                        "that fits with headroom), as notebook 07 does")
    p.add_argument("--hybrid-shard-degree", type=_number(int, 0, "the hybrid shard degree", low_ok=True), default=None,
                   help="with --sharding hybrid: devices per shard group, e.g. 8 (one node)")
    p.add_argument("--tp", type=_number(int, 1, "the tensor-parallel degree", low_ok=True), default=None,
                   help="tensor-parallel degree")
    p.add_argument("--pp", type=_number(int, 1, "the pipeline-parallel degree", low_ok=True), default=None,
                   help="pipeline-parallel degree")
    p.add_argument("--micro-batch", type=_number(int, 1, "the micro-batch", low_ok=True), default=None,
                   help="sequences per device per step")
    p.add_argument("--seq-len", type=_number(int, 1, "the sequence length", low_ok=True), default=None,
                   help="sequence length (default: the preset's context)")
    p.add_argument("--activation-checkpointing", default=None, choices=CHECKPOINTING,
                   help="what each layer recomputes in backward (fmlab.train's flag): selective keeps the matmul "
                        "outputs, full only each layer's input")
    p.add_argument("--activation-offloading", nargs="?", const="true", default=None, type=_boolean,
                   metavar="BOOL", help="move what each layer keeps for backward to host memory (fmlab.train's flag)")
    p.add_argument("--attention", default="flash", choices=["flash", "eager"],
                   help="attention kernel: flash (fused, FlashAttention/SDPA: no s x s scores kept) or eager")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_plan)


LAYOUT_FLAGS = ("sharding", "hybrid_shard_degree", "tp", "pp", "micro_batch", "activation_checkpointing",
                "activation_offloading")


def cmd_plan(args: argparse.Namespace) -> int:
    from fmlab.plan import compute
    from fmlab.plan.layout import make_plan, planned

    if args.published:
        return _published(args.published, args.json)
    missing = [f"--{name}" for name in ("model", "instance", "count") if getattr(args, name) is None]
    if missing:
        print(f"error: fmlab plan needs {', '.join(missing)} (or --published RUNS.json)", file=sys.stderr)
        return 2
    tokens = args.tokens or compute.chinchilla_tokens(compute.param_count(catalog.model(args.model)))
    chosen = all(getattr(args, name) is None for name in LAYOUT_FLAGS)
    try:
        if chosen:
            layout_plan = planned(args.model, tokens, args.instance, args.count, mfu=args.mfu,
                                  attention=args.attention)
            parallel, micro_batch = layout_plan.parallel, layout_plan.micro_batch
        else:
            parallel, micro_batch = _layout_from_flags(args), args.micro_batch or 1
        plan = make_plan(args.model, tokens, args.instance, args.count, parallel=parallel, mfu=args.mfu,
                         micro_batch=micro_batch, seq_len=args.seq_len, attention=args.attention,
                         global_batch=args.global_batch)
    except PlanError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(_finite({**plan.to_dict(), "layout_chosen_by_planner": chosen}), indent=2))
    else:
        if chosen:
            print("layout       chosen by the planner (no layout flag given): the fastest predicted step that fits "
                  "with headroom, micro-batch 1-8 (fmlab.plan.layout.choose)")
        print(format_plan(plan))
    return 0 if plan.fits else EXIT_DOES_NOT_FIT


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
    print(f"{'run':<40} {'GPUs':>6} {'predicted':>10} {'reported':>10} {'ratio':>6} {'MFU':>5}  step: compute "
          "+ recompute + exposed comm + bubble (s)")
    for r in rows:
        print(f"{r['name']:<40} {r['gpus']:>6} {r['predicted_tokens_per_second_per_gpu']:>10,.0f} "
              f"{r['reported_tokens_per_second_per_gpu']:>10,.0f} {r['ratio']:>6.2f} {r['predicted_mfu']:>5.0%}  "
              f"{r['compute_s']:.2f} + {r['recompute_s']:.2f} + {r['exposed_communication_s']:.2f} + "
              f"{r['bubble_s']:.2f} = {r['step_s']:.2f}")
    s = published.summary(rows)
    print(f"{s['inside']} of {s['runs']} within {s['within']:.0%} of the reported figure; the worst: {s['worst']} "
          f"({s['worst_off']:.0%} off)")
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


def format_plan(plan) -> str:
    lay, world = plan.parallel, plan.devices
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
                     f"{st['recompute_s']:.3f} + exposed communication {st['exposed_communication_s']:.3f} + bubble "
                     f"{st['bubble_s']:.3f} + optimizer {st['optimizer_s']:.3f} + fixed {st['fixed_s']:.3f}; "
                     f"{st['tokens_per_second_per_gpu']:,.0f} tokens/s per device")
        lines += [f"  exposed    {name:<26} {seconds:.3f} s" for name, seconds in st["communication"].items()]
        lines.append(f"  hidden     {'behind compute':<26} {st['hidden_communication_s']:.3f} s")
    lines += [
        f"time         {plan.days:,.1f} days",
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
    p.add_argument("--jobs", type=_number(int, 1, "the number of notebooks run at once", low_ok=True), default=2,
                   help="notebooks executed at the same time, each in its own kernel (default 2; 1: one by one)")
    p.add_argument("--report", default="build/course-report.html",
                   help="HTML report of status, seconds and recorded figures ('' for none)")
    p.set_defaults(func=cmd_course)


def cmd_course(args: argparse.Namespace) -> int:
    from fmlab.course.run import course_log, print_table, run_course, stderr_to

    started = time.perf_counter()
    results = run_course(output=args.output, only=args.only, labs=not args.no_labs, jobs=args.jobs)
    print_table(results)
    print(f"wall clock: {time.perf_counter() - started:.1f} s ({args.jobs} at a time)")
    if args.report and results:
        from fmlab.course.report import write_report

        with stderr_to(course_log(args.output)):  # nbconvert's warnings join the kernels' in the log
            report = write_report(results, args.report)
        print(f"report: {report}")
    return 0 if all(r.ok for r in results) else 1


def _add_slides(sub: argparse._SubParsersAction) -> None:
    from fmlab.course import slides

    p = sub.add_parser("slides", help="build the slide decks to offline reveal.js HTML under build/slides/")
    slides.add_arguments(p)
    p.set_defaults(func=slides.run)


def _add_convert(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("convert", help="Hugging Face Llama <-> Neuron Distributed (Trainium) checkpoints")
    how = p.add_subparsers(dest="direction", required=True)
    to_nxd = how.add_parser("hf-to-nxd", help="split a Hugging Face Llama folder into NxD TP/PP shards")
    to_nxd.add_argument("--input", required=True, help="Hugging Face model folder (config.json + safetensors)")
    to_nxd.add_argument("--output", required=True, help="folder for the NxD checkpoint")
    to_nxd.add_argument("--tp", type=int, default=1, help="tensor-parallel size")
    to_nxd.add_argument("--pp", type=int, default=1, help="pipeline-parallel size")
    to_nxd.add_argument("--layout", default="current", choices=["current", "legacy"],
                        help="current: <tag>/model/dp_rank_00_tp_rank_XX_pp_rank_YY.pt + done; "
                             "legacy: tp_rank_XX_pp_rank_YY/checkpoint.pt")
    to_nxd.add_argument("--tag", default="pretrained_weight", help="tag folder of the current layout")
    to_nxd.add_argument("--qkv-linear", action="store_true", help="GQAQKVColumnParallelLinear qkv_proj.weight_q/k/v")
    to_nxd.add_argument("--kv-size-multiplier", type=int, default=1, help="K/V head replication (with --qkv-linear)")
    to_nxd.add_argument("--dtype", default="bf16", choices=["bf16", "fp32", "keep"], help="weights dtype (bf16)")
    to_nxd.add_argument("--overwrite", action="store_true", help="replace shards already in the output")
    to_hf = how.add_parser("nxd-to-hf", help="merge NxD shards (either layout) back into a Hugging Face folder")
    to_hf.add_argument("--input", required=True, help="NxD checkpoint folder (newest completed tag is used)")
    to_hf.add_argument("--output", required=True, help="folder for the Hugging Face model")
    to_hf.add_argument("--config", default=None, help="the model's Hugging Face config.json (or its folder); "
                       "default: the config.json that hf-to-nxd wrote at the top of --input")
    to_hf.add_argument("--tag", default=None, help="a completed tag to read instead of the newest")

    def cmd_convert(args: argparse.Namespace) -> int:
        from fmlab import neuron

        try:
            if args.direction == "hf-to-nxd":
                report = neuron.hf_to_nxd(args.input, args.output, tp=args.tp, pp=args.pp, layout=args.layout,
                                          qkv_linear=args.qkv_linear, kv_size_multiplier=args.kv_size_multiplier,
                                          dtype=args.dtype, tag=args.tag, overwrite=args.overwrite)
            else:
                report = neuron.nxd_to_hf(args.input, args.output, config=args.config, tag=args.tag)
        except neuron.NeuronLayoutError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        print(report.summary())
        return 0

    p.set_defaults(func=cmd_convert)


def _add_data(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("data", help="prepare a pretraining dataset (tokenize, pack, shard) or inspect one")
    data = p.add_subparsers(dest="data_command", required=True)
    prep = data.add_parser("prepare", help="tokenize, pack and shard text files with parallel workers")
    prep.add_argument("--input", required=True, help="a .txt/.jsonl file or a folder of them (e.g. data/corpus)")
    prep.add_argument("--output", required=True, help="a folder, or s3://bucket/prefix")
    prep.add_argument("--seq-len", type=int, default=128, help="tokens per training sequence (default 128)")
    prep.add_argument("--vocab-size", type=int, default=None,
                      help="train a byte-level BPE tokenizer of this size (default 512; omit with --tokenizer)")
    prep.add_argument("--tokenizer", default=None, help="use this local Hugging Face tokenizer folder instead")
    prep.add_argument("--workers", type=int, default=1, help="share-nothing worker processes (default 1)")
    prep.add_argument("--unit-mb", type=float, default=0.25, help="input megabytes per work unit / shard")
    prep.add_argument("--validation-units", type=int, default=0,
                      help="work units held out as the validation split, never trained on (default 0)")
    prep.set_defaults(func=cmd_data_prepare)
    insp = data.add_parser("inspect", help="tokens, sequences, shards and a decoded sample of a dataset")
    insp.add_argument("path", help="a dataset folder, its manifest.json, or an s3:// URI")
    insp.add_argument("--no-verify", action="store_true", help="skip the shard checksums")
    insp.add_argument("--json", action="store_true", help="print one JSON object")
    insp.set_defaults(func=cmd_data_inspect)


def cmd_data_prepare(args: argparse.Namespace) -> int:
    from fmlab.data import DataError, prepare
    from fmlab.storage import StorageError

    vocab = args.vocab_size if args.vocab_size or args.tokenizer else 512
    try:
        m = prepare(args.input, args.output, args.seq_len, vocab, args.workers, tokenizer=args.tokenizer,
                    unit_bytes=max(1, int(args.unit_mb * 2**20)), validation_units=args.validation_units)
    except (DataError, StorageError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"{m['num_sequences']:,} sequences x {m['seq_len']} = {m['num_tokens']:,} tokens ({m['dtype']}) in "
          f"{len(m['shards'])} shards from {m['documents']:,} documents -> {m['location']}")
    if "validation" in m:
        print(f"held out for validation: {m['validation']['num_sequences']:,} sequences in "
              f"{len(m['validation']['shards'])} shard(s)")
    return 0


def cmd_data_inspect(args: argparse.Namespace) -> int:
    from fmlab.data import DataError, describe_dataset
    from fmlab.storage import StorageError

    try:
        info = describe_dataset(args.path, verify=not args.no_verify)
    except (DataError, StorageError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        sample = info.pop("sample", "")
        print("\n".join(f"{k:<17} {v:,}" if isinstance(v, int) else f"{k:<17} {v}" for k, v in info.items()))
        print(f"sample            {sample!r}")
    return 0


def _add_job(sub: argparse._SubParsersAction) -> None:
    from fmlab.jobs import cli as jobs_cli

    p = sub.add_parser("job", aliases=["jobs"], help="launch, list, follow and clean up training jobs (local or SageMaker)")
    jobs_sub = jobs_cli.add_arguments(p)
    req = jobs_sub.add_parser("request", help="the CreateTrainingJob request of a course job, as JSON (or --list)")
    req.add_argument("name", nargs="?", help="a course job (fmlab job request --list names them)")
    req.add_argument("--list", action="store_true", help="name every job the course builds, one per line")
    req.set_defaults(func=cmd_job_request)


def cmd_job_request(args: argparse.Namespace) -> int:
    from fmlab.course_jobs import COURSE_JOBS, UnknownCourseJob, course_request

    if args.list or not args.name:
        if not args.list:
            print("error: give a course job's name, or --list to see them", file=sys.stderr)
            return 2
        for name, (module, build) in COURSE_JOBS.items():
            what = (build.__doc__ or "").split(":", 1)[-1].split(" (")[0].split(".")[0].strip()
            print(f"{name:<8} {module}: {what}")
        return 0
    try:
        request = course_request(args.name)
    except UnknownCourseJob as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(json.dumps(request, indent=1, default=str))
    return 0


def _add_preflight(sub: argparse._SubParsersAction) -> None:
    from fmlab.jobs import preflight

    p = sub.add_parser("preflight", help="would SageMaker accept a CreateTrainingJob request, and could it start?")
    preflight.add_arguments(p)


def _add_train(sub: argparse._SubParsersAction) -> None:
    # Listed for --help only: main() hands everything after "train" to fmlab.train untouched.
    sub.add_parser("train", add_help=False,
                   help="the training entry point (same as python -m fmlab.train; --help lists its flags)")


def _add_hangs(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("hangs", help="name the rank that stopped, from the collective traces a failed run wrote")
    p.add_argument("folder", help="the run's trace folder (--trace-dir; default <output dir>/collective-traces)")
    p.add_argument("--world", type=_number(int, 0, "--world"), default=None,
                   help="the number of ranks (default: from the traces)")
    p.set_defaults(func=cmd_hangs)


def cmd_hangs(args: argparse.Namespace) -> int:
    """Print the analyzer's report: 0 when it names a rank, 1 when no rank is to blame, 2 on bad input."""
    from fmlab.hangs.analysis import analyze, load_traces

    try:
        report = analyze(load_traces(args.folder), args.world)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(report)
    return 0 if report.ranks else 1


class OneLineParser(argparse.ArgumentParser):
    """argparse's parser, but a bad command line gets one line that says what to change (no usage block)."""

    def error(self, message: str):
        self.exit(2, f"error: {self.prog}: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="fmlab", description="Pretraining Foundation Models on AWS: course tools")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_plan(sub)
    _add_env(sub)
    _add_course(sub)
    _add_train(sub)
    _add_convert(sub)
    _add_slides(sub)
    _add_data(sub)
    _add_job(sub)
    _add_preflight(sub)
    _add_hangs(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["train"]:
        from fmlab.train import main as train_main

        return train_main(argv[1:])
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
