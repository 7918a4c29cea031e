"""Launch training jobs from the notebooks: on SageMaker with an AWS account, in the local sandbox without one.

    from fmlab.jobs import JobSpec, launch, sweep, wait_all, cleanup
    base = JobSpec("sweep", hyperparameters={"max_steps": 30}, inputs={"train": course_dataset_uri()})
    jobs = [launch(s) for s in sweep(base, "lr", [1e-3, 3e-3, 1e-2, 3e-2])]   # none of them waits
    wait_all(jobs)                                    # a progress bar while they run
    jobs[0].metrics()                                 # the script's step/loss/lr lines as a table
    jobs[0].artifacts()                               # model.tar.gz, output.tar.gz, checkpoints, log
    cleanup()                                         # stop the course's running jobs, release warm pools

One code path, two places to run: both backends build the same SDK v3 `ModelTrainer` (fmlab.jobs.request).
Both run `fmlab preflight`'s account-free checks on the request first (fmlab.jobs.preflight: the API model, the
service rules, the image against the script) and refuse with the failing check's message (PreflightFailed).
backend="sagemaker" also checks the worst-case cost against your budget and your account's quotas, then calls
AWS. backend="local" (the default without AWS credentials) captures the very same request in-process and hands
it to the sandbox (fmlab.sandbox).
Credentials are never printed: everything shown passes through `job_guards.redact`.
"""

from __future__ import annotations

import re
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from fmlab import sandbox, storage
from fmlab.environment import redact
from fmlab.jobs.guards import CostEstimate, OverBudget, QuotaTooLow, check_budget, worst_case_cost
from fmlab.jobs.spec import NAME_PREFIX, JobSpec, JobSpecInvalid
from fmlab.service.api_model import RequestInvalid

__all__ = ["Job", "JobSpec", "JobSpecInvalid", "OverBudget", "QuotaTooLow", "RequestInvalid", "cleanup",
           "course_dataset_uri", "launch", "list_jobs", "parse_metrics", "peak_concurrency", "startup_seconds",
           "status_table", "sweep", "wait_all"]

FINAL = ("Completed", "Failed", "Stopped")
LOG_GROUP = "/aws/sagemaker/TrainingJobs"
_METRIC_LINE = re.compile(r"\bstep=\d+ (?:val_)?loss=")
_PAIR = re.compile(r"(\w+)=(\S+)")


def _backend(backend: str | None) -> str:
    from fmlab.environment import announce_backend

    chosen = backend or announce_backend()
    if chosen not in ("local", "sagemaker"):
        raise ValueError(f"backend must be 'local' or 'sagemaker', not {chosen!r}")
    return chosen


def _redacted(value):
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: _redacted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_redacted(v) for v in value]
    return value


def parse_metrics(log: str):
    """The `step=N loss=... lr=...` and `step=N val_loss=...` lines of a training log as a DataFrame, one row
    per step (a step's training and validation lines merged; a repeated value: the last wins)."""
    import pandas as pd

    rows = {}
    for line in log.splitlines():
        if not _METRIC_LINE.search(line):
            continue
        row = {}
        for key, text in _PAIR.findall(line[_METRIC_LINE.search(line).start():]):
            try:
                row[key] = int(text) if key == "step" else float(text)
            except ValueError:
                continue
        rows.setdefault(row["step"], {}).update(row)
    return pd.DataFrame(sorted(rows.values(), key=lambda r: r["step"])).reset_index(drop=True)


@dataclass
class Job:
    """A launched training job, on either backend; every method reads its current state."""

    name: str
    backend: str
    request: dict = field(default_factory=dict, repr=False)
    estimate: CostEstimate | None = field(default=None, repr=False)
    region: str = "us-east-1"

    def _sm(self):
        import boto3

        return boto3.client("sagemaker", region_name=self.region)

    def describe(self) -> dict:
        """Like describe_training_job: status, secondary status, failure reason, artifacts (redacted)."""
        if self.backend == "local":
            return _redacted(sandbox.describe(self.name))
        return _redacted(self._sm().describe_training_job(TrainingJobName=self.name))

    def status(self) -> str:
        return self.describe()["TrainingJobStatus"]

    def wait(self, timeout: float | None = None, poll: float = 0.5) -> dict:
        deadline = None if timeout is None else time.monotonic() + timeout
        while (d := self.describe())["TrainingJobStatus"] not in FINAL:
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"{self.name} is still {d['SecondaryStatus']} after {timeout} s")
            time.sleep(poll if self.backend == "local" else max(poll, 15))
        return d

    def logs(self) -> str:
        """The job's log so far (every host), with credentials redacted."""
        if self.backend == "local":
            return redact(sandbox.logs(self.name))
        import boto3

        logs = boto3.client("logs", region_name=self.region)
        streams = logs.describe_log_streams(logGroupName=LOG_GROUP, logStreamNamePrefix=f"{self.name}/")
        text = []
        for stream in streams.get("logStreams", []):
            host = stream["logStreamName"].split("/")[-1].rsplit("-", 1)[0]
            events = logs.get_log_events(logGroupName=LOG_GROUP, logStreamName=stream["logStreamName"],
                                         startFromHead=True)
            text += [f"[{host}] {e['message']}" for e in events.get("events", [])]
        return redact("\n".join(text))

    def stream_logs(self, poll: float = 1.0) -> dict:
        """Print the log as it grows until the job ends (local), or its final log (SageMaker); returns describe()."""
        if self.backend != "local":
            d = self.wait()
            print(self.logs())
            return d
        shown = 0
        while True:
            d = self.describe()
            text = sandbox.logs(self.name, since=shown)
            shown += len(text.encode())
            if text:
                print(redact(text), end="", flush=True)
            if d["TrainingJobStatus"] in FINAL:
                return d
            time.sleep(poll)

    def metrics(self):
        """The training script's metric lines (step, loss, lr, tokens_per_s, tflops, mfu, ...) as a table."""
        return parse_metrics(self.logs())

    def artifacts(self) -> dict[str, str]:
        """Where the job's results are: model.tar.gz, output.tar.gz, the checkpoint URI (and the local log)."""
        d = self.describe()
        out = d["OutputDataConfig"]["S3OutputPath"].rstrip("/")
        found = {"model": f"{out}/{self.name}/output/model.tar.gz",
                 "output": f"{out}/{self.name}/output/output.tar.gz"}
        if d.get("CheckpointConfig"):
            found["checkpoints"] = d["CheckpointConfig"]["S3Uri"]
        if self.backend == "local":
            found["log"] = d["Sandbox"]["Log"]
            found = {k: v for k, v in found.items() if k == "log" or storage.exists(v, "local")}
        return found

    def download(self, what: str = "model", destination: str | Path | None = None) -> Path:
        """Fetch and unpack model.tar.gz (or output.tar.gz) into `destination`; returns the folder."""
        uri = self.artifacts()[what]
        destination = Path(destination or storage.local_bucket_root().parent / "downloads" / self.name / what)
        archive = storage.download(uri, destination.parent / f".{what}-archive", backend=self.backend)
        with tarfile.open(next(archive.glob("*.tar.gz"))) as tar:
            tar.extractall(destination, filter="data")
        return destination

    def stop(self) -> None:
        if self.backend == "local":
            sandbox.stop(self.name)
        else:
            self._sm().stop_training_job(TrainingJobName=self.name)

    def __str__(self) -> str:
        return f"{self.name} ({self.backend})"


# ---------------------------------------------------------------- launching


def launch(spec: JobSpec, backend: str | None = None, budget_usd: float | None = None,
           price_per_hour: float | None = None, quotas: bool = True, quotas_client=None, sagemaker_client=None,
           quiet: bool = False) -> Job:
    """Start `spec` without waiting for it; returns a Job. See the module docstring for what each backend does."""
    backend = _backend(backend)
    spec.validate(backend)
    try:
        estimate = worst_case_cost(spec, price_per_hour)
    except OverBudget:
        estimate = None
    if backend == "local":
        job = _launch_local(spec, estimate, quiet)
    else:
        job = _launch_sagemaker(spec, budget_usd, price_per_hour, quotas, quotas_client, sagemaker_client, estimate)
    if not quiet:
        cost = (f" (on SageMaker: at most ${job.estimate.worst_case_usd:,.2f})" if job.estimate and backend == "local"
                else "")
        print(f"launched {job.name} on {backend}{cost}")
    return job


def _launch_local(spec: JobSpec, estimate: CostEstimate | None, quiet: bool = False) -> Job:
    from fmlab.jobs.preflight import refuse_unless_ok
    from fmlab.jobs.request import capture_request

    captured = capture_request(spec, "local")
    report = refuse_unless_ok(captured.request)  # what SageMaker would refuse, refused here, before anything runs
    if not quiet:
        print(f"preflight {report.job}: {report.verdict}")
    for uri, content in captured.uploads.items():
        path = storage.to_local_path(uri)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    name = sandbox.submit(captured.request, checked=True)
    return Job(name, "local", captured.request, estimate, spec.aws_region)


def _launch_sagemaker(spec: JobSpec, budget_usd, price_per_hour, quotas, quotas_client, sagemaker_client,
                      estimate: CostEstimate | None = None) -> Job:
    estimate = check_budget(spec, budget_usd, price_per_hour, estimate)  # before anything touches AWS
    print(f"{spec.base_job_name}: {estimate}")

    import tempfile

    import boto3
    from sagemaker.core.helper.session_helper import Session

    from fmlab.jobs.guards import check_quotas
    from fmlab.jobs.request import build_trainer, stage_source, validation_hook

    boto_session = boto3.Session(region_name=spec.aws_region)
    if quotas:
        try:
            check_quotas(spec, quotas_client or boto_session.client("service-quotas"),
                         sagemaker_client or boto_session.client("sagemaker"))
        except QuotaTooLow:
            raise
        except Exception as e:  # e.g. no servicequotas:ListServiceQuotas permission: say so, and go on
            print(f"note: could not read your SageMaker quotas ({type(e).__name__}); launching anyway")
    sent: dict = {}
    boto_session.events.register("provide-client-params.sagemaker.CreateTrainingJob", validation_hook(sent))
    session = Session(boto_session=boto_session, default_bucket=spec.bucket)
    with tempfile.TemporaryDirectory(prefix="fmlab-source-") as tmp:
        trainer = build_trainer(spec, session, stage_source(spec, Path(tmp) / "source"),
                                spec.bucket or session.default_bucket())
        trainer.train(wait=False, logs=False)
    return Job(sent["TrainingJobName"], "sagemaker", sent, estimate, spec.aws_region)


def sweep(base: JobSpec, hyperparameter: str, values: list) -> list[JobSpec]:
    """One JobSpec per value of one hyperparameter, named <base>-<hyperparameter>-<i>."""
    stem = f"{base.name}-{hyperparameter.replace('_', '-')}"
    return [base.with_(name=f"{stem}-{i}", hyperparameters={**base.hyperparameters, hyperparameter: v})
            for i, v in enumerate(values)]


def wait_all(jobs: list[Job], timeout: float | None = None, poll: float = 0.5, progress: bool = True) -> list[dict]:
    """Wait for every job to end (a progress bar counts them); returns their describe() results in order."""
    from fmlab.progress import progress as tqdm

    deadline = None if timeout is None else time.monotonic() + timeout
    done: dict[str, dict] = {}
    with tqdm(total=len(jobs), desc="jobs finished", unit="job", disable=not progress) as bar:
        while len(done) < len(jobs):
            for job in jobs:
                if job.name not in done and (d := job.describe())["TrainingJobStatus"] in FINAL:
                    done[job.name] = d
                    bar.update(1)
            if len(done) < len(jobs):
                if deadline is not None and time.monotonic() > deadline:
                    raise TimeoutError(f"{len(jobs) - len(done)} job(s) still running after {timeout} s")
                time.sleep(poll if all(j.backend == "local" for j in jobs) else max(poll, 15))
    return [done[j.name] for j in jobs]


def _time(value) -> float:
    import datetime as dt

    return (value if isinstance(value, dt.datetime) else dt.datetime.fromisoformat(value)).timestamp()


def training_span(d: dict) -> tuple[float, float] | None:
    """(start, end) of a finished job's Training phase, in seconds since the epoch, from its transitions."""
    for t in d.get("SecondaryStatusTransitions", []):
        if t["Status"] == "Training" and t.get("EndTime"):
            return _time(t["StartTime"]), _time(t["EndTime"])
    return None


def peak_concurrency(descriptions: list[dict]) -> int:
    """The most jobs that were in their Training phase at the same moment."""
    events = sorted(e for d in descriptions if (span := training_span(d))
                    for e in ((span[0], 1), (span[1], -1)))
    running = peak = 0
    for _, step in events:
        running += step
        peak = max(peak, running)
    return peak


def startup_seconds(d: dict) -> float | None:
    """Start-up latency of a job: on SageMaker, creation to the Training phase (instances, image, data); in
    the sandbox, end of the queue wait to the first logged step (processes, imports, data)."""
    if "Sandbox" in d:
        first = d["Sandbox"].get("FirstStepTime")
        return _time(first) - _time(d["TrainingStartTime"]) if first and d.get("TrainingStartTime") else None
    span = training_span(d)
    return span[0] - _time(d["CreationTime"]) if span else None


def status_table(jobs: list[Job]):
    """Name, status, seconds and final loss of each job, as a DataFrame."""
    import pandas as pd

    rows = []
    for job in jobs:
        d = job.describe()
        m = job.metrics()
        rows.append({"job": job.name, "status": d["TrainingJobStatus"], "seconds": d.get("TrainingTimeInSeconds"),
                     "final_loss": float(m["loss"].iloc[-1]) if len(m) else None,
                     "failure": (d.get("FailureReason") or "").split("\n")[0]})
    return pd.DataFrame(rows)


def list_jobs(backend: str | None = None, sagemaker_client=None) -> list[dict]:
    """The course's jobs (names starting fmlab-), newest first."""
    if _backend(backend) == "local":
        return sandbox.list_jobs()
    import boto3

    sm = sagemaker_client or boto3.client("sagemaker")
    found = sm.list_training_jobs(NameContains=NAME_PREFIX, SortBy="CreationTime", SortOrder="Descending",
                                  MaxResults=100)
    return [{k: j.get(k) for k in ("TrainingJobName", "TrainingJobStatus", "CreationTime", "TrainingEndTime")}
            for j in found.get("TrainingJobSummaries", [])]


def cleanup(backend: str | None = None, sagemaker_client=None, dry_run: bool = False,
            every_launcher: bool = False) -> list[str]:
    """Stop the course's jobs still running and release their warm pools (keep-alive set to 0); prints and
    returns what it did.

    In the sandbox, a job that another live process launched (a notebook running beside this one, as `make
    course` runs two at a time) is left to it unless `every_launcher` (`fmlab job cleanup` from a terminal): on
    SageMaker one account's jobs are all the course's, on this machine they are each kernel's own."""
    actions: list[str] = []
    if _backend(backend) == "local":
        for job in sandbox.list_jobs("InProgress"):
            launcher = None if every_launcher else sandbox.launched_elsewhere(job["TrainingJobName"])
            if launcher:
                print(f"left {job['TrainingJobName']} running: another live process (pid {launcher}) launched it "
                      "(`fmlab job cleanup` stops it)")
                continue
            if not dry_run:
                sandbox.stop(job["TrainingJobName"])
            actions.append(f"stopped {job['TrainingJobName']} (local sandbox)")
    else:
        import boto3

        sm = sagemaker_client or boto3.client("sagemaker")
        for page in sm.get_paginator("list_training_jobs").paginate(StatusEquals="InProgress",
                                                                    NameContains=NAME_PREFIX):
            for j in page.get("TrainingJobSummaries", []):
                if not dry_run:
                    sm.stop_training_job(TrainingJobName=j["TrainingJobName"])
                actions.append(f"stopped {j['TrainingJobName']}")
        for page in sm.get_paginator("list_training_jobs").paginate(WarmPoolStatusEquals="Available",
                                                                    NameContains=NAME_PREFIX):
            for j in page.get("TrainingJobSummaries", []):
                if not dry_run:
                    sm.update_training_job(TrainingJobName=j["TrainingJobName"],
                                           ResourceConfig={"KeepAlivePeriodInSeconds": 0})
                actions.append(f"released the warm pool of {j['TrainingJobName']} (keep-alive set to 0)")
    for line in actions or ["nothing to clean up: no course job is running and no warm pool is kept"]:
        print(("(dry run) " if dry_run and actions else "") + line)
    return actions


def course_dataset_uri(backend: str | None = None, bucket: str | None = None, seq_len: int = 128,
                       vocab_size: int = 512, validation_units: int = 0) -> str:
    """The course's packed dataset (fmlab.data), prepared once and uploaded to the bucket; its s3:// URI.
    validation_units > 0 holds that many work units out as the validation split (module 7's gates)."""
    from fmlab.data import course_dataset
    from fmlab.jobs.request import LOCAL_BUCKET_NAME

    folder = course_dataset(seq_len=seq_len, vocab_size=vocab_size, validation_units=validation_units)
    backend = _backend(backend)
    if backend == "sagemaker" and not bucket:
        from sagemaker.core.helper.session_helper import Session

        bucket = Session().default_bucket()
    uri = f"s3://{bucket or LOCAL_BUCKET_NAME}/fmlab/data/{folder.name}"
    if not storage.exists(f"{uri}/manifest.json", backend):
        storage.upload(folder, uri, backend=backend)
    return uri
