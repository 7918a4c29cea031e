"""The sandbox's supervisor: runs one job folder to its end, as SageMaker runs a training job.

Started by `fmlab.sandbox.submit` as a detached process (`python -m fmlab.sandbox run <job folder>`), so the
job outlives the notebook's kernel. In order: wait for CPU slots (file locks shared by every sandbox job on
the machine), copy the input channels and any checkpoints into each host's /opt/ml folder, start the entry
script on every host (fmlab.sandbox.host builds the commands and the SM_* environment), copy checkpoints up
while it runs, stop it at MaxRuntimeInSeconds or on StopTrainingJob (SIGTERM), and upload model.tar.gz and
output.tar.gz. It is the only writer of the job's status.json while it lives.

Failures are classified as SageMaker classifies them (fmlab.service.retry): a process that exits nonzero or is
killed (SIGKILL, the OOM killer) is an AlgorithmError and is never retried; a lost instance (a host whose processes
left the lost-instance mark, `--fault lose-host`) is an InternalServerError, which a RetryStrategy retries: the lost
host is replaced by a fresh one, the others are rebooted (their processes restarted), every host gets the
checkpoints back from the checkpoint URI, and MaxRuntimeInSeconds bounds all attempts together.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import re
import shutil
import signal
import subprocess
import tarfile
import threading
import time
from pathlib import Path

from fmlab import storage
from fmlab.environment import free_port, kill_process_tree, redact
from fmlab.sandbox.host import Host, process_environment, read_launch, sync_folder
from fmlab.sandbox.state import capacity, now, root, write_json
from fmlab.service import retry as service_retry

FAILURE_REASON_MAX = 1024  # DescribeTrainingJob's FailureReason is at most 1024 characters
SYNC_SECONDS = 2.0
LOG_TAIL_LINES = 12
STEP_LINE = re.compile(r"\bstep=\d+ ")
LOST_MARKER = "instance-lost"  # a host folder holding this file lost its instance (fmlab.train.faults lose-host)
LOST_MARKER_VARIABLE = "FMLAB_SANDBOX_LOST_MARKER"


class _Slots:
    """Hold `need` of the machine's slot lock files (fcntl.flock; released by the OS if this process dies)."""

    def __init__(self, need: int):
        self.need, self.files = need, []

    def try_acquire(self) -> bool:
        import fcntl

        folder = root() / "slots"
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(capacity()):
            f = open(folder / f"slot-{i}.lock", "a")  # kept open while held; closed in release()
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                f.close()
                continue
            self.files.append(f)
            if len(self.files) == self.need:
                return True
        self.release()
        return False

    def release(self) -> None:
        for f in self.files:
            f.close()
        self.files = []


class Supervisor:
    """Runs one job folder to its end; the only writer of its status while it lives."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.request = json.loads((folder / "request.json").read_text())
        self.name = self.request["TrainingJobName"]
        self.status = json.loads((folder / "status.json").read_text())
        self.stop_requested = threading.Event()
        self.log_lock = threading.Lock()
        self.log = open(folder / "job.log", "a", buffering=1)  # closed at the end of run()
        resources = self.request["ResourceConfig"]
        self.instance_type = resources["InstanceType"]
        self.hosts_names = [f"algo-{i + 1}" for i in range(resources["InstanceCount"])]
        self.hosts = [Host(folder / "hosts" / h, h, i, self.hosts_names, self.instance_type)
                      for i, h in enumerate(self.hosts_names)]
        self.checkpoint_uri = (self.request.get("CheckpointConfig") or {}).get("S3Uri")
        self.procs: list[subprocess.Popen] = []

    # -- status and log
    def set_status(self, secondary: str, message: str = "", **fields) -> None:
        stamp = now()
        transitions = self.status.setdefault("SecondaryStatusTransitions", [])
        if transitions and transitions[-1]["Status"] == secondary and "EndTime" not in transitions[-1]:
            transitions[-1]["StatusMessage"] = message  # same status, newer message
        else:
            if transitions and "EndTime" not in transitions[-1]:
                transitions[-1]["EndTime"] = stamp
            transitions.append({"Status": secondary, "StartTime": stamp, "StatusMessage": message})
        self.status.update(SecondaryStatus=secondary, LastModifiedTime=stamp, **fields)
        write_json(self.folder / "status.json", self.status)
        self.say(f"{secondary}: {message}" if message else secondary)

    def say(self, line: str, host: str = "sandbox") -> None:
        with self.log_lock:
            self.log.write(f"[{host}] {redact(line.rstrip())}\n")

    def notice(self, text: str) -> None:
        self.status["Sandbox"]["Notices"].append(text)
        self.say(f"notice: {text}")

    # -- steps
    def plan(self) -> tuple[int, int]:
        """(processes per host, slots to hold) after capping to this machine."""
        from fmlab.plan import catalog

        launch = self.launch
        if launch.driver == "basic":
            wanted = 1
        else:
            inst = catalog.INSTANCES.get(self.instance_type)
            devices = inst.processes if inst else 1
            wanted = launch.processes_per_host or devices
            if launch.driver == "mpi":
                wanted = self.mpirun_per_host(wanted)
        slots = capacity()
        per_host = wanted
        if len(self.hosts) * wanted > slots:
            per_host = max(1, slots // len(self.hosts))
            self.notice(f"the job asks for {len(self.hosts)} x {wanted} processes; this machine runs {slots} at "
                        f"once, so each host runs {per_host} (world size {len(self.hosts) * per_host})")
        return per_host, min(len(self.hosts) * per_host, slots)

    def mpirun_per_host(self, count: int) -> int:
        """The ranks per host that SDK v3's mpirun command would start. Its driver writes `--host h:N,...`
        and `-np N` with N = process_count_per_node, and Open MPI's -np is the total: on several hosts that
        leaves all but the first idle, which the sandbox refuses to imitate silently."""
        from fmlab.service.mpi_launch import mpirun_ranks

        command = ["mpirun", "--host", ",".join(f"{h}:{count}" for h in self.hosts_names), "-np", str(count),
                   *self.launch.mpi_options]
        placed = mpirun_ranks(command)["per_host"]
        if len(set(placed.values())) > 1:
            where = ", ".join(f"{h}: {n}" for h, n in placed.items())
            raise ValueError(
                f"mpirun would start {count} ranks in all ({where}), not {count} per instance: SDK v3 passes "
                f"process_count_per_node to mpirun as -np, which Open MPI reads as the total. On SageMaker the "
                f"job would run on part of its GPUs. Ask for every rank and place them per node: "
                f"MPI(**fmlab.service.mpi_launch.mpi_launch({count}, {len(self.hosts_names)}))")
        return next(iter(placed.values()))

    def run(self) -> None:
        self.status["Sandbox"].update(SupervisorPid=os.getpid(), Attempts=0)
        signal.signal(signal.SIGTERM, lambda *_: self.stop_requested.set())
        slots = _Slots(1)
        try:
            drivers = storage.to_local_path(next(c for c in self.request["InputDataConfig"]
                                                 if c["ChannelName"] == "sm_drivers")["DataSource"]["S3DataSource"]["S3Uri"])
            self.launch = read_launch(drivers)
            self.honest_notices()
            per_host, need = self.plan()
            self.status["Sandbox"].update(ProcessesPerHost=per_host, Slots=need, Capacity=capacity(),
                                          Hosts=self.hosts_names, Driver=self.launch.driver)
            slots = _Slots(need)
            self.set_status("Starting", f"waiting for {need} of {capacity()} local CPU slots")
            while not slots.try_acquire():
                if self.stop_requested.wait(0.2):
                    return self.finish("Stopped", "Stopped", "stopped while queued")
            self.set_status("Downloading", "copying input channels and checkpoints into each host's /opt/ml",
                            TrainingStartTime=now())
            for host in self.hosts:
                host.prepare(self.request)
                if self.checkpoint_uri and storage.to_local_path(self.checkpoint_uri).is_dir():
                    sync_folder(storage.to_local_path(self.checkpoint_uri), host.checkpoints, {})
            self.set_status("Training", f"{self.launch.driver} on {len(self.hosts)} host(s) x {per_host} process(es)")
            # MaxRuntimeInSeconds bounds all attempts together (fmlab.service.rules, max-runtime)
            self.deadline = time.monotonic() + (self.request.get("StoppingCondition") or {}).get(
                "MaxRuntimeInSeconds", 86400)
            outcome, reason = self.train(per_host, need)
            retries = (self.request.get("RetryStrategy") or {}).get("MaximumRetryAttempts", 0)
            attempt = 1
            while (outcome == "Failed" and service_retry.retried(reason.split(":", 1)[0]) and attempt <= retries):
                self.retry(attempt, retries, reason)
                attempt += 1
                outcome, reason = self.train(per_host, need)
            self.status["Sandbox"]["Attempts"] = attempt
            self.set_status("Uploading", "copying checkpoints, model and output data to the local bucket")
            self.sync_checkpoints(final=True)
            if outcome != "Failed":  # a failed job leaves no model artifacts on SageMaker either
                self.upload_artifacts()
            if outcome == "Completed":
                return self.finish("Completed", "Completed", "Training job completed")
            if outcome == "Stopped":
                return self.finish("Stopped", reason or "Stopped", "Training job stopped")
            return self.finish("Failed", "Failed", reason, FailureReason=reason)
        except Exception as e:  # a sandbox problem (bad channel, missing script): the job fails, with why
            self._terminate()
            reason = f"ClientError: {type(e).__name__}: {e}"
            return self.finish("Failed", "Failed", reason, FailureReason=reason[:FAILURE_REASON_MAX])
        finally:
            slots.release()
            self.log.close()

    def honest_notices(self) -> None:
        resources = self.request["ResourceConfig"]
        if resources.get("KeepAlivePeriodInSeconds"):
            self.notice(f"KeepAlivePeriodInSeconds={resources['KeepAlivePeriodInSeconds']}: warm pools do not exist "
                        "locally; every local job starts fresh processes")
        if self.request.get("EnableManagedSpotTraining"):
            self.notice("managed spot training does not apply locally: the job is never interrupted here")
        if self.launch.driver == "mpi":
            self.notice("mpirun launches the ranks on SageMaker; the sandbox starts the same ranks with torchrun "
                        "(RANK, LOCAL_RANK, WORLD_SIZE set the same way; no OMPI_* variables, no SMDDP)")
        if self.launch.requirements:
            self.notice(f"{self.launch.requirements} is installed by the SageMaker container; the sandbox runs "
                        "this Python environment as it is")
        self.notice(f"{self.instance_type}: the sandbox runs on this machine's CPUs (gloo), not on that hardware")

    def train(self, per_host: int, slots: int) -> tuple[str, str]:
        hps = self.request.get("HyperParameters") or {}
        endpoint = f"127.0.0.1:{free_port()}"
        threads = max(1, slots // max(1, len(self.hosts) * per_host))
        deadline = getattr(self, "deadline", time.monotonic() + 86400)
        readers = []
        for host in self.hosts:
            env = process_environment(dict(os.environ), host.environment(self.request, self.launch, self.name),
                                      threads, host.checkpoints if self.checkpoint_uri else None)
            env.update({k: str(v) for k, v in (self.request.get("Environment") or {}).items()})  # as in the container
            env[LOST_MARKER_VARIABLE] = str(host.folder / LOST_MARKER)
            cmd = host.command(self.launch, hps, per_host, endpoint, self.name)
            self.say(f"{host.name}: {' '.join(cmd[:2] + [c for c in cmd[2:] if not c.startswith('/')][:8])} ...")
            proc = subprocess.Popen(cmd, cwd=host.code, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, text=True, errors="replace", bufsize=1)
            self.procs.append(proc)
            readers.append(threading.Thread(target=self._pump, args=(proc, host.name), daemon=True))
            readers[-1].start()
        last_sync, outcome, reason = time.monotonic(), "", ""
        while not outcome:
            codes = [p.poll() for p in self.procs]
            failed = [(h, c) for h, c in zip(self.hosts, codes, strict=True) if c not in (None, 0)]
            failed.sort(key=lambda hc: not (hc[0].folder / LOST_MARKER).exists())  # a lost instance explains the rest
            if failed:
                outcome, reason = "Failed", self.failure_reason(*failed[0])
            elif all(c == 0 for c in codes):
                outcome = "Completed"
            elif self.stop_requested.is_set():
                outcome, reason = "Stopped", "Stopped"
            elif time.monotonic() > deadline:
                outcome, reason = "Stopped", "MaxRuntimeExceeded"
                self.say("MaxRuntimeInSeconds reached: stopping the job, as SageMaker does")
            elif time.monotonic() - last_sync > SYNC_SECONDS:
                self.sync_checkpoints()
                last_sync = time.monotonic()
            if not outcome:
                time.sleep(0.1)
        self._terminate()
        for r in readers:
            r.join(timeout=5)
        return outcome, reason

    def retry(self, attempt: int, retries: int, reason: str) -> None:
        """What SageMaker does for a RetryStrategy after an InternalServerError: the lost instance replaced by a
        fresh one, the healthy ones rebooted, the checkpoints copied back from S3 to every host."""
        self.sync_checkpoints(final=True)
        lost = [h for h in self.hosts if (h.folder / LOST_MARKER).exists()]
        kept = [h.name for h in self.hosts if h not in lost]
        what = (f"{', '.join(h.name for h in lost)} replaced" if lost else "every host replaced") + \
            (f", {', '.join(kept)} rebooted" if lost and kept else "")
        cause = reason.split(". Last lines of its log:", 1)[0].splitlines()[0][:200]  # the head, not the log tail
        self.set_status("Restarting", f"{cause}. RetryStrategy attempt {attempt} of {retries}: {what}; "
                        "checkpoints copied back from the checkpoint URI")
        self.procs = []
        for host in self.hosts:
            if host in lost or not lost:  # a replacement instance starts from nothing
                shutil.rmtree(host.folder, ignore_errors=True)
                host.prepare(self.request)
            for path in sorted(host.checkpoints.glob("*"), reverse=True):
                if path.is_dir():
                    shutil.rmtree(path)
                else:
                    path.unlink()
            if self.checkpoint_uri and storage.to_local_path(self.checkpoint_uri).is_dir():
                sync_folder(storage.to_local_path(self.checkpoint_uri), host.checkpoints, {})
        self.__dict__.pop("_seen", None)  # the fresh hosts' files are all new to the next upload
        self.set_status("Training", f"attempt {attempt + 1}: {self.launch.driver} on {len(self.hosts)} host(s)")

    def _pump(self, proc: subprocess.Popen, host: str) -> None:
        for line in proc.stdout:
            if "FirstStepTime" not in self.status["Sandbox"] and STEP_LINE.search(line):
                self.status["Sandbox"]["FirstStepTime"] = now()  # start-up ends at the first logged step
            self.say(line, host)

    def _terminate(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        end = time.monotonic() + 10
        for p in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=max(0.1, end - time.monotonic()))
            if p.poll() is None:  # torchrun and its workers, which it starts in sessions of their own
                kill_process_tree(p.pid)
                p.wait()

    def failure_reason(self, host: Host, code: int) -> str:
        failure = host.output / "failure"
        written = failure.read_text(errors="replace").strip() if failure.exists() else ""
        lines = [ln for ln in (self.folder / "job.log").read_text(errors="replace").splitlines()
                 if ln.startswith(f"[{host.name}]")][-LOG_TAIL_LINES:]
        tail = "\n".join(ln[len(host.name) + 3:] for ln in lines)
        lost = (host.folder / LOST_MARKER).exists()
        kind = service_retry.failure_kind(code, host_lost=lost)
        if lost:
            mark = (host.folder / LOST_MARKER).read_text().strip().removeprefix("instance lost").strip()
            written = f"instance {host.name} was lost {mark}".rstrip()  # e.g. "... was lost at step 8 (--fault ...)"
        elif not written:
            written = f"the entry script {service_retry.describe_exit(code)}"
        if not lost and code < 0:
            written += ("; a process that dies is the script failing, not retried by RetryStrategy "
                        f"({service_retry.SOURCE})")
        head = f"{kind}: {written}" + ("" if lost else f" on {host.name}")  # a lost instance names itself
        reason = f"{head}. Last lines of its log:\n{tail}"
        if len(reason) <= FAILURE_REASON_MAX:
            return reason
        head = head if len(head) <= FAILURE_REASON_MAX // 2 else head[:FAILURE_REASON_MAX // 2 - 4] + " ..."
        return f"{head}. Last lines of its log:\n... " + tail[-(FAILURE_REASON_MAX - len(head) - 30):]  # the script's own words whole

    def sync_checkpoints(self, final: bool = False) -> None:
        if not self.checkpoint_uri:
            return
        target = storage.to_local_path(self.checkpoint_uri)
        seen = self.__dict__.setdefault("_seen", {})
        copied = sum(sync_folder(h.checkpoints, target, seen.setdefault(h.name, {})) for h in self.hosts)
        if copied and final:
            self.say(f"copied {copied} checkpoint file(s) to {self.checkpoint_uri}")

    def upload_artifacts(self) -> None:
        out = self.request["OutputDataConfig"]["S3OutputPath"].rstrip("/")
        prefix = storage.to_local_path(f"{out}/{self.name}/output")
        prefix.mkdir(parents=True, exist_ok=True)
        leader = self.hosts[0]  # rank 0 runs on algo-1 and is the one that saves the model
        for name, source in (("model.tar.gz", leader.model), ("output.tar.gz", leader.output / "data")):
            with tarfile.open(prefix / name, "w:gz") as tar:
                for path in sorted(source.rglob("*")):
                    tar.add(path, arcname=path.relative_to(source).as_posix(), recursive=False)
        self.status["ModelArtifacts"] = {"S3ModelArtifacts": f"{out}/{self.name}/output/model.tar.gz"}
        self.status["OutputDataArtifacts"] = f"{out}/{self.name}/output/output.tar.gz"

    def finish(self, status: str, secondary: str, message: str, **fields) -> None:
        end = now()
        start = self.status.get("TrainingStartTime")
        seconds = int((dt.datetime.fromisoformat(end) - dt.datetime.fromisoformat(start)).total_seconds()) \
            if start else 0
        self.set_status(secondary, message.splitlines()[0] if message else "", TrainingJobStatus=status,
                        TrainingEndTime=end, TrainingTimeInSeconds=seconds, BillableTimeInSeconds=seconds, **fields)


