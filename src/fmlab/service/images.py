"""What each training image the course uses holds, as data with sources: PyTorch, Python, CUDA, NCCL, EFA, the
aws-ofi-nccl plug-in, whether SMDDP, SMP v2 or NxD is inside, and when its patches end.

`manifest_for(uri)` finds the manifest of an image URI (any region, any registry account: the repository and tag
decide); `fmlab.service.features` compares it with what a job's script needs. The URIs themselves are built by
fmlab.jobs.images (the one place that composes them); both read the same kinds and versions from here.

    from fmlab.service.images import manifest_for
    manifest_for("763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch:2.13-cu133-amzn2023-sagemaker").pytorch
    # -> "2.13.0"

Frozen images (SMDDP, SMP v2, NxD Training) are kept beside the current one, dated, the way module 9 teaches NxD:
SMDDP ships only in the SageMaker PyTorch DLCs up to 2.5 and in SMP images; SMP v2.8.0 (April 2025, PyTorch
2.5.1) is the newest SMP; the PyTorch 2.13 DLC (2026-07-20) has neither, and runs FSDP2 and NCCL over EFA.

`efa_environment(manifest)` is what a multi-node job on p4/p5 must put in its Environment for the image's
aws-ofi-nccl, by the plug-in's own cheatsheet (EFA_ENV_DOC): nothing from 1.7.0 on, where the plug-in's defaults
are right (PLUGIN_DEFAULTS), so the course's DLC jobs set none of FI_PROVIDER, FI_EFA_USE_DEVICE_RDMA, NCCL_PROTO.
"""

from __future__ import annotations

from dataclasses import dataclass

from fmlab.service.sources import Source

READ = "2026-11-24"
DLC = "aws/deep-learning-containers"


@dataclass(frozen=True)
class ImageManifest:
    """One training image: where it lives, what is inside, until when it is patched, and where that is written."""

    name: str
    repository: str  # ECR repository name, e.g. "pytorch" or "pytorch-training"
    tag: str  # the tag, "{version}" style fields filled in
    processor: str  # "gpu" | "cpu" | "neuron"
    pytorch: str
    python: str
    cuda: str = ""
    nccl: str = ""
    efa: str = ""  # the EFA installer's version
    aws_ofi_nccl: str = ""  # the NCCL plug-in that reaches EFA through libfabric; "" where no source gives it
    smddp: str = ""  # smdistributed-dataparallel version inside, "" if none
    smp: str = ""  # SMP v2 (torch.sagemaker) version inside
    nxd: str = ""  # neuronx-distributed(-training) inside
    end_of_patch: str = ""  # ISO date after which AWS no longer patches it
    source: str = ""
    read: str = READ

    def contains(self) -> str:
        parts = [f"PyTorch {self.pytorch}", f"Python {self.python}"]
        parts += [f"{k} {v}" for k, v in (("CUDA", self.cuda), ("NCCL", self.nccl), ("EFA", self.efa),
                                            ("aws-ofi-nccl", self.aws_ofi_nccl), ("SMDDP", self.smddp),
                                            ("SMP", self.smp), ("NxD", self.nxd)) if v]
        return ", ".join(parts)


MANIFESTS: tuple[ImageManifest, ...] = (
    ImageManifest(
        "pytorch-2.13-gpu", "pytorch", "2.13-cu133-amzn2023-sagemaker", "gpu", "2.13.0", "3.12", cuda="13.3.0",
        nccl="2.30.7", efa="1.49.0", aws_ofi_nccl="1.20.0", end_of_patch="2027-07-20",
        source=f"{DLC} docs/pytorch/changelog/index.md ('PyTorch 2.13 - 2026-07-20', bundled versions), "
               ".github/config/image/pytorch/2.13-sagemaker-cuda.yml (private_registry: true; efa_version 1.49.0, "
               "installed by scripts/docker/common/install_efa_amzn2023.sh) and docs/src/data/pytorch/"
               "2.13-cuda-sagemaker.yml (eop 2027-07-20) @ e0ecedea; aws-ofi-nccl 1.20.0: docker/base/cu132/"
               "Dockerfile @ e0ecedea ('EFA installer 1.49.0 vends libfabric 2.4.0amzn5.0 and aws-ofi-nccl 1.20.0', "
               "read 2026-11-26); sagemaker-core 2.27.0 image_uri_config/pytorch-amzn2023.json (repository 'pytorch')"),
    ImageManifest(
        "pytorch-2.13-ec2-gpu", "pytorch", "2.13-cu130-amzn2023", "gpu", "2.13.0", "3.12", cuda="13.0.2",
        nccl="2.30.7", efa="1.49.0", aws_ofi_nccl="1.20.0",
        source=f"{DLC} .github/config/image/pytorch/2.13-ec2-cuda.yml @ 1d2ad709 (customer_type ec2, prod_image "
               "pytorch:2.13-cu130-amzn2023, public and private registries; torch 2.13.0, CUDA 13.0.2, NCCL 2.30.7-1, "
               "EFA 1.49.0, Transformer Engine 2.17.0, read 2026-11-26): the EC2 flavour, for EKS and HyperPod EKS "
               "(no SageMaker training toolkit); aws-ofi-nccl as the EFA installer 1.49.0 vends it"),
    ImageManifest(
        "pytorch-2.13-cpu", "pytorch", "2.13-cpu-amzn2023-sagemaker", "cpu", "2.13.0", "3.12",
        end_of_patch="2027-07-20",
        source=f"{DLC} docs/pytorch/changelog/index.md (tags of PyTorch 2.13, 2026-07-20); sagemaker-core 2.27.0 "
               "image_uri_config/pytorch-amzn2023.json"),
    ImageManifest(
        "pytorch-2.10-gpu", "pytorch-training", "2.10.0-gpu-py313-cu130-ubuntu22.04-sagemaker", "gpu", "2.10.0",
        "3.13", cuda="13.0", efa="1.47.0", aws_ofi_nccl="1.18.0", end_of_patch="2027-01-21",
        source=f"{DLC} docs/src/data/pytorch-training/2.10-gpu-sagemaker.yml @ e0ecedea (ga 2026-01-21, eop "
               "2027-01-21): the last Ubuntu pytorch-training line; EFA and aws-ofi-nccl (read 2026-11-26): "
               "pytorch/training/docker/2.10/py3/cu130/Dockerfile.gpu @ b872b749 builds FROM base:13.0.2-gpu-py313-"
               "cu130-ubuntu22.04-ec2, whose base/x86_64/gpu/cu130/ubuntu22.04/py313/Dockerfile @ b872b749 has "
               "EFA_VERSION 1.47.0; commit b9b3eded (2026-08-16): 'EFA 1.47.0 (aws-ofi-nccl 1.18.0)'"),
    ImageManifest(
        "pytorch-2.5-gpu", "pytorch-training", "2.5.1-gpu-py311-cu124-ubuntu22.04-sagemaker", "gpu", "2.5.1", "3.11",
        cuda="12.4.1", nccl="2.23.4", efa="1.36.0", aws_ofi_nccl="1.12.1", smddp="2.6.0", end_of_patch="2025-10-29",
        source=f"{DLC} pytorch/training/docker/2.5/py3/cu124/Dockerfile.gpu @ 0192682e (its sagemaker stage installs "
               "smdistributed_dataparallel-2.6.0; ARG AWS_OFI_NCCL_VERSION=1.12.1, built from the v1.12.1-aws "
               "release tarball, read 2026-11-26), docs/src/legacy/legacy_support.yml (2.5: eop 2025-10-29); "
               "sagemaker-core 2.27.0 image_uri_config/pytorch.json (2.5.1: py311)"),
    ImageManifest(
        "pytorch-2.3-gpu", "pytorch-training", "2.3.0-gpu-py311-cu121-ubuntu20.04-sagemaker", "gpu", "2.3.0", "3.11",
        cuda="12.1", nccl="2.21.5", efa="1.32.0", smddp="2.3.0", end_of_patch="2025-04-24", read="2026-11-26",
        source=f"{DLC} pytorch/training/docker/2.3/py3/cu121/Dockerfile.gpu: commit 5891e61e ('install smddp', "
               "2024-05-23) adds `RUN SMDATAPARALLEL_PT=1 pip install --no-cache-dir ${SMD_DATA_PARALLEL_URL}` to "
               "its sagemaker stage, SMD_DATA_PARALLEL_URL = .../pytorch/2.3.0/cu121/2024-05-23/"
               "smdistributed_dataparallel-2.3.0-cp311-cp311-linux_x86_64.whl; it reached master in 1059e445 "
               "(PR #3935, 'PyTorch 2.3.0 Currency Release', 2024-05-24), and every later version of the file in "
               "the repository still installs it, the newest a patch branch's 7738838 of 2025-03-25 (the earlier "
               "reading, at 06d0ef0e, was a branch from before that commit). NCCL 2.21.5 and EFA 1.32.0: the ENV "
               "lines of the same file; aws-ofi-nccl is the unpinned conda package `aws-ofi-nccl` of the "
               "aws-ml-conda channel, its version in no source read. docs/src/legacy/legacy_support.yml (2.3: eop "
               "2025-04-24)"),
    ImageManifest(
        "pytorch-2.3-cpu", "pytorch-training", "2.3.0-cpu-py311-ubuntu20.04-sagemaker", "cpu", "2.3.0", "3.11",
        end_of_patch="2025-04-24",
        source=f"{DLC} available_images.md (SageMaker PyTorch 2.3.0 training, CPU), legacy_support.yml"),
    ImageManifest(
        "smp-2.8.0", "smdistributed-modelparallel", "2.5.1-gpu-py311-cu124", "gpu", "2.5.1", "3.11", cuda="12.4",
        smp="2.8.0", smddp="included (version not read)",
        source="SageMaker developer guide, SMP v2 release notes: v2.8.0 (2025-04-01) for PyTorch 2.5.1, the newest "
               "SMP release, image smdistributed-modelparallel:2.5.1-gpu-py311-cu124; SMDDP 'integrated in the SMP "
               "Docker containers' (distributed-data-parallel-support); sagemaker-core 2.27.0 image_uri_config/"
               "pytorch-smp.json (2.5.1 -> 2.8.0). HyperPod recipes v2 dropped SMP"),
    ImageManifest(
        "neuron-2.9.0", "pytorch-training-neuronx", "2.9.0-neuronx-py312-sdk2.30.0-ubuntu24.04", "neuron", "2.9.0",
        "3.12", nxd="neuronx_distributed_training 1.7.0",
        source="aws-neuron/deep-learning-containers README.md @ 2be9ed1d (the 2.32.0 release README, read "
               "2026-11-23): the last training image with NxD Training (Neuron 2.30.0); see fmlab.neuron.status"),
    ImageManifest(
        "torchneuron-2.13", "fmlab-torchneuron", "2.13.0-neuronx2.13.3-sdk2.33.0-ubuntu26.04", "neuron", "2.13.0",
        "3.14",
        source="built in your own ECR from the documented TorchNeuron installation (fmlab.jobs.images."
               "torchneuron_image_uri; Neuron 2.33.0 release notes, TorchNeuron, read 2026-11-23): no NxD inside"),
)


# ---------------------------------------------------------------- EFA: what the image's aws-ofi-nccl needs

EFA_READ = "2026-11-26"
EFA_ENV_DOC = Source(
    "aws/aws-ofi-nccl doc/efa-env-var.md (EFA Cheatsheet)",
    "https://github.com/aws/aws-ofi-nccl/blob/2daf7d303aa139a03140aa530957d10521e4478d/doc/efa-env-var.md",
    "FI_PROVIDER=efa and NCCL_PROTO=simple: 'Use for aws-ofi-nccl<=1.5.0 AND EFA-enabled GPU instances'. "
    "FI_EFA_USE_DEVICE_RDMA=1: 'Do not set for libfabric>=1.18.0 and aws-ofi-nccl>=1.7.0. It's not harmful to set it "
    "on p4/p5 instances with the newer software, but you just don't have to set it.' RDMAV_FORK_SAFE=1: 'Do not use. "
    "This is a RDMA-core environment variable. Prefer FI_EFA_FORK_SAFE (if it still makes sense for your Linux "
    "kernel version). ... on newer kernels, where RDMAV_FORK_SAFE=1 can break things'; RDMAV_*: 'Do not use.' "
    "Presets: 'libfabric>=1.18.0, aws-ofi-nccl>=1.7.0': N/A; 'aws-ofi-nccl>=1.6.0,<1.7.0, p4/p5 instances': "
    "FI_EFA_USE_DEVICE_RDMA=1; 'aws-ofi-nccl<=1.5.0, p4/p5 instances': FI_EFA_USE_DEVICE_RDMA=1, FI_PROVIDER=efa, "
    "NCCL_PROTO=simple.", read=EFA_READ, release="2daf7d30 (the table dates from e0a65432, 2023-11-14)")
PLUGIN_DEFAULTS = Source(
    "aws/aws-ofi-nccl src/platform-aws.cpp",
    "https://github.com/aws/aws-ofi-nccl/blob/2daf7d303aa139a03140aa530957d10521e4478d/src/platform-aws.cpp",
    "The plug-in sets its own defaults: with FI_PROVIDER unset it filters for the efa provider ('Setting "
    "provider_filter to efa'); on NVIDIA platforms it sets FI_EFA_FORK_SAFE=1 itself (RDMAV_FORK_SAFE only under "
    "libfabric < 1.13; not on Neuron platforms: 'The Neuron team has asked us to skip trying to set this'); and "
    "where an endpoint cannot guarantee byte delivery ordering it forces NCCL_PROTO=simple "
    "itself ('the LL/LL128 protocols can lead to data corruption without data delivery ordering'), except on "
    "p5en with the RDMA protocol, and only when NCCL_PROTO is not already set.", read=EFA_READ)
# The libfabric half of the '>= 1.7.0' preset: every image below with a plug-in version carries EFA installer 1.36.0 or
# newer, whose libfabric is 1.22.0 or newer (aws-parallelcluster-cookbook CHANGELOG, EFA installer 1.36.0:
# libfabric-aws 1.22.0; DLC docker/base/cu132/Dockerfile: 1.49.0 vends libfabric 2.4.0amzn5.0).
EFA_RDMA_GPU_FAMILIES = ("p4d", "p4de", "p5", "p5e", "p5en")  # the cheatsheet's "p4/p5": EFA with GPUDirect RDMA
OLD_PLUGIN_ENVIRONMENT = {"FI_EFA_USE_DEVICE_RDMA": "1", "FI_PROVIDER": "efa", "NCCL_PROTO": "simple"}
DO_NOT_SET_PREFIX = "RDMAV_"  # RDMAV_FORK_SAFE and every RDMAV_* variable: "Do not use"


def plugin_version(m: ImageManifest | None) -> tuple[int, ...] | None:
    """The image's aws-ofi-nccl version as numbers, None when no source gave it."""
    if m is None or not m.aws_ofi_nccl:
        return None
    return tuple(int(part) for part in m.aws_ofi_nccl.split(".")[:3])


def efa_environment(m: ImageManifest | None) -> dict[str, str] | None:
    """What a multi-node job on p4/p5 must set for the image's aws-ofi-nccl (EFA_ENV_DOC's presets): {} from 1.7.0
    (the plug-in's defaults are right, PLUGIN_DEFAULTS), FI_EFA_USE_DEVICE_RDMA=1 for 1.6.x, and with it
    FI_PROVIDER=efa and NCCL_PROTO=simple up to 1.5.x. None for a GPU image whose version is not known (or no GPU
    image): the caller decides (the course keeps the old settings there; preflight says it did not check)."""
    version = plugin_version(m) if m is not None and m.processor == "gpu" else None
    if version is None:
        return None
    if version >= (1, 7):
        return {}
    if version >= (1, 6):
        return {"FI_EFA_USE_DEVICE_RDMA": "1"}
    return dict(OLD_PLUGIN_ENVIRONMENT)


def parse_uri(uri: str) -> tuple[str, str]:
    """(repository, tag) of an image URI; ValueError when it has no tag."""
    path, sep, tag = uri.rpartition(":")
    if not sep or "/" in tag or not tag:
        raise ValueError(f"image URI {uri!r} has no tag: give <registry>/<repository>:<tag>")
    return path.split("/", 1)[-1], tag


def manifest_for(uri: str) -> ImageManifest | None:
    """The manifest of an image URI (by repository and tag), or None for an image the course does not know."""
    try:
        repository, tag = parse_uri(uri)
    except ValueError:
        return None
    for m in MANIFESTS:
        if m.repository == repository.split("/")[-1] and m.tag == tag:
            return m
    return None


def manifest(name: str) -> ImageManifest:
    """A manifest by name ("pytorch-2.13-gpu", "smp-2.8.0", ...)."""
    for m in MANIFESTS:
        if m.name == name:
            return m
    raise KeyError(f"no image manifest {name!r}; known: {', '.join(m.name for m in MANIFESTS)}")


# Where AWS's list of Deep Learning Containers says Neuron containers are not available, though an SDK table names a
# registry there: a Neuron image URI built for such a Region may not exist.
NEURON_NOT_LISTED = Source(
    "aws/deep-learning-containers available images (the website template's Region table)",
    "https://github.com/aws/deep-learning-containers/blob/6fcfa898f732f107ce408e6fe9e41447cbb61e74/docs/src/templates/"
    "reference/available_images.template.md",
    "'| Asia Pacific (Melbourne) | ap-southeast-4 | ✅ | ❌ | 457447274322...': general containers yes, Neuron "
    "containers no; Neuron ✅ only in us-east-1, us-east-2, us-west-2, ap-south-1, ap-southeast-1, ap-southeast-2, "
    "ap-east-2, ap-northeast-1, eu-central-1, eu-west-1, eu-west-3 and sa-east-1 (the same 'None' since the row was "
    "added, e118172d, 2023-02-23); the current docs' table (a913958f, 2026-05-20) lists Regions and accounts only",
    read="2026-11-29", release="6fcfa898 (2026-03-06)")
NEURON_UNLISTED_REGIONS = ("ap-southeast-4",)


def neuron_region_findings(uri: str, processor: str | None) -> list:
    """A warning for a Neuron image in a Region where the DLC list marks Neuron containers as not available."""
    from fmlab.service.rules import Finding

    region = next((part for part in uri.split(".") if part.count("-") >= 2), "") if uri else ""
    if processor != "neuron" or region not in NEURON_UNLISTED_REGIONS:
        return []
    return [Finding("image/region", "warn", f"{uri}: AWS's Deep Learning Containers list marks Neuron containers as not "
                    f"available in {region}, though the SDK's table names its registry; check the image exists "
                    f"there (aws ecr describe-images --region {region}) or train in a listed Region",
                    f"{NEURON_NOT_LISTED.title}, {NEURON_NOT_LISTED.url} (read {NEURON_NOT_LISTED.read})")]
