"""The catalog: every entry names its source, and figures are in sane ranges."""

import math
import re

import pytest

from fmlab.plan import catalog


def test_every_instance_has_a_source_and_a_dated_price():
    for inst in catalog.INSTANCES.values():
        assert inst.source and inst.price_region and inst.price_basis, inst.name
        assert re.fullmatch(r"20\d\d-\d\d(-\d\d)?", inst.price_date), inst.name
        assert inst.accelerators in (4, 8, 16)
        # A price is either published (positive) or explicitly absent (NaN) with the reason in price_basis.
        assert inst.price_known or (math.isnan(inst.price_per_hour) and "none published" in inst.price_basis), inst.name


def test_required_instances_present():
    for name in ["ml.p4d.24xlarge", "ml.p4de.24xlarge", "ml.p5.48xlarge", "ml.g5.12xlarge", "ml.g5.48xlarge",
                 "ml.trn1.32xlarge", "ml.trn1n.32xlarge", "ml.trn2.48xlarge", "ml.p5e.48xlarge", "ml.p5en.48xlarge",
                 "ml.p6-b200.48xlarge"]:
        assert name in catalog.INSTANCES


def test_prices_not_from_sagemaker_say_so():
    # Only the 2024-06 SageMaker rows are SageMaker training prices; the rest are EC2 stand-ins or absent.
    for inst in catalog.INSTANCES.values():
        if inst.price_date != "2024-06":
            assert not inst.price_basis.startswith("SageMaker"), inst.name


def test_trainium2_instance():
    # Neuron docs, Trainium2 / Trn2 architecture (read 2026-11-23): 16 chips of 96 GiB, 667 TFLOP/s dense BF16
    # each (10.7 PFLOP/s per instance), EFAv3 3,200 Gbps; default LNC=2 gives 4 logical cores per chip, 64 ranks.
    trn2 = catalog.instance("ml.trn2.48xlarge")
    assert (trn2.accelerators, trn2.device_memory_gb, trn2.peak_tflops_bf16, trn2.network_gbps) == (16, 96, 667, 3200)
    assert trn2.cluster_peak_tflops == pytest.approx(10.7e3, rel=0.01)
    assert trn2.processes == 64
    assert catalog.instance("ml.trn1.32xlarge").processes == 32


def test_h200_and_b200_peaks_are_dense():
    # NVIDIA quotes tensor FLOP/s with 2:4 sparsity; the catalog halves them: H200 1,979 -> 989, B200 4.5 PF -> 2.25 PF.
    for name in ["ml.p5e.48xlarge", "ml.p5en.48xlarge"]:
        inst = catalog.instance(name)
        assert (inst.accelerators, inst.device_memory_gb, inst.peak_tflops_bf16) == (8, 141, 989)
    b200 = catalog.instance("ml.p6-b200.48xlarge")
    assert (b200.accelerators, b200.device_memory_gb, b200.peak_tflops_bf16, b200.network_gbps) == (8, 180, 2250, 3200)
    assert catalog.ACCELERATOR_PEAK_TFLOPS["H200"] == 989 and catalog.ACCELERATOR_PEAK_TFLOPS["B200"] == 2250


def test_a100_and_h100_peaks():
    # NVIDIA datasheets: A100 312 TFLOP/s dense BF16, H100 SXM 989 TFLOP/s dense BF16.
    assert catalog.instance("ml.p4d.24xlarge").peak_tflops_bf16 == 312
    assert catalog.instance("ml.p5.48xlarge").peak_tflops_bf16 == 989
    # AWS Trn1 page: 3,040 TFLOP/s BF16 per trn1.32xlarge (16 chips).
    assert catalog.instance("ml.trn1.32xlarge").cluster_peak_tflops == 3040


def test_required_model_presets_present_with_sources():
    for name in ["tiny", "gpt-30b", "llama2-7b", "llama2-13b", "llama2-70b", "falcon-40b", "bloomberggpt-50b",
                 "gpt3-175b", "llama3.1-8b", "llama3.1-70b", "llama3.1-405b"]:
        assert catalog.model(name).source


def test_gpt_30b_shape():
    m = catalog.model("gpt-30b")
    assert (m.hidden, m.layers, m.heads, m.seq_len, m.vocab) == (7168, 48, 64, 2048, 50257)


def test_unknown_names_list_the_choices():
    import pytest

    with pytest.raises(KeyError, match="ml.p4d.24xlarge"):
        catalog.instance("ml.p4d.24xl")
    with pytest.raises(KeyError, match="llama2-7b"):
        catalog.model("llama-7b")


@pytest.mark.parametrize("name, shape", [
    # meta-llama/Llama-3.1-*/config.json: hidden, layers, heads, kv heads, intermediate, vocabulary.
    ("llama3.1-8b", (4096, 32, 32, 8, 14336, 128256)),
    ("llama3.1-70b", (8192, 80, 64, 8, 28672, 128256)),
    ("llama3.1-405b", (16384, 126, 128, 8, 53248, 128256)),
])
def test_llama31_shapes_match_released_configs(name, shape):
    m = catalog.model(name)
    assert (m.hidden, m.layers, m.heads, m.n_kv_heads, m.ffn, m.vocab) == shape
    assert m.family == "llama" and m.seq_len == 8192  # the main pretraining stage's length


def test_new_accelerators_match_gpu_names_in_the_log():
    # fmlab.train.log maps torch.cuda.get_device_name() to a peak by substring: "NVIDIA H200" must not read as H100.
    from fmlab.train.log import peak_tflops_of

    class Dev:
        type = "cuda"

    import torch

    for gpu, peak in [("NVIDIA H200", 989.0), ("NVIDIA B200", 2250.0), ("NVIDIA H100 80GB HBM3", 989.0)]:
        orig = torch.cuda.get_device_name
        torch.cuda.get_device_name = lambda device=None, gpu=gpu: gpu
        try:
            assert peak_tflops_of(Dev()) == peak, gpu
        finally:
            torch.cuda.get_device_name = orig
