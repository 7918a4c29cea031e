"""The PyTorch DLCs' Regions and registries come from the installed SageMaker SDK's own table
(sagemaker-core's image_uri_config/pytorch-amzn2023.json and pytorch.json), read when a URI is built: every Region
the table lists builds the URI the SDK builds (45 for the 2.13 DLC in sagemaker-core 2.27.0, where 16 were listed
by hand before, and eu-central-2 and ap-northeast-3 raised). The newest DLC in the table is reported, not adopted:
the course's image follows the course's PyTorch."""

from __future__ import annotations

import json
from importlib import resources

import pytest
import torch

from fmlab.jobs.images import IMAGES, PYTORCH_TRAINING_TAGS, ImageError, dlc_registries, image_uri, newest_dlc


def sdk_table(framework: str) -> dict:
    return json.loads(resources.files("sagemaker.core").joinpath(f"image_uri_config/{framework}.json").read_text())[
        "training"]


def test_every_region_of_the_sdks_table_builds_the_sdks_uri():
    from sagemaker.core import image_uris

    version = IMAGES["pytorch"].default_version
    regions = sdk_table("pytorch-amzn2023")["versions"][version]["registries"]
    assert dlc_registries(version) == regions and len(regions) > 16
    for region in regions:
        for processor, instance in (("gpu", "ml.p4d.24xlarge"), ("cpu", "ml.m5.xlarge")):
            sdk = image_uris.retrieve("pytorch-amzn2023", region=region, version=version, instance_type=instance,
                                      image_scope="training")
            assert image_uri("pytorch", region, processor=processor) == sdk, region
    assert image_uri("pytorch", "eu-central-2").startswith("380420809688.dkr.ecr.eu-central-2.amazonaws.com/pytorch:")
    assert image_uri("pytorch", "ap-northeast-3").startswith("364406365360.dkr.ecr.ap-northeast-3.amazonaws.com/")


@pytest.mark.parametrize("version", sorted(PYTORCH_TRAINING_TAGS))
def test_the_ubuntu_line_uses_the_sdks_regions_and_accounts(version):
    from sagemaker.core import image_uris

    regions = sdk_table("pytorch")["versions"][version]["registries"]
    assert dlc_registries(version) == regions
    python = PYTORCH_TRAINING_TAGS[version]["python"]
    for region in regions:
        short = image_uris.retrieve("pytorch", region=region, version=version, py_version=python,
                                    instance_type="ml.p4d.24xlarge", image_scope="training")
        full = image_uri("pytorch", region, version)
        assert full.startswith(short) and full.endswith("-sagemaker"), (region, full)
    if version == IMAGES["smddp"].default_version:
        assert image_uri("smddp", "eu-central-2").startswith("380420809688.dkr.ecr.eu-central-2.amazonaws.com/")
    missing = sorted(set(sdk_table("pytorch-amzn2023")["versions"]["2.13"]["registries"]) - set(regions))
    with pytest.raises(ImageError, match=r"not published in .* \(per the SDK.s table\)"):
        image_uri("pytorch", missing[0], version)


def test_the_newest_dlc_is_read_from_the_table_and_the_course_keeps_its_own_pytorch():
    versions = sdk_table("pytorch-amzn2023")["versions"]
    newest = newest_dlc()
    assert newest == max(versions, key=lambda v: tuple(int(x) for x in v.split(".")))
    course = IMAGES["pytorch"].default_version
    assert course == ".".join(torch.__version__.split(".")[:2])  # the image runs the PyTorch the course runs
    assert tuple(map(int, newest.split("."))) >= tuple(map(int, course.split(".")))
    assert dlc_registries(newest)  # published somewhere, per the same table
