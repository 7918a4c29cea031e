"""Join the process group and build the device mesh: the device (cuda, neuron, cpu), the backend (gloo, nccl,
neuron, smddp) and the 3-D mesh (dp_replicate, dp_shard, tp) every layout of fmlab.parallel is placed on.

    choose_device()                # DeviceChoice("cuda", "nccl") on a GPU, ("neuron", "neuron") on trn2, else cpu/gloo

The device comes from where the script runs, so the same training script runs on a GPU instance, on Trainium2
with TorchNeuron (native PyTorch on Neuron: `import torch_neuronx` registers the "neuron" device and the
"neuron" process-group backend; Neuron docs "How to use torch.distributed on Neuron", read 2026-11-23) and on a
laptop. CUDA wins when both could answer; Neuron counts only when torch_neuronx imports AND torch.accelerator
reports a neuron device (TorchNeuron registers through PyTorch's PrivateUse1 mechanism, "code written against
torch.accelerator needs no change": Neuron docs "TorchNeuron: Native PyTorch on AWS Neuron").

    dist = init_distributed(cfg)   # torchrun's RANK / WORLD_SIZE / LOCAL_RANK, or a world of 1
    dist = init_distributed(cfg, timeout=600)   # a collective waiting 600 s for a peer raises instead

Two things make failures recoverable rather than endless (module 8):
- `timeout` (seconds) becomes init_process_group's `timeout`: a collective, or the rendezvous, that waits that
  long (fmlab.train passes its long first-phase timeout, then lowers it with `set_collective_timeout` after the
  first step) for a dead or hung peer raises an error on the ranks still alive (gloo: "Timed out waiting ...ms"; NCCL
  needs TORCH_NCCL_ASYNC_ERROR_HANDLING=1, which torchrun sets), and `collective_timeout_error` turns that
  error into a CollectiveTimeout that names the setting. None keeps torch's default (30 min; NCCL 10 min).
- Under torchrun (TORCHELASTIC_RESTART_COUNT is set; gloo and nccl, smddp keeps torch's own env:// setup) the
  group is built on `PrefixStore("fmlab/attempt-N")` of the agent's store, N = TORCHELASTIC_RESTART_COUNT.
  The agent keeps one TCPStore for the whole job, so after `--max-restarts` restarts the workers the dead
  group's keys (each rank's gloo address) are still in it; a fresh group reading them tries to connect to a
  process that no longer exists ("Gloo connectFullMesh failed ... Connection refused") or hangs. A prefix per
  attempt gives every attempt clean keys. Measured on a 2-core CPU with torch 2.13, 10 kill-and-restart drills
  of fmlab.train (2 gloo processes, --max-restarts 1): 5 of 10 restarts came up without the prefix (3 failed
  to connect, 2 still hung after 2 minutes), 10 of 10 with it.
  Caveat: the attempt number must be the same on every node. It is on one node, and when every node's agent
  restarts its workers after a failure; with torchrun's dynamic (c10d) rendezvous over several nodes, agents
  that restart healthy workers for a membership change do not count a restart, and torchrun does not pass
  the rendezvous round to the workers.
"""

from __future__ import annotations

import contextlib
import datetime
import os
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch.distributed import distributed_c10d as c10d
from torch.distributed.constants import default_pg_timeout
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.rendezvous import rendezvous

from fmlab.parallel.config import DistInfo, ParallelConfig
from fmlab.parallel.smp import smp_available, smp_init
from fmlab.plan.compute import PlanError
from fmlab.plan.parallelism import MESH_DIMS


@dataclass(frozen=True)
class DeviceChoice:
    """The device type this process trains on and the process-group backend that goes with it."""

    device: str  # "cuda" | "neuron" | "cpu"
    backend: str  # "nccl" | "neuron" | "gloo"
    why: str


BACKEND_OF = {"cuda": "nccl", "neuron": "neuron", "cpu": "gloo"}


def cuda_present() -> bool:
    return torch.cuda.is_available()


def neuron_present() -> bool:
    """True only where TorchNeuron is installed and a Neuron device is visible (a trn2/trn3 instance)."""
    try:
        import torch_neuronx  # noqa: F401  (registers the "neuron" device and backend)
    except ImportError:
        return False
    accelerator = getattr(torch, "accelerator", None)
    if accelerator is None or not accelerator.is_available():
        return False
    current = accelerator.current_accelerator()
    return current is not None and current.type == "neuron"


def choose_device() -> DeviceChoice:
    """cuda if a GPU is visible, else neuron if TorchNeuron sees a Neuron device, else cpu; with its backend."""
    if cuda_present():
        return DeviceChoice("cuda", "nccl", "torch.cuda.is_available()")
    if neuron_present():
        return DeviceChoice("neuron", "neuron", "torch_neuronx imported and torch.accelerator is a neuron device")
    return DeviceChoice("cpu", "gloo", "no CUDA GPU and no Neuron device")


def resolve_backend(cfg: ParallelConfig) -> str:
    """The torch.distributed backend to use: smddp only when asked and importable; "auto" from choose_device()."""
    if cfg.backend == "smddp":
        try:
            import smdistributed.dataparallel.torch.torch_smddp  # noqa: F401  (registers the "smddp" backend)
        except ImportError:
            raise PlanError("backend='smddp' needs SageMaker's SMDDP library (smdistributed.dataparallel), found "
                            "only in the SageMaker PyTorch containers up to 2.5 and the SMP images (frozen: "
                            "fmlab.service.libraries): use backend='auto' (NCCL on GPUs)") from None
        return "smddp"
    if cfg.backend != "auto":
        return cfg.backend
    return choose_device().backend


def build_mesh(cfg: ParallelConfig, world_size: int, device_type: str):
    """The 3-D DeviceMesh (dp_replicate, dp_shard, tp) for `cfg`; call on every rank of an initialised world."""
    return init_device_mesh(device_type, cfg.mesh_shape(world_size), mesh_dim_names=MESH_DIMS)


def needs_mesh(cfg: ParallelConfig, backend: str) -> bool:
    """Whether the layout gets a DeviceMesh. Not for plain DDP on SMDDP: AWS says "(For PyTorch DDP jobs only)
    The smddp backend currently does not support creating subprocess groups with the
    torch.distributed.new_group() API" (SageMaker developer guide, "Use the SMDDP library in your PyTorch
    training script"), and plain DDP needs no subgroup: it all-reduces over the default group."""
    return not (backend == "smddp" and cfg.sharding == "none" and cfg.tp == 1)


class CollectiveTimeout(RuntimeError):
    """A collective (or the rendezvous) waited longer than the configured timeout: a peer is dead or hung."""


def restart_attempt(env=None) -> int:
    """Which start of the workers this is: torchrun's TORCHELASTIC_RESTART_COUNT (0 first, 1 after a restart)."""
    env = os.environ if env is None else env
    try:
        return int(env.get("TORCHELASTIC_RESTART_COUNT", "0") or 0)
    except ValueError:
        return 0


def collective_timeout_error(error: BaseException, timeout: float | None, flag: str = "--collective-timeout",
                             named: str = "") -> CollectiveTimeout | None:
    """A CollectiveTimeout naming `timeout` (and the `flag` that set it) if `error` is a backend's timeout (gloo:
    "Timed out waiting 5000ms for recv operation", NCCL's watchdog: "Watchdog caught collective operation
    timeout"), else None. `named`: what the collective traces say (fmlab.hangs.analysis), put first."""
    text = str(error)
    if not isinstance(error, RuntimeError) or not any(w in text.lower() for w in ("timed out", "timeout")):
        return None
    limit = f"{timeout:g} s" if timeout else "torch's default timeout"
    lead = f"{named}. " if named else "a peer process is dead or hung, see the other ranks' logs (or the host's health). "
    timed_out = CollectiveTimeout(
        f"a collective waited longer than the collective timeout ({limit}, {flag}): {lead}With `torchrun "
        f"--max-restarts N` the job restarts from its newest complete checkpoint; raise {flag} only if a rank "
        f"legitimately works alone that long (a large checkpoint or export). Backend said: {text.strip()[:300]}")
    # the short form, for a job's failure reason (SageMaker keeps 1,024 characters of it)
    timed_out.summary = f"{named} (collective timeout {limit}, {flag})" if named else \
        f"collective timeout ({limit}, {flag}): {lead.strip()}"
    return timed_out


def peer_lost(error: BaseException) -> bool:
    """True if `error` is a collective failing because a peer's connection closed (gloo: "Connection closed by
    peer", "Connection reset by peer"): the peer process died."""
    text = str(error).lower()
    return isinstance(error, RuntimeError) and any(w in text for w in ("closed by peer", "reset by peer",
                                                                        "broken pipe"))


def set_collective_timeout(seconds: float) -> int:
    """Give every process group of this process (the world and the mesh's subgroups) a new collective timeout;
    returns how many groups changed. Call it on every rank at the same point: it starts with a barrier under the
    old timeout, so no rank issues a collective under the new, shorter one while another is still in the
    slower phase before it (torchtitan's set_pg_timeouts, torchtitan/distributed/utils.py, does the same).

    torch 2.13 has no public call for this: torch.distributed.distributed_c10d._set_pg_timeout(timeout, group)
    sets the default timeout of a group's gloo and NCCL backends (ProcessGroupGloo reads it for each new
    collective; measured: a gloo group created with 60 s, set to 3 s, raises "Timed out waiting 3000ms")."""
    if not dist.is_initialized() or dist.get_world_size() < 2:
        return 0
    on_gpu = dist.get_backend() == "nccl"
    dist.barrier(device_ids=[torch.cuda.current_device()] if on_gpu else None)  # NCCL: the device it runs on
    delta = datetime.timedelta(seconds=seconds)
    groups = list(c10d._world.pg_map)
    for group in groups:
        with contextlib.suppress(ValueError):  # a group this rank is not in
            c10d._set_pg_timeout(delta, group)
    return len(groups)


def join_process_group(backend: str, timeout: float | None) -> None:
    """init_process_group, with `timeout`, on a store prefixed by the restart attempt when torchrun started us."""
    delta = datetime.timedelta(seconds=timeout) if timeout else None
    if "TORCHELASTIC_RESTART_COUNT" not in os.environ or backend not in ("gloo", "nccl"):
        dist.init_process_group(backend=backend, timeout=delta)  # env:// as torch does it
        return

    # What init_process_group does for env:// (the agent's TCPStore, RANK, WORLD_SIZE), plus a prefix per attempt.
    store, rank, world = next(rendezvous("env://", timeout=delta or default_pg_timeout))
    store.set_timeout(delta or default_pg_timeout)
    store = dist.PrefixStore(f"fmlab/attempt-{restart_attempt()}/default_pg", store)
    dist.init_process_group(backend=backend, store=store, rank=rank, world_size=world, timeout=delta)


def init_distributed(cfg: ParallelConfig, timeout: float | None = None) -> DistInfo:
    """Join the process group torchrun (or SageMaker) set up; a world of 1 when RANK/WORLD_SIZE are absent.

    `timeout`: seconds a collective may wait for its peers before it raises (None: torch's default). Safe to
    call again in an initialised world (a new layout gets a new mesh on the same process group).
    """
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    cfg.check(world).check_trainable()
    backend = resolve_backend(cfg)
    if backend in ("nccl", "smddp"):
        if not torch.cuda.is_available():
            raise PlanError(f"backend {backend!r} needs CUDA GPUs; on a CPU use backend='gloo' (or 'auto')")
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    elif backend == "neuron":
        if not neuron_present():
            raise PlanError("backend 'neuron' needs TorchNeuron (torch-neuronx 2.13+) and a Neuron device (trn2, "
                            "trn3); here use backend='auto'")
        device = torch.device("neuron")  # the process's logical NeuronCore, as Neuron's torch.distributed guide does
    else:
        device = torch.device("cpu")
    if timeout is not None and not timeout > 0:
        raise PlanError(f"the collective timeout must be a positive number of seconds, got {timeout!r}")
    if world == 1 and not dist.is_initialized():
        return DistInfo(0, 1, 0, device, backend, None)
    if not dist.is_initialized():
        join_process_group(backend, timeout)
    if smp_available():
        smp_init(cfg)
    if not needs_mesh(cfg, backend):
        return DistInfo(dist.get_rank(), dist.get_world_size(), local_rank, device, backend, None)
    mesh = build_mesh(cfg, dist.get_world_size(), device.type)
    return DistInfo(dist.get_rank(), dist.get_world_size(), local_rank, device, backend, mesh)
