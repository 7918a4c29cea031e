"""What the course's training script needs from its image, feature by feature, and the check of a request's image.

The script (`entrypoints/train.py` = fmlab.train, or fmlab.neuron.train on trn1) imports what a run's layout asks
for, lazily: FSDP2 only when it shards, DTensor tensor parallelism only when tp > 1, SMDDP only for
`--backend smddp`, torch.sagemaker only with SMP's `--mp_parameters`. So the features a job uses follow from its
request: the HyperParameters (the script's flags) and nothing else. `image_findings(request)` reads them and the
image's manifest (fmlab.service.images) and refuses a job whose image lacks a feature, naming the feature, the
version it needs and an image that has it.

    from fmlab.service.features import features_of, image_findings
    features_of({"HyperParameters": {"sharding": "full"}})   # -> [FEATURES["fsdp2"]]
    features_of({"HyperParameters": {"activation_checkpointing": "selective"}})   # -> [FEATURES["selective-ac"]]
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from fmlab.service.images import MANIFESTS, ImageManifest, manifest_for
from fmlab.service.rules import Finding


@dataclass(frozen=True)
class Feature:
    """One thing the script uses, what an image must hold for it, and where that is written."""

    id: str
    name: str
    min_pytorch: str = ""  # the PyTorch release that made it public
    needs: str = ""  # "smddp" | "smp" | "nxd": a library the image must carry
    source: str = ""

    def satisfied_by(self, m: ImageManifest) -> bool:
        if self.min_pytorch and _version(m.pytorch) < _version(self.min_pytorch):
            return False
        return not self.needs or bool(getattr(m, self.needs))

    def requirement(self) -> str:
        return f"PyTorch >= {self.min_pytorch}" if self.min_pytorch else f"{self.needs.upper()} in the image"


FEATURES: dict[str, Feature] = {f.id: f for f in [
    Feature("fsdp2", "FSDP2 (torch.distributed.fsdp.fully_shard, MixedPrecisionPolicy), used by --sharding "
            "full|hybrid", min_pytorch="2.6",
            source="pytorch/pytorch PR #141868 (fully_shard and MixedPrecisionPolicy public in torch.distributed.fsdp,"
                   " released in 2.6); imported by fmlab.parallel.fsdp and precision"),
    Feature("dtensor-tp", "DTensor tensor parallelism (torch.distributed.tensor, .parallel), used by --tp > 1",
            min_pytorch="2.5",
            source="pytorch/pytorch PR #133881 (torch.distributed.tensor public, released in 2.5); imported by "
                   "fmlab.parallel.tensor"),
    Feature("selective-ac", "selective activation checkpointing (torch.utils.checkpoint."
            "create_selective_checkpoint_contexts, CheckpointPolicy), used by --activation-checkpointing selective",
            min_pytorch="2.5",
            source="torch/utils/checkpoint.py of the PyPI torch wheels (read 2026-11-26): public in 2.5.0 "
                   "(git 32f585d9; pytorch/pytorch PR #125795), absent from 2.4.0 and 2.4.1 (only the private "
                   "_pt2_selective_checkpoint_context_fn_gen); imported by fmlab.parallel.activations"),
    Feature("smddp", "the smddp backend (smdistributed.dataparallel), used by --backend smddp", needs="smddp",
            source="SageMaker developer guide, 'Supported frameworks, AWS Regions, and instances types' of SMDDP: "
                   "preinstalled in SageMaker PyTorch framework containers up to 2.5 and in SMP v2 images"),
    Feature("smp", "SMP v2 (torch.sagemaker), used by --mp_parameters (Torchrun(smp=SMP(...)))", needs="smp",
            source="SMP v2 release notes: it runs in the smdistributed-modelparallel images, 'in replacement of the "
                   "SageMaker PyTorch framework containers'"),
    Feature("nxd", "Neuron Distributed (neuronx_distributed), used by fmlab.neuron.train (--tensor_parallel_size, "
            "--pipeline_parallel_size)", needs="nxd",
            source="aws-neuron/deep-learning-containers: NxD Training ships in pytorch-training-neuronx up to 2.9.0 "
                   "(Neuron 2.30.0); see fmlab.neuron.status"),
]}


def _version(text: str) -> tuple[int, ...]:
    out = []
    for part in text.split(".")[:3]:
        digits = "".join(ch for ch in part if ch.isdigit())
        out.append(int(digits) if digits else 0)
    return tuple(out)


def _value(hps: dict, key: str) -> str:
    value = hps.get(key)
    if value is None:
        return ""
    text = str(value)
    try:  # SDK v3 sends every hyperparameter as a JSON-encoded string
        decoded = json.loads(text)
        return decoded if isinstance(decoded, str) else text
    except (json.JSONDecodeError, TypeError):
        return text


def features_of(request: dict) -> list[Feature]:
    """The features the script uses in this request, from its HyperParameters (the script's flags)."""
    hps = request.get("HyperParameters") or {}
    out = []
    if _value(hps, "mp_parameters"):
        out.append(FEATURES["smp"])  # SMP's own FSDP and TP: the image's torch.sagemaker does the layout
    else:
        if _value(hps, "sharding") in ("full", "hybrid"):
            out.append(FEATURES["fsdp2"])
        tp = _value(hps, "tp")
        if tp.isdigit() and int(tp) > 1:
            out.append(FEATURES["dtensor-tp"])
        # the flag as SageMaker passes it (activation_checkpointing) or as typed (activation-checkpointing);
        # SMP's recipe (mp_parameters) wraps its layers with its own checkpoint_wrapper instead
        if "selective" in (_value(hps, "activation_checkpointing"), _value(hps, "activation-checkpointing")):
            out.append(FEATURES["selective-ac"])
    if _value(hps, "backend") == "smddp":
        out.append(FEATURES["smddp"])
    if "tensor_parallel_size" in hps or "pipeline_parallel_size" in hps:
        out.append(FEATURES["nxd"])
    return out


def image_having(feature: Feature, processor: str = "gpu") -> ImageManifest | None:
    """The newest manifest (by PyTorch) of `processor` that carries `feature`, or None."""
    fits = [m for m in MANIFESTS if m.processor == processor and feature.satisfied_by(m)]
    return max(fits, key=lambda m: _version(m.pytorch), default=None)


def training_image(request: dict) -> str:
    return str(((request.get("AlgorithmSpecification") or {}).get("TrainingImage")) or "")


def image_findings(request: dict) -> list[Finding]:
    """The image against what the script needs: one finding per feature used (and one for an unknown image)."""
    uri = training_image(request)
    m = manifest_for(uri) if uri else None
    used = features_of(request)
    if m is None:
        return [Finding("image", "warn", f"{uri or 'no TrainingImage'}: not an image the course has a manifest for; "
                        f"its contents are not checked (features used: {', '.join(f.id for f in used) or 'none'})",
                        "fmlab.service.images.MANIFESTS")]
    out = [Finding("image", "pass", f"{m.repository}:{m.tag}: {m.contains()}", m.source)]
    for f in used:
        if f.satisfied_by(m):
            out.append(Finding(f"image/{f.id}", "pass", f"{f.name}: needs {f.requirement()}, the image has it",
                               f.source))
            continue
        better = image_having(f, m.processor if m.processor != "cpu" else "gpu")
        instead = f"; use {better.repository}:{better.tag} ({better.contains()})" if better else ""
        has = f"PyTorch {m.pytorch}" if f.min_pytorch else f"no {f.needs.upper()}"
        out.append(Finding(f"image/{f.id}", "fail", f"{f.name} needs {f.requirement()}; {m.repository}:{m.tag} has "
                           f"{has}: the job would fail on import{instead}", f.source))
    return out


def image_processor(request: dict) -> str | None:
    """The processor the request's image is built for ("gpu", "cpu", "neuron"), None when unknown."""
    m = manifest_for(training_image(request))
    return m.processor if m else None
