"""The catalog: every entry names its source, and figures are in sane ranges."""

from fmlab.plan import catalog


def test_every_instance_has_a_source_and_a_dated_price():
    for inst in catalog.INSTANCES.values():
        assert inst.source and inst.price_region and inst.price_date, inst.name
        assert inst.price_per_hour > 0 and inst.accelerators in (4, 8, 16)


def test_required_instances_present():
    for name in ["ml.p4d.24xlarge", "ml.p4de.24xlarge", "ml.p5.48xlarge", "ml.g5.12xlarge", "ml.g5.48xlarge",
                 "ml.trn1.32xlarge", "ml.trn1n.32xlarge"]:
        assert name in catalog.INSTANCES


def test_a100_and_h100_peaks():
    # NVIDIA datasheets: A100 312 TFLOP/s dense BF16, H100 SXM 989 TFLOP/s dense BF16.
    assert catalog.instance("ml.p4d.24xlarge").peak_tflops_bf16 == 312
    assert catalog.instance("ml.p5.48xlarge").peak_tflops_bf16 == 989
    # AWS Trn1 page: 3,040 TFLOP/s BF16 per trn1.32xlarge (16 chips).
    assert catalog.instance("ml.trn1.32xlarge").cluster_peak_tflops == 3040


def test_required_model_presets_present_with_sources():
    for name in ["tiny", "gpt-30b", "llama2-7b", "llama2-13b", "llama2-70b", "falcon-40b", "bloomberggpt-50b",
                 "gpt3-175b"]:
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
