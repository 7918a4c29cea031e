"""How SageMaker's SDK v3 launches MPI jobs, and where Open MPI then puts the ranks: the rules a job request and the
sandbox both follow (so they live on the service's floor, below jobs, sandbox and parallel).

    from fmlab.service.mpi_launch import mpi_launch, mpirun_ranks
    mpi_launch(8, instances=2)     # the MPI(...) settings that start 16 ranks, 8 per instance
    mpirun_ranks(command)          # {"total": 16, "per_host": {"algo-1": 8, "algo-2": 8}}

SDK v3's MPI driver (sagemaker-train 1.27.0, mpi_driver.py and mpi_utils.py) writes `--host algo-1:8,algo-2:8` and
passes `process_count_per_node` as mpirun's `-np`, which Open MPI reads as the TOTAL: on 2 x p4d it would start 8
ranks, all on algo-1. fmlab.service.smddp explains the rest and checks the installed driver (driver_drift).
"""

from __future__ import annotations


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
