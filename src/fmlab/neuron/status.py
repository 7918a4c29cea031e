"""Which Trainium training stack is current, which is in maintenance or at end of support, since which Neuron
release: the one place module 9 keeps these facts, each with its sources and the date they were read.

    from fmlab.neuron import status
    status.table()               # one row per stack: status, since, instances, sources (notebook 09, slides)
    status.NXD_TRAINING.status   # "end of support"
    status.LAST_NXD_TRAINING_IMAGE_SDK   # "2.30.0": the last training container that ships NxD Training

Notebook 09, its slides and the job builders (fmlab.neuron.job, fmlab.neuron.native) read these facts from here,
so a change in AWS's status is one edit. READ_ON is the day every source below was read; re-read them before
trusting a status more than a few months old (Neuron releases about every six weeks).

Where AWS's pages disagree, both are kept and the container list decides what a SageMaker job can run:
- which release is the last with NxD Training: the end-of-support announcement says Neuron 2.28 (PyTorch 2.9);
  the archived release-notes index says "last supported in Neuron 2.31.0"; the setup pages say the library is
  "no longer included on Neuron DLAMIs and DLCs as of release v2.31.0"; and the container list's newest training
  image that contains neuronx_distributed_training is Neuron 2.30.0's. A job runs a container, so the pinned
  image is 2.30.0's (fmlab.jobs.images). 2.28, 2.29 and 2.30 all ship PyTorch 2.9.
- native PyTorch was announced for "Neuron 2.28 and PyTorch 2.10", then "Neuron 2.31 and PyTorch 2.12" as a
  private beta; the public beta shipped in Neuron 2.33.0 for PyTorch 2.13 and 2.14.
"""

from __future__ import annotations

from dataclasses import dataclass

from fmlab.jobs.images import IMAGES, NEURON_TRAINING_TAGS, TORCHNEURON_FAMILIES, TORCHNEURON_NEURON_SDK
from fmlab.service.sources import Source, cited, sources_of

READ_ON = "2026-11-23"  # when every source below was read
_DOCS = "https://awsdocs-neuron.readthedocs-hosted.com/en"


def _source(title: str, url: str, says: str, release: str = "") -> Source:
    return Source(title, url, says, read=READ_ON, release=release)


@dataclass(frozen=True)
class StackStatus:
    """One training stack on Trainium and where it stands."""

    name: str
    status: str  # "current (public beta)" | "maintenance" | "end of support"
    since: str  # the Neuron release the status holds from
    instances: str
    what_to_do: str
    sources: tuple[Source, ...]


MAINTENANCE = _source(
    "NxDT and NxD Core Training APIs are now in maintenance mode starting with Neuron 2.30",
    f"{_DOCS}/v2.30.0/about-neuron/announcements/neuron2.x/announce-maintenance-nxdt-nxd-core-training.html",
    "Starting with Neuron Release 2.30.0, NxDT and NxD Core Training APIs are in maintenance mode; future releases "
    "address critical security issues only. Existing users should stay on Neuron 2.28 and PyTorch 2.9 until ready "
    "to migrate to native PyTorch on Neuron.", "2.30.0")
EOS_ANNOUNCEMENT = _source(
    "Announcing end of support for NxDT and NxD Core Training APIs starting with Neuron SDK release 2.29 "
    "(PyTorch 2.10)",
    f"{_DOCS}/latest/about-neuron/announcements/neuron2.x/announce-eos-nxdt-nxd-core-training.html",
    "Neuron SDK release 2.28 (PyTorch 2.9) will be the last release to include the NeuronX Distributed Training "
    "(NxDT) library; from 2.29 (PyTorch 2.10) NxD Core training APIs and PyTorch/XLA for training are no longer "
    "supported.", "2.28")
XLA_TRAINING = _source(
    "Neuron no longer supports PyTorch/XLA for training starting with Neuron 2.30",
    f"{_DOCS}/latest/about-neuron/announcements/neuron2.x/announce-no-support-pytorch-xla-training.html",
    "Starting with Neuron Release 2.30.0, PyTorch/XLA is no longer supported for training workloads on Trainium. "
    "PyTorch 2.9 was the last version based on the PyTorch/XLA backend for training; it stays supported for "
    "inference.", "2.30.0")
ARCHIVE_WARNING = _source(
    "NxD Training (archived), the warning on every archived NxD Training page",
    f"{_DOCS}/latest/archive/nxd-training/index.html",
    "NxD Training (NeuronX Distributed Training) and the XLA-based torch-neuronx training flow have reached "
    "end-of-support as of Neuron 2.32 and are no longer actively maintained (page modified 2026-07-24).", "2.32")
ARCHIVED_RELEASE_NOTES = _source(
    "Archived Neuron Component Release Notes",
    f"{_DOCS}/v2.33.0/release-notes/archive/index.html",
    "NxD Training (neuronx-distributed-training): last supported in Neuron 2.31.0. NxD Core: last updated in "
    "Neuron 2.31.0 (page modified 10/19/2026).", "2.33.0")
NOT_IN_DLCS = _source(
    "Install PyTorch for Neuron (v2.32.0) and Install PyTorch via Deep Learning Container (v2.31.0)",
    f"{_DOCS}/v2.32.0/setup/pytorch/index.html",
    "neuronx_distributed_training is no longer included on Neuron DLAMIs and DLCs as of release v2.31.0; "
    "torch-neuronx is no longer included from v2.32.0: if you train with torch-neuronx, pin your environment to "
    "Neuron v2.31.0.", "2.31.0 / 2.32.0")
DLC_LIST = _source(
    "aws-neuron/deep-learning-containers README.md, table pytorch-training-neuronx",
    "https://github.com/aws-neuron/deep-learning-containers/blob/2be9ed1d5da9d7c8e15d7abac1eb7f550ed3a723/README.md",
    "Newest training image: PyTorch 2.9.0, Neuron 2.30.0, packages aws-neuronx-tools, neuronx_distributed, "
    "neuronx_distributed_training, torch-neuronx, nki, neuron_agentic_development, "
    "pytorch-training-neuronx:2.9.0-neuronx-py312-sdk2.30.0-ubuntu24.04; no training row for 2.31.x or 2.32.0 "
    "(commit of the 2.32.0 release, 2026-08-17). Its pytorch/training/2.9.0/Dockerfile.neuronx pins "
    "NEURONX_DISTRIBUTED_TRAINING_VERSION=1.7.0.", "2.32.0 README")
TORCHNEURON_NOTES = _source(
    "Release Notes for Neuron Component: TorchNeuron, torch-neuronx 2.13.3.0 and 2.14.3.0 (Neuron 2.33.0)",
    f"{_DOCS}/latest/release-notes/components/torchneuron.html",
    "Neuron 2.33.0 (2026-10-19) introduces the native torch-neuronx backend as a public beta: the neuron device "
    "through the PyTorch PrivateUse1 extension, on Trainium2 or Trainium3. Support matrix: torch-neuronx 2.13.3.0.* "
    "with PyTorch 2.13.0 and 2.14.3.0.* with PyTorch 2.14.0, Python 3.12-3.14, Ubuntu 24.04 and 26.04.", "2.33.0")
TORCHNEURON_HOME = _source(
    "TorchNeuron: Native PyTorch on AWS Neuron",
    f"{_DOCS}/latest/torch/index.html",
    "Public beta for the Neuron 2.33 release, Trn2 and Trn3. Eager mode, torch.compile(backend='neuron'), and the "
    "standard distributed APIs (DDP, FSDP2, DTensor tensor and sequence parallelism, pipeline and context "
    "parallelism). Change .to('cuda') to .to('neuron'); code written against torch.accelerator needs no change; "
    "autocast with device_type='neuron'.", "2.33")
TORCH_DISTRIBUTED = _source(
    "How to use torch.distributed on Neuron; Tutorial: Train with DDP, FSDP2, and DTensor on Neuron",
    f"{_DOCS}/latest/torch/guides/torch-distributed.html",
    "import torch_neuronx registers the Neuron device and distributed backend; dist.init_process_group("
    "backend='neuron'); tensors on torch.device('neuron'). The tutorial runs 64 workers on one trn2.48xlarge and "
    "the same script on CPU with gloo (page modified 2026-10-15).", "2.33")
TORCHTITAN_NOTES = _source(
    "TorchTitan Neuron Release Notes, 0.2.2+neuron.1 (Neuron 2.33.0)",
    f"{_DOCS}/latest/release-notes/components/torchtitan-neuron.html",
    "First release (beta) of TorchTitan on TorchNeuron: Llama3, Qwen3, DeepSeek-V3, GPT-OSS; FSDP2, TP, CP, EP, PP; "
    "runs on torch-neuronx 2.14; Trn2 and Trn3.", "2.33.0")

NXD_TRAINING = StackStatus(
    "NxD Training / NxD Core training APIs on PyTorch/XLA (torch-neuronx <= 2.9)", "end of support", "2.32",
    "trn1, trn1n, trn2",
    "Existing NxD checkpoints and jobs: pin the last container that ships NxD Training (Neuron 2.30.0, PyTorch "
    "2.9). No fixes or security patches any more; plan the move to native PyTorch (trn2/trn3).",
    (MAINTENANCE, EOS_ANNOUNCEMENT, ARCHIVE_WARNING, ARCHIVED_RELEASE_NOTES, NOT_IN_DLCS, DLC_LIST))
XLA_TRAINING_STACK = StackStatus(
    "PyTorch/XLA training (torch-neuronx, XLA device)", "end of support", "2.30",
    "trn1, trn1n, trn2",
    "No longer supported for training from Neuron 2.30 (inference only); the archived pages date its end of "
    "support to 2.32, and torch-neuronx (XLA) last ships in Neuron 2.31.",
    (XLA_TRAINING, ARCHIVE_WARNING, NOT_IN_DLCS))
TORCHNEURON = StackStatus(
    "TorchNeuron: native PyTorch (device 'neuron'; DDP, FSDP2, DTensor; TorchTitan)", "current (public beta)",
    "2.33.0", "trn2, trn3 (not trn1)",
    "New work: the course's own FSDP2/DTensor training script with device 'neuron' and backend 'neuron', "
    "torch-neuronx 2.13.3.0.* for the course's PyTorch 2.13.0. Beta: expect missing ops and changes.",
    (TORCHNEURON_NOTES, TORCHNEURON_HOME, TORCH_DISTRIBUTED, TORCHTITAN_NOTES))

STACKS = (TORCHNEURON, NXD_TRAINING, XLA_TRAINING_STACK)
MAINTENANCE_SINCE = "2.30.0"  # NxD Training and the NxD Core training APIs (MAINTENANCE)
END_OF_SUPPORT_AS_OF = "2.32"  # the archived pages (ARCHIVE_WARNING)
# The newest pytorch-training-neuronx with neuronx_distributed_training (DLC_LIST): the image table's default.
_LAST = IMAGES["neuron"].default_version
LAST_NXD_TRAINING_IMAGE_SDK = NEURON_TRAINING_TAGS[_LAST]["sdk"]
LAST_NXD_TRAINING_IMAGE_TAG = IMAGES["neuron"].tag_template.format(version=_LAST, **NEURON_TRAINING_TAGS[_LAST])
LAST_NXD_RELEASE_CLAIMS = {  # what each page names as the last release with NxD Training: they disagree
    "end-of-support announcement": ("2.28", EOS_ANNOUNCEMENT),
    "archived release-notes index": ("2.31.0", ARCHIVED_RELEASE_NOTES),
    "setup pages (not in DLAMIs/DLCs as of)": ("2.31.0", NOT_IN_DLCS),
    "container list (newest training image with it)": ("2.30.0", DLC_LIST),
}
TORCHNEURON_RELEASE, TORCHNEURON_DATE = TORCHNEURON_NEURON_SDK, "2026-10-19"
TORCHNEURON_TORCH = TORCHNEURON_FAMILIES  # PyTorch -> torch-neuronx family (TORCHNEURON_NOTES), kept in jobs.images
TORCHNEURON_BACKEND = "neuron"  # the process-group backend and the device type (TORCH_DISTRIBUTED)


def sources() -> list[Source]:
    """Every source of this module, once each."""
    return sources_of(STACKS)


def table() -> list[dict]:
    """One row per stack, for notebook 09's status table (and the slides)."""
    return [{"stack": s.name, "status": s.status, "since Neuron": s.since, "instances": s.instances,
             "what to do": s.what_to_do, "sources": cited(s.sources)}
            for s in STACKS]


def headline() -> str:
    """The one-line status that the README, the notebook and the slides show."""
    return (f"Trainium training status (read {READ_ON}): native PyTorch on Neuron (TorchNeuron) is current, a public "
            f"beta since Neuron {TORCHNEURON_RELEASE} ({TORCHNEURON_DATE}), on trn2/trn3 only; NxD Training and the "
            f"NxD Core training APIs have been in maintenance since Neuron {MAINTENANCE_SINCE} and at end of support "
            f"as of {END_OF_SUPPORT_AS_OF}; PyTorch/XLA training is unsupported from Neuron 2.30. The last container "
            f"with NxD Training is Neuron {LAST_NXD_TRAINING_IMAGE_SDK}'s pytorch-training-neuronx:"
            f"{LAST_NXD_TRAINING_IMAGE_TAG}.")
