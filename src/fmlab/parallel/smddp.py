"""SageMaker's data-parallel library (SMDDP, the `smddp` backend): where it runs, which launcher it needs, and
the command SageMaker's SDK v3 driver builds for a job.

    from fmlab.parallel import smddp
    smddp.smddp_advice("ml.p4d.24xlarge", instances=16)
    smddp.sagemaker_command(Torchrun(process_count_per_node=8), "ml.p4d.24xlarge", 2, {"max_steps": 100})
    smddp.mpirun_ranks(command)            # {"total": 8, "per_host": {...}}: what Open MPI will start
    smddp.mpi_launch(8, instances=2)       # the MPI(...) settings that start 16 ranks, 8 per instance

SDK v3's MPI driver (sagemaker-train, container_drivers/distributed_drivers/mpi_driver.py and mpi_utils.py,
read in sagemaker-train 1.27.0) writes `--host algo-1:8,algo-2:8` and passes `process_count_per_node` as
mpirun's `-np`. In Open MPI `-np` is the TOTAL number of processes, so on 2 x p4d it starts 8 ranks, all on
algo-1, for 16 GPUs. `mpi_launch` works around it: `-np` = every rank of the job, placed 8 per node with
`--map-by ppr:8:node`.

Used by notebooks/04_data_parallel.ipynb and labs/lab_04_data_parallel.ipynb; the traffic arithmetic is in
fmlab.parallel.traffic. Tested by tests/parallel/test_data_parallel.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

# ---------------------------------------------------------------- SMDDP: where it runs and how it is launched

# "The SMDDP library supports P4 and P4de instances" (SageMaker developer guide, "Compatibility with the SMDDP
# library optimized for AWS infrastructure", SMP v2); check "Supported frameworks, AWS Regions, and instance
# types" of the SMDDP library for the current list.
SMDDP_INSTANCES = ("ml.p4d.24xlarge", "ml.p4de.24xlarge")
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
           "SM_MASTER_ADDR": hosts[0], "SM_MASTER_PORT": "7777", "SM_CURRENT_HOST_RANK": "0",
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


def mpirun_ranks(command: list[str]) -> dict:
    """How many processes an mpirun command starts and where, by Open MPI's rules: `-np` is the total; with
    `--map-by ppr:N:node` each host gets N, otherwise ranks fill each host's slots (`host:slots`) in order."""
    if not command or command[0] != "mpirun":
        raise ValueError("not an mpirun command")
    hosts = command[command.index("--host") + 1].split(",")
    slots = {h.split(":")[0]: int(h.split(":")[1]) if ":" in h else 1 for h in hosts}
    total = int(command[command.index("-np") + 1])
    per_node = None
    if "--map-by" in command and command[command.index("--map-by") + 1].startswith("ppr:"):
        per_node = int(command[command.index("--map-by") + 1].split(":")[1])
    placed, left = {}, total
    for host, n in slots.items():
        take = min(left, per_node if per_node is not None else n)
        placed[host] = take
        left -= take
    if left:
        raise ValueError(f"-np {total} does not fit the hosts' slots {slots}: mpirun would refuse to start")
    return {"total": total, "per_host": placed}


def mpi_launch(processes_per_host: int, instances: int) -> dict:
    """Keyword arguments for SDK v3 `MPI(...)` that start `processes_per_host` ranks on EACH instance.

    The SDK passes process_count_per_node as mpirun's -np (a total in Open MPI): ask for every rank of the
    job there, and place them per node with `--map-by ppr:N:node`. One instance needs no workaround."""
    if processes_per_host < 1 or instances < 1:
        raise ValueError(f"processes_per_host and instances must be at least 1, got {processes_per_host}, "
                         f"{instances}")
    if instances == 1:
        return {"process_count_per_node": processes_per_host, "mpi_additional_options": []}
    return {"process_count_per_node": processes_per_host * instances,
            "mpi_additional_options": ["--map-by", f"ppr:{processes_per_host}:node"]}


_TORCHRUN_SCRIPT = """
import json, sys
sys.path.insert(0, sys.argv[1])
from distributed_drivers import torchrun_driver
print(json.dumps(torchrun_driver.create_commands()))
"""

# The same calls as the SDK's mpi_driver.main() on the master host, without starting sshd or mpirun.
_MPI_SCRIPT = """
import json, os, sys
sys.path.insert(0, sys.argv[1])
from common.utils import get_process_count, hyperparameters_to_cli_args
from distributed_drivers.mpi_utils import get_mpirun_command
config = json.loads(os.environ["SM_DISTRIBUTED_CONFIG"])
hosts = json.loads(os.environ["SM_HOSTS"])
count = get_process_count(int(config["process_count_per_node"] or 0))
if count > 1:
    hosts = [f"{h}:{count}" for h in hosts]
command = get_mpirun_command(host_count=len(hosts), host_list=hosts, num_processes=count,
                             additional_options=config["mpi_additional_options"] or [],
                             entry_script_path=os.environ["SM_ENTRY_SCRIPT"])
print(json.dumps(command + hyperparameters_to_cli_args(json.loads(os.environ["SM_HPS"]))))
"""
