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

import datetime
import json
from dataclasses import dataclass

from fmlab.service.images import MANIFESTS, ImageManifest, manifest_for, neuron_region_findings
from fmlab.service.rules import Finding, runs_course_script


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
    """The features the script uses in this request, from its HyperParameters: SMP's mp_parameters and NxD's
    tensor/pipeline sizes (their own conventions) for any script; the course's flags (sharding, tp,
    activation_checkpointing, backend) only when the request runs the course's script (rules.runs_course_script),
    since another script's `tp` or `backend` means what that script says."""
    hps = request.get("HyperParameters") or {}
    ours, smp = runs_course_script(request), bool(_value(hps, "mp_parameters"))
    out = [FEATURES["smp"]] if smp else []  # SMP's own FSDP and TP: the image's torch.sagemaker does the layout
    if ours and not smp:
        if _value(hps, "sharding") in ("full", "hybrid"):
            out.append(FEATURES["fsdp2"])
        tp = _value(hps, "tp")
        if tp.isdigit() and int(tp) > 1:
            out.append(FEATURES["dtensor-tp"])
        # the flag as SageMaker passes it (activation_checkpointing) or as typed (activation-checkpointing);
        # SMP's recipe (mp_parameters) wraps its layers with its own checkpoint_wrapper instead
        if "selective" in (_value(hps, "activation_checkpointing"), _value(hps, "activation-checkpointing")):
            out.append(FEATURES["selective-ac"])
    if ours and _value(hps, "backend") == "smddp":
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


# SMDDP's launch under SDK v3: what fmlab.service.libraries.LAUNCH_DECISION says, as a finding (its sources there).
SMDDP_V3_LAUNCH = ("sagemaker-train 1.27.0, container_drivers/distributed_drivers/mpi_driver.py and mpi_utils.py (SDK "
                   "v3's MPI driver: plain mpirun ... python -m mpi4py, no smddprun, validate_smddprun() never "
                   "called) against aws/sagemaker-training-toolkit smdataparallel.py (SDK v2's runner: smddprun and "
                   "the SMDATAPARALLEL_* variables); see fmlab.service.libraries.LAUNCH_DECISION, read 2026-11-24")
SDK_V3_DRIVERS_CHANNEL = "sm_drivers"  # sagemaker.train.constants.SM_DRIVERS: the channel SDK v3's drivers ride in


def _patched_on(m: ImageManifest, today: datetime.date) -> bool:
    return bool(m.end_of_patch) and datetime.date.fromisoformat(m.end_of_patch) >= today


def end_of_patch_findings(m: ImageManifest, used: list[Feature], today: datetime.date) -> list[Finding]:
    """A warning when today is past the image's end of patch, naming the date and the newest still-patched image of
    the same processor (one that has every feature used, when one does; else what it lacks)."""
    if not m.end_of_patch or _patched_on(m, today):
        return []
    patched = [x for x in MANIFESTS if x.processor == m.processor and _patched_on(x, today)]
    fits = [x for x in patched if all(f.satisfied_by(x) for f in used)]
    newer = max(fits or patched, key=lambda x: _version(x.pytorch), default=None)
    instead = ""
    if newer is not None:
        lacks = [f.requirement() for f in used if not f.satisfied_by(newer)]
        instead = (f"; a patched image: {newer.repository}:{newer.tag} (patched until {newer.end_of_patch})"
                   + (f", which lacks {', '.join(lacks)}: moving there changes the job" if lacks else ""))
    return [Finding("image/end-of-patch", "warn", f"{m.repository}:{m.tag} left AWS's patching on {m.end_of_patch} "
                    f"(today is {today.isoformat()}): it gets no more security or bug fixes{instead}", m.source)]


def smddp_launch_findings(request: dict, used: list[Feature]) -> list[Finding]:
    """A warning when SMDDP would run under SDK v3's drivers (its channel is in the request): untested by AWS."""
    channels = {c.get("ChannelName") for c in request.get("InputDataConfig") or [] if isinstance(c, dict)}
    if FEATURES["smddp"] not in used or SDK_V3_DRIVERS_CHANNEL not in channels:
        return []
    return [Finding("image/smddp-launch", "warn", "the smddp backend under SDK v3: its MPI driver starts plain "
                    "mpirun ... python -m mpi4py, without the smddprun launcher and SMDATAPARALLEL_* variables that "
                    "SDK v2's runner set, so this launch is untested by AWS; SMDDP is frozen (PyTorch <= 2.5.1, "
                    "p4d/p4de): prefer NCCL on the current PyTorch DLC (the course's script: --backend nccl)",
                    SMDDP_V3_LAUNCH)]


def image_findings(request: dict, today: datetime.date | None = None) -> list[Finding]:
    """The image against what the script needs: one finding per feature used (and one for an unknown image), a
    warning past the image's end of patch (`today`: the date to judge by, default today) and one for SMDDP under
    SDK v3's launcher."""
    uri = training_image(request)
    m = manifest_for(uri) if uri else None
    used = features_of(request)
    if m is None:
        algorithm = (request.get("AlgorithmSpecification") or {}).get("AlgorithmName")
        what = (f"the algorithm {algorithm} brings its own image" if algorithm and not uri else
                f"{uri} is not an image fmlab has a manifest for" if uri else
                "the request names no TrainingImage (a serverless job's image is SageMaker's own)")
        used_text = f" (the course's script would use: {', '.join(f.id for f in used)})" if used else ""
        return [Finding("image", "warn", f"not checked: {what}, so whether it holds what the job needs and can "
                        f"start was not checked{used_text}", "fmlab.service.images.MANIFESTS")]
    out = [Finding("image", "pass", f"{m.repository}:{m.tag}: {m.contains()}", m.source)]
    out += neuron_region_findings(uri, m.processor)
    out += end_of_patch_findings(m, used, today or datetime.date.today())
    out += smddp_launch_findings(request, used)
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
