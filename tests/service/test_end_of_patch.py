"""A manifest's end of patch is used: past it preflight warns, naming the date and a patched image from the
manifests; SMDDP under SDK v3's launcher is warned as untested by AWS (fmlab.service.libraries.LAUNCH_DECISION); the
PyTorch 2.3.0 DLC carries SMDDP 2.3.0 (aws/deep-learning-containers commit 5891e61e, 2024-05-23)."""

from __future__ import annotations

import datetime

from fmlab.service import FEATURES, manifest, service_findings
from fmlab.service.features import image_findings

IMAGE_213 = "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch:2.13-cu133-amzn2023-sagemaker"
IMAGE_23 = "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.3.0-gpu-py311-cu121-ubuntu20.04-sagemaker"
IMAGE_251 = "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.5.1-gpu-py311-cu124-ubuntu22.04-sagemaker"
DAY = datetime.date.fromisoformat


def request(image: str, channels: tuple[str, ...] = ("train",), **hyperparameters) -> dict:
    return {"AlgorithmSpecification": {"TrainingImage": image, "TrainingInputMode": "File"},
            "HyperParameters": {k: str(v) for k, v in hyperparameters.items()},
            "Environment": {"FMLAB_SCRIPT": "entrypoints/train.py"},  # the course's script: its flags are features
            "InputDataConfig": [{"ChannelName": c} for c in channels],
            "ResourceConfig": {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2, "VolumeSizeInGB": 30}}


def checks(r: dict, today: str) -> dict[str, list]:
    out: dict[str, list] = {}
    for f in image_findings(r, today=DAY(today)):
        out.setdefault(f.check, []).append(f)
    return out


def test_past_its_end_of_patch_an_image_is_warned_with_the_date_and_a_patched_image():
    smddp = request(IMAGE_251, backend="smddp")
    assert "image/end-of-patch" not in checks(smddp, "2025-10-29")  # patched through that day
    [f] = checks(smddp, "2025-10-30")["image/end-of-patch"]
    assert f.level == "warn" and "left AWS's patching on 2025-10-29" in f.message and "2025-10-30" in f.message
    # no patched image has SMDDP: the newest patched GPU image is named, with what it lacks
    assert "pytorch:2.13-cu133-amzn2023-sagemaker (patched until 2027-07-20)" in f.message
    assert "lacks SMDDP in the image" in f.message and "legacy_support.yml" in f.source
    fsdp = checks(request(IMAGE_23, sharding="full"), "2026-11-26")["image/end-of-patch"][0]
    assert "2025-04-24" in fsdp.message and "pytorch:2.13-cu133-amzn2023-sagemaker" in fsdp.message
    assert "lacks" not in fsdp.message  # the 2.13 DLC has FSDP2
    assert "image/end-of-patch" not in checks(request(IMAGE_213), "2026-11-26")
    late = checks(request(IMAGE_213), "2027-07-21")["image/end-of-patch"][0]
    assert "2027-07-20" in late.message and "a patched image" not in late.message  # none left among the manifests


def test_smddp_under_sdk_v3s_launcher_is_untested_by_aws():
    v3 = checks(request(IMAGE_251, channels=("train", "sm_drivers"), backend="smddp"), "2026-11-26")
    [f] = v3["image/smddp-launch"]
    assert f.level == "warn" and "untested by AWS" in f.message and "smddprun" in f.message
    assert "LAUNCH_DECISION" in f.source and "mpi_driver.py" in f.source
    assert "image/smddp-launch" not in checks(request(IMAGE_251, backend="smddp"), "2026-11-26")  # not SDK v3
    assert "image/smddp-launch" not in checks(request(IMAGE_213, channels=("sm_drivers",)), "2026-11-26")


def test_the_course_smddp_job_is_warned_today():
    from fmlab.course_jobs import course_request

    found = {f.check: f for f in service_findings(course_request("smddp"))}
    assert found["image/end-of-patch"].level == found["image/smddp-launch"].level == "warn"
    assert "2025-10-29" in found["image/end-of-patch"].message
    assert not [f for f in service_findings(course_request("smddp")) if f.level == "fail"]


def test_the_2_3_dlc_carries_smddp_2_3_0_from_commit_5891e61e():
    m = manifest("pytorch-2.3-gpu")
    assert m.smddp == "2.3.0" and FEATURES["smddp"].satisfied_by(m)
    assert "5891e61e" in m.source and "smdistributed_dataparallel-2.3.0" in m.source and "1059e445" in m.source
    assert m.read == "2026-11-26"
