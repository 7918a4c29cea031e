"""The course's training under a real Slurm: an sbatch script with `srun torchrun`, submitted, watched, requeued.

    from fmlab.hyperpod import slurm
    status = slurm.ensure_cluster()               # starts the local Slurm if installed (requirements/slurm.sh)
    spec = slurm.SlurmTrainSpec(work_dir="runs/slurm", nodes=2, processes_per_node=1, train_args=[...])
    run = slurm.run_with_auto_resume(spec, max_requeues=1, timeout=180)
    run.job_id, run.restarts, run.resumed_at, run.replaced, run.output

The local Slurm has two nodes on one host (node-1 and node-2: two slurmd daemons, requirements/slurm.sh), so a job
spans two nodes and torchrun's rendezvous must find the first one. On a HyperPod Slurm cluster the script is the same
with `srun --auto-resume=1` (`hyperpod=True`): HyperPod's plugin then replaces a faulty node and reruns the step by
itself. The local Slurm has no such plugin, so `run_with_auto_resume` does its part from outside: when the job fails
it replaces the node the fault was on (`replace_node`: marked `State=FAIL Reason=Action:Replace`, as a HyperPod user
asks for a replacement, its slurmd taken away and a new one started under the same name), requeues the job
(`scontrol requeue`), lets it start at once (`scontrol update StartTime=now`: a requeued job otherwise waits about
120 s, Reason=BeginTime), and the script, started again with SLURM_RESTART_COUNT=1 and the same job id, resumes from
its newest checkpoint. Every wait is bounded; a job that overruns is cancelled (`scancel`) so no job is left behind.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from fmlab.environment import ROOT, FileLock, free_port
from fmlab.train import planned
from fmlab.train.config import TrainConfigError, parse_config

SETUP_SCRIPT = ROOT / "requirements" / "slurm.sh"
ENTRY_SCRIPT = ROOT / "entrypoints" / "train.py"
SPEC_FOLDERS = ("--checkpoint-dir", "--checkpoint_dir", "--output-dir", "--output_dir")  # the spec sets these itself
FINISHED = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "BOOT_FAIL",
            "DEADLINE")


CLUSTER_SOURCE = ("aws-samples/awsome-distributed-training at 7217859: 3.test_cases/pytorch/mosaicml-composer/mpt/"
                  "2.train-mpt-manual-distributed.sbatch (--gres=gpu:8, --exclusive, --container-image, "
                  "--container-mounts /fsx:/fsx), 3.test_cases/pytorch/FSDP/slurm/llama3_1_8b-training.sbatch "
                  "(--auto-resume=1 on HyperPod); LifecycleScripts/base-config/lifecycle_script.py (FSx at /fsx); "
                  "SageMaker developer guide, 'Schedule a Slurm job on a SageMaker HyperPod cluster' (srun -N 8 "
                  "--exclusive; conda, venv, docker and enroot); read 2026-11-26")


class SlurmError(RuntimeError):
    """A Slurm command failed or a job did not reach the state it was waited for in time."""


@dataclass
class ClusterStatus:
    available: bool
    reason: str  # what sinfo says, or why there is no Slurm here
    sinfo: str = ""


def _command(args: list[str], timeout: float = 20) -> str:
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise SlurmError(f"`{shlex.join(args)}` did not answer in {timeout:.0f} s: is slurmctld running? "
                         f"(bash {SETUP_SCRIPT.relative_to(ROOT)} starts it)") from e
    if done.returncode != 0:
        raise SlurmError(f"`{shlex.join(args)}` failed: {(done.stderr or done.stdout).strip()[:300]}")
    return done.stdout


def cluster_status() -> ClusterStatus:
    """Is there a Slurm here with a node that takes jobs? Never raises."""
    if not shutil.which("sinfo"):
        return ClusterStatus(False, "no Slurm on this machine (sinfo not found)")
    try:
        states = _command(["sinfo", "-h", "-N", "-o", "%T"], timeout=10).split()  # one line per node
        table = _command(["sinfo"], timeout=10)
    except SlurmError as e:
        return ClusterStatus(False, str(e))
    ready = [s for s in states if s.rstrip("*~#") in ("idle", "mixed", "allocated", "completing")]
    if not ready:
        return ClusterStatus(False, f"no node takes jobs (states: {', '.join(states) or 'none'})", table)
    return ClusterStatus(True, f"{len(ready)} node(s) up", table)


def ensure_cluster(install: bool = False, timeout: float = 120) -> ClusterStatus:
    """The local Slurm, started by requirements/slurm.sh if it is installed but down (installed too if `install`
    and this is root with apt). The script says why not in one line where it cannot; that line is the reason."""
    status = cluster_status()
    if status.available or not SETUP_SCRIPT.exists():
        return status
    args = ["bash", str(SETUP_SCRIPT)] + ([] if install else ["--no-install"])
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return ClusterStatus(False, f"{SETUP_SCRIPT.name} did not finish in {timeout:.0f} s")
    except OSError as e:  # no bash on the PATH
        return ClusterStatus(False, f"{status.reason}; {SETUP_SCRIPT.name} could not run ({e})")
    status = cluster_status()
    if not status.available:
        said = done.stdout.strip().splitlines()
        status.reason = said[-1] if said else status.reason
    return status


@dataclass
class SlurmTrainSpec:
    """One training job under sbatch: `srun` starts one torchrun per node, torchrun the processes per node."""

    work_dir: str | Path  # the job's output file, checkpoints and metrics live here
    train_args: list[str] = field(default_factory=list)  # flags of `python -m fmlab.train`
    job_name: str = "fmlab-train"
    nodes: int = 1
    processes_per_node: int = 2
    time_limit_minutes: int = 10
    hyperpod: bool = False  # True: `srun --auto-resume=1`, HyperPod's flag (an unknown option to plain Slurm)
    python: str = sys.executable
    # A GPU cluster as HyperPod's Slurm clusters are run (not on the local Slurm, which has no GPUs and no Pyxis):
    gpus_per_node: int = 0  # > 0: `#SBATCH --gres=gpu:N`, the node's GPUs as a generic resource
    exclusive: bool = False  # `#SBATCH --exclusive`: no other job shares the nodes
    container_image: str = ""  # Enroot/Pyxis: `srun --container-image=...` (e.g. an .sqsh on FSx)
    container_mounts: str = ""  # with it: `srun --container-mounts=/fsx:/fsx` (the checkpoints a new node must see)
    code_dir: str | Path = ""  # where the course's repository lies on every node (a clone on FSx); default: this one

    def __post_init__(self):
        if self.nodes < 1 or self.processes_per_node < 1:
            raise ValueError(f"nodes and processes_per_node must be at least 1, got {self.nodes} and "
                             f"{self.processes_per_node}")
        if self.time_limit_minutes < 1:
            raise ValueError(f"time_limit_minutes must be at least 1, got {self.time_limit_minutes}")
        if self.container_mounts and not self.container_image:
            raise ValueError("container_mounts needs a container_image (Pyxis mounts into the container it starts)")
        given = [flag for flag in SPEC_FOLDERS if flag in self.train_args]
        if given:
            raise ValueError(f"train_args gives {', '.join(given)}: the spec puts the checkpoints and the output under "
                             "work_dir (work_dir/checkpoints, work_dir/out); set work_dir instead")
        self.work_dir = Path(self.work_dir).resolve()
        self.code_dir = Path(self.code_dir) if self.code_dir else ROOT

    @property
    def output_file(self) -> Path:
        return self.work_dir / "slurm-job.out"

    @property
    def checkpoint_dir(self) -> Path:
        return self.work_dir / "checkpoints"


def train_args_of(script: str) -> list[str]:
    """The training script's flags in a batch script's `srun` line (what `python -m fmlab.train` parses): the
    words after the entry script. ValueError when the script has no `srun` line that runs it."""
    for line in script.splitlines():
        if line.strip().startswith("srun "):
            words = shlex.split(line.replace("$", "DOLLAR_"))
            for i, word in enumerate(words):
                if word.endswith(ENTRY_SCRIPT.name):
                    return [w.replace("DOLLAR_", "$") for w in words[i + 1:]]
    raise ValueError(f"the batch script has no srun line that runs {ENTRY_SCRIPT.name}")


def script_problems(script: str, instance_type: str) -> list[str]:
    """The batch script's training flags held against the planner, as on `instance_type` nodes: a flag given twice
    (the last one wins, silently), then the layout re-planned from its own flags (does it fit with the planner's
    headroom?) and its checkpoint interval in hours of its own step (fmlab.train.planned.problems)."""
    nodes = re.search(r"^#SBATCH --nodes=(\d+)", script, re.M)
    try:
        args = train_args_of(script)
    except ValueError as e:
        return [str(e)]
    flags = [a.replace("_", "-") for a in args if a.startswith("--")]
    out = [f"{flag} is given {flags.count(flag)} times: the last one wins" for flag in sorted(set(flags))
           if flags.count(flag) > 1]
    try:
        config = parse_config(args, env={})
    except TrainConfigError as e:
        return out + [f"the training flags do not parse: {e}"]
    return out + planned.problems(config, instance_type, int(nodes.group(1)) if nodes else 1, "the srun line")


def batch_script(spec: SlurmTrainSpec, port: int | None = None) -> str:
    """The sbatch script: #SBATCH options, then `srun` (one task per node) running torchrun on every node.

    torchrun's c10d rendezvous runs on the first node of the allocation; its id is the job id, so a requeued
    job (same id) meets itself again. --requeue lets the job go back to the queue; --open-mode=append keeps the
    output of every start in one file."""
    port = port or free_port()
    auto_resume = " --auto-resume=1" if spec.hyperpod else ""
    if spec.container_image:
        auto_resume += f" --container-image={spec.container_image}"
        auto_resume += f" --container-mounts={spec.container_mounts}" if spec.container_mounts else ""
    cluster_lines = "".join([f"#SBATCH --gres=gpu:{spec.gpus_per_node}\n" if spec.gpus_per_node else "",
                             "#SBATCH --exclusive\n" if spec.exclusive else ""])
    train = [spec.python, "-m", "torch.distributed.run", "--nnodes", "$SLURM_JOB_NUM_NODES",
             "--nproc-per-node", str(spec.processes_per_node), "--rdzv-backend", "c10d",
             "--rdzv-endpoint", f"$HEAD_NODE:{port}", "--rdzv-id", "$SLURM_JOB_ID",
             str(spec.code_dir / ENTRY_SCRIPT.relative_to(ROOT)),
             *spec.train_args, "--checkpoint-dir", str(spec.checkpoint_dir), "--output-dir",
             str(spec.work_dir / "out")]
    quoted = " ".join(a if a.startswith("$") else shlex.quote(a) for a in train)
    return f"""#!/bin/bash
#SBATCH --job-name={spec.job_name}
#SBATCH --nodes={spec.nodes}
#SBATCH --ntasks-per-node=1
#SBATCH --time={spec.time_limit_minutes}
#SBATCH --chdir={spec.code_dir}
#SBATCH --output={spec.output_file}
#SBATCH --open-mode=append
#SBATCH --requeue
{cluster_lines}set -euo pipefail
HEAD_NODE=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
echo "job $SLURM_JOB_ID start ${{SLURM_RESTART_COUNT:-0}} on $SLURM_JOB_NODELIST at $(date -u +%H:%M:%S)"
export OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1
srun{auto_resume} {quoted}
"""


def submit(script: str, work_dir: str | Path) -> int:
    """Write `script` to work_dir/job.sbatch and sbatch it; the job id."""
    folder = Path(work_dir)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "job.sbatch"
    path.write_text(script)
    return int(_command(["sbatch", "--parsable", str(path)]).strip().split(";")[0])


def job_info(job_id: int) -> dict[str, str]:
    """`scontrol show job -o ID` as a dict (JobState, Reason, Restarts, ExitCode, ...)."""
    text = _command(["scontrol", "show", "job", "-o", str(job_id)])
    return dict(re.findall(r"(\w+)=(\S*)", text))


# slurmd revokes the finished run's job credential, by the second; a new start in that same second is killed
# ("Killing non-startable batch JobId=N: Job credential revoked", slurmctld.log), so the release waits past it.
CREDENTIAL_GRACE_SECONDS = 2.0


REPLACE_REASON = "Action:Replace"  # HyperPod's Slurm: a node in State=FAIL with this reason is replaced


def node_states() -> dict[str, str]:
    """Each node's state as `sinfo -N` gives it (idle, allocated, fail, down*, ...)."""
    return dict(line.split()[:2] for line in _command(["sinfo", "-h", "-N", "-o", "%N %T"]).splitlines()
                if line.strip())


CLUSTER_LOCK = Path(tempfile.gettempdir()) / "fmlab-slurm-cluster.lock"
_holding_cluster = False


@contextlib.contextmanager
def cluster_to_itself():
    """Hold the local two-node cluster for one run or one node replacement at a time, across processes. Two jobs of
    two nodes each already wait for each other in Slurm's queue, but a node replaced under another run's job kills
    that job (as on HyperPod), and a queued job's wait would count against its run's timeout. A process that holds
    it already goes on: run_with_auto_resume replaces nodes while it holds the cluster."""
    global _holding_cluster
    if _holding_cluster:
        yield
        return
    with FileLock(CLUSTER_LOCK):
        with contextlib.suppress(OSError):
            os.chmod(CLUSTER_LOCK, 0o666)  # another user of this machine may run the course too
        _holding_cluster = True
        try:
            yield
        finally:
            _holding_cluster = False


def replace_node(node: str, timeout: float = 30) -> str:
    """Replace `node` of the local Slurm the way HyperPod replaces a faulty one, and return `sinfo` as it read while
    the node was out. The node is marked for replacement (`scontrol update NodeName=... State=FAIL
    Reason=Action:Replace`, the request HyperPod acts on), its slurmd is taken away (the instance is gone), a new
    slurmd starts under the same name (the replacement instance joins the cluster), and the node is resumed once it
    has registered. Only for this machine's two-node set-up (requirements/slurm.sh)."""
    with cluster_to_itself():  # no other run's job is on the node
        if node not in node_states():
            raise SlurmError(f"no node {node!r} in this Slurm (sinfo shows {', '.join(node_states()) or 'none'})")
        _command(["scontrol", "update", f"NodeName={node}", "State=FAIL", f"Reason={REPLACE_REASON}"])
        subprocess.run(["pkill", "-f", f"slurmd -N {node}$"], capture_output=True, timeout=10)
        while_out = _command(["sinfo", "-N", "-o", "%N %T %E"])
        subprocess.run(["/usr/sbin/slurmd", "-N", node], capture_output=True, timeout=20, check=False)
        deadline = time.monotonic() + timeout
        while True:
            try:
                _command(["scontrol", "update", f"NodeName={node}", "State=RESUME"])
            except SlurmError:
                pass  # not registered yet
            if node_states().get(node, "").rstrip("*~#") in ("idle", "mixed", "allocated"):
                return while_out
            if time.monotonic() > deadline:
                raise SlurmError(f"the replacement of {node} did not take jobs within {timeout:.0f} s: "
                                 f"{node_states().get(node)} (see /var/log/slurm/slurmd-{node}.log)")
            time.sleep(0.25)


def requeue_now(job_id: int) -> None:
    """Back to the queue, and eligible almost at once rather than after Slurm's ~120 s of Reason=BeginTime."""
    _command(["scontrol", "requeue", str(job_id)])
    time.sleep(CREDENTIAL_GRACE_SECONDS)
    _command(["scontrol", "update", f"JobId={job_id}", "StartTime=now"])


def cancel(job_id: int) -> None:
    subprocess.run(["scancel", str(job_id)], capture_output=True, timeout=20)


@dataclass
class SlurmRun:
    job_id: int
    script: str
    states: list[str]  # every state seen, in order (PENDING, RUNNING, FAILED, PENDING, RUNNING, COMPLETED)
    final: dict[str, str]  # the last `scontrol show job`
    output: str  # the job's output file: every start, appended
    seconds: float
    squeue: list[str] = field(default_factory=list)  # `squeue` each time the job was seen RUNNING anew
    replaced: list[str] = field(default_factory=list)  # the nodes replaced after a fault, in order
    sinfo_while_replacing: list[str] = field(default_factory=list)  # `sinfo -N` with each of them out

    @property
    def restarts(self) -> int:
        return int(self.final.get("Restarts", "0"))

    @property
    def state(self) -> str:
        return self.final.get("JobState", "")

    @property
    def resumed_at(self) -> list[int]:
        """The steps the script resumed from (one per start that found a checkpoint)."""
        return [int(m) for m in re.findall(r"^resumed from \S+ at step (\d+)", self.output, re.M)]

    @property
    def faults(self) -> list[str]:
        return [line for line in self.output.splitlines() if line.startswith("fault: ")]

    @property
    def nodes_started(self) -> list[str]:
        """The node list of every start of the job (`job N start K on NODES` lines)."""
        return re.findall(r"^job \d+ start \d+ on (\S+)", self.output, re.M)


def fault_node(output: str) -> str | None:
    """The node of the newest `fault: rank R on NODE ...` line in the job's output (None when the line names none)."""
    found = re.findall(r"^fault: rank \d+ on (\S+)", output, re.M)
    return found[-1] if found else None


def run_with_auto_resume(spec: SlurmTrainSpec, max_requeues: int = 1, timeout: float = 240,
                         script: str | None = None, replace_faulty_node: bool = True) -> SlurmRun:
    """Submit the job; each time it fails, replace the node its fault was on (`replace_node`, when
    `replace_faulty_node` and the output names one) and requeue the job at once, up to `max_requeues` times (what
    HyperPod's auto-resume does); return when it has finished for good. The job is cancelled if the whole run
    overruns `timeout` seconds."""
    with cluster_to_itself():  # the timeout counts from when the cluster is this run's
        return _run_with_auto_resume(spec, max_requeues, timeout, script, replace_faulty_node)


def _run_with_auto_resume(spec: SlurmTrainSpec, max_requeues: int, timeout: float, script: str | None,
                          replace_faulty_node: bool) -> SlurmRun:
    script = script or batch_script(spec)
    spec.output_file.unlink(missing_ok=True)
    start = time.monotonic()
    job_id = submit(script, spec.work_dir)
    states: list[str] = []
    seen_running: list[str] = []
    replaced: list[str] = []
    sinfo_out: list[str] = []
    try:
        while True:
            remaining = timeout - (time.monotonic() - start)
            if remaining <= 0:
                raise SlurmError(f"job {job_id} did not finish in {timeout:.0f} s (states seen: {states})")
            info = job_info(job_id)
            state = info.get("JobState", "?")
            if not states or states[-1] != state:
                states.append(state)
                if state == "RUNNING":
                    seen_running.append(queue_text())
            if state in FINISHED:
                if state == "FAILED" and int(info.get("Restarts", "0")) < max_requeues:
                    node = fault_node(spec.output_file.read_text()) if spec.output_file.exists() else None
                    if replace_faulty_node and node:
                        sinfo_out.append(replace_node(node))
                        replaced.append(node)
                    requeue_now(job_id)
                    continue
                break
            time.sleep(0.5)
    except BaseException:
        cancel(job_id)
        raise
    output = spec.output_file.read_text() if spec.output_file.exists() else ""
    return SlurmRun(job_id, script, states, info, output, time.monotonic() - start, seen_running, replaced,
                    sinfo_out)


def queue_text() -> str:
    """`squeue` as a learner would type it (every job of every user)."""
    return _command(["squeue"])


def job_text(job_id: int) -> str:
    """`scontrol show job ID`: the record Slurm keeps of a job (sacct needs slurmdbd, which the local set-up does
    not run)."""
    return _command(["scontrol", "show", "job", str(job_id)])


def slurm_version() -> str:
    return _command(["sinfo", "--version"]).strip() if shutil.which("sinfo") else ""
