"""Arithmetic of fmlab.plan.scaling against the published formulas it implements (sources per test)."""

import pytest

from fmlab.measure.state_bytes import predicted_state_bytes
from fmlab.plan.compute import PlanError
from fmlab.plan.scaling import (
    bubble_fraction,
    global_batch_tokens,
    gpipe_schedule,
    hybrid_traffic,
    smallest_tp_for_batch,
    three_d_layout,
)


def test_bubble_fraction_is_megatrons():
    # Narayanan et al. 2021, section 2.2.1: (p - 1) / m; section 2.2.2: interleaving divides it by v.
    assert bubble_fraction(6, 24) == pytest.approx(5 / 24)
    assert bubble_fraction(6, 24, interleave=2) == pytest.approx(5 / 48)
    with pytest.raises(PlanError):
        bubble_fraction(6, 0)


@pytest.mark.parametrize("stages, micro", [(6, 4), (4, 8), (2, 1)])
def test_gpipe_schedule_idles_exactly_the_bubble(stages, micro):
    slots = gpipe_schedule(stages, micro, backward_cost=2)
    makespan = max(s["start"] + s["length"] for s in slots)
    busy = micro * 3  # each stage: m forwards of 1 unit, m backwards of 2
    assert (makespan - busy) / busy == pytest.approx(bubble_fraction(stages, micro))
    for stage in range(stages):  # a stage never runs two slots at once
        spans = sorted((s["start"], s["start"] + s["length"]) for s in slots if s["stage"] == stage)
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False))


def test_three_d_example_of_the_best_practices_post():
    # AWS "training LLMs on SageMaker: best practices": 6 layers, DP k, PP 6, TP 4 on 8 * k * 3 GPUs.
    for k in (1, 2, 4):
        layout = three_d_layout(k)
        assert layout["gpus"] == 8 * k * 3 and layout["nodes"] == 3 * k and layout["layers_per_stage"] == 1
    with pytest.raises(PlanError, match="must divide the 6 layers"):
        three_d_layout(1, pp=4)


def test_global_batch_grows_with_data_parallel_replicas_only():
    assert global_batch_tokens(2048, seq_len=4096) == 2048 * 4096  # 256 p4d nodes, one sequence per GPU
    assert global_batch_tokens(2048, tp=8, seq_len=4096) == 256 * 4096
    assert smallest_tp_for_batch(2048, 4 * 2**20, seq_len=4096) == 2
    with pytest.raises(PlanError, match="add pipeline parallelism"):
        smallest_tp_for_batch(2048, 1000, seq_len=4096)


def test_hybrid_traffic_trade_off():
    params, world = 30e9, 128
    textbook = {d: hybrid_traffic(params, world, d, reduce_bytes=2) for d in (1, 128)}  # every collective in 16 bits
    # ZeRO (Rajbhandari et al. 2020, section 7.2.2): ZeRO-3 moves 3 x the parameters, 1.5x DDP's all-reduce.
    assert textbook[128]["node_efa_bytes"] / textbook[1]["node_efa_bytes"] == pytest.approx(1.5, rel=0.01)
    by_degree = {d: hybrid_traffic(params, world, d) for d in (1, 2, 4, 8, 16, 32, 64, 128)}
    # the engine reduces in fp32: ZeRO-3's 2 + 2 + 4 bytes per parameter equal DDP's fp32 all-reduce (2 x 4)
    assert by_degree[128]["node_efa_bytes"] == pytest.approx(by_degree[1]["node_efa_bytes"], rel=0.01)
    # Shard groups that stay inside one 8-GPU node send the least between nodes of the groups that shard
    inter = {d: t["node_efa_bytes"] for d, t in by_degree.items() if d > 1}
    assert min(inter, key=inter.get) == 8
    assert all(by_degree[d]["state_bytes"] == pytest.approx(16 * params / d) for d in by_degree)
    with pytest.raises(PlanError):
        hybrid_traffic(params, world, 3)


def test_a_node_sends_one_gpus_ring_traffic_not_eight():
    """NCCL's rings cross a node once: a shard group of 64 (8 nodes) sends (2 + 2 + 4) x 63/64 x P out of each
    node, about what one GPU sends in its group, plus the replica all-reduce of the node's 8 shards."""
    params = 30e9
    t = hybrid_traffic(params, 128, 64)
    group = 8 * 63 / 64 * params
    replicas = 8 * (2 * 1 / 2 * params * 4 / 64)  # 8 GPUs, each all-reducing its 1/64 shard with one peer
    assert t["node_efa_bytes"] == pytest.approx(group + replicas)
    assert t["intra_node_bytes"] == 0


def test_the_30b_step_on_p4d_is_bound_by_efa():
    """gpt-30b on 16 x p4d (400 Gbps EFA per node, 41.8 GB/s as NCCL achieves it), groups of 64, micro-batch
    1 x 2,048 tokens at MFU 40%: ~6 s of EFA against ~3.1 s of compute; at the 50 GB/s line rate it would be ~5 s."""
    from fmlab.plan import catalog, compute
    from fmlab.plan.scaling import step_communication

    m, p4d = catalog.model("gpt-30b"), catalog.instance("ml.p4d.24xlarge")
    s = step_communication(compute.param_count(m), 128, 64, 2048, compute.flops_per_token(m), p4d.peak_tflops_bf16,
                           p4d.network_gbps)
    assert s["compute_seconds"] == pytest.approx(3.09, abs=0.05)
    assert s["efa_seconds"] == pytest.approx(s["node_efa_bytes"] / 41.78e9, rel=0.01) and 5.4 < s["efa_seconds"] < 6.6
    assert s["comms_bound"]


def test_predicted_state_bytes_rescales_the_planner_to_fp32():
    from fmlab.parallel import ParallelConfig

    mixed = predicted_state_bytes("tiny", ParallelConfig(sharding="full"), 4, fp32=False)
    fp32 = predicted_state_bytes("tiny", ParallelConfig(sharding="full"), 4)
    assert sum(mixed.values()) == pytest.approx(sum(fp32.values()))  # 2+2+12 = 4+4+8 = 16 bytes per parameter
    assert fp32["weights"] == pytest.approx(2 * mixed["weights"])
