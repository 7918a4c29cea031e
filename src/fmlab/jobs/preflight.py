"""`fmlab preflight`: would SageMaker accept this CreateTrainingJob request, and could the job start?

Takes exactly the dict boto3's `create_training_job` takes (a file, or `-` for standard input) and checks it, check
by check, each verdict with its source: the API model (botocore's, fmlab.service.api_model), the service's rules
beyond it and the image against what the script needs (fmlab.service), EFA settings on EFA instances, checkpoints
where the script writes them, what only your account knows (quotas, a training plan's state, whether the input
prefixes hold data, a Marketplace subscription: read with credentials, else reported as not checked), and the cost
of the whole chain when the plan is longer than one job may run.

    fmlab preflight request.json [--json] [--plan-days 41]
    fmlab job request gpt30b | fmlab preflight -
    report = preflight(request, plan_days=41); report.ok; print(report.render())

Exit status: 0 when SageMaker would accept it and it could start (warnings allowed), 1 when not, 2 for bad input.
`jobs.launch` runs the same checks first, on both backends (`refuse_unless_ok`).
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import asdict, dataclass, field

from fmlab.service import Finding, service_findings
from fmlab.service.api_model import Problem, RequestInvalid, api_problems
from fmlab.service.rule_book import BOTOCORE_MODEL
from fmlab.service.rules import MAX_RUNTIME_SECONDS

API_SOURCE = f"{BOTOCORE_MODEL}: CreateTrainingJob's input shape (required fields, types, ranges, enums, patterns)"
QUOTA_SOURCE = "your account's Service Quotas (Amazon SageMaker) and its running jobs (fmlab.jobs.guards)"


class PreflightInputError(ValueError):
    """The input is not a CreateTrainingJob request at all (bad JSON, not an object): exit 2."""


@dataclass
class Report:
    """Every check's finding on one request, in the order they ran."""

    job: str
    findings: list[Finding] = field(default_factory=list)

    @property
    def failures(self) -> list[Finding]:
        return [f for f in self.findings if f.level == "fail"]

    @property
    def ok(self) -> bool:
        return not self.failures

    @property
    def unchecked(self) -> list[str]:
        """The checks that could not be made here (no credentials, no manifest for the image, no price)."""
        return [f.check for f in self.findings if f.level == "warn" and "not checked" in f.message]

    @property
    def verdict(self) -> str:
        if not self.ok:
            return "SageMaker would refuse it, or the job would fail as it starts"
        if self.unchecked:
            return ("no check refused it; not checked here: " + ", ".join(dict.fromkeys(self.unchecked)))
        return "SageMaker would accept it and it could start"

    def render(self) -> str:
        counts = {level: sum(f.level == level for f in self.findings) for level in ("pass", "warn", "fail")}
        verdict = self.verdict
        lines = [f"preflight {self.job}: {verdict} ({counts['pass']} pass, {counts['warn']} warn, "
                 f"{counts['fail']} fail)"]
        for f in self.findings:
            lines.append(f"  {f.level.upper():<4}  {f.check}: {f.message}")
            if f.source:
                lines.append(f"        source: {f.source}")
        return "\n".join(lines)

    def to_json(self) -> str:
        return json.dumps({"job": self.job, "ok": self.ok, "verdict": self.verdict, "unchecked": self.unchecked,
                           "findings": [asdict(f) for f in self.findings]}, indent=1)


def api_findings(request: dict) -> list[Finding]:
    problems = api_problems(request)  # Findings already (Problem is a failing Finding); the message names the field
    if not problems:
        return [Finding("api-model", "pass", "the request matches the API model", API_SOURCE)]
    return [Finding(p.check, p.level, str(p), API_SOURCE, p.field) for p in problems]


def _spec_for_quotas(request: dict):
    from fmlab.jobs.spec import JobSpec

    rc = request.get("ResourceConfig") or {}
    return JobSpec("preflight", instance_type=rc.get("InstanceType") or "", instance_count=rc.get("InstanceCount") or 1,
                   keep_alive_seconds=rc.get("KeepAlivePeriodInSeconds") or 0,
                   max_run_seconds=(request.get("StoppingCondition") or {}).get("MaxRuntimeInSeconds", 86400))


def quota_findings(request: dict, quotas_client=None, sagemaker_client=None) -> list[Finding]:
    """Your quotas against the request when credentials exist (or clients are given); else 'not checked'."""
    from fmlab.environment import credential_source

    if quotas_client is None and not credential_source():
        return [Finding("quotas", "warn", "not checked: no AWS credentials (the account's quotas and running jobs "
                        "can only be read from AWS)", QUOTA_SOURCE)]
    from fmlab.jobs.guards import quota_problems

    try:
        if quotas_client is None or sagemaker_client is None:
            import boto3

            quotas_client = quotas_client or boto3.client("service-quotas")
            sagemaker_client = sagemaker_client or boto3.client("sagemaker")
        problems = quota_problems(_spec_for_quotas(request), quotas_client, sagemaker_client)
    except Exception as e:  # no permission to read quotas, no network: say so, do not guess
        return [Finding("quotas", "warn", f"not checked: could not read the account's quotas ({type(e).__name__})",
                        QUOTA_SOURCE)]
    if problems:
        return [Finding("quotas", "fail", p, QUOTA_SOURCE) for p in problems]
    return [Finding("quotas", "pass", "the account's quotas allow this job", QUOTA_SOURCE)]


ACCOUNT_SOURCE = ("your account, read with its credentials: SageMaker DescribeTrainingPlan, S3 ListObjectsV2 "
                  "(MaxKeys 1); API reference, ResourceConfig.TrainingPlanArn and AlgorithmSpecification.AlgorithmName")


def account_findings(request: dict, sagemaker_client=None, s3_client=None) -> list[Finding]:
    """What only the account can answer: the training plan's state, whether each S3 input prefix holds an object,
    a Marketplace algorithm's subscription. Read when credentials exist (or clients are given); otherwise each is
    said to be not checked, never passed silently."""
    from fmlab.environment import credential_source

    rc = request.get("ResourceConfig") or {}
    plan = rc.get("TrainingPlanArn")
    prefixes = [((c.get("DataSource") or {}).get("S3DataSource") or {}).get("S3Uri")
                for c in request.get("InputDataConfig") or [] if isinstance(c, dict)]
    prefixes = [u for u in prefixes if isinstance(u, str) and u.startswith("s3://")]
    algorithm = (request.get("AlgorithmSpecification") or {}).get("AlgorithmName")
    out = []
    if algorithm:  # no API answers "is this account subscribed" before the job: CreateTrainingJob itself does
        out.append(Finding("marketplace", "warn", f"not checked: whether this account is subscribed to {algorithm} "
                           "(AWS Marketplace); CreateTrainingJob refuses it if not", ACCOUNT_SOURCE))
    if not (plan or prefixes):
        return out
    live = sagemaker_client is not None or s3_client is not None or credential_source()
    if not live:
        what = ([f"training plan {plan}"] if plan else []) + ([f"{len(prefixes)} S3 input prefix(es)"]
                                                             if prefixes else [])
        return out + [Finding("account", "warn", f"not checked without AWS credentials: {', '.join(what)}",
                              ACCOUNT_SOURCE)]
    if plan:
        out.append(_plan_finding(plan, rc, sagemaker_client))
    for uri in prefixes:
        out.append(_prefix_finding(uri, s3_client))
    return out


def _plan_finding(plan: str, rc: dict, client) -> Finding:
    try:
        if client is None:
            import boto3

            client = boto3.client("sagemaker")
        found = client.describe_training_plan(TrainingPlanName=plan.rsplit("/", 1)[-1])
    except Exception as e:  # noqa: BLE001 - no permission, no such plan, no network: say which
        return Finding("training-plan", "warn", f"not checked: could not read training plan {plan} "
                       f"({type(e).__name__})", ACCOUNT_SOURCE)
    status = found.get("Status")
    if status not in ("Active", "Scheduled"):
        return Finding("training-plan", "fail", f"training plan {plan} is {status}: a job runs on an Active or "
                       "Scheduled plan only", ACCOUNT_SOURCE, "ResourceConfig.TrainingPlanArn")
    return Finding("training-plan", "pass", f"training plan {plan} is {status}", ACCOUNT_SOURCE)


def _prefix_finding(uri: str, client) -> Finding:
    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    try:
        if client is None:
            import boto3

            client = boto3.client("s3")
        listed = client.list_objects_v2(Bucket=bucket, Prefix=prefix, MaxKeys=1)
    except Exception as e:  # noqa: BLE001
        return Finding("input-data", "warn", f"not checked: could not list {uri} ({type(e).__name__})",
                       ACCOUNT_SOURCE)
    if not listed.get("KeyCount", len(listed.get("Contents") or [])):
        return Finding("input-data", "fail", f"{uri} holds no object: the job would start with an empty channel",
                       ACCOUNT_SOURCE, "InputDataConfig")
    return Finding("input-data", "pass", f"{uri} holds data", ACCOUNT_SOURCE)


def plan_days_of(request: dict, plan_days: float | None) -> float | None:
    """The planned length of the whole run: --plan-days, else a `plan_days` hyperparameter, else None."""
    if plan_days is not None:
        return plan_days
    value = (request.get("HyperParameters") or {}).get("plan_days")
    try:
        return float(json.loads(value)) if isinstance(value, str) else (float(value) if value is not None else None)
    except (ValueError, TypeError):
        return None


def dollars(amount: float) -> str:
    """$1,234 for large sums, $0.59 for small ones (a short job's worst case must not read as $0)."""
    return f"${amount:,.2f}" if amount < 100 else f"${amount:,.0f}"


def cost_findings(request: dict, plan_days: float | None = None) -> list[Finding]:
    """The worst case of one job, and of the whole chain when the plan is longer than one job may run."""
    from fmlab.jobs.guards import OverBudget, price_per_hour

    rc = request.get("ResourceConfig") or {}
    kind, count = rc.get("InstanceType"), rc.get("InstanceCount") or 1
    run = (request.get("StoppingCondition") or {}).get("MaxRuntimeInSeconds", 86400)
    if not isinstance(kind, str) or not isinstance(run, int) or not isinstance(count, int):
        return []
    try:
        price, source = price_per_hour(kind)
    except OverBudget:  # its advice speaks to jobs.launch; a request from elsewhere only needs to know
        return [Finding("cost", "warn", f"not checked: fmlab's price table has no on-demand price for {kind}, so "
                        "this job's cost was not bounded", "fmlab.plan.catalog and fmlab.jobs.guards prices")]
    one = price * count * run / 3600
    out = [Finding("cost", "pass", f"one job at most {count} x {kind} x {run / 3600:,.1f} h x ${price:,.2f} = "
                   f"{dollars(one)} (on-demand, before any warm pool)", source)]
    days = plan_days_of(request, plan_days)
    if days:
        per_job = min(run, MAX_RUNTIME_SECONDS)
        chain = math.ceil(days * 86400 / per_job)
        total = price * count * days * 24
        level = "pass" if chain == 1 else "warn"
        out.append(Finding("chain-cost", level, f"a {days:g}-day plan is {chain} job(s) of at most {per_job / 86400:.1f} "
                           f"days each (resuming from checkpoints): {count} x {kind} x {days * 24:,.0f} h = "
                           f"${total:,.0f} for the whole chain, plus each restart's start-up and lost steps", source))
    return out


def preflight(request, plan_days: float | None = None, quotas: bool = True, quotas_client=None,
              sagemaker_client=None, s3_client=None) -> Report:
    """Every check on `request` (a dict as boto3's create_training_job takes it)."""
    if not isinstance(request, dict):
        raise PreflightInputError(f"a CreateTrainingJob request is a JSON object, not {type(request).__name__}: give "
                                  "the dict boto3's create_training_job takes (fmlab job request NAME prints one)")
    report = Report(str(request.get("TrainingJobName") or "(no TrainingJobName)"))
    report.findings += api_findings(request)
    report.findings += service_findings(request)
    if quotas:  # the account's side: quotas, training plan, input data, subscription
        report.findings += quota_findings(request, quotas_client, sagemaker_client)
        report.findings += account_findings(request, sagemaker_client, s3_client)
    report.findings += cost_findings(request, plan_days)
    return report


class PreflightFailed(RequestInvalid):
    """jobs.launch's refusal: the failing checks, each with its message and source (`.fields` names the request
    field where there is one, else the check as "[check]")."""

    def __init__(self, report: Report):
        self.report = report
        named = {f.field for f in report.failures if f.check == "api-model"}
        super().__init__([Problem(f.field or f"[{f.check}]", f"{f.message.removeprefix(f.field + ': ')} (source: "
                                  f"{f.source})") for f in report.failures
                          if f.check == "api-model" or not f.field or f.field not in named])


def refuse_unless_ok(request: dict) -> Report:
    """What jobs.launch runs before either backend: the checks that need no account (quotas are checked by the
    sagemaker backend itself); raises PreflightFailed naming the failing checks."""
    report = preflight(request, quotas=False)
    if not report.ok:
        raise PreflightFailed(report)
    return report


def read_request(path: str) -> dict:
    """A request from a JSON file or '-' (standard input); PreflightInputError says what is wrong with it."""
    from pathlib import Path

    if path == "-":
        text = sys.stdin.read()
    else:
        p = Path(path)
        if not p.is_file():
            raise PreflightInputError(f"{path}: no such file; give a JSON file with a CreateTrainingJob request, or "
                                      "- to read one from standard input")
        text = p.read_text(errors="replace")
    try:
        request = json.loads(text)
    except json.JSONDecodeError as e:
        raise PreflightInputError(f"{path}: not JSON ({e.msg} at line {e.lineno} column {e.colno}); give the dict "
                                  "boto3's create_training_job takes, as JSON") from None
    if not isinstance(request, dict):
        raise PreflightInputError(f"{path}: a JSON {type(request).__name__}, not an object; give the dict boto3's "
                                  "create_training_job takes")
    return request


def add_arguments(p) -> None:
    p.add_argument("request", help="a JSON file with a CreateTrainingJob request, or - for standard input")
    p.add_argument("--json", action="store_true", help="print one JSON object (for tools)")
    p.add_argument("--plan-days", type=float, default=None,
                   help="the whole run's planned days: prices the chain of jobs when it is longer than one job")
    p.set_defaults(func=run_command)


def run_command(args) -> int:
    try:
        if args.plan_days is not None and not args.plan_days > 0:
            raise PreflightInputError(f"--plan-days {args.plan_days:g} must be a positive number of days")
        report = preflight(read_request(args.request), plan_days=args.plan_days)
    except PreflightInputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(report.to_json() if args.json else report.render())
    return 0 if report.ok else 1
