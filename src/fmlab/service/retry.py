"""How SageMaker classifies a failed attempt of a training job, and which failures its RetryStrategy retries.

A process of the job that exits nonzero, or is killed (SIGKILL from the kernel's OOM killer included), is the
script failing: `AlgorithmError`, never retried, and nothing restarts it inside the job either: SDK v3's torchrun
driver passes no --max-restarts (DEAD_PROCESS), so a new job resumes from the checkpoints. A lost or broken
instance is the platform's fault: `InternalServerError`, retried up to MaximumRetryAttempts; on a GPU fault
SageMaker reboots an instance when a reboot recovers it and replaces it when not, then restarts the job from its
checkpoints. The sandbox (fmlab.sandbox.supervisor) models exactly this, so the course's recovery drills behave
as they would on AWS.

    failure_kind(exit_code=-9, host_lost=False)   # -> "AlgorithmError" (an OOM kill is the script's failure)
    retried("InternalServerError")                 # -> True
"""

from __future__ import annotations

from fmlab.service.rule_book import RULES
from fmlab.service.sources import Source

ALGORITHM_ERROR = "AlgorithmError"
INTERNAL_SERVER_ERROR = "InternalServerError"
RETRIED = (INTERNAL_SERVER_ERROR,)
SOURCE = RULES["retry-scope"].cite()
# A dead process on SageMaker under SDK v3: no restart inside the job (torchrun's --max-restarts is a local tool here)
DEAD_PROCESS = Source(
    "sagemaker-train 1.27.0: sagemaker/train/distributed.py (Torchrun) and container_drivers/distributed_drivers/"
    "torchrun_driver.py; torch 2.13.0 torch/distributed/run.py",
    "https://pypi.org/project/sagemaker-train/1.27.0/",
    "Torchrun has two fields, process_count_per_node and smp: no restart option. The driver's create_commands() runs "
    "`torchrun --nnodes=N --nproc_per_node=P [--master_addr --master_port --node_rank] <entry script> <args>`, no "
    "--max-restarts, so torchrun's default holds (`--max-restarts` default=0, 'Maximum number of worker group "
    "restarts before failing'); on a non-zero exit main() writes the failure file and exits with that code: the job "
    "fails as an AlgorithmError, which RetryStrategy does not retry.", read="2026-11-26")


def failure_kind(exit_code: int, host_lost: bool) -> str:
    """AlgorithmError for any process that failed on a healthy host (an exit code, a signal, an OOM kill);
    InternalServerError only when the host itself was lost."""
    return INTERNAL_SERVER_ERROR if host_lost else ALGORITHM_ERROR


def retried(kind: str) -> bool:
    """Whether RetryStrategy retries a failure of this kind."""
    return kind in RETRIED


def describe_exit(exit_code: int) -> str:
    """'exited with code 2' or 'was killed by SIGKILL (signal 9: the OOM killer sends it too)'."""
    if exit_code < 0:
        import signal

        name = signal.Signals(-exit_code).name if -exit_code in {s.value for s in signal.Signals} else str(-exit_code)
        oom = ": the kernel's OOM killer sends it too" if -exit_code == 9 else ""
        return f"was killed by {name} (signal {-exit_code}{oom})"
    return f"exited with code {exit_code}"
