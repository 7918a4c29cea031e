"""`fmlab job ...`: launch and inspect the course's training jobs from a terminal (fmlab.jobs does the work).

    fmlab job run --name tiny --hp max_steps=20 --input train=s3://fmlab-local/fmlab/data/... [--wait]
    fmlab job run --name ddp --distribution torchrun --processes-per-host 2 --backend local --wait
    fmlab job list [--backend local|sagemaker]
    fmlab job logs NAME [--follow]
    fmlab job describe NAME [--json]
    fmlab job cleanup [--dry-run]     # stop running course jobs, release warm pools (keep-alive 0)
    fmlab job request --list | NAME   # the course's jobs and their CreateTrainingJob requests (fmlab.cli)

A job NAME found in the local sandbox is read there; any other name is looked up on SageMaker (with AWS
credentials; without them, one line says so). Every error is one line that says what to change, exit status 2.
"""

from __future__ import annotations

import argparse
import json
import sys


def _pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def add_arguments(p: argparse.ArgumentParser):
    """Add the job subcommands to `p`; returns its subparsers, for the commands the top-level CLI adds."""
    sub = p.add_subparsers(dest="job_command", required=True)
    run = sub.add_parser("run", help="launch one job (without waiting, unless --wait)")
    run.add_argument("--name", required=True, help="base job name (fmlab- is put in front, a timestamp after)")
    run.add_argument("--entry-point", default="entrypoints/train.py", help="training script")
    run.add_argument("--hp", action="append", type=_pair, default=[], metavar="KEY=VALUE", help="hyperparameter")
    run.add_argument("--input", action="append", type=_pair, default=[], metavar="CHANNEL=URI", help="input channel")
    run.add_argument("--instance-type", default="ml.g5.xlarge")
    run.add_argument("--instance-count", type=int, default=1)
    run.add_argument("--processes-per-host", type=int, default=None)
    run.add_argument("--distribution", default="none", choices=["none", "torchrun", "smp", "mpi"])
    run.add_argument("--smp", default="", help='SMP v2 settings as JSON, e.g. \'{"hybrid_shard_degree": 8}\'')
    run.add_argument("--checkpoint-s3-uri", default=None)
    run.add_argument("--output-path", default=None)
    run.add_argument("--keep-alive-seconds", type=int, default=0)
    run.add_argument("--max-run-seconds", type=int, default=3600)
    run.add_argument("--role", default=None, help="execution role ARN (required for SageMaker)")
    run.add_argument("--backend", default=None, choices=["local", "sagemaker"])
    run.add_argument("--budget-usd", type=float, default=None, help="refuse SageMaker launches costing more")
    run.add_argument("--wait", action="store_true", help="stream the log until the job ends")
    lst = sub.add_parser("list", help="the course's jobs, newest first")
    lst.add_argument("--backend", default=None, choices=["local", "sagemaker"])
    logs = sub.add_parser("logs", help="a job's log (credentials redacted)")
    logs.add_argument("name")
    logs.add_argument("--follow", action="store_true", help="keep printing until the job ends")
    desc = sub.add_parser("describe", help="a job's status, like describe_training_job")
    desc.add_argument("name")
    desc.add_argument("--json", action="store_true")
    clean = sub.add_parser("cleanup", help="stop running course jobs and release warm pools")
    clean.add_argument("--backend", default=None, choices=["local", "sagemaker"])
    clean.add_argument("--dry-run", action="store_true", help="say what would be done, do nothing")
    p.set_defaults(func=run_command)
    return sub


def _job(name: str):
    from fmlab import sandbox
    from fmlab.environment import credential_source
    from fmlab.jobs import Job

    if sandbox.job_dir(name).exists():
        return Job(name, "local")
    if not credential_source():
        raise ValueError(f"no job named {name!r} in the local sandbox ({sandbox.job_dir(name).parent}), and no AWS "
                         "credentials to look for it on SageMaker: `fmlab job list` names the local jobs")
    return Job(name, "sagemaker")


def one_line(error: BaseException) -> str:
    """An error message on one line (a multi-problem message joined with '; ')."""
    text = ""
    for line in (ln.strip() for ln in str(error).splitlines() if ln.strip()):
        text += (" " if text.endswith(":") else "; " if text else "") + line
    return text or type(error).__name__


def run_command(args: argparse.Namespace) -> int:
    from botocore.exceptions import BotoCoreError, ClientError

    from fmlab import jobs
    from fmlab.jobs.guards import OverBudget, QuotaTooLow
    from fmlab.sandbox import SandboxError
    from fmlab.service.api_model import RequestInvalid

    try:
        from fmlab.environment import credential_source

        if getattr(args, "backend", None) == "sagemaker" and not credential_source():
            raise ValueError("--backend sagemaker needs AWS credentials and none were found: configure them (aws "
                             "configure, or an execution role in SageMaker Studio), or use --backend local")
        if args.job_command == "run":
            spec = jobs.JobSpec(
                args.name, entry_point=args.entry_point, hyperparameters=dict(args.hp), inputs=dict(args.input),
                instance_type=args.instance_type, instance_count=args.instance_count,
                processes_per_host=args.processes_per_host, distribution=args.distribution,
                smp=json.loads(args.smp) if args.smp else {}, checkpoint_s3_uri=args.checkpoint_s3_uri,
                output_path=args.output_path, keep_alive_seconds=args.keep_alive_seconds,
                max_run_seconds=args.max_run_seconds, role=args.role)
            job = jobs.launch(spec, backend=args.backend, budget_usd=args.budget_usd)
            if not args.wait:
                return 0
            d = job.stream_logs()
            print(f"{job.name}: {d['TrainingJobStatus']}")
            return 0 if d["TrainingJobStatus"] == "Completed" else 1
        if args.job_command == "list":
            for j in jobs.list_jobs(args.backend):
                print(f"{j['TrainingJobName']:<48} {j['TrainingJobStatus']:<11} {j['CreationTime']}")
            return 0
        if args.job_command == "logs":
            job = _job(args.name)
            if args.follow:
                job.stream_logs()
            else:
                print(job.logs())
            return 0
        if args.job_command == "describe":
            d = _job(args.name).describe()
            if args.json:
                print(json.dumps(d, indent=1, default=str))
            else:
                for key in ("TrainingJobName", "TrainingJobStatus", "SecondaryStatus", "FailureReason",
                            "TrainingTimeInSeconds", "ModelArtifacts"):
                    if d.get(key) is not None:
                        print(f"{key:<22} {d[key]}")
            return 0 if d["TrainingJobStatus"] != "Failed" else 1
        jobs.cleanup(args.backend, dry_run=args.dry_run, every_launcher=True)
        return 0
    except (RequestInvalid, OverBudget, QuotaTooLow, SandboxError, ValueError, KeyError) as e:
        print(f"error: {one_line(e)}", file=sys.stderr)
        return 2
    except (BotoCoreError, ClientError) as e:  # no credentials, no such job on SageMaker, no permission
        print(f"error: SageMaker: {one_line(e)}", file=sys.stderr)
        return 2
