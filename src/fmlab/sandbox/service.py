"""The local sandbox: runs a CreateTrainingJob request on this machine, without AWS or Docker.

    from fmlab import sandbox
    name = sandbox.submit(request)      # validates it, then starts it in the background (queued for CPU slots)
    sandbox.describe(name)              # like describe_training_job: InProgress -> Completed | Failed | Stopped
    sandbox.wait(name); sandbox.logs(name); sandbox.stop(name); sandbox.list_jobs()
    python -m fmlab.sandbox run <job folder>     # the supervisor that submit() starts (not for people)

A submitted job gets a folder `<sandbox>/jobs/<job name>/` (the sandbox folder is FMLAB_SANDBOX_DIR, else
`sandbox/` next to the local bucket, see fmlab.storage) with the request, its status and its log, and one
/opt/ml-shaped folder per requested instance (fmlab.sandbox.host). A detached supervisor process
(fmlab.sandbox.supervisor) then does
what SageMaker does: waits for capacity, copies the input channels in from the local bucket (S3 URIs map
onto it), copies checkpoints down from the checkpoint URI, starts the entry script on every host (directly,
or with `torchrun`: one agent per instance, c10d rendezvous on 127.0.0.1), copies /opt/ml/checkpoints up
while it runs, and at the end uploads model.tar.gz and output.tar.gz to the output path. It outlives the
notebook's kernel, and so do the artifacts.

Capacity: the machine has FMLAB_SANDBOX_CPUS slots (default: its CPU count), one per training process.
A job holds min(its processes, slots) slots while it runs, so parallel jobs queue instead of
oversubscribing the CPU; a job asking for more processes per host than fit is scaled down, with a notice.
Warm pools, spot capacity and instance hardware do not exist here: the job's notices say so.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from fmlab.sandbox.state import (
    FINAL,
    SANDBOX_VARIABLE,
    SandboxError,
    job_dir,
    now,
    read_status,
    root,
    write_json,
)
from fmlab.service.api_model import validate_request

# ---------------------------------------------------------------- the API


def submit(request: dict, start: bool = True, checked: bool = False) -> str:
    """Check `request` (a CreateTrainingJob request) as SageMaker would, create the job and start its supervisor.
    `checked=True`: the caller ran fmlab preflight on this very request (jobs.launch), so it is not checked twice."""
    if not checked:
        validate_request(request)
    name = request["TrainingJobName"]
    channels = {c["ChannelName"]: c for c in request.get("InputDataConfig") or []}
    if "sm_drivers" not in channels:
        raise SandboxError("the sandbox runs jobs built by ModelTrainer(source_code=...), which upload an "
                           "'sm_drivers' channel; this request has none (a custom container cannot run here)")
    folder = job_dir(name)
    try:
        folder.mkdir(parents=True)
    except FileExistsError:
        raise SandboxError(f"ResourceInUse: a training job named {name!r} already exists; job names are unique "
                           "(the SDK appends a timestamp: launch again a second later, or change the name)") from None
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    (folder / "request.json").write_text(json.dumps(request, indent=1, default=str))
    status = {
        "TrainingJobName": name,
        "TrainingJobArn": f"arn:aws:sagemaker:{region}:000000000000:training-job/{name.lower()}",
        "TrainingJobStatus": "InProgress", "SecondaryStatus": "Starting", "CreationTime": now(),
        "LastModifiedTime": now(),
        "SecondaryStatusTransitions": [{"Status": "Starting", "StartTime": now(),
                                        "StatusMessage": "Queued in the local sandbox"}],
        **{k: request[k] for k in ("AlgorithmSpecification", "RoleArn", "InputDataConfig", "OutputDataConfig",
                                   "ResourceConfig", "StoppingCondition", "HyperParameters", "CheckpointConfig",
                                   "EnableManagedSpotTraining", "Environment") if k in request},
        "Sandbox": {"JobDir": str(folder), "Log": str(folder / "job.log"), "Notices": [],
                    "LauncherPid": _launcher_pid()},
    }
    write_json(folder / "status.json", status)
    (folder / "job.log").touch()
    if start:
        _start_supervisor(folder)
    return name


def _start_supervisor(folder: Path) -> None:
    with open(folder / "supervisor.out", "ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "fmlab.sandbox", "run", str(folder)], stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                                env={**os.environ, SANDBOX_VARIABLE: str(root())})
    threading.Thread(target=proc.wait, daemon=True).start()  # reap it when it ends, so it leaves no zombie


def describe(name: str) -> dict:
    """The job's status, shaped like DescribeTrainingJob's response (plus a `Sandbox` section)."""
    status = read_status(name)
    pid = status.get("Sandbox", {}).get("SupervisorPid")
    if status["TrainingJobStatus"] not in FINAL and pid and not _alive(pid):
        time.sleep(0.2)  # it may have just written its final status
        status = read_status(name)
        if status["TrainingJobStatus"] not in FINAL:
            status.update(TrainingJobStatus="Failed", SecondaryStatus="Failed",
                          FailureReason="InternalServerError: the sandbox supervisor ended without a final status "
                                        f"(see {job_dir(name) / 'supervisor.out'})")
            write_json(job_dir(name) / "status.json", status)
    for key in ("CreationTime", "TrainingStartTime", "TrainingEndTime", "LastModifiedTime"):
        if isinstance(status.get(key), str):
            status[key] = dt.datetime.fromisoformat(status[key])
    return status


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def list_jobs(status: str | None = None) -> list[dict]:
    """Every sandbox job (newest first) as {TrainingJobName, TrainingJobStatus, CreationTime, ...}."""
    found = []
    for folder in sorted((root() / "jobs").glob("*/status.json")):
        d = describe(folder.parent.name)
        if status is None or d["TrainingJobStatus"] == status:
            found.append({k: d.get(k) for k in ("TrainingJobName", "TrainingJobStatus", "SecondaryStatus",
                                                 "CreationTime", "TrainingEndTime")})
    return sorted(found, key=lambda d: d["CreationTime"], reverse=True)


def logs(name: str, since: int = 0) -> str:
    """The job's log (every host, lines prefixed [algo-N]) from character `since` on; credentials redacted."""
    path = job_dir(name) / "job.log"
    if not path.exists():
        raise SandboxError(f"no sandbox job named {name!r}")
    with open(path, errors="replace") as f:
        f.seek(since)
        return f.read()


def wait(name: str, timeout: float | None = None, poll: float = 0.25) -> dict:
    """Block until the job ends; returns describe(). Raises TimeoutError after `timeout` seconds."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        d = describe(name)
        if d["TrainingJobStatus"] in FINAL:
            return d
        if deadline is not None and time.monotonic() > deadline:
            raise TimeoutError(f"sandbox job {name} still {d['SecondaryStatus']} after {timeout} s")
        time.sleep(poll)


def _launcher_pid() -> int:
    return os.getpid()


def launched_elsewhere(name: str) -> int | None:
    """The pid of the live process, other than this one, that submitted the job (a notebook's kernel running
    beside this one), or None: this process launched it, or its launcher has ended."""
    pid = describe(name).get("Sandbox", {}).get("LauncherPid")
    return pid if pid and pid != os.getpid() and _alive(pid) else None


def stop(name: str) -> dict:
    """Stop a running job, as StopTrainingJob does (checkpoints are copied up first); returns describe()."""
    d = describe(name)
    if d["TrainingJobStatus"] in FINAL:
        return d
    pid = d.get("Sandbox", {}).get("SupervisorPid")
    if pid and _alive(pid):
        os.kill(pid, signal.SIGTERM)
        for _ in range(120):
            if describe(name)["TrainingJobStatus"] in FINAL:
                break
            time.sleep(0.25)
    else:  # never started (or already gone): mark it stopped ourselves
        status = read_status(name)
        status.update(TrainingJobStatus="Stopped", SecondaryStatus="Stopped", TrainingEndTime=now())
        write_json(job_dir(name) / "status.json", status)
    return describe(name)
