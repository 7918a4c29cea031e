"""Module 11's requeue where Slurm cannot start (a SageMaker Studio space has no root): the same lesson, in the sandbox.

    from fmlab.hyperpod import without_slurm
    drill = without_slurm.lost_node_drill(steps=12, checkpoint_every=4, fault_step=7)
    drill.states, drill.attempts, drill.resumed_at

`requirements/slurm.sh` needs root to install and start Slurm's daemons; a Studio space's user has none, so module
11's two-node Slurm requeue cannot run there. This drill teaches the same three beats without root: a job on two
instances (one gloo process each) loses the instance of rank 1 at `fault_step` (`--fault lose-host`, a node fault);
the sandbox, playing the cluster, ends that attempt, starts the job again on fresh instances with its checkpoints
brought back (as HyperPod replaces the node and requeues, or a training job's RetryStrategy retries); and the script
resumes from its newest complete checkpoint. The same training script and flags as the Slurm drill.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass


@dataclass
class LostNodeDrill:
    job_name: str
    status: str  # the job's final status
    states: list[str]  # its secondary status transitions, in order
    attempts: int  # starts, the first included
    resumed_at: list[int]  # the steps the script resumed from
    seconds: float
    log_lines: list[str]  # the attempt and resume lines of its log


def lost_node_drill(steps: int = 12, checkpoint_every: int = 4, fault_step: int = 7,
                    timeout: float = 240) -> LostNodeDrill:
    """Run the drill in the local sandbox (no AWS, no root) and return what it did."""
    from fmlab import jobs
    from fmlab.jobs import JobSpec

    started = time.perf_counter()
    uri = f"s3://fmlab-local/fmlab/checkpoints/nb11-lost-node-{time.strftime('%Y%m%d-%H%M%S')}"
    spec = JobSpec("nb11-lost-node", distribution="torchrun", instance_count=2, processes_per_host=1,
                   inputs={"train": jobs.course_dataset_uri(backend="local")}, checkpoint_s3_uri=uri,
                   max_retry_attempts=1,
                   hyperparameters={"model": "tiny", "max_steps": steps, "micro_batch": 4, "warmup_steps": 2,
                                    "log_every": 2, "tensorboard": False, "checkpoint_every": checkpoint_every,
                                    "fault": "lose-host", "fault_step": fault_step, "fault_rank": 1})
    job = jobs.launch(spec, backend="local", quiet=True)
    described = job.wait(timeout=timeout)
    log = job.logs()
    return LostNodeDrill(
        job_name=described["TrainingJobName"], status=described["TrainingJobStatus"],
        states=[t["Status"] for t in described.get("SecondaryStatusTransitions", [])],
        attempts=described.get("Sandbox", {}).get("Attempts", 1),
        resumed_at=[int(m.group(1)) for m in re.finditer(r"resumed from \S+ at step (\d+)", log)],
        seconds=time.perf_counter() - started,
        log_lines=[line for line in log.splitlines() if "resumed from" in line or "fault:" in line])
