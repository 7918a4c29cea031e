"""What this machine has, and where the course's jobs will run (`fmlab env`, notebook 00).

The backend is "sagemaker" when AWS credentials were configured and "local" otherwise; a SageMaker Studio space's
execution role alone is not a choice (every learner in a room has one): FMLAB_BACKEND=local or FMLAB_BACKEND=sagemaker
decides (`backend_choice` says which and why; the first job says it once). Credentials are looked for without any
network call (no instance-metadata probing on a laptop), and never printed. `free_port()` finds a port for a local rendezvous.
"""

from __future__ import annotations

import contextlib
import os
import platform
import re
import socket
from importlib import metadata
from pathlib import Path

# The repository's root (notebooks/, labs/, data/, entrypoints/ live there); the package is src/fmlab.
ROOT = Path(__file__).resolve().parents[2]

CREDENTIAL_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_PROFILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                        "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_WEB_IDENTITY_TOKEN_FILE")


def credential_source() -> str:
    """Where AWS credentials would come from, or "" when there are none. Never returns a secret."""
    for var in CREDENTIAL_VARIABLES:
        if os.environ.get(var):
            return f"environment ({var})"
    aws = Path.home() / ".aws"
    for path in (Path(os.environ.get("AWS_SHARED_CREDENTIALS_FILE", aws / "credentials")),
                 Path(os.environ.get("AWS_CONFIG_FILE", aws / "config"))):
        text = path.read_text(errors="ignore") if path.is_file() else ""
        if any(key in text for key in ("aws_access_key_id", "credential_process", "sso_session", "role_arn")):
            return f"file ({path})"
    if os.environ.get("SAGEMAKER_INTERNAL_IMAGE_URI") or Path("/opt/ml/metadata/resource-metadata.json").exists():
        return "SageMaker Studio execution role"
    return ""


STUDIO_ROLE = "SageMaker Studio execution role"


def backend_choice() -> tuple[str, str]:
    """The backend and why, in one line a learner can act on. FMLAB_BACKEND decides when set. Without it: credentials
    someone configured (keys, a profile, a role in a file) mean "sagemaker"; a SageMaker Studio space's execution role
    alone does not, because every learner in a workshop room has one: there the instructor chooses (FMLAB_BACKEND=
    sagemaker in the space, docs/instructor.md's runbook), and the course runs locally until then."""
    chosen = os.environ.get("FMLAB_BACKEND", "").strip().lower()
    if chosen in ("local", "sagemaker"):
        return chosen, f"FMLAB_BACKEND={chosen} is set"
    if chosen:
        raise ValueError(f"FMLAB_BACKEND must be 'local' or 'sagemaker', not {chosen!r}")
    source = credential_source()
    if source == STUDIO_ROLE:
        return "local", ("a SageMaker Studio space: its execution role could launch real jobs, so they run here until "
                         "FMLAB_BACKEND=sagemaker is set (the instructor's choice: docs/instructor.md)")
    if source:
        return "sagemaker", f"AWS credentials from {source}; FMLAB_BACKEND=local keeps every job on this machine"
    return "local", "no AWS credentials found; FMLAB_BACKEND=sagemaker with credentials launches real jobs"


def default_backend() -> str:
    """The backend of `backend_choice`: "sagemaker" or "local"."""
    return backend_choice()[0]


_ANNOUNCED: list[str] = []


def announce_backend() -> str:
    """The backend, said once per process (before the first job or bucket a notebook touches): which and why."""
    backend, why = backend_choice()
    line = f"fmlab backend: {backend} ({why})"
    if line not in _ANNOUNCED:
        _ANNOUNCED.append(line)
        print(line)
    return backend


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def describe() -> dict[str, str]:
    """A flat dict of facts about this environment, safe to print."""
    import torch

    if torch.cuda.is_available():
        device = f"cuda: {torch.cuda.device_count()} x {torch.cuda.get_device_name(0)}"
    else:
        device = "cpu only (no GPU): the course uses tiny models and the gloo backend"
    creds = credential_source()
    backend, why = backend_choice()
    return {
        "python": platform.python_version(),
        "platform": f"{platform.system()} {platform.machine()}",
        "cpu_cores": str(os.cpu_count()),
        "accelerator": device,
        "torch": torch.__version__,
        "transformers": _version("transformers"),
        "sagemaker-train": _version("sagemaker-train"),
        "fmlab": _version("fmlab"),
        "aws_credentials": creds or "none found",
        "aws_region": os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "not set",
        "backend": backend,
        "backend_because": why,
        "where_jobs_run": ("on AWS SageMaker (real instances, real cost)" if backend == "sagemaker"
                           else "on this machine: the local sandbox runs the same job requests with torchrun + gloo"),
    }


EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")  # Linux; elsewhere 49152 and up (IANA)


def free_port(tries: int = 50) -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now (for a local rendezvous, a server).

    The port is handed to a process that binds it seconds later, so it is drawn below the range the OS hands out
    for port 0 (Linux: 32768-60999): a notebook kernel's ZeroMQ sockets and every outgoing connection take their
    ports from that range, and one once took such a port between its choice and its use.
    """
    import random

    try:
        ephemeral_low = int(EPHEMERAL_RANGE_FILE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral_low = 49152
    low = max(1024, ephemeral_low - 16384)
    for _ in range(tries if ephemeral_low - low >= 1024 else 0):
        port = random.randrange(low, ephemeral_low)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:  # crowded below the range: the OS's choice
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def kill_process_tree(pid: int) -> None:
    """SIGKILL a process, its process group and every process below it. torchrun starts each worker in a session
    of its own, so killing torchrun's group leaves the workers behind (a frozen one, SIGSTOPped, for good): the
    descendants are listed first, while they are still torchrun's children, then all are killed."""
    import signal

    try:
        import psutil  # installed with IPython; without it, the group alone

        below = psutil.Process(pid).children(recursive=True)
    except Exception:  # noqa: BLE001 - psutil missing, or the process already gone: nothing more to find
        below = []
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGKILL)
    for child in below:
        with contextlib.suppress(Exception):  # psutil.NoSuchProcess: it ended meanwhile
            child.kill()


def matmul_tflops(size: int = 512, seconds: float = 0.5, threads: int = 1) -> float:
    """Measured fp32 matrix-multiply TFLOP/s of this machine with `threads` threads: the "peak" a CPU run's
    MFU and a local throughput plan are taken against (a GPU's peak comes from its datasheet instead)."""
    import time

    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        a, b = torch.randn(size, size), torch.randn(size, size)
        for _ in range(3):
            a @ b  # warm-up: first calls pay for allocation and kernel selection
        done, start = 0, time.perf_counter()
        while (elapsed := time.perf_counter() - start) < seconds:
            a @ b
            done += 1
    finally:
        torch.set_num_threads(before)
    return 2 * size**3 * done / elapsed / 1e12


class FileLock:
    """An exclusive lock on a file (fcntl, where the platform has it) so two processes never do one thing at once
    (prepare a dataset, fill a cache entry, use the local Slurm); the OS releases it if the process dies."""

    def __init__(self, path: Path):
        self.path = path

    def __enter__(self):
        self.file = open(self.path, "w")  # closed in __exit__
        try:
            import fcntl

            fcntl.flock(self.file, fcntl.LOCK_EX)
        except ImportError:  # Windows: no lock, the staging folder still keeps each write atomic
            pass
        return self

    def __exit__(self, *exc):
        self.file.close()


def share_cores(ways: int) -> int:
    """Give each of `ways` runs that share this machine at once (test workers, notebook kernels) an equal share of
    its cores as torch's intra-op threads: sets OMP_NUM_THREADS, unless it is set already, for this process and
    every process it starts (torch reads it when it loads); returns the threads per share.

    Why: torch takes every core by default, and its threads spin while they wait for each other, so two busy
    processes on 2 cores with 2 threads each slow each other down. Measured on the 2-core reference machine
    (2026-11-24; 30 steps of the tiny Llama in one process, beside 2 busy processes): 2 threads 6.9-8.2 s and
    5.5-6.6 CPU-s, 1 thread 5.5-5.6 s and 3.4-3.5 CPU-s."""
    if ways < 1:
        raise ValueError(f"ways must be at least 1, got {ways}")
    threads = max(1, (os.cpu_count() or 1) // ways)
    os.environ.setdefault("OMP_NUM_THREADS", str(threads))
    return int(os.environ["OMP_NUM_THREADS"])


# ---------------------------------------------------------------- credentials never printed

SECRET_PATTERNS = [
    re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|A3T[A-Z0-9])[A-Z0-9]{16}\b"),  # access key ids
    re.compile(r"(?i)((?:aws_?)?secret_?access_?key[\"']?\s*[:=]\s*[\"']?)[A-Za-z0-9/+=]{16,}"),
    re.compile(r"(?i)((?:aws_?)?session_?token[\"']?\s*[:=]\s*[\"']?)[A-Za-z0-9/+=]{16,}"),
    re.compile(r"(?i)((?:aws_?)?security_?token[\"']?\s*[:=]\s*[\"']?)[A-Za-z0-9/+=]{16,}"),
]
MASK = "****"


def redact(text: str) -> str:
    """`text` with AWS access keys, secret keys and session tokens replaced by ****."""
    if not text:
        return text
    for var in ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_ACCESS_KEY_ID"):
        value = os.environ.get(var, "")
        if len(value) >= 8:
            text = text.replace(value, MASK)
    for pattern in SECRET_PATTERNS:
        text = pattern.sub(lambda m: (m.group(1) if m.groups() else "") + MASK, text)
    return text
