"""The parallel engine: one call turns a model into DDP, FSDP (full or hybrid), TP or FSDP+TP.

    from fmlab.parallel import ParallelConfig, init_distributed, parallelize
    cfg = ParallelConfig(sharding="full", tp=2).check(4, "tiny")
    dist = init_distributed(cfg)            # torchrun's RANK / WORLD_SIZE / LOCAL_RANK, or a world of 1
    model = parallelize(build_model("tiny"), cfg, dist)

Run it with `torchrun --nproc-per-node 4 -m fmlab.train ...` (gloo on a CPU), or inside a SageMaker job.
Each layout lives in its own short file (picotron-style): ddp.py, fsdp.py, tensor.py, activations.py,
precision.py, and smp.py for SageMaker model parallelism v2 (`torch.sagemaker`), used when importable.
The order is fixed: tensor parallelism first (it replaces weights with DTensor shards), then activation
checkpointing / offloading (they wrap whole decoder layers), then FSDP or DDP (they shard or replicate what
is left). All devices are arranged on one 3-D device mesh (dp_replicate, dp_shard, tp).

Files: config.py (ParallelConfig, DistInfo), mesh.py (process group, backend, device mesh, collective timeouts),
recipe.py (`parallelize`), one file per layout (ddp, fsdp, tensor, activations, precision, smp), compiled.py
(torch.compile, one decoder layer at a time), linear.py (column/row parallel layers written by hand, the teaching
version of tensor.py).

Beside the engine, each in its own room: the communication and scaling arithmetic in fmlab.plan (traffic.py,
scaling.py; no torch); the multi-process checks that every layout equals one process, the measured memory and
their figures in fmlab.measure; the per-rank collective trace and the hang analyzer in fmlab.hangs; SageMaker's
library facts (SMP/SMDDP status, SMDDP's instances, launchers and the SDK driver's command) in
fmlab.service.libraries and fmlab.service.smddp. fmlab.measure and fmlab.hangs sit above the engine (they
import it, it never imports them).
"""

from fmlab.parallel.config import DistInfo, ParallelConfig
from fmlab.parallel.mesh import build_mesh, init_distributed, needs_mesh, resolve_backend
from fmlab.parallel.recipe import parallelize
from fmlab.parallel.smp import from_mp_parameters, smp_available
from fmlab.plan.compute import PlanError

__all__ = ["ParallelConfig", "DistInfo", "init_distributed", "parallelize", "from_mp_parameters", "build_mesh",
           "needs_mesh", "resolve_backend", "smp_available", "PlanError"]
