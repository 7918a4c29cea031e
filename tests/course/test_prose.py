"""The sentences notebooks 07 and 08 render from computed values change when a parameter changes (milliseconds)."""

import re

import pytest

from fmlab.course import prose
from fmlab.plan import catalog, compute, layout, reliability
from fmlab.plan.compute import PlanError

MODEL, INSTANCE = "gpt-30b", "ml.p4d.24xlarge"


def chosen(instances: int):
    rows = layout.candidates(MODEL, 300e9, INSTANCE, instances, attention="flash", micro_batch=1)  # one sequence a GPU
    return rows, layout.choose(rows)


def test_the_layout_sentences_follow_the_cluster_size():
    params = compute.param_count(catalog.model(MODEL))
    rows16, c16 = chosen(16)
    rows32, c32 = chosen(32)
    # at one sequence per GPU, eight accumulation steps gather every layer eight times a step, and each hidden gather
    # slows the compute beside it: the fastest predicted step that fits shards over 64 GPUs and keeps the matmul outputs
    assert c16["shard degree"] == 64 and "hybrid_shard_degree=64" in prose.layout_reason(rows16, c16, params)
    s16, s32 = prose.layout_reason(rows16, c16, params), prose.layout_reason(rows32, c32, params)
    assert s16 != s32
    assert f"{c16['states GB']:.1f} GB per GPU" in s16 and "The cluster holds 2 such groups" in s16
    assert "The cluster holds 4 such groups" in s32
    # the sentence follows the planner: 16-GPU groups hold 30 GB of states, and with the activations and the
    # held gradients nothing fits in the 34.2 GB a plan may fill
    assert "In groups of 16 GPUs no layout fits: the states alone are 30.0 GB per GPU." in s16
    assert "In groups of 8 GPUs no layout fits" in s16  # not "fit with none", which reads as "without recomputation"
    assert "Groups of 32 GPUs fit only with full recomputation." in s16
    t16, t32 = prose.layout_traffic(params, 128, 64), prose.layout_traffic(params, 128, 32)
    assert t16 != t32 and "A ring over 64 GPUs has 63 latency steps instead of 127" in t16
    share = float(re.search(r"the same within ([\d.]+)%", t16).group(1))
    assert share < 1.0  # groups of 64 and 128 move about the same bytes per GPU
    seconds = {"efa_seconds": 5.0, "compute_seconds": 3.1, "comms_bound": True}
    timed = prose.layout_traffic(params, 128, 64, seconds=seconds)
    assert "5.0 s per step against 3.1 s of compute: more than the compute" in timed


def test_the_global_batch_sentence_and_rule():
    _, c16 = chosen(16)
    assert c16["global batch tokens"] == 1024 * 2048 and c16["smallest batch tokens"] == 128 * 2048
    text = prose.global_batch(c16, 128, 2048)
    assert "128 data-parallel replicas x micro-batch 1 x 8 accumulation steps" in text
    assert "= **2,097,152 tokens (2.00M) per optimizer step**" in text and "one micro-batch per replica, 262,144" in text
    assert "reaches the limit at 2,048 GPUs" in text
    rows = layout.candidates(MODEL, 300e9, INSTANCE, 16, attention="flash", micro_batch=1)
    small = layout.choose(rows, max_global_batch_tokens=64 * 2048)  # 64 replicas at most: TP 2 needed
    assert small["tp"] >= 2 and small["smallest batch tokens"] <= 64 * 2048
    with pytest.raises(PlanError, match="global batch above 1,000 tokens"):
        layout.choose(rows, max_global_batch_tokens=1000)


def test_the_interruptions_sentence_follows_nodes_and_days():
    mtbf = reliability.LLAMA3_405B.node_mtbf_hours
    days16 = compute.estimate_run(MODEL, 300e9, INSTANCE, 16, 0.4).days
    s16 = prose.interruptions(16, reliability.job_mtbf_hours(16, mtbf), days16)
    s32 = prose.interruptions(32, reliability.job_mtbf_hours(32, mtbf), days16 / 2)
    assert s16 != s32 and f"over its {days16:.1f} days" in s16 and "41 days" not in s32


def test_serving_sweep_says_what_was_measured():
    # notebook 10's run in issue 40: 466, 552, 327 tokens/s at 1, 4, 16 clients is not "flat"
    text = prose.serving_sweep({"one request at a time": [(1, 466, 0.5), (4, 552, 1.9), (16, 327, 9.0)],
                                "continuous batching": [(1, 470, 0.5), (4, 900, 0.8), (16, 1500, 1.6)]})
    assert "466, 552, 327 tokens/s at 1, 4 and 16 clients" in text and "flat" not in text.split("continuous")[0]
    assert "peaks in the middle" in text and "rises to 3.19x" in text
    assert "p95 latency goes from 500 ms to 9,000 ms (x18.0)" in text
    assert "At 16 clients one request at a time serves 0.22x the tokens/s of continuous batching" in text
    flat = prose.serving_sweep({"one": [(1, 100, 0.1), (16, 105, 1.6)]})
    assert "stays within 15% (x1.05)" in flat and "At 16" not in flat
    assert "falls to 0.50x" in prose.serving_sweep({"one": [(1, 100, 0.1), (16, 50, 1.6)]})


def test_the_generated_sentences_follow_the_reading_rule():
    """What prose writes for notebooks 05, 07 and 08 keeps the notebooks' 40-word rule (tests/reading_rule.py)."""
    from reading_rule import too_long

    params = compute.param_count(catalog.model(MODEL))
    rows, choice = chosen(16)
    texts = [prose.layout_reason(rows, choice, params), prose.layout_traffic(params, 128, 64),
             prose.layout_traffic(params, 128, 32, seconds={"efa_seconds": 5.0, "compute_seconds": 3.1,
                                                            "comms_bound": True}),
             prose.layout_traffic(params, 128, 32, seconds={"efa_seconds": 1.0, "compute_seconds": 3.1,
                                                            "comms_bound": False}),
             prose.global_batch(choice, 128, 2048), prose.interruptions(16, 2.0, 34.5),
             prose.serving_sweep({"continuous batching": [(1, 218.0, 0.9), (4, 549.0, 1.1), (16, 1364.0, 1.9)],
                                  "static batching": [(1, 210.0, 0.9), (4, 400.0, 1.8), (16, 500.0, 5.2)]})]
    assert [s for text in texts for s in too_long(text)] == []
