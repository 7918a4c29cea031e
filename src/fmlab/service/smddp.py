"""SageMaker's data-parallel library (SMDDP, the `smddp` backend): where it runs, which launcher it needs, the
command SageMaker's SDK v3 driver builds for a job, and what SDK v2's SMDDP runner added that SDK v3 does not.

    from fmlab.service import smddp
    smddp.smddp_advice("ml.p4d.24xlarge", instances=16)
    smddp.sagemaker_command(Torchrun(process_count_per_node=8), "ml.p4d.24xlarge", 2, {"max_steps": 100})
    smddp.mpirun_ranks(command)            # {"total": 8, ...}: what Open MPI will start (fmlab.service.mpi_launch)
    smddp.mpi_launch(8, instances=2)       # the MPI(...) settings that start 16 ranks, 8 per instance
    smddp.v2_runner_gaps(command)          # what SDK v2's runner set for SMDDP, and whether `command` has it
    smddp.driver_drift()                   # [] while the installed SDK builds the commands the course expects

SMDDP is frozen (fmlab.service.libraries: only in images with PyTorch <= 2.5.1, p4d/p4de only) and SDK v3 has no
SMDDP launcher: its MPI driver runs plain `mpirun ... python -m mpi4py`, without the `smddprun` and the
SMDATAPARALLEL_* variables SDK v2's runner set. The course therefore teaches NCCL as the default and SMDDP under
SDK v3 as untested by AWS (libraries.LAUNCH_DECISION).

SDK v3's MPI driver (sagemaker-train, container_drivers/distributed_drivers/mpi_driver.py and mpi_utils.py,
read in sagemaker-train 1.27.0, the version pyproject.toml pins) writes `--host algo-1:8,algo-2:8` and passes
`process_count_per_node` as mpirun's `-np`. In Open MPI `-np` is the TOTAL number of processes, so on 2 x p4d it
starts 8 ranks, all on algo-1, for 16 GPUs. `mpi_launch` works around it: `-np` = every rank of the job, placed
8 per node with `--map-by ppr:8:node`. That rests on the driver's behaviour in 1.27.0: `driver_drift` (and
tests/parallel/test_sdk_drivers.py) runs the installed driver's own main() offline and says when it changes.

Facts and offline checks only: nothing here runs inside a training process (the engine registers and picks the
`smddp` process-group backend itself: fmlab.parallel.mesh.resolve_backend). Used by notebooks/04_data_parallel.ipynb
and labs/lab_04_data_parallel.ipynb; the traffic arithmetic is in fmlab.plan.traffic. Tested by
tests/parallel/test_data_parallel.py and tests/parallel/test_sdk_drivers.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from fmlab.service import libraries
from fmlab.service.mpi_launch import mpi_launch, mpirun_ranks  # noqa: F401  (the launch rules, as smddp.* too)

# ---------------------------------------------------------------- SMDDP: where it runs and how it is launched

# "The SMDDP library supports P4 and P4de instances" (fmlab.service.libraries.SMDDP_INSTANCES, with its source).
SMDDP_INSTANCES = libraries.SMDDP_INSTANCE_TYPES
# "If you chose to replace NCCL AllReduce with SMDDP AllReduce, you must choose one of the mpirun-based
# options" while AllGather works with all launchers (developer guide, "Use the PyTorch framework estimators in
# the SageMaker Python SDK"). SDK v3: MPI(...) runs mpirun, Torchrun(...) runs torchrun.
SMDDP_LAUNCHERS = {"allreduce": ("MPI",), "allgather": ("Torchrun", "MPI")}


@dataclass
class SmddpAdvice:
    """Whether SMDDP is worth switching on for a job, why, and the SDK v3 launcher it needs."""

    helps: bool
    launcher: str
    reasons: list[str] = field(default_factory=list)


def smddp_advice(instance_type: str, instances: int, collective: str = "allreduce") -> SmddpAdvice:
    """When SMDDP helps: multi-node jobs on the instances it supports, where the collective crosses EFA."""
    if collective not in SMDDP_LAUNCHERS:
        raise ValueError(f"collective must be 'allreduce' (DDP) or 'allgather' (FSDP / SMP v2), not {collective!r}")
    launcher = SMDDP_LAUNCHERS[collective][0]
    reasons = []
    if instance_type not in SMDDP_INSTANCES:
        reasons.append(f"SMDDP supports {' and '.join(SMDDP_INSTANCES)}; on {instance_type} keep backend 'nccl'")
    if instances < 2:
        reasons.append("one instance: gradients move over NVLink/NVSwitch, where NCCL is already fast; SMDDP "
                       "optimizes the inter-node traffic over EFA")
    if reasons:
        return SmddpAdvice(False, "Torchrun", reasons)
    reasons.append(f"{instances} x {instance_type}: the {collective} crosses EFA every step, where SMDDP's "
                   "implementation is built to help; the gain is largest when a step is communication-bound "
                   "(many nodes, a large model, a small per-GPU batch)")
    if collective == "allreduce":
        reasons.append("SMDDP's AllReduce needs an mpirun launch: SDK v3 MPI(...), script backend 'smddp'")
    else:
        reasons.append("SMDDP's AllGather (FSDP / SMP v2) works under torchrun: SDK v3 Torchrun(...)")
    return SmddpAdvice(True, launcher, reasons)


def sagemaker_command(distributed, instance_type: str, instance_count: int, hyperparameters: dict,
                      entry_script: str = "entrypoints/train.py", devices_per_instance: int = 0) -> list[str]:
    """The command SageMaker's driver runs on the first instance for an SDK v3 `Torchrun(...)` or `MPI(...)`.

    It calls the SDK's own container drivers (shipped in sagemaker-train) in a subprocess, with the SM_*
    environment a job on `instance_count` x `instance_type` would have: nothing is launched.
    """
    import sagemaker.train.distributed as sm_distributed

    from fmlab.plan import catalog

    kind = type(distributed).__name__
    if kind not in ("Torchrun", "MPI"):
        raise ValueError(f"expected sagemaker.train.distributed.Torchrun or MPI, got {kind}")
    drivers = Path(sm_distributed.__file__).parent / "container_drivers"
    devices = devices_per_instance or catalog.INSTANCES[instance_type].accelerators
    hosts = [f"algo-{i + 1}" for i in range(instance_count)]
    config = distributed.model_dump()
    config.pop("smp", None)
    env = {"SM_ENTRY_SCRIPT": entry_script, "SM_DISTRIBUTED_CONFIG": json.dumps(config),
           "SM_HPS": json.dumps(hyperparameters), "SM_HOST_COUNT": str(instance_count), "SM_HOSTS": json.dumps(hosts),
           "SM_MASTER_ADDR": hosts[0], "SM_MASTER_PORT": "7777", "SM_CURRENT_HOST_RANK": "0", "SM_CURRENT_HOST": hosts[0],
           "SM_CURRENT_INSTANCE_TYPE": instance_type, "SM_NUM_GPUS": str(devices), "SM_NETWORK_INTERFACE_NAME": "eth0",
           "PATH": "/usr/bin:/bin"}
    if hasattr(distributed, "smp") and distributed.smp is not None:
        env["SM_HPS"] = json.dumps({**hyperparameters, **distributed.smp._to_mp_hyperparameters()})
    script = _MPI_SCRIPT if kind == "MPI" else _TORCHRUN_SCRIPT
    done = subprocess.run([sys.executable, "-c", script, str(drivers)], env=env, capture_output=True, text=True,
                          timeout=60)
    if done.returncode != 0:
        raise RuntimeError(f"the SDK's {kind} driver could not build its command: {done.stderr.strip()[-600:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


_TORCHRUN_SCRIPT = """
import json, sys
sys.path.insert(0, sys.argv[1])
from distributed_drivers import torchrun_driver
print(json.dumps(torchrun_driver.create_commands()))
"""

# The SDK's own mpi_driver.main() on the master host, with its side effects (writing /etc/environment, sshd,
# waiting for the workers over SSH, running mpirun, touching the workers' status files) replaced: the command it
# would execute is printed instead.
_MPI_SCRIPT = """
import json, sys
sys.path.insert(0, sys.argv[1])
from distributed_drivers import mpi_driver
ran = []
for name in ("write_env_vars_to_file", "start_sshd_daemon", "bootstrap_master_node", "write_status_file_to_workers"):
    setattr(mpi_driver, name, lambda *a, **k: None)
mpi_driver.execute_commands = lambda command: (ran.append(command), (0, ""))[1]
mpi_driver.main()
print(json.dumps(ran[0]))
"""

# ---------------------------------------------------------------- the SDK version the course was checked against

SDK_DISTRIBUTION = "sagemaker-train"
SDK_CHECKED = "1.27.0"  # pyproject.toml pins it; re-read the drivers and update EXPECTED_* when you move the pin
REFERENCE_JOB = {"instance_type": "ml.p4d.24xlarge", "instance_count": 2,
                 "hyperparameters": {"backend": "nccl", "max_steps": 10}}
PYTHON = "<python>"  # the driver's get_python_executable(): the container's interpreter
# What sagemaker-train 1.27.0's drivers run on algo-1 for REFERENCE_JOB (read from the installed package on
# 2026-11-24 by driver_commands(); the MPI one for MPI(**mpi_launch(8, instances=2))).
EXPECTED_TORCHRUN_COMMAND = [
    "torchrun", "--nnodes=2", "--nproc_per_node=8", "--master_addr=algo-1", "--master_port=7777", "--node_rank=0",
    "entrypoints/train.py", "--backend", "nccl", "--max_steps", "10"]
EXPECTED_MPI_COMMAND = [
    "mpirun", "--host", "algo-1:16,algo-2:16", "-np", "16", "--allow-run-as-root", "--tag-output",
    "-mca", "btl_tcp_if_include", "eth0", "-mca", "oob_tcp_if_include", "eth0", "-mca", "plm_rsh_no_tree_spawn", "1",
    "-mca", "pml", "ob1", "-mca", "btl", "^openib", "-mca", "orte_abort_on_non_zero_status", "1",
    "-mca", "btl_vader_single_copy_mechanism", "none", "-mca", "plm_rsh_num_concurrent", "2",
    "-x", "NCCL_SOCKET_IFNAME=eth0", "-x", "LD_LIBRARY_PATH", "-x", "PATH", "--map-by", "ppr:8:node",
    "-x", "FI_PROVIDER=efa", "-x", "NCCL_PROTO=simple", "-x", "FI_EFA_USE_DEVICE_RDMA=1",
    PYTHON, "-m", "mpi4py", "entrypoints/train.py", "--backend", "nccl", "--max_steps", "10"]


def installed_sdk() -> str:
    """The installed sagemaker-train version."""
    return metadata.version(SDK_DISTRIBUTION)


def driver_commands() -> dict[str, list[str]]:
    """What the installed SDK's Torchrun and MPI drivers run for REFERENCE_JOB (the interpreter as PYTHON)."""
    from sagemaker.train.distributed import MPI, Torchrun

    job = REFERENCE_JOB
    torchrun = sagemaker_command(Torchrun(process_count_per_node=8), job["instance_type"], job["instance_count"],
                                 job["hyperparameters"])
    mpi = sagemaker_command(MPI(**mpi_launch(8, instances=job["instance_count"])), job["instance_type"],
                            job["instance_count"], job["hyperparameters"])
    mpi = [PYTHON if part.endswith(("/python", "/python3")) or part in ("python", "python3") else part for part in mpi]
    return {"Torchrun": torchrun, "MPI": mpi}


def driver_drift() -> list[str]:
    """How the installed SDK's drivers differ from the ones the course was checked against; [] when they do not."""
    out = []
    if installed_sdk() != SDK_CHECKED:
        out.append(f"{SDK_DISTRIBUTION} {installed_sdk()} is installed; the course was checked against {SDK_CHECKED} "
                   "(pyproject.toml pins it): reinstall with `make setup`, or re-read the drivers and update the pin")
    got = driver_commands()
    for name, expected in (("Torchrun", EXPECTED_TORCHRUN_COMMAND), ("MPI", EXPECTED_MPI_COMMAND)):
        if got[name] != expected:
            first = next((i for i, (a, b) in enumerate(zip(got[name], expected, strict=False)) if a != b),
                         min(len(got[name]), len(expected)))
            out.append(f"the {name} driver now builds {' '.join(got[name][max(0, first - 2):first + 4])!r} where the "
                       f"course expects {' '.join(expected[max(0, first - 2):first + 4])!r} (argument {first}): "
                       "re-check smddp.mpi_launch and notebook 04 against the new driver")
    return out


# ---------------------------------------------------------------- what SDK v2's SMDDP runner added

# Each piece SDK v2's runner put on the mpirun command line for SMDDP (libraries.V2_RUNNER: aws/sagemaker-training-
# toolkit smdataparallel.py, read 2026-11-24), with what it is for. "=" ends a prefix whose value varies.
V2_RUNNER_PIECES = (
    ("smddprun", "SMDDP's launcher binary, between mpirun and `python -m mpi4py <script>`"),
    ("SMDATAPARALLEL_USE_HOMOGENEOUS=1", "several hosts: SMDDP's multi-node mode (SMDATAPARALLEL_USE_SINGLENODE=1 on "
                                         "one host)"),
    ("SMDATAPARALLEL_SERVER_ADDR=", "the master host, where SMDDP's servers meet"),
    ("SMDATAPARALLEL_SERVER_PORT=7592", "their port"),
    ("SAGEMAKER_INSTANCE_TYPE=", "the instance type, for SMDDP's topology"),
    ("FI_PROVIDER=efa", "libfabric's EFA provider"),
    ("RDMAV_FORK_SAFE=1", "rdma-core stays correct when the process forks"),
    ("LD_PRELOAD=", "the toolkit's gethostname shim"),
)


def v2_runner_gaps(command: list[str]) -> list[dict]:
    """For each piece SDK v2's runner set for SMDDP: whether `command` has it, and what it is for."""
    def has(piece: str) -> bool:
        return any(part == piece or (piece.endswith("=") and part.startswith(piece)) for part in command)

    return [{"SDK v2 runner set": piece, "in this command": has(piece), "what for": why}
            for piece, why in V2_RUNNER_PIECES]
