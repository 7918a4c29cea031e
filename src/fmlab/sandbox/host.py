"""One local "instance" of a sandbox job: its /opt/ml-shaped folder, its SM_* environment, its launch command.

SageMaker gives every instance of a training job the same layout under /opt/ml, the environment variables its
SDK v3 driver scripts set (`sm_drivers/scripts/environment.py`), and then runs the entry script: directly,
with `torchrun`, or with `mpirun`. The sandbox (`fmlab.sandbox`) builds one such folder per requested
instance, `hosts/algo-1 ... algo-N` inside the job's folder, and mirrors that contract on this machine:

    hosts/algo-1/input/config/{hyperparameters,resourceconfig,inputdataconfig}.json
    hosts/algo-1/input/data/<channel>/...     the channel's S3 prefix, copied (File mode)
    hosts/algo-1/input/data/code/             the source directory (entry script, fmlab, requirements.txt)
    hosts/algo-1/model/  output/data/  output/failure  checkpoints/

Values that describe hardware (SM_NUM_CPUS, SM_NUM_GPUS) are this machine's, honestly; the instance type is
the requested one. SM_MASTER_ADDR=algo-1 and SM_MASTER_PORT=7777 are set as SageMaker sets them; the local
processes rendezvous on 127.0.0.1 instead (torchrun's c10d backend), since "algo-1" names no local host.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from fmlab import storage

SM_MASTER_PORT = 7777  # what sagemaker's environment.py sets, with SM_MASTER_ADDR = "algo-1"
NETWORK_INTERFACE = "eth0"
# Variables that would hand AWS credentials to the job's processes: a local job needs none (its S3 is a folder).
CREDENTIAL_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN",
                        "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                        "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_AUTHORIZATION_TOKEN",
                        "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN")


def safe_deserialize(value):
    """As the SDK's drivers read a hyperparameter: JSON when it parses, the string itself otherwise."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value


def safe_serialize(value) -> str:
    """As the SDK's drivers write a value into the environment or the command line."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value)
    except TypeError:
        return str(value)


def hyperparameters_to_args(hyperparameters: dict) -> list[str]:
    """`--key value` for each hyperparameter, exactly as the SDK's basic and torchrun drivers build them."""
    args: list[str] = []
    for key, value in hyperparameters.items():
        args += [f"--{key}", safe_serialize(safe_deserialize(value))]
    return args


@dataclass
class Launch:
    """How the job's processes start: the SDK driver the request chose, and what it needs."""

    driver: str  # "basic" | "torchrun" | "mpi"
    entry_script: str
    processes_per_host: int | None = None  # as requested (None: one per device)
    smp: dict = field(default_factory=dict)
    requirements: str | None = None
    mpi_options: list[str] = field(default_factory=list)  # MPI(mpi_additional_options=...), mpirun's own


def read_launch(drivers_dir: Path) -> Launch:
    """Read the sm_drivers channel the SDK uploaded: sourcecode.json, distributed.json and sm_train.sh."""
    source = json.loads((drivers_dir / "sourcecode.json").read_text() or "{}")
    distributed = json.loads((drivers_dir / "distributed.json").read_text() or "{}") \
        if (drivers_dir / "distributed.json").exists() else {}
    script = (drivers_dir / "sm_train.sh").read_text() if (drivers_dir / "sm_train.sh").exists() else ""
    if source.get("command"):
        raise ValueError("this job runs SourceCode(command=...); the sandbox runs entry scripts only: "
                         "use SourceCode(entry_script=...)")
    found = re.search(r"distributed_drivers/(\w+)\.py", script)
    driver = {"torchrun_driver": "torchrun", "mpi_driver": "mpi"}.get(found.group(1), "basic") if found else "basic"
    return Launch(driver, source.get("entry_script") or "", distributed.get("process_count_per_node"),
                  distributed.get("smp") or {}, source.get("requirements"),
                  list(distributed.get("mpi_additional_options") or []))


@dataclass
class Host:
    """The folder and identity of one local instance."""

    folder: Path
    name: str  # algo-1 ...
    rank: int
    hosts: list[str]
    instance_type: str

    @property
    def input(self) -> Path:
        return self.folder / "input"

    @property
    def config(self) -> Path:
        return self.input / "config"

    @property
    def data(self) -> Path:
        return self.input / "data"

    @property
    def code(self) -> Path:
        return self.data / "code"

    @property
    def model(self) -> Path:
        return self.folder / "model"

    @property
    def output(self) -> Path:
        return self.folder / "output"

    @property
    def checkpoints(self) -> Path:
        return self.folder / "checkpoints"

    def resource_config(self) -> dict:
        return {"current_host": self.name, "current_instance_type": self.instance_type,
                "current_group_name": "homogeneousCluster", "hosts": self.hosts,
                "instance_groups": [{"instance_group_name": "homogeneousCluster", "instance_type": self.instance_type,
                                     "hosts": self.hosts}],
                "network_interface_name": NETWORK_INTERFACE}

    def prepare(self, request: dict) -> None:
        """Create the /opt/ml layout and copy every input channel into it (SageMaker's File mode)."""
        for path in (self.config, self.data, self.model, self.output / "data", self.checkpoints):
            path.mkdir(parents=True, exist_ok=True)
        channels = request.get("InputDataConfig") or []
        (self.config / "hyperparameters.json").write_text(json.dumps(request.get("HyperParameters") or {}))
        (self.config / "resourceconfig.json").write_text(json.dumps(self.resource_config()))
        job_mode = (request.get("AlgorithmSpecification") or {}).get("TrainingInputMode") or "File"
        (self.config / "inputdataconfig.json").write_text(json.dumps({  # FastFile is served as File: a local copy
            c["ChannelName"]: {"TrainingInputMode": c.get("InputMode") or job_mode,
                               "S3DistributionType": c["DataSource"]["S3DataSource"].get(
                                   "S3DataDistributionType", "FullyReplicated"),
                               "RecordWrapperType": "None"} for c in channels}))
        for channel in channels:
            uri = channel["DataSource"]["S3DataSource"]["S3Uri"]
            target = self.data / channel["ChannelName"]
            source = storage.to_local_path(uri)
            if not source.exists():
                raise FileNotFoundError(f"channel {channel['ChannelName']!r}: nothing at {uri} (looked in {source})")
            if source.is_file():
                target.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target / source.name)
            else:
                shutil.copytree(source, target, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))

    def environment(self, request: dict, launch: Launch, job_name: str) -> dict[str, str]:
        """The SM_* variables SageMaker's environment.py would export on this host, with local paths."""
        channels = [c["ChannelName"] for c in request.get("InputDataConfig") or []]  # code, sm_drivers too
        hps = {k: safe_deserialize(v) for k, v in (request.get("HyperParameters") or {}).items()}
        env: dict = {
            "SM_MODEL_DIR": str(self.model), "SM_INPUT_DIR": str(self.input), "SM_INPUT_DATA_DIR": str(self.data),
            "SM_INPUT_CONFIG_DIR": str(self.config), "SM_OUTPUT_DIR": str(self.output),
            "SM_OUTPUT_FAILURE": str(self.output / "failure"), "SM_OUTPUT_DATA_DIR": str(self.output / "data"),
            "SM_LOG_LEVEL": 20, "SM_MASTER_ADDR": self.hosts[0], "SM_MASTER_PORT": SM_MASTER_PORT,
            "SM_SOURCE_DIR": str(self.code), "SM_ENTRY_SCRIPT": launch.entry_script,
        }
        if launch.driver != "basic":
            env["SM_DISTRIBUTED_DRIVER_DIR"] = str(self.data / "sm_drivers" / "distributed_drivers")
            env["SM_DISTRIBUTED_CONFIG"] = {"process_count_per_node": launch.processes_per_host,
                                            **({"smp": launch.smp} if launch.smp else {})}
        for channel in channels:
            env[f"SM_CHANNEL_{channel.upper()}"] = str(self.data / channel)
        env["SM_CHANNELS"] = channels
        for key, value in hps.items():
            env[f"SM_HP_{key.replace('-', '_').upper()}"] = value
        env["SM_HPS"] = hps
        env.update({"SM_CURRENT_HOST": self.name, "SM_CURRENT_INSTANCE_TYPE": self.instance_type,
                    "SM_HOSTS": self.hosts, "SM_NETWORK_INTERFACE_NAME": NETWORK_INTERFACE,
                    "SM_HOST_COUNT": len(self.hosts), "SM_CURRENT_HOST_RANK": self.rank,
                    "SM_NUM_CPUS": os.cpu_count() or 1, "SM_NUM_GPUS": 0, "SM_NUM_NEURONS": 0,
                    "SM_RESOURCE_CONFIG": self.resource_config(),
                    "SM_INPUT_DATA_CONFIG": json.loads((self.config / "inputdataconfig.json").read_text())})
        env["SM_TRAINING_ENV"] = {
            "channel_input_dirs": {c: env[f"SM_CHANNEL_{c.upper()}"] for c in channels},
            "current_host": self.name, "current_instance_type": self.instance_type, "hosts": self.hosts,
            "master_addr": self.hosts[0], "master_port": SM_MASTER_PORT, "hyperparameters": hps,
            "input_data_config": env["SM_INPUT_DATA_CONFIG"], "input_config_dir": str(self.config),
            "input_data_dir": str(self.data), "input_dir": str(self.input), "job_name": job_name,
            "log_level": 20, "model_dir": str(self.model), "network_interface_name": NETWORK_INTERFACE,
            "num_cpus": env["SM_NUM_CPUS"], "num_gpus": 0, "num_neurons": 0,
            "output_data_dir": str(self.output / "data"), "resource_config": self.resource_config(),
        }
        out = {k: safe_serialize(v) for k, v in env.items()}
        out["TRAINING_JOB_NAME"] = job_name
        return out

    def command(self, launch: Launch, hyperparameters: dict, processes: int, endpoint: str,
                job_name: str) -> list[str]:
        """The command this host runs: the entry script alone, or torchrun with one agent for this host."""
        script = str(self.code / launch.entry_script)
        args = hyperparameters_to_args(hyperparameters)
        if launch.driver == "basic":
            return [sys.executable, script, *args]
        return [sys.executable, "-m", "torch.distributed.run", f"--nnodes={len(self.hosts)}",
                f"--nproc-per-node={processes}", "--rdzv-backend=c10d", f"--rdzv-endpoint={endpoint}",
                f"--rdzv-id={job_name}", "--max-restarts=0", script, *args]


def process_environment(base: dict[str, str], sm_env: dict[str, str], threads: int,
                        checkpoints: Path | None) -> dict[str, str]:
    """The full environment of a host's processes: this one minus AWS credentials, plus the SM_* contract."""
    env = {k: v for k, v in base.items() if k not in CREDENTIAL_VARIABLES and not k.startswith("SM_")}
    env.update(sm_env)
    env.update({"PYTHONUNBUFFERED": "1", "FMLAB_BACKEND": "local", "OMP_NUM_THREADS": str(threads),
                storage.LOCAL_BUCKET_VARIABLE: str(storage.local_bucket_root())})
    env.pop("PYTHONPATH", None)  # the shipped source directory, not this checkout, is what the job imports
    env["FMLAB_SANDBOX_HOST"] = sm_env.get("SM_CURRENT_HOST", "algo-1")  # this machine's own /opt/ml is not the job's
    if checkpoints is not None:
        env["FMLAB_CHECKPOINT_DIR"] = str(checkpoints)  # what fmlab.train reads instead of /opt/ml/checkpoints
    return env


def _files_under(folder: Path) -> list[Path]:
    """Every file below `folder`, sorted. The script may delete a folder while this walks (a checkpoint rotated
    out): os.walk skips it, where Path.rglob raises FileNotFoundError on Python 3.11."""
    return sorted(Path(root) / name for root, _, names in os.walk(folder) for name in names)


# SageMaker's checkpoint sync, as the developer guide states it (Checkpoints in Amazon SageMaker AI,
# https://docs.aws.amazon.com/sagemaker/latest/dg/model-checkpoints.html, read 2026-11-26): "Existing checkpoints
# in S3 are written to the SageMaker AI container at the start of the job"; "Checkpoints added to the S3 folder
# after the job has started are not copied to the training container"; "If a checkpoint is deleted in the
# SageMaker AI container, it will also be deleted in the S3 folder."
CHECKPOINT_SYNC_SOURCE = "https://docs.aws.amazon.com/sagemaker/latest/dg/model-checkpoints.html (read 2026-11-26)"


def sync_folder(source: Path, target: Path, seen: dict[str, tuple[float, int]]) -> int:
    """Copy files new or changed since the last call from `source` to `target`, and delete from `target` the
    files this sync copied there earlier that `source` no longer has: SageMaker's checkpoint upload, which mirrors
    a deletion in the container to S3 (CHECKPOINT_SYNC_SOURCE). So the S3 prefix holds what the folder holds: the
    kept checkpoints, not every checkpoint ever saved, and a rename (`.incomplete-step_N` to `step_N`) becomes a
    copy under the new name and a deletion of the old one, as S3 has no rename. A fresh `seen` ({}) deletes
    nothing (the copy down at the start of a job). Returns how many files were copied."""
    copied = 0
    if not source.is_dir():
        return 0
    present: set[str] = set()
    for path in _files_under(source):
        rel = path.relative_to(source).as_posix()
        present.add(rel)
        try:
            stat = path.stat()
        except FileNotFoundError:  # the script replaced it meanwhile (an atomic rename): next round
            continue
        key = (stat.st_mtime, stat.st_size)
        if seen.get(rel) == key:
            continue
        dest = target / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(dest.name + ".fmlab-partial")
        try:
            shutil.copy2(path, tmp)
        except FileNotFoundError:
            continue
        os.replace(tmp, dest)
        seen[rel] = key
        copied += 1
    for rel in sorted(set(seen) - present):
        if (source / rel).exists():  # missed by a walk that raced a rename: still there, kept
            continue
        del seen[rel]
        (target / rel).unlink(missing_ok=True)
        _remove_empty_parents((target / rel).parent, target)
    return copied


def _remove_empty_parents(folder: Path, stop: Path) -> None:
    """S3 has no folders: a prefix whose last object is deleted is gone, so the local bucket drops the empty
    folder too (and its empty parents, up to `stop`)."""
    while folder != stop and stop in folder.parents:
        try:
            folder.rmdir()
        except OSError:  # not empty, or already gone
            return
        folder = folder.parent
