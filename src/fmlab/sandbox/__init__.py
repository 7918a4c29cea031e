"""The local SageMaker: runs a CreateTrainingJob request on this machine, without AWS or Docker.

    from fmlab import sandbox
    name = sandbox.submit(request)     # check, then start in the background (queued for CPU slots)
    sandbox.describe(name)             # like DescribeTrainingJob: InProgress -> Completed | Failed | Stopped
    sandbox.wait(name); sandbox.logs(name); sandbox.stop(name); sandbox.list_jobs()

How a local job runs (what SageMaker would refuse, fmlab.service.api_model refuses first, unless the caller already
ran preflight: fmlab.jobs.launch does, once, and says so):
    service.py     submit / describe / list / logs / wait / stop: the API, writing a job folder
    state.py       the sandbox folder, CPU slots, a job's status file (shared by the API and the supervisor)
    supervisor.py  a detached process per job (`python -m fmlab.sandbox run <folder>`): waits for slots,
                   copies channels and checkpoints in, starts the hosts, syncs checkpoints, uploads artifacts
    host.py        one /opt/ml-shaped instance "algo-N": its SM_* environment and its torchrun agent
"""

from fmlab.sandbox.service import describe, launched_elsewhere, list_jobs, logs, stop, submit, wait
from fmlab.sandbox.state import FINAL, SandboxError, capacity, job_dir, root

__all__ = ["FINAL", "SandboxError", "capacity", "describe", "job_dir", "launched_elsewhere", "list_jobs", "logs",
           "root", "stop", "submit", "wait"]
