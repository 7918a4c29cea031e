"""The `fmlab` command: plan a run, check the environment, run the course.

    fmlab plan --model gpt-30b --tokens 300e9 --instance ml.p4d.24xlarge --count 16 --sharding full \
        --activation-checkpointing full
    fmlab plan --model llama2-7b --tokens 2e12 --instance ml.p5.48xlarge --count 8 --json
    fmlab env
    fmlab train --max-steps 20            (the training entry point; torchrun -m fmlab.train for several processes)
    fmlab course [--only 01] [--jobs 2] [--report build/course-report.html]
    fmlab course --path one-day        # a workshop path's sections only, as its learners run them
    fmlab slides [--source slides] [--output build/slides]
    fmlab data prepare --input data/corpus --output s3://bucket/data/v1 --seq-len 128 --vocab-size 512 --workers 2
    fmlab data inspect s3://bucket/data/v1
    fmlab job run|list|logs|describe|cleanup   (see fmlab.jobs.cli)
    fmlab hangs out/collective-traces     (which rank stopped, in which collective, at which step)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from fmlab.plan.command import add_plan, number


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
    p.add_argument("--path", choices=("one-day", "two-day"),
                   help="execute a workshop path as its learners run it: its sections only, in order, and its labs "
                        "(into build/paths/<path>/ unless --output says otherwise)")
    p.add_argument("--write-only", action="store_true",
                   help="with --path: write the path's cut notebooks into workshop/<path>/ (or --output) for a room to "
                        "open; run none; a notebook already there is kept")
    p.add_argument("--jobs", type=number(int, 1, "the number of notebooks run at once", low_ok=True), default=2,
                   help="notebooks executed at the same time, each in its own kernel (default 2; 1: one by one)")
    p.add_argument("--report", default="build/course-report.html",
                   help="HTML report of status, seconds and recorded figures ('' for none)")
    p.set_defaults(func=cmd_course)


def cmd_course(args: argparse.Namespace) -> int:
    from fmlab.course.run import course_log, print_table, run_course, stderr_to

    started = time.perf_counter()
    if args.path:
        from fmlab.course.pathrun import run_path

        if args.only or args.no_labs:
            print("error: --path runs a whole path; drop --only and --no-labs", file=sys.stderr)
            return 2
        if args.write_only:
            from fmlab.course.pathrun import workshop_folder, write_path

            folder = Path(args.output) if args.output != "build/executed" else workshop_folder(args.path)
            written = write_path(args.path, folder, overwrite=False)
            kept = len(list(folder.glob("*.ipynb"))) - len(written)
            print(f"wrote {len(written)} notebooks into {folder}" + (f" ({kept} already there, kept as they are)"
                  if kept else "") + ": open them in order, run each top to bottom")
            return 0
        if args.output == "build/executed":
            args.output = f"build/paths/{args.path}"
        if args.report == "build/course-report.html":
            args.report = f"build/paths/{args.path}/report.html"
        results = run_path(args.path, args.output, jobs=args.jobs)
    elif args.write_only:
        print("error: --write-only needs --path one-day or --path two-day", file=sys.stderr)
        return 2
    else:
        results = run_course(output=args.output, only=args.only, labs=not args.no_labs, jobs=args.jobs)
    print_table(results)
    print(f"wall clock: {time.perf_counter() - started:.1f} s ({args.jobs} at a time)")
    if args.report and results:
        from fmlab.course.report import write_report

        log = Path(args.output) / "course.log" if args.path else course_log(args.output)  # a path's own log
        with stderr_to(log):  # nbconvert's warnings join the kernels' in the log
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
    from fmlab.course_jobs import COURSE_JOBS, FROM_PLAN, UnknownCourseJob, course_request

    if args.list or not args.name:
        if not args.list:
            print("error: give a course job's name, or --list to see them", file=sys.stderr)
            return 2
        for name, (module, build) in COURSE_JOBS.items():
            what = (build.__doc__ or "").split(":", 1)[-1].split(" (")[0].split(".")[0].strip()
            print(f"{name:<9} {module}: {what}" + (f"\n{'':<9} {FROM_PLAN[name]}" if name in FROM_PLAN else ""))
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
    p.add_argument("--world", type=number(int, 0, "--world"), default=None,
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
    add_plan(sub)
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
