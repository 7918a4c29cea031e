"""SageMaker's own parallel libraries, SMP v2 and SMDDP, as they stand: frozen, dated and sourced, in one place,
beside the current path (FSDP2 / DDP over NCCL and EFA in the current SageMaker PyTorch container).

    from fmlab.service import libraries
    libraries.table()           # one row per path: status, since, where it ships, instances, launcher, sources
    libraries.SMP.status        # "frozen"
    libraries.LAST_SMP          # "2.8.0", released libraries.LAST_SMP_DATE
    libraries.LAUNCH_DECISION   # why the course teaches NCCL as the default and SMDDP as untested under SDK v3

Notebooks 04 and 05, their slides and fmlab.service.smddp read these facts from here, so a change in AWS's
libraries is one edit (the way fmlab.neuron.status keeps Trainium's). READ_ON is the day every source below was
read; re-read them before trusting a status more than a few months old.

What "frozen" means here: no release since the date given, no build for a PyTorch newer than the one given, and
no image beyond the ones named. Jobs that use them still run on those images; new work takes the current path.
"""

from __future__ import annotations

from dataclasses import dataclass

from fmlab.service.rules import SMDDP_INSTANCES as SMDDP_INSTANCE_TYPES  # the service rule smddp-instances
from fmlab.service.sources import Source, cited, sources_of

READ_ON = "2026-11-24"  # when every source below was read
_DG = "https://docs.aws.amazon.com/sagemaker/latest/dg"


def _source(title: str, url: str, says: str, release: str = "") -> Source:
    return Source(title, url, says, read=READ_ON, release=release)


@dataclass(frozen=True)
class LibraryStatus:
    """One way to run data/sharded parallelism on SageMaker GPUs, and where it stands."""

    name: str
    status: str  # "current" | "frozen"
    since: str  # the last release (frozen) or the image line it lives in (current)
    ships_in: str
    instances: str
    launcher: str
    what_to_do: str
    sources: tuple[Source, ...]


SMP_RELEASE_NOTES = _source(
    "Release notes for the SageMaker model parallelism library",
    f"{_DG}/model-parallel-release-notes.html",
    "Newest entry: 'The SageMaker model parallelism library v2.8.0, Date: April 01, 2025': PyTorch v2.5.1, CUDA "
    "v12.4, SMDDP library upgraded to 2.6.0; SMP Docker container "
    "658645717510.dkr.ecr.<region>.amazonaws.com/smdistributed-modelparallel:2.5.1-gpu-py311-cu124 with NCCL "
    "v2.23.4, EFA v1.36.0, AWS-OFI-NCCL v1.13.2. v2.7.0 (2024-12-04) added support for SageMaker HyperPod recipes.")
SMP_FP8_P5 = _source(
    "Release notes for the SageMaker model parallelism library, v2.5.0 (2024-08-28)",
    f"{_DG}/model-parallel-release-notes.html",
    "Added support for mixed-precision training using FP8 data format on P5 instances for the Mixtral model: SMP "
    "v2 runs on P5 as well as P4d/P4de.")
SMDDP_INSTANCES = _source(
    "Compatibility with the SMDDP library optimized for AWS infrastructure (SMP v2)",
    f"{_DG}/model-parallel-core-features-v2-smddp-allgather.html",
    "'The SMDDP library supports P4 and P4de instances' (see also the SMDDP library's 'Supported frameworks, AWS "
    "Regions, and instances types'): P5 is not among them.")
SMDDP_SUPPORT = _source(
    "Supported frameworks, AWS Regions, and instances types (SMDDP)",
    f"{_DG}/distributed-data-parallel-support.html",
    "The SMDDP library is available in the SageMaker framework containers, integrated in the Docker containers "
    "distributed by the SMP library v2, and as a binary file; its PyTorch table names framework containers and SMP "
    "images per PyTorch version (the newest rows are SMP images, no framework container).")
DLC_25 = _source(
    "aws/deep-learning-containers pytorch/training/docker/2.5/py3/cu124/Dockerfile.gpu",
    "https://github.com/aws/deep-learning-containers/blob/64a7c2365dca8626258cd86b09c9f7fd5f2a22c6/"
    "pytorch/training/docker/2.5/py3/cu124/Dockerfile.gpu",
    "The sagemaker stage installs SMD_DATA_PARALLEL_URL = .../pytorch/2.5.1/cu124/03-10-25/"
    "smdistributed_dataparallel-2.6.0-cp311-...whl (PyTorch 2.5.1): the last SageMaker PyTorch DLC with SMDDP.")
DLC_26 = _source(
    "aws/deep-learning-containers pytorch/training/docker/2.6/py3/cu126/Dockerfile.gpu",
    "https://github.com/aws/deep-learning-containers/blob/094e20453b319771df9eee7e74d459f2bf4a2f83/"
    "pytorch/training/docker/2.6/py3/cu126/Dockerfile.gpu",
    "The sagemaker stage installs the SageMaker profiler (smprof), PyTorch, GDRCopy, NCCL, flash-attn, Transformer "
    "Engine and the sagemaker-training toolkit, and no smdistributed_dataparallel: from PyTorch 2.6 the framework "
    "containers carry no SMDDP (the GDRCopy comment still names it).")
HYPERPOD_RECIPES_V2 = _source(
    "aws/sagemaker-hyperpod-recipes README.md (v2.0.0, merged 2025-12-03; read at 26319955, 2026-06-23)",
    "https://github.com/aws/sagemaker-hyperpod-recipes/blob/263199555b2e1f8eb9b17459892e440f3242b5d9/README.md",
    "'This repository contains v2.0.0 of Amazon SageMaker HyperPod recipes ... Looking for v1 recipes? Please refer "
    "to the v1 branch.' v2 recipes run on the LLMFT and VERL images (hyperpod-recipes:llmft-v1.0.0, verl-...); "
    "v1.0.0's README built its GPU recipes on the SMP container (smdistributed-modelparallel:2.4.1-gpu-py311-cu121, "
    "the SMP v2.7.0 enroot image). v2 names no SMP image.")
V2_RUNNER = _source(
    "aws/sagemaker-training-toolkit src/sagemaker_training/smdataparallel.py (SDK v2's SMDDP runner)",
    "https://github.com/aws/sagemaker-training-toolkit/blob/07cb410433a4ef4cc3a534548c7ae07c83b54198/"
    "src/sagemaker_training/smdataparallel.py",
    "SMDataParallelRunner starts mpirun with 8 processes per host and puts `smddprun` in front of `python -m "
    "mpi4py <script>`; it exports SMDATAPARALLEL_USE_HOMOGENEOUS=1 on several hosts (SMDATAPARALLEL_USE_SINGLENODE=1 "
    "on one), SMDATAPARALLEL_SERVER_ADDR=<master host>, SMDATAPARALLEL_SERVER_PORT=7592, SAGEMAKER_INSTANCE_TYPE, "
    "FI_PROVIDER=efa, RDMAV_FORK_SAFE=1 and an LD_PRELOAD gethostname shim.")
V3_DRIVER = _source(
    "sagemaker-train 1.27.0, sagemaker/train/container_drivers/distributed_drivers/mpi_driver.py and mpi_utils.py "
    "(SDK v3's MPI driver, as installed)",
    "https://pypi.org/project/sagemaker-train/1.27.0/",
    "main() runs `mpirun --host algo-1:N,... -np N ... <python> -m mpi4py <entry script>` with the EFA variables "
    "for EFA instances; no smddprun and no SMDATAPARALLEL_* variable. mpi_utils defines validate_smddprun() and "
    "validate_smddpmprun(), and nothing calls them.")
SMDDP_LAUNCHERS = _source(
    "Use the SMDDP library in your PyTorch training script; Use the PyTorch framework estimators in the SageMaker "
    "Python SDK",
    f"{_DG}/data-parallel-modify-sdp-pt.html",
    "`import smdistributed.dataparallel.torch.torch_smddp; dist.init_process_group(backend='smddp')`; to replace "
    "NCCL AllReduce with SMDDP AllReduce you must choose an mpirun-based option (SDK v2: distribution="
    "{'smdistributed': {'dataparallel': {'enabled': True}}} or pytorchddp). Every launch example is SDK v2.")
FSDP2_PUBLIC = _source(
    "pytorch/pytorch PR #141868 (fully_shard and MixedPrecisionPolicy public in torch.distributed.fsdp, PyTorch 2.6)",
    "https://github.com/pytorch/pytorch/pull/141868",
    "FSDP2's fully_shard is public from PyTorch 2.6: newer than every image that ships SMDDP or SMP (PyTorch <= 2.5.1).")

SMP = LibraryStatus(
    "SMP v2 (SageMaker model parallelism: torch.sagemaker on PyTorch FSDP)", "frozen", "v2.8.0 (2025-04-01)",
    "the SMP images only (smdistributed-modelparallel, newest 2.5.1-gpu-py311-cu124); not in the PyTorch DLCs",
    "ml.p4d.24xlarge, ml.p4de.24xlarge, ml.p5.48xlarge",
    "SDK v3 Torchrun(smp=SMP(...)): torchrun, SMP settings as --mp_parameters",
    "Existing SMP jobs: pin the SMP v2.8.0 image (PyTorch 2.5.1). No release since; HyperPod "
    "recipes v2 no longer use it. New work: FSDP2 + DTensor in the current PyTorch DLC (the course's script does both).",
    (SMP_RELEASE_NOTES, SMP_FP8_P5, HYPERPOD_RECIPES_V2))
SMDDP = LibraryStatus(
    "SMDDP (SageMaker distributed data parallelism: the smddp backend, AllReduce and AllGather)", "frozen",
    "v2.6.0 (in SMP v2.8.0's image, 2025-04-01)",
    "SageMaker PyTorch DLCs up to 2.5 and the SMP images; no DLC from 2.6 on",
    "ml.p4d.24xlarge, ml.p4de.24xlarge only (not p5)",
    "SDK v2's runner (smddprun with SMDATAPARALLEL_* variables); SDK v3 has no SMDDP launcher: untested by AWS",
    "Do not start new work on it. Keep backend 'nccl' (FSDP2 / DDP over NCCL and EFA); if you must reproduce an "
    "old SMDDP job, run it with SDK v2 on the image it was built for.",
    (SMDDP_INSTANCES, SMDDP_SUPPORT, DLC_25, DLC_26, V2_RUNNER, V3_DRIVER, SMDDP_LAUNCHERS))
CURRENT = LibraryStatus(
    "FSDP2 / DDP over NCCL, EFA through aws-ofi-nccl (PyTorch's own APIs)", "current",
    "every SageMaker PyTorch DLC (the course's default GPU image, fmlab.jobs.images)",
    "the SageMaker PyTorch training containers: NCCL, EFA and the aws-ofi-nccl plug-in built in",
    "every GPU training instance; EFA on p4d, p4de, p5 and newer",
    "SDK v3 Torchrun(process_count_per_node=...): torchrun on every instance",
    "The course's default: `--backend nccl`, fully_shard (FSDP2) and DTensor tensor parallelism, the EFA environment "
    "of fmlab.jobs.sharded.",
    (FSDP2_PUBLIC, DLC_26))

LIBRARIES = (CURRENT, SMP, SMDDP)
LAST_SMP, LAST_SMP_DATE = "2.8.0", "2025-04-01"  # SMP_RELEASE_NOTES
LAST_SMP_IMAGE_TAG = "2.5.1-gpu-py311-cu124"  # SMP_RELEASE_NOTES (fmlab.jobs.images reads the SDK's table)
LAST_SMDDP = "2.6.0"  # in DLC_25 and in SMP v2.8.0's image
LAST_DLC_WITH_SMDDP = "2.5"  # DLC_25; DLC_26 has none
NEWEST_PYTORCH_WITH_SMP_OR_SMDDP = "2.5.1"

# The choice the course made for SMDDP's launch under SDK v3, and why (notebook 04 and its deck print it).
LAUNCH_DECISION = (
    "The course teaches NCCL (FSDP2 / DDP over NCCL and EFA in the current SageMaker PyTorch DLC) as the default, and "
    "SMDDP as frozen and untested by AWS under SDK v3. Why not a wrapper that runs smddprun with the SMDATAPARALLEL_* "
    "variables, as SDK v2's runner did: (1) smddprun's contract (the variables, the server processes it starts) is "
    "written down only in that runner's code, so a copy of it could be checked here only for its text, never for what "
    "the binary does, and no AWS sample launches SMDDP the SDK v3 way; (2) only frozen images ship SMDDP (PyTorch "
    "<= 2.5.1), older than the PyTorch 2.6 that the course's FSDP2 script needs; (3) SMDDP supports p4d/p4de only, "
    "not p5. SDK v3's MPI driver runs plain mpirun ... python -m mpi4py, without smddprun (it defines "
    "validate_smddprun and never calls it).")


def sources() -> list[Source]:
    """Every source of this module, once each."""
    return sources_of(LIBRARIES)


def table() -> list[dict]:
    """One row per path, for notebooks 04/05 and the slides."""
    return [{"path": x.name, "status": x.status, "since": x.since, "ships in": x.ships_in, "instances": x.instances,
             "launcher (SDK v3)": x.launcher, "what to do": x.what_to_do,
             "sources": cited(x.sources)} for x in LIBRARIES]


def headline() -> str:
    """The one-line status that the notebooks and the slides show."""
    return (f"SageMaker's parallel libraries (read {READ_ON}): SMP v2 is frozen at v{LAST_SMP} ({LAST_SMP_DATE}, "
            f"image smdistributed-modelparallel:{LAST_SMP_IMAGE_TAG}) and HyperPod recipes v2 dropped it; SMDDP is "
            f"frozen at v{LAST_SMDDP}, only in the SageMaker PyTorch DLCs up to {LAST_DLC_WITH_SMDDP} and the SMP images, "
            f"on {' and '.join(t.removeprefix('ml.') for t in SMDDP_INSTANCE_TYPES)} only (not p5), with no SDK v3 "
            "launcher. Current: FSDP2 / DDP over NCCL and EFA in the current SageMaker PyTorch DLC.")
