"""A training job, described in one small typed object: what to run, on what, for how long, with what data.

`JobSpec` is what a notebook writes; `fmlab.jobs.request` turns it into a SageMaker SDK v3 `ModelTrainer`
(and so into the exact CreateTrainingJob request), and `fmlab.jobs` launches it on SageMaker or in the local
sandbox. `validate()` catches, with the field named, what neither the SDK nor the service model can: a base
name too long for the SDK's timestamp suffix, SMP degrees that do not divide the job's processes, a
distribution the chosen image cannot run, a missing execution role for SageMaker.

    spec = JobSpec("lr-3e-4", hyperparameters={"lr": 3e-4, "steps": 40}, instance_type="ml.g5.xlarge",
                   keep_alive_seconds=600)
    spec.validate(backend="sagemaker")   # raises JobSpecInvalid naming each field at fault
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from fmlab.environment import ROOT
from fmlab.plan import catalog
from fmlab.service.api_model import Problem, RequestInvalid
from fmlab.service.rules import MAX_PENDING_SECONDS

NAME_PREFIX = "fmlab-"  # every course job starts with this, so `fmlab job cleanup` finds exactly the course's jobs
TIMESTAMP_SUFFIX = len("-20240101120000")  # the SDK appends "-%Y%m%d%H%M%S" to the base job name
MAX_JOB_NAME = 63  # CreateTrainingJob's TrainingJobName maximum, from the service model
DISTRIBUTIONS = ("none", "torchrun", "smp", "mpi")
INPUT_MODES = ("File", "FastFile", "Pipe")
DEFAULT_ENTRY_POINT = "entrypoints/train.py"
# Stands in for an execution role on the local backend only: the sandbox needs no AWS permissions.
LOCAL_ROLE = "arn:aws:iam::000000000000:role/fmlab-local-sandbox"


class JobSpecInvalid(RequestInvalid):
    """The job description cannot become a valid SageMaker job; `.fields` names the JobSpec fields at fault."""

    def __init__(self, problems: list[Problem]):
        super().__init__(problems, operation="JobSpec")


@functools.cache
def smp_fields() -> tuple[str, ...]:
    """The settings the SDK's SMP v2 config accepts (hybrid_shard_degree, tensor_parallel_degree, ...)."""
    from sagemaker.train.distributed import SMP

    return tuple(SMP.model_fields)


@dataclass(frozen=True)
class Cluster:
    """Where a run trains: the instance type, how many, and processes on each (None: one per GPU or logical
    NeuronCore, SageMaker's default)."""

    instance_type: str = "ml.p4d.24xlarge"
    instances: int = 16
    processes_per_host: int | None = None

    @property
    def processes(self) -> int:
        """Processes in the whole job: the training script's world size."""
        return self.instances * (self.processes_per_host or catalog.instance(self.instance_type).processes)


@dataclass
class JobSpec:
    """One training job. Only `name` is required; the defaults are the course's tiny-model job."""

    name: str  # base job name: "fmlab-" is put in front and the SDK appends a timestamp
    entry_point: str = DEFAULT_ENTRY_POINT  # the training script, relative to the repository root or absolute
    hyperparameters: dict = field(default_factory=dict)  # reach the script as --key value and as SM_HPS
    instance_type: str = "ml.g5.xlarge"
    instance_count: int = 1
    processes_per_host: int | None = None  # None: one per GPU / NeuronCore, as SageMaker's launchers do
    distribution: str = "none"  # none | torchrun | smp (torchrun + SMP v2) | mpi (mpirun, e.g. for SMDDP)
    smp: dict = field(default_factory=dict)  # SMP v2 settings, e.g. {"hybrid_shard_degree": 8}
    mpi_options: list[str] = field(default_factory=list)  # extra mpirun options for distribution="mpi"
    inputs: dict[str, str] = field(default_factory=dict)  # channel name -> s3:// URI or local folder
    input_mode: str = "File"  # File (copy to disk first) | FastFile (stream from S3 on read) | Pipe
    checkpoint_s3_uri: str | None = None  # where /opt/ml/checkpoints is synced; None: no checkpoint syncing
    output_path: str | None = None  # s3:// prefix for model.tar.gz; None: s3://<bucket>/fmlab/output
    keep_alive_seconds: int = 0  # warm pool: keep the instances this long after the job for the next one
    max_run_seconds: int = 3600
    max_retry_attempts: int = 0  # RetryStrategy: SageMaker restarts the job after an InternalServerError (0: never)
    spot: bool = False
    training_plan_arn: str | None = None  # run on a SageMaker training plan's reserved capacity (module 11)
    max_wait_seconds: int | None = None  # spot only: run time plus time waiting for capacity
    # StoppingCondition.MaxPendingTimeInSeconds (1,800 s to 28 days): how long the job may wait for capacity; on a
    # training plan only time waiting in an Active plan counts (not while the plan is Scheduled). None: left out
    max_pending_seconds: int | None = None
    role: str | None = None  # execution role ARN; required for SageMaker
    region: str | None = None  # None: AWS_REGION / AWS_DEFAULT_REGION, else us-east-1
    image: str = ""  # "" picks from distribution, backend and instance; or "pytorch" | "smddp" | "smp" | "neuron" | a URI
    image_version: str | None = None
    environment: dict[str, str] = field(default_factory=dict)
    bucket: str | None = None  # staging and default output bucket; None: the SDK's default bucket on AWS
    volume_gb: int = 30
    ship_fmlab: bool = True  # put the fmlab package next to the entry point (the script imports it)
    requirements: tuple[str, ...] = ("transformers>=4.46", "tokenizers>=0.20", "safetensors>=0.4")

    # ---- derived values -------------------------------------------------------------------------------
    @property
    def base_job_name(self) -> str:
        return self.name if self.name.startswith(NAME_PREFIX) else NAME_PREFIX + self.name

    @property
    def aws_region(self) -> str:
        return self.region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"

    @property
    def entry_path(self) -> Path:
        path = Path(self.entry_point).expanduser()
        return path if path.is_absolute() else ROOT / path

    @property
    def image_kind(self) -> str:
        if self.image and "/" not in self.image:
            return self.image
        if self.image:
            return "custom"
        if self.instance_type.removeprefix("ml.").startswith("trn"):
            return "neuron"
        if self.distribution == "smp":
            return "smp"
        # the smddp backend needs SMDDP in the image: only the frozen PyTorch 2.5 DLC (and SMP images) carry it
        return "smddp" if str(self.hyperparameters.get("backend", "")) == "smddp" else "pytorch"

    def devices_per_host(self) -> int | None:
        """Accelerators per instance as launchers count them (None when the catalog does not know the type)."""
        known = catalog.INSTANCES.get(self.instance_type)
        if known is None:
            return None
        return known.processes

    def processes(self) -> int | None:
        """Processes per host the job asks for (SageMaker's rule: one per device unless told otherwise)."""
        if self.distribution == "none":
            return 1
        return self.processes_per_host or self.devices_per_host() or 1

    def world_size(self) -> int:
        return self.instance_count * (self.processes() or 1)

    def with_(self, **changes) -> JobSpec:
        """A copy with some fields changed (for sweeps): spec.with_(name="lr-1e-3", hyperparameters={...})."""
        return replace(self, **changes)

    # ---- validation -----------------------------------------------------------------------------------
    def problems(self, backend: str = "local") -> list[Problem]:
        out: list[Problem] = []
        limit = MAX_JOB_NAME - TIMESTAMP_SUFFIX
        if not self.name:
            out.append(Problem("name", "is required (a short base name such as 'lr-3e-4')"))
        elif len(self.base_job_name) > limit:
            out.append(Problem("name", f"{self.base_job_name!r} is {len(self.base_job_name)} characters; SageMaker "
                               f"job names are at most {MAX_JOB_NAME} and the SDK appends a {TIMESTAMP_SUFFIX}-character "
                               f"timestamp, so keep the base name within {limit} (including {NAME_PREFIX!r})"))
        elif not re.fullmatch(r"[a-zA-Z0-9][a-zA-Z0-9_-]*", self.name):
            out.append(Problem("name", f"{self.name!r} may only use letters, digits and hyphens, "
                               "starting with a letter or digit"))
        if not self.entry_path.is_file():
            out.append(Problem("entry_point", f"{self.entry_path} does not exist: give the training script's path"))
        if self.distribution not in DISTRIBUTIONS:
            out.append(Problem("distribution", f"{self.distribution!r} is not one of {', '.join(DISTRIBUTIONS)}"))
        if not isinstance(self.instance_count, int) or self.instance_count < 1:
            out.append(Problem("instance_count", f"{self.instance_count!r} must be a whole number of instances, >= 1"))
        if self.processes_per_host is not None and (not isinstance(self.processes_per_host, int)
                                                    or self.processes_per_host < 1):
            out.append(Problem("processes_per_host", f"{self.processes_per_host!r} must be >= 1, or None"))
        if self.processes_per_host and self.distribution == "none":
            out.append(Problem("processes_per_host", "needs a distribution (torchrun, smp or mpi) to start "
                               "several processes per host"))
        if self.smp and self.distribution != "smp":
            out.append(Problem("smp", "SMP settings need distribution='smp'"))
        if self.distribution == "smp":
            out += self._smp_problems()
        if self.image_kind == "smp" and self.distribution not in ("smp", "torchrun"):
            out.append(Problem("image", "the SMP v2 container is launched with torchrun: use distribution='smp'"))
        if self.spot and self.max_wait_seconds is None:
            out.append(Problem("max_wait_seconds", "spot jobs need it (>= max_run_seconds): how long to wait for "
                               "spot capacity plus the run itself"))
        if self.spot and not self.checkpoint_s3_uri:
            out.append(Problem("checkpoint_s3_uri", "spot jobs can be interrupted: give a checkpoint URI so a "
                               "restarted job resumes instead of starting over"))
        low, high = MAX_PENDING_SECONDS
        if self.max_pending_seconds is not None and not (isinstance(self.max_pending_seconds, int)
                                                         and low <= self.max_pending_seconds <= high):
            out.append(Problem("max_pending_seconds", f"{self.max_pending_seconds!r} must be whole seconds from {low:,} "
                               f"to {high:,} (28 days): StoppingCondition.MaxPendingTimeInSeconds' limits"))
        if not isinstance(self.max_retry_attempts, int) or not 0 <= self.max_retry_attempts <= 30:
            out.append(Problem("max_retry_attempts", f"{self.max_retry_attempts!r} must be a whole number from 0 to "
                               "30 (CreateTrainingJob's RetryStrategy.MaximumRetryAttempts is 1-30; 0 leaves it out)"))
        if self.max_retry_attempts and not self.checkpoint_s3_uri:
            out.append(Problem("checkpoint_s3_uri", "a retried job starts over on new instances: give a checkpoint "
                               "URI so the retry resumes from the last checkpoint instead of step 0"))
        if self.input_mode not in INPUT_MODES:
            out.append(Problem("input_mode", f"{self.input_mode!r} is not one of {', '.join(INPUT_MODES)} "
                               "(FastFile streams large datasets and checkpoints from S3 without copying them)"))
        for channel, source in self.inputs.items():
            if channel in ("code", "sm_drivers"):
                out.append(Problem(f"inputs[{channel!r}]", "is a channel name the SDK reserves for itself; rename it"))
            if not str(source).startswith("s3://") and not Path(source).exists():
                out.append(Problem(f"inputs[{channel!r}]", f"{source} is neither an s3:// URI nor an existing folder"))
        if backend == "sagemaker" and not self.role:
            out.append(Problem("role", "SageMaker runs the job as an IAM execution role: pass role='arn:aws:iam::"
                               "<account>:role/<name>' (in SageMaker Studio: sagemaker.core.helper.session_helper."
                               "get_execution_role())"))
        return out

    def _smp_problems(self) -> list[Problem]:

        out = []
        unknown = sorted(set(self.smp) - set(smp_fields()))
        if unknown:
            out.append(Problem("smp", f"unknown SMP v2 settings {unknown}; the SDK's SMP accepts: "
                               f"{', '.join(smp_fields())}"))
        devices = self.world_size()
        layout_ok = True
        for key in ("tensor_parallel_degree", "hybrid_shard_degree", "context_parallel_degree",
                    "expert_parallel_degree"):
            value = self.smp.get(key)
            if value is None:
                continue
            if not isinstance(value, int) or value < (0 if key == "hybrid_shard_degree" else 1):
                out.append(Problem(f"smp.{key}", f"{value!r} must be a positive whole number"))
                layout_ok = False
            elif key in ("context_parallel_degree", "expert_parallel_degree") and devices % value:
                out.append(Problem(f"smp.{key}", f"{value} does not divide the job's {devices} GPUs "
                                   f"({self.instance_count} x {self.processes()} processes)"))
        if layout_ok:  # the one check of the layout (fmlab.plan.parallelism), the planner's and the engine's
            from fmlab.plan.compute import PlanError
            from fmlab.service.smp_settings import SMP_KEYS, from_mp_parameters

            try:
                from_mp_parameters({k: v for k, v in self.smp.items() if k in SMP_KEYS}).check(
                    devices, catalog.MODELS.get(str(self.hyperparameters.get("model", ""))))
            except PlanError as e:
                key = "hybrid_shard_degree" if "hybrid_shard_degree" in str(e) else "tensor_parallel_degree"
                out.append(Problem(f"smp.{key}", f"{e} (SMP's {key}, on {self.instance_count} x "
                                   f"{self.processes()} processes)"))
        return out

    def validate(self, backend: str = "local") -> JobSpec:
        problems = self.problems(backend)
        if problems:
            raise JobSpecInvalid(problems)
        return self
