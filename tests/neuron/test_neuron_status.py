"""Module 9's status facts (fmlab.neuron.status): every stack has dated sources, the pinned trn1 image is the last
training container that ships NxD Training, and the notebook/slides/README headline says what the facts say.

Run: .venv/bin/pytest tests/neuron/test_neuron_status.py -q

The expected values are copied from the sources themselves (read 2026-11-23), not from the module:
- aws-neuron/deep-learning-containers README.md @ 2be9ed1d (the 2.32.0 release, 2026-08-17), table
  pytorch-training-neuronx, newest row: "PyTorch 2.9.0 | aws-neuronx-tools, neuronx_distributed,
  neuronx_distributed_training, torch-neuronx, nki, neuron_agentic_development | Neuron 2.30.0 | ... |
  public.ecr.aws/neuron/pytorch-training-neuronx:2.9.0-neuronx-py312-sdk2.30.0-ubuntu24.04"; no later training row.
- Neuron docs, announce-maintenance-nxdt-nxd-core-training (v2.30.0): maintenance "starting with Neuron Release 2.30.0".
- Neuron docs, archive/nxd-training: "reached end-of-support as of Neuron 2.32".
- Neuron docs, release notes TorchNeuron: public beta in Neuron 2.33.0; torch-neuronx 2.13.3.0.* with PyTorch 2.13.0.
"""

import re
from pathlib import Path

from fmlab.jobs.images import image_uri
from fmlab.neuron import status
from fmlab.neuron.job import LLAMA2_70B_TRN1

ROOT = Path(__file__).resolve().parents[2]
LAST_NXD_TAG = "2.9.0-neuronx-py312-sdk2.30.0-ubuntu24.04"  # the DLC README row quoted above


def test_every_stack_has_sources_with_urls_and_dates():
    assert {s.status for s in status.STACKS} == {"current (public beta)", "end of support"}
    for stack in status.STACKS:
        assert stack.sources and stack.since and stack.what_to_do, stack.name
        for source in stack.sources:
            assert source.url.startswith("https://"), source
            assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", source.read) and source.read == status.READ_ON == "2026-11-23"
            assert source.title and len(source.says) > 40, source
    rows = status.table()
    assert len(rows) == len(status.STACKS) and all("read 2026-11-23" in r["sources"] for r in rows)


def test_the_dates_and_releases_are_the_ones_the_sources_give():
    assert status.MAINTENANCE_SINCE == "2.30.0" and "2.30.0" in status.MAINTENANCE.says
    assert status.END_OF_SUPPORT_AS_OF == "2.32" and "as of Neuron 2.32" in status.ARCHIVE_WARNING.says
    assert status.NXD_TRAINING.status == "end of support" and status.NXD_TRAINING.since == "2.32"
    assert status.TORCHNEURON.status == "current (public beta)" and status.TORCHNEURON_RELEASE == "2.33.0"
    assert status.TORCHNEURON_TORCH["2.13.0"] == "2.13.3.0.*"  # the course's PyTorch has a package family
    assert "trn1" not in status.TORCHNEURON.instances.split("(")[0]  # TorchNeuron: Trn2 and Trn3 only
    # the pages disagree on the last release with NxD Training: all claims are kept, each with its source
    claims = {k: v[0] for k, v in status.LAST_NXD_RELEASE_CLAIMS.items()}
    assert set(claims.values()) == {"2.28", "2.31.0", "2.30.0"}
    assert claims["container list (newest training image with it)"] == status.LAST_NXD_TRAINING_IMAGE_SDK


def test_the_pinned_trn1_image_is_the_documented_last_nxd_training_container():
    assert status.LAST_NXD_TRAINING_IMAGE_TAG == LAST_NXD_TAG
    assert LAST_NXD_TAG in status.DLC_LIST.says and "neuronx_distributed_training" in status.DLC_LIST.says
    uri = LLAMA2_70B_TRN1.image_uri("us-west-2")
    assert uri == f"763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training-neuronx:{LAST_NXD_TAG}"
    assert uri == image_uri("neuron", "us-west-2") and LLAMA2_70B_TRN1.neuron_sdk == "2.30.0"


def test_every_region_with_a_priced_trn1_reservation_has_the_image():
    """Melbourne is where module 11 prices trn1 reserved capacity; its registry is its own account (the SDK's
    table for pytorch-training-neuronx), and preflight warns that AWS's container list marks Neuron as not there."""
    from fmlab.plan import capacity
    from fmlab.service.features import image_findings

    regions = {region for instance, region in capacity.RESERVED_RATE if instance.startswith("ml.trn")}
    assert "ap-southeast-4" in regions
    for region in regions:
        assert image_uri("neuron", region).startswith(
            ("457447274322" if region == "ap-southeast-4" else "763104351884") + f".dkr.ecr.{region}.amazonaws.com/")
        request = {"AlgorithmSpecification": {"TrainingImage": image_uri("neuron", region)}, "HyperParameters": {}}
        warned = [f for f in image_findings(request) if f.check == "image/region"]
        assert (len(warned) == 1 and warned[0].level == "warn" and "6fcfa898" in warned[0].source) \
            == (region == "ap-southeast-4"), region


def test_the_headline_is_in_the_readme_notebook_and_slides():
    headline_facts = ["2.30", "2.32", "2.33.0", LAST_NXD_TAG]
    assert all(f in status.headline() for f in headline_facts)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    slides = (ROOT / "slides" / "09_trainium_continuous_pretraining.md").read_text(encoding="utf-8")
    notebook = (ROOT / "notebooks" / "09_trainium_continuous_pretraining.ipynb").read_text(encoding="utf-8")
    for where, text in (("README.md", readme), ("slides 09", slides), ("notebook 09", notebook)):
        for fact in headline_facts:
            assert fact in text, f"{where} should state {fact} (fmlab.neuron.status)"
        assert "2026-11-23" in text, f"{where} should say when the status was read"
