"""What each training image the course uses holds, as data with sources: PyTorch, Python, CUDA, NCCL, EFA, whether
SMDDP, SMP v2 or NxD is inside, and when its patches end.

`manifest_for(uri)` finds the manifest of an image URI (any region, any registry account: the repository and tag
decide); `fmlab.service.features` compares it with what a job's script needs. The URIs themselves are built by
fmlab.jobs.images (the one place that composes them); both read the same kinds and versions from here.

    from fmlab.service.images import manifest_for
    manifest_for("763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch:2.13-cu133-amzn2023-sagemaker").pytorch
    # -> "2.13.0"

Frozen images (SMDDP, SMP v2, NxD Training) are kept beside the current one, dated, the way module 9 teaches NxD:
SMDDP ships only in the SageMaker PyTorch DLCs up to 2.5 and in SMP images; SMP v2.8.0 (April 2025, PyTorch
2.5.1) is the newest SMP; the PyTorch 2.13 DLC (2026-07-20) has neither, and runs FSDP2 and NCCL over EFA.
"""

from __future__ import annotations

from dataclasses import dataclass

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
    efa: str = ""
    smddp: str = ""  # smdistributed-dataparallel version inside, "" if none
    smp: str = ""  # SMP v2 (torch.sagemaker) version inside
    nxd: str = ""  # neuronx-distributed(-training) inside
    end_of_patch: str = ""  # ISO date after which AWS no longer patches it
    source: str = ""
    read: str = READ

    def contains(self) -> str:
        parts = [f"PyTorch {self.pytorch}", f"Python {self.python}"]
        parts += [f"{k} {v}" for k, v in (("CUDA", self.cuda), ("NCCL", self.nccl), ("EFA", self.efa),
                                            ("SMDDP", self.smddp), ("SMP", self.smp), ("NxD", self.nxd)) if v]
        return ", ".join(parts)


MANIFESTS: tuple[ImageManifest, ...] = (
    ImageManifest(
        "pytorch-2.13-gpu", "pytorch", "2.13-cu133-amzn2023-sagemaker", "gpu", "2.13.0", "3.12", cuda="13.3.0",
        nccl="2.30.7", efa="1.49.0", end_of_patch="2027-07-20",
        source=f"{DLC} docs/pytorch/changelog/index.md ('PyTorch 2.13 - 2026-07-20', bundled versions), "
               ".github/config/image/pytorch/2.13-sagemaker-cuda.yml (private_registry: true) and "
               "docs/src/data/pytorch/2.13-cuda-sagemaker.yml (eop 2027-07-20) @ e0ecedea; sagemaker-core 2.27.0 "
               "image_uri_config/pytorch-amzn2023.json (repository 'pytorch', 763104351884 in the DLC regions)"),
    ImageManifest(
        "pytorch-2.13-cpu", "pytorch", "2.13-cpu-amzn2023-sagemaker", "cpu", "2.13.0", "3.12",
        end_of_patch="2027-07-20",
        source=f"{DLC} docs/pytorch/changelog/index.md (tags of PyTorch 2.13, 2026-07-20); sagemaker-core 2.27.0 "
               "image_uri_config/pytorch-amzn2023.json"),
    ImageManifest(
        "pytorch-2.10-gpu", "pytorch-training", "2.10.0-gpu-py313-cu130-ubuntu22.04-sagemaker", "gpu", "2.10.0",
        "3.13", cuda="13.0", end_of_patch="2027-01-21",
        source=f"{DLC} docs/src/data/pytorch-training/2.10-gpu-sagemaker.yml @ e0ecedea (ga 2026-01-21, eop "
               "2027-01-21): the last Ubuntu pytorch-training line"),
    ImageManifest(
        "pytorch-2.5-gpu", "pytorch-training", "2.5.1-gpu-py311-cu124-ubuntu22.04-sagemaker", "gpu", "2.5.1", "3.11",
        cuda="12.4.1", nccl="2.23.4", efa="1.36.0", smddp="2.6.0", end_of_patch="2025-10-29",
        source=f"{DLC} pytorch/training/docker/2.5/py3/cu124/Dockerfile.gpu @ 0192682e (its sagemaker stage installs "
               "smdistributed_dataparallel-2.6.0), docs/src/legacy/legacy_support.yml (2.5: eop 2025-10-29); "
               "sagemaker-core 2.27.0 image_uri_config/pytorch.json (2.5.1: py311)"),
    ImageManifest(
        "pytorch-2.3-gpu", "pytorch-training", "2.3.0-gpu-py311-cu121-ubuntu20.04-sagemaker", "gpu", "2.3.0", "3.11",
        cuda="12.1", nccl="2.21.5", efa="1.32.0", end_of_patch="2025-04-24",
        source=f"{DLC} pytorch/training/docker/2.3/py3/cu121/Dockerfile.gpu @ 06d0ef0e (no SMDDP in its sagemaker "
               "stage; SMDDP's own table lists 'not applicable' for the 2.3 framework container), "
               "docs/src/legacy/legacy_support.yml (2.3: eop 2025-04-24)"),
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
