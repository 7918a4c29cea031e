"""Selective activation checkpointing as an image feature (issue 41): torch.utils.checkpoint's
create_selective_checkpoint_contexts is public from PyTorch 2.5.0 (absent from the 2.4.0 and 2.4.1 wheels), so
preflight refuses it on the course's PyTorch 2.3 image, naming 2.5 and an image that has it, and passes it on the
PyTorch 2.5.1 images (SMDDP's DLC, SMP v2) and the 2.13 DLC."""

from __future__ import annotations

import pytest
from test_service_rules import IMAGE_23, IMAGE_213, IMAGE_251, IMAGE_SMP, refused, request

from fmlab.jobs.preflight import preflight
from fmlab.service import refusals
from fmlab.service.features import FEATURES, features_of, image_having
from fmlab.service.images import manifest

SELECTIVE = {"activation_checkpointing": '"selective"'}  # as SDK v3 sends it: JSON-encoded


def test_the_feature_states_its_minimum_pytorch_and_source():
    f = FEATURES["selective-ac"]
    assert f.min_pytorch == "2.5" and f.requirement() == "PyTorch >= 2.5"
    assert "create_selective_checkpoint_contexts" in f.name and "2.5.0" in f.source and "2.4.1" in f.source
    assert not f.satisfied_by(manifest("pytorch-2.3-gpu"))
    assert f.satisfied_by(manifest("pytorch-2.5-gpu")) and f.satisfied_by(manifest("smp-2.8.0"))
    assert image_having(f).name == "pytorch-2.13-gpu"


OURS = {"Environment": {"FMLAB_SCRIPT": "entrypoints/train.py"}}  # the course's script reads these flags


@pytest.mark.parametrize("hps", [SELECTIVE, {"activation_checkpointing": "selective"},
                                 {"activation-checkpointing": "selective"}])
def test_selective_checkpointing_is_read_from_the_hyperparameters(hps):
    assert [f.id for f in features_of({**OURS, "HyperParameters": hps})] == ["selective-ac"]


def test_full_or_no_checkpointing_and_smps_own_recipe_need_nothing():
    assert features_of({**OURS, "HyperParameters": {"activation_checkpointing": "full"}}) == []
    assert features_of({**OURS, "HyperParameters": {"activation_checkpointing": "none"}}) == []
    with_smp = {**SELECTIVE, "mp_parameters": '{"hybrid_shard_degree": 8}'}
    assert [f.id for f in features_of({**OURS, "HyperParameters": with_smp})] == ["smp"]


def test_selective_checkpointing_on_the_pytorch_2_3_image_is_refused_naming_2_5_and_an_image():
    r = request(AlgorithmSpecification={"TrainingImage": IMAGE_23}, HyperParameters=SELECTIVE)
    message = refused(r, "image/selective-ac", "2.4.1")
    assert "PyTorch >= 2.5" in message and "PyTorch 2.3.0" in message and "pytorch:2.13-cu133" in message
    report = preflight(r, quotas=False)
    assert not report.ok and [f.check for f in report.failures] == ["image/selective-ac"]


@pytest.mark.parametrize("image", [IMAGE_251, IMAGE_SMP, IMAGE_213])
def test_selective_checkpointing_passes_on_the_2_5_1_images_and_the_2_13_dlc(image):
    r = request(AlgorithmSpecification={"TrainingImage": image}, HyperParameters=SELECTIVE)
    assert not refusals(r)
    report = preflight(r, quotas=False)
    assert report.ok, [str(f) for f in report.failures]
    assert any(f.check == "image/selective-ac" and f.level == "pass" for f in report.findings)
