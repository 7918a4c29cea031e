"""Training container images as data: the PyTorch training DLC, the SMDDP and SMP v2 containers, the Neuron container.

An image URI is `<registry account>.dkr.ecr.<region>.amazonaws.com/<repository>:<tag>`; the account depends on
the region, the tag on the framework version. `image_uri("pytorch", region="eu-west-1")` builds one from the
facts below, each with its source, so a learner sees where a URI comes from instead of copying a string. What
each image holds (PyTorch, CUDA, NCCL, EFA, SMDDP, SMP, NxD, end of patch) is in fmlab.service.images.

    >>> image_uri("pytorch", "us-east-1")
    '763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch:2.13-cu133-amzn2023-sagemaker'
    >>> image_uri("smp", "us-west-2")
    '658645717510.dkr.ecr.us-west-2.amazonaws.com/smdistributed-modelparallel:2.5.1-gpu-py311-cu124'

The default PyTorch image is the SageMaker PyTorch 2.13 DLC, the course's own PyTorch (aws/deep-learning-containers
docs/pytorch/changelog, 2026-07-20): the Amazon Linux 2023 line in the `pytorch` repository of the regional DLC
registries, read from the SageMaker SDK's own table (sagemaker-core's image_uri_config/pytorch-amzn2023.json, the
table `image_uris.retrieve(framework="pytorch-amzn2023")` launches with). It has neither SMDDP nor SMP: the
current path is FSDP2 and NCCL over EFA. The Regions and registry accounts of the PyTorch DLCs (both lines, the
Ubuntu `pytorch-training` one in image_uri_config/pytorch.json) are read from the installed SDK's table when a URI
is built (`dlc_registries`), never copied here; `newest_dlc()` is the newest version that table lists (the course
stays on its own PyTorch, fmlab.neuron.native.COURSE_TORCH, until it moves as a whole). Frozen, dated images stay
beside it: "smddp" is the last SageMaker PyTorch DLC with SMDDP inside (2.5.1, out of patch since 2025-10-29),
"smp" the newest SMP v2 release (2.8.0, April 2025).
SMP v2 images are not composed here: their tags change Python and CUDA between releases (2.2.0 is py310, 2.5.1 is
cu124), so `smp_releases()` reads the SDK's image_uri_config/pytorch-smp.json and `image_uri("smp", ...)` asks the
SDK for the URI. The default is the newest SMP release there, for its PyTorch version.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from importlib import resources

# Regions of the SMP and Neuron images (and their registry account), as their sources state. The PyTorch DLCs' are
# read from the SDK's table instead (dlc_registries).
_SMP_ACCOUNT = {region: "658645717510" for region in (
    "us-east-1", "us-east-2", "us-west-1", "us-west-2", "ap-south-1", "ap-northeast-1", "ap-northeast-2",
    "ap-northeast-3", "ap-southeast-1", "ap-southeast-2", "ca-central-1", "eu-central-1", "eu-west-1", "eu-west-2",
    "eu-west-3", "eu-north-1", "sa-east-1")}
# Neuron containers are only where Trainium is (a subset of the DLC regions). Melbourne (ap-southeast-4), where
# trn1 reservations are priced (fmlab.plan.capacity), has its own registry account in the SDK's table for the same
# pytorch-training-neuronx repository (sagemaker-core 2.27.0, image_uri_config/hyperpod-recipes-neuron.json,
# registries["ap-southeast-4"] = "457447274322"; read 2026-11-28); but AWS's list of Deep Learning Containers marks
# Neuron containers as not available there, so preflight warns (fmlab.service.images.NEURON_NOT_LISTED).
_NEURON_ACCOUNT = {region: "763104351884" for region in (
    "us-east-1", "us-east-2", "us-west-2", "ap-south-1", "ap-northeast-1", "ap-southeast-1", "ap-southeast-2",
    "eu-central-1", "eu-west-1", "eu-west-3", "sa-east-1")} | {"ap-southeast-4": "457447274322"}


@dataclass(frozen=True)
class TrainingImage:
    """One kind of training container: where it lives, and how its tag is built from a version."""

    kind: str
    repository: str
    accounts: dict[str, str]
    default_version: str
    tag_template: str  # str.format with version= (Neuron: sdk=, python=, os= too)
    source: str = ""


IMAGES: dict[str, TrainingImage] = {
    i.kind: i
    for i in [
        TrainingImage(
            "pytorch", "pytorch", {}, "2.13", "(from the SageMaker SDK)",
            source="sagemaker-core's image_uri_config/pytorch-amzn2023.json (repository 'pytorch', tags "
                   "2.13-cu133-amzn2023-sagemaker / 2.13-cpu-amzn2023-sagemaker; its Regions and accounts read when "
                   "a URI is built: 45 Regions in sagemaker-core 2.27.0, read 2026-11-26); "
                   "aws/deep-learning-containers docs/pytorch/changelog/index.md, PyTorch 2.13 - 2026-07-20; "
                   "older pytorch-training tags (2.3.0, 2.5.1) from available_images.md and image_uri_config/"
                   "pytorch.json"),
        TrainingImage(
            "smddp", "pytorch-training", {}, "2.5.1", "{version}-gpu-py311-cu124-ubuntu22.04-sagemaker",
            source="aws/deep-learning-containers pytorch/training/docker/2.5/py3/cu124/Dockerfile.gpu (its sagemaker "
                   "stage installs smdistributed_dataparallel 2.6.0): the last SageMaker PyTorch DLC with SMDDP; "
                   "out of patch since 2025-10-29 (docs/src/legacy/legacy_support.yml); Regions and accounts from "
                   "sagemaker-core's image_uri_config/pytorch.json (2.5.1), read when a URI is built"),
        TrainingImage(
            "smp", "smdistributed-modelparallel", _SMP_ACCOUNT, "2.5.1", "(from the SageMaker SDK)",
            source="sagemaker-core's image_uri_config/pytorch-smp.json (the SDK's table: PyTorch version -> SMP "
                   "release, Python, regions) and sagemaker.core.image_uris.get_training_image_uri (the CUDA "
                   "suffix); matches the SMP v2 release notes: v2.8.0 (2025-04-01) for PyTorch 2.5.1, "
                   "smdistributed-modelparallel:2.5.1-gpu-py311-cu124"),
        TrainingImage(
            "neuron", "pytorch-training-neuronx", _NEURON_ACCOUNT, "2.9.0",
            "{version}-neuronx-{python}-sdk{sdk}-{os}",
            source="aws-neuron/deep-learning-containers README.md @ 2be9ed1d (the 2.32.0 release README, 2026-08-17; "
                   "read 2026-11-23), table pytorch-training-neuronx: the newest training image is PyTorch 2.9.0 with "
                   "Neuron 2.30.0, public.ecr.aws/neuron/pytorch-training-neuronx:2.9.0-neuronx-py312-sdk2.30.0-"
                   "ubuntu24.04, packages 'neuronx_distributed, neuronx_distributed_training, torch-neuronx, ...' "
                   "(its Dockerfile pins neuronx_distributed_training 1.7.0); no training image follows it for 2.31 "
                   "or 2.32. SageMaker pulls the same tags from 763104351884.dkr.ecr.<region>.amazonaws.com "
                   "(aws/deep-learning-containers docs/reference/available_images.md @ 5f42cef3, Neuron Containers). "
                   "Older rows: PyTorch 2.1.2 with Neuron 2.20.2 (py310, ubuntu20.04); PyTorch 1.13.1 with SDK 2.15.0 "
                   "is the image of the 2024 Llama 2 70B sample (aws-samples/sagemaker-trainium-examples @ 36bfadd2)"),
    ]
}


# The Neuron SDK release, Python and Ubuntu of each Neuron training image version (PyTorch version), as its tag
# spells them (sources above). 2.9.0 is the LAST training image with NxD Training in it (Neuron 2.30.0): see
# fmlab.neuron.status for why, and for the end of support of NxD Training and of PyTorch/XLA training.
NEURON_TRAINING_TAGS = {
    "2.9.0": {"sdk": "2.30.0", "python": "py312", "os": "ubuntu24.04"},
    "2.1.2": {"sdk": "2.20.2", "python": "py310", "os": "ubuntu20.04"},
    "1.13.1": {"sdk": "2.15.0", "python": "py310", "os": "ubuntu20.04"},
}
NEURON_SDK_FOR_PYTORCH = {version: tag["sdk"] for version, tag in NEURON_TRAINING_TAGS.items()}

# The Ubuntu pytorch-training line (before the Amazon Linux 2023 `pytorch` repository): version -> Python, CUDA, OS,
# as their tags spell them (available_images.md; sagemaker-core's image_uri_config/pytorch.json for the Python).
PYTORCH_TRAINING_TAGS = {
    "2.3.0": {"python": "py311", "cuda": "cu121", "os": "ubuntu20.04"},
    "2.5.1": {"python": "py311", "cuda": "cu124", "os": "ubuntu22.04"},
}


def neuron_sdk(version: str | None = None) -> str:
    """The Neuron SDK release of the Neuron training image for PyTorch `version` (default: the course's)."""
    version = version or IMAGES["neuron"].default_version
    if version not in NEURON_SDK_FOR_PYTORCH:
        raise ImageError(f"no Neuron training image for PyTorch {version} is listed here; use one of "
                         f"{', '.join(NEURON_SDK_FOR_PYTORCH)} or pass the full image URI")
    return NEURON_SDK_FOR_PYTORCH[version]


class ImageError(ValueError):
    """An image kind, region or processor that has no published container."""


@functools.cache
def smp_releases() -> dict[str, dict]:
    """PyTorch version -> {"smp": SMP release, "python": "py311", "regions": [...]}, from the SageMaker SDK's
    own image table (newest PyTorch last)."""
    text = resources.files("sagemaker.core").joinpath("image_uri_config/pytorch-smp.json").read_text()
    table = json.loads(text)["training"]
    releases = {}
    for pytorch, smp in table["version_aliases"].items():
        if pytorch.count(".") != 2 or smp not in table["versions"]:
            continue  # "2.0"-style aliases repeat a full version
        entry = table["versions"][smp]
        releases[pytorch] = {"smp": smp, "python": entry["py_versions"][-1], "regions": sorted(entry["registries"])}
    return dict(sorted(releases.items(), key=lambda kv: tuple(int(x) for x in kv[0].split("."))))


def _smp_image_uri(region: str, version: str | None) -> str:
    releases = smp_releases()
    version = version or next(reversed(releases))
    if version not in releases:
        raise ImageError(f"no SMP v2 image for PyTorch {version} in the SageMaker SDK's table; use one of "
                         f"{', '.join(releases)}")
    if region not in releases[version]["regions"]:
        raise ImageError(f"the smp training image is not published in {region!r} (per the SDK's table); "
                         f"use one of: {', '.join(releases[version]['regions'])}")
    image_uris = sdk_image_uris()

    distribution = {"torch_distributed": {"enabled": True}, "smdistributed": {"modelparallel": {"enabled": True}}}
    return image_uris.get_training_image_uri(region, "pytorch", version, py_version=releases[version]["python"],
                                             distribution=distribution, instance_type="ml.p4d.24xlarge")


@functools.cache
def sdk_image_uris():
    """The SageMaker SDK's image_uris module, its endpoint resolver built once per process: the SDK reads botocore's
    endpoints.json (a 1 MB JSON file) again on every retrieve() to find a region's ECR host, about 60 ms a call, and
    the course asks for one image per region in a table (the data it resolves against never changes in a process)."""
    from sagemaker.core import common_utils, image_uris

    common_utils._botocore_resolver = functools.cache(common_utils._botocore_resolver)  # once: this is cached
    return image_uris


@functools.cache
def _sdk_training_table(framework: str) -> dict:
    text = resources.files("sagemaker.core").joinpath(f"image_uri_config/{framework}.json").read_text()
    return json.loads(text)["training"]


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def dlc_registries(version: str) -> dict[str, str]:
    """Region -> registry account of the SageMaker PyTorch training DLC `version`, from the installed SDK's own
    table: the Amazon Linux 2023 line (image_uri_config/pytorch-amzn2023.json, "2.13") or the Ubuntu
    pytorch-training line (image_uri_config/pytorch.json, "2.5.1"); {} for a version neither lists."""
    for framework in ("pytorch-amzn2023", "pytorch"):
        table = _sdk_training_table(framework)
        key = table.get("version_aliases", {}).get(version, version)
        if key in table["versions"]:
            return dict(table["versions"][key]["registries"])
    return {}


def newest_dlc() -> str:
    """The newest SageMaker PyTorch training DLC the installed SDK's table lists (the Amazon Linux 2023 line)."""
    return max(_sdk_training_table("pytorch-amzn2023")["versions"], key=_version_key)


def _dlc_image_uri(region: str, version: str, processor: str) -> str:
    """The SageMaker PyTorch DLC of the Amazon Linux 2023 line, from the SDK's own table."""
    image_uris = sdk_image_uris()

    instance = "ml.p4d.24xlarge" if processor == "gpu" else "ml.m5.xlarge"
    try:
        return image_uris.retrieve(framework="pytorch-amzn2023", region=region, version=version,
                                   instance_type=instance, image_scope="training")
    except ValueError as e:
        raise ImageError(f"no SageMaker PyTorch {version} training image in {region!r} per the SDK's table "
                         f"(image_uri_config/pytorch-amzn2023.json): {e}") from None


def image_uri(kind: str = "pytorch", region: str = "us-east-1", version: str | None = None,
              processor: str = "gpu") -> str:
    """The training image URI for `kind` ("pytorch", "smddp", "smp", "neuron") in `region`.

    processor is "gpu" or "cpu" (the PyTorch DLC only: SMDDP and SMP need GPUs, Neuron runs on Trainium)."""
    if kind not in IMAGES:
        raise ImageError(f"unknown image kind {kind!r}: choose one of {', '.join(IMAGES)}")
    image = IMAGES[kind]
    if processor not in ("gpu", "cpu"):
        raise ImageError(f"processor must be 'gpu' or 'cpu', not {processor!r}")
    if processor == "cpu" and kind != "pytorch":
        raise ImageError(f"the {kind} image has no CPU variant: use kind='pytorch' for a CPU instance")
    if kind == "smp":
        return _smp_image_uri(region, version)  # the SDK's table: its regions, its URI
    version = version or image.default_version
    if kind == "pytorch" and version not in PYTORCH_TRAINING_TAGS:
        return _dlc_image_uri(region, version, processor)
    accounts = dlc_registries(version) if kind in ("pytorch", "smddp") else image.accounts
    if region not in accounts:
        table = "the SDK's table" if kind in ("pytorch", "smddp") else "its source"
        raise ImageError(f"the {kind} training image {version} is not published in {region!r} (per {table}); "
                         f"use one of: {', '.join(sorted(accounts))}")
    if kind in ("pytorch", "smddp"):
        if version not in PYTORCH_TRAINING_TAGS:
            raise ImageError(f"no pytorch-training image {version} is listed here; use one of "
                             f"{', '.join(PYTORCH_TRAINING_TAGS)}, or the pytorch kind's {IMAGES['pytorch'].default_version}")
        t = PYTORCH_TRAINING_TAGS[version]
        cuda = f"-{t['cuda']}" if processor == "gpu" else ""
        tag = f"{version}-{processor}-{t['python']}{cuda}-{t['os']}-sagemaker"
        image_uris = sdk_image_uris()  # the registry host as the SDK spells it in this partition

        instance = "ml.p4d.24xlarge" if processor == "gpu" else "ml.m5.xlarge"
        short = image_uris.retrieve("pytorch", region=region, version=version, py_version=t["python"],
                                    instance_type=instance, image_scope="training")
        return f"{short.rpartition(':')[0]}:{tag}"
    parts = NEURON_TRAINING_TAGS[version] if neuron_sdk(version) else {}  # only the neuron kind is left
    tag = image.tag_template.format(version=version, **parts)
    suffix = ".amazonaws.com.cn" if region.startswith("cn-") else ".amazonaws.com"
    return f"{accounts[region]}.dkr.ecr.{region}{suffix}/{image.repository}:{tag}"


def processor_for(instance_type: str) -> str:
    """"gpu" for accelerated instance types (p*, g*), "cpu" otherwise (trn* instances use the Neuron image)."""
    family = instance_type.removeprefix("ml.").split(".")[0]
    return "gpu" if family[:1] in ("p", "g") else "cpu"


# ---------------------------------------------------------------- inference: the Large Model Inference container

# The LMI container (DJL Serving; vLLM, TensorRT-LLM or Neuron backends) is an inference image, the one a
# SageMaker endpoint runs for module 10. Like SMP, its tags come from the SageMaker SDK's own table
# (sagemaker-core's image_uri_config/djl-lmi.json for GPUs, djl-neuronx.json for Inferentia2/Trainium; read
# 2026-11-23 from sagemaker-core 2.27.0: newest djl-lmi 0.38.0 = djl-inference:0.38.0-lmi29.0.0-cu130, newest
# djl-neuronx 0.29.0 = djl-inference:0.29.0-neuronx-sdk2.19.1). The vLLM backend and its settings:
# deepjavalibrary/djl-serving serving/docs/lmi/user_guides/vllm_user_guide.md @00db6305 (read 2026-11-23).
LMI_SOURCE = ("sagemaker-core's image_uri_config/djl-lmi.json and djl-neuronx.json (the SDK's table), via "
              "sagemaker.core.image_uris.retrieve; DJL Serving LMI docs, vllm_user_guide.md")
LMI_FRAMEWORKS = {"gpu": "djl-lmi", "neuron": "djl-neuronx"}


@functools.cache
def lmi_versions(accelerator: str = "gpu") -> list[str]:
    """The LMI container versions the SDK's table lists for "gpu" (vLLM/LMI) or "neuron", oldest first."""
    if accelerator not in LMI_FRAMEWORKS:
        raise ImageError(f"accelerator must be one of {', '.join(LMI_FRAMEWORKS)}, not {accelerator!r}")
    text = resources.files("sagemaker.core").joinpath(f"image_uri_config/{LMI_FRAMEWORKS[accelerator]}.json").read_text()
    return sorted(json.loads(text)["versions"], key=lambda v: tuple(int(x) for x in v.split(".")))


def lmi_image_uri(region: str = "us-east-1", version: str | None = None, accelerator: str = "gpu") -> str:
    """The LMI (DJL Serving) inference image URI: the newest version in the SDK's table unless `version`."""
    image_uris = sdk_image_uris()

    versions = lmi_versions(accelerator)
    version = version or versions[-1]
    if version not in versions:
        raise ImageError(f"no {LMI_FRAMEWORKS[accelerator]} image {version} in the SageMaker SDK's table; use one "
                         f"of {', '.join(versions)}")
    try:
        return image_uris.retrieve(framework=LMI_FRAMEWORKS[accelerator], region=region, version=version)
    except ValueError as e:
        raise ImageError(f"the {LMI_FRAMEWORKS[accelerator]} {version} image is not published in {region!r} "
                         f"(per the SDK's table): {e}") from None


# ---------------------------------------------------------------- TorchNeuron: native PyTorch on Trainium2 / Trainium3

# TorchNeuron (the native torch-neuronx backend, a `neuron` device through PyTorch's PrivateUse1 extension) is a
# public beta from Neuron 2.33.0 (2026-10-19), on Trn2 and Trn3 only. Its support matrix pairs each package
# family with one PyTorch version (Python 3.12-3.14, Ubuntu 24.04 / 26.04): release notes "TorchNeuron",
# awsdocs-neuron.readthedocs-hosted.com/en/latest/release-notes/components/torchneuron.html (read 2026-11-23).
# Containers: AWS's "PyTorch Training (TorchNeuron)" DLC is built for torch-neuronx 2.14 with TorchTitan, and from
# Neuron 2.33.0 every Neuron DLC is Ubuntu 26.04 / Python 3.14 (v2.33.0 setup/pytorch/dlc.html and update-dlc.html,
# read 2026-11-23); its exact tag is not in any source read here (the stored DLC README stops at 2.32.0). The course
# runs PyTorch 2.13, so its trn2 job runs an image built in your own ECR from the documented installation
# (quickstart "Install and verify torch-neuronx", v2.33.1: Neuron system packages and EFA on Ubuntu 26.04, then
# pip install of the family below from the Neuron pip repository).
TORCHNEURON_SOURCE = ("Neuron release notes, TorchNeuron: torch-neuronx 2.13.3.0 and 2.14.3.0 (Neuron 2.33.0, "
                      "2026-10-19), support matrix; Neuron docs v2.33.0 setup/pytorch (index, dlc, manual) and the "
                      "quickstart 'Install and verify torch-neuronx' (v2.33.1); all read 2026-11-23")
TORCHNEURON_NEURON_SDK = "2.33.0"
TORCHNEURON_FAMILIES = {"2.13.0": "2.13.3.0.*", "2.14.0": "2.14.3.0.*"}  # PyTorch -> torch-neuronx package family
TORCHNEURON_PIP_INDEX = "https://pip.repos.neuron.amazonaws.com"
TORCHNEURON_OS = "ubuntu26.04"  # the standalone wheels of this release support Ubuntu 26.04 only (quickstart)


def torchneuron_family(torch_version: str) -> str:
    """The torch-neuronx package family documented for PyTorch `torch_version` (e.g. "2.13.0" -> "2.13.3.0.*")."""
    if torch_version not in TORCHNEURON_FAMILIES:
        raise ImageError(f"TorchNeuron (Neuron {TORCHNEURON_NEURON_SDK}) is published for PyTorch "
                         f"{', '.join(TORCHNEURON_FAMILIES)} only, not {torch_version}: build the image for one of them")
    return TORCHNEURON_FAMILIES[torch_version]


def torchneuron_requirements(torch_version: str = "2.13.0") -> tuple[str, ...]:
    """What the image's `pip install --extra-index-url TORCHNEURON_PIP_INDEX` installs for PyTorch `torch_version`."""
    return (f"torch=={torch_version}", f"torch-neuronx=={torchneuron_family(torch_version)}", "neuronx-cc==2.*", "nki")


def torchneuron_image_uri(account: str, region: str, repository: str = "fmlab-torchneuron",
                          torch_version: str = "2.13.0") -> str:
    """The ECR URI of YOUR TorchNeuron training image (built from the documented installation, see above), e.g.
    111122223333.dkr.ecr.us-east-2.amazonaws.com/fmlab-torchneuron:2.13.0-neuronx2.13.3-sdk2.33.0-ubuntu26.04."""
    if not (len(account) == 12 and account.isdigit()):
        raise ImageError(f"account {account!r} must be your 12-digit AWS account id (the registry that holds the image)")
    family = torchneuron_family(torch_version).removesuffix(".0.*")
    return (f"{account}.dkr.ecr.{region}.amazonaws.com/{repository}:"
            f"{torch_version}-neuronx{family}-sdk{TORCHNEURON_NEURON_SDK}-{TORCHNEURON_OS}")
