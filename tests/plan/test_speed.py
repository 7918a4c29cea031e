"""fmlab.plan.speed and fmlab.plan.published: the predicted step, term by term, and held against published runs.

    .venv/bin/pytest tests/plan/test_speed.py -v

The outside check is tests/plan/published_runs.json: runs read from their papers and posts, each with its quote and
conversion (docs/published-runs.md). The model's constants (fmlab.plan.hardware) are sourced or measured, never
fitted to these runs; the test says how many it explains.
"""

import json
import math
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from fmlab.plan import catalog, compute, gpu_measurements, hardware, layout, published, speed
from fmlab.plan.compute import PlanError
from fmlab.plan.parallelism import ParallelConfig
from fmlab.plan.scaling import bubble_fraction

RUNS = Path(__file__).with_name("published_runs.json")
GPT_30B = catalog.model("gpt-30b")


def workload(**changes):
    base = dict(model=GPT_30B, hardware=speed.Hardware("A100-40GB", 128, 8, 400.0),
                parallel=ParallelConfig(sharding="full", activation_checkpointing="full"), micro_batch=4,
                global_batch=512)
    base.update(changes)
    return speed.Workload(**base)


# ---------------------------------------------------------------- the outside check


def test_the_published_runs_file_follows_the_format():
    runs = published.load(RUNS)
    assert len(runs) >= 12
    for run in runs:
        for key in ("name", "source", "quote", "conversion", "model", "hardware", "layout", "batch", "precision",
                    "reported"):
            assert key in run, (run.get("name"), key)
        assert run["quote"].strip() and run["conversion"].strip()
    gpus = [r["hardware"]["gpu"] for r in runs]
    assert sum(g.startswith("A100") for g in gpus) >= 2 and sum(g in ("H100-SXM", "H200") for g in gpus) >= 2
    assert sum(r["layout"]["sharding"] in ("full", "hybrid") for r in runs) >= 2
    assert sum(r["layout"]["tp"] > 1 and r["layout"]["pp"] > 1 and r["hardware"]["gpu"].startswith("A100")
               for r in runs) >= 2
    assert sum(bool(r.get("aws")) for r in runs) >= 3  # runs on AWS instances, marked as such
    assert len({r["name"] for r in runs}) == len(runs)


def test_the_cli_prints_every_run_as_json():
    out = subprocess.run([sys.executable, "-m", "fmlab", "plan", "--published", str(RUNS), "--json"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    assert len(rows) == len(published.load(RUNS))
    for key in ("name", "predicted_tokens_per_second_per_gpu", "reported_tokens_per_second_per_gpu", "ratio",
                "predicted_mfu", "compute_s", "exposed_communication_s", "bubble_s", "recompute_s", "step_s"):
        assert all(key in r for r in rows), key


@pytest.mark.parametrize("change, words", [
    (lambda r: r["hardware"].update(gpu="A100"), "unknown GPU"),
    (lambda r: r["model"].pop("hidden"), "model.hidden is missing"),
    (lambda r: r["layout"].update(tp=3), "tp=3"),
    (lambda r: r["batch"].update(global_batch=7), "multiple of"),
    (lambda r: r["reported"].update(tokens_per_second_per_gpu=0), "positive number"),
    (lambda r: r.update(precision="fp8"), "precision must be"),
])
def test_a_wrong_run_gets_an_error_naming_its_field(change, words):
    run = json.loads(json.dumps(published.load(RUNS)[0]))
    change(run)
    with pytest.raises(PlanError, match=words):
        published.predict(run)


@pytest.mark.parametrize("change, words", [
    (lambda r: r["layout"].pop("activation_checkpointing"), "layout.activation_checkpointing is missing (required)"),
    (lambda r: r["layout"].pop("sharding"), "layout.sharding is missing (required)"),
    (lambda r: r.pop("precision"), "precision is missing (required)"),
    (lambda r: r["layout"].update(activation_checkpoint="full"), "layout.activation_checkpoint is not a field"),
    (lambda r: r["batch"].update(microbatch=4), "batch.microbatch is not a field"),
    (lambda r: r.update(reportd={}), "reportd is not a field"),
])
def test_the_format_is_read_strictly_through_the_command(tmp_path, change, words):
    """A missing required field, or one the format does not know (a misspelling), exits 2 naming the run and the
    field; the optional ones (attention, kernels, gpu_power_watts) may be left out."""
    runs = json.loads(json.dumps(published.load(RUNS)))
    change(runs[0])
    path = tmp_path / "runs.json"
    path.write_text(json.dumps(runs))
    out = subprocess.run([sys.executable, "-m", "fmlab", "plan", "--published", str(path), "--json"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and f"run {runs[0]['name']!r}: {words}" in out.stderr, out.stderr
    optional = json.loads(json.dumps(published.load(RUNS)[0]))
    for key in ("attention", "kernels"):
        optional["layout"].pop(key, None)
    optional["hardware"].pop("gpu_power_watts", None)
    assert published.format_problems(optional) == [] and published.predict(optional)["ratio"] > 0


# ---------------------------------------------------------------- the constants


def test_the_kernel_efficiency_is_the_courses_own_measurement():
    measured = gpu_measurements.kernel_efficiency_measured()
    assert len(measured) == 4  # compiled and eager, on one H100 and one H200
    for (kernels, card), value in measured.items():
        assert speed.KERNEL_EFFICIENCY[kernels] == pytest.approx(value, abs=0.02), (kernels, card)


def test_a_power_cap_lowers_the_clock_by_the_cube_root():
    h100 = hardware.gpu("H100-SXM")
    assert h100.rates(500)[0] == pytest.approx(h100.matmul_tflops * (500 / 700) ** (1 / 3))
    assert h100.rates(None) == h100.rates(900) == (h100.matmul_tflops, h100.attention_tflops)


def test_the_network_share_is_each_measurement_at_its_line_rate():
    assert hardware.network(400).achievable_gbs == pytest.approx(41.8, abs=0.1)  # 2 x p4d, nccl-tests algbw
    assert hardware.network(3200).achievable_gbs == pytest.approx(260, abs=1)  # 2 x p5
    assert 0.65 < hardware.network(1600).efficiency < 0.84
    with pytest.raises(PlanError, match="inter_node_gbps"):
        hardware.network(0)


# ---------------------------------------------------------------- the terms


def test_a_collective_inside_a_node_moves_its_ring_bytes_at_nvlink_speed():
    hw = speed.Hardware("A100-40GB", 8)
    size = 1e9
    t = speed.collective_seconds("all_gather", size, 8, 8, hw)
    assert t == pytest.approx(7 / 8 * size / 230.8e9 + (8.4 + 7 * 3.4) * 1e-6)
    assert speed.collective_seconds("all_reduce", size, 8, 8, hw) > 1.9 * t  # twice the bytes
    assert speed.collective_seconds("all_gather", size, 1, 1, hw) == 0.0


def test_groups_that_cross_nodes_share_the_nodes_network():
    hw = speed.Hardware("A100-40GB", 128, 8, 400.0)
    one_group = speed.collective_seconds("all_gather", 1e9, 16, 8, hw)  # all 8 GPUs of a node in one group
    eight_groups = speed.collective_seconds("all_gather", 1e9, 16, 1, hw)  # 8 groups leave each node
    assert one_group == pytest.approx(15 / 16 * 1e9 / 41.8e9, rel=0.02)
    assert eight_groups == pytest.approx(8 * 15 / 16 * 1e9 / 41.8e9, rel=0.02)


def test_fsdp_gathers_hide_behind_compute_when_the_layers_are_big_enough():
    small, large = speed.step_time(workload(micro_batch=1, global_batch=512)), speed.step_time(workload())
    exposed = lambda s: s.communication["fsdp_all_gather_forward"] + s.communication["fsdp_backward"]  # noqa: E731
    assert exposed(small) > 10 * exposed(large)  # micro-batch 1 cannot hide the EFA gathers; 4 can
    assert large.hidden_communication_s > 0.9 * (large.hidden_communication_s + exposed(large))


def test_the_bubble_is_megatrons_formula():
    w = workload(model=catalog.model("gpt3-175b"), hardware=speed.Hardware("A100-80GB", 512, 8, 1600.0),
                 parallel=ParallelConfig(tp=8, pp=8, activation_checkpointing="full"), micro_batch=1,
                 global_batch=256, attention="unfused")
    s = speed.step_time(w)
    pipelined = s.compute_s + s.recompute_s + s.communication["tensor_parallel"]
    assert s.bubble_s == pytest.approx(bubble_fraction(8, s.micro_batches) * pipelined, rel=1e-6)
    v2 = speed.step_time(replace(w, virtual_stages=2))
    assert v2.bubble_s == pytest.approx(s.bubble_s / 2, rel=1e-6)


def test_full_recomputation_adds_a_forward_and_selective_adds_nothing_with_flash():
    none = speed.step_time(workload(parallel=ParallelConfig(sharding="full")))
    full = speed.step_time(workload())
    selective = speed.step_time(workload(parallel=ParallelConfig(sharding="full",
                                                                 activation_checkpointing="selective")))
    assert none.recompute_s == selective.recompute_s == 0
    assert full.recompute_s == pytest.approx(full.compute_s / 3, rel=0.2)
    assert full.mfu < none.mfu and full.hfu > full.mfu


def test_ddp_hides_its_all_reduce_behind_the_backward_but_not_its_last_bucket():
    w = workload(model=catalog.model("llama2-7b"), hardware=speed.Hardware("H100-SXM", 8, 8, 3200.0),
                 parallel=ParallelConfig(activation_checkpointing="full"), micro_batch=1, global_batch=8)
    s = speed.step_time(w)
    local = compute.param_count(w.model)
    ar = speed.collective_seconds("all_reduce", 4 * local, 8, 8, w.hardware)
    assert s.communication["data_parallel_all_reduce"] == pytest.approx(ar * speed.DDP_BUCKET_BYTES / (4 * local))
    assert s.hidden_communication_s == pytest.approx(ar - s.communication["data_parallel_all_reduce"])


def test_mfu_is_model_flops_over_peak_and_step():
    s = speed.step_time(workload())
    tokens = 512 * GPT_30B.seq_len
    assert s.mfu == pytest.approx(compute.flops_per_token(GPT_30B) * tokens / (s.step_s * 128 * 312e12))
    assert s.tokens_per_second_per_gpu == pytest.approx(tokens / s.step_s / 128)


def test_an_impossible_workload_is_refused_with_the_fix():
    with pytest.raises(PlanError, match="multiple of data-parallel ranks"):
        speed.step_time(workload(global_batch=100))
    with pytest.raises(PlanError, match="attention must be"):
        speed.step_time(workload(attention="sparse"))
    with pytest.raises(PlanError, match="needs pp > 1"):
        speed.step_time(workload(virtual_stages=2))
    with pytest.raises(PlanError, match="global_batch must be a whole number of at least 1"):
        speed.step_time(workload(global_batch=-4))
    for bad in (0, 64, 100):  # none, fewer than one micro-batch per replica, not whole micro-batches
        with pytest.raises(PlanError, match="a multiple of 128 x 1"):
            layout.make_plan("gpt-30b", 300e9, "ml.p4d.24xlarge", 16, parallel=ParallelConfig(sharding="full"),
                             global_batch=bad)


# ---------------------------------------------------------------- the planner uses it


def test_the_plan_is_built_on_the_predicted_step_and_mfu_is_a_what_if():
    cfg = ParallelConfig(sharding="full", activation_checkpointing="full")
    plan = layout.make_plan("gpt-30b", 300e9, "ml.p4d.24xlarge", 16, parallel=cfg, micro_batch=4)
    assert plan.step and plan.speed_basis.startswith("predicted step")
    tokens_per_s = plan.step["tokens_per_second_per_gpu"] * plan.devices
    assert plan.days == pytest.approx(300e9 / tokens_per_s / 86400, rel=1e-6)
    assert plan.mfu == pytest.approx(plan.step["mfu"], rel=1e-6)
    what_if = layout.make_plan("gpt-30b", 300e9, "ml.p4d.24xlarge", 16, parallel=cfg, micro_batch=4, mfu=0.4)
    assert what_if.step is None and "what if" in what_if.speed_basis and what_if.hfu == 0.4
    trn = layout.make_plan("llama2-7b", 1e9, "ml.trn1.32xlarge", 2, parallel=ParallelConfig(sharding="full"))
    assert trn.step is None and "no speed model" in trn.speed_basis


def test_the_planner_never_chooses_a_layout_without_its_headroom():
    for instance in ("ml.p4d.24xlarge", "ml.p5.48xlarge"):
        rows = layout.candidates("gpt-30b", 300e9, instance, 16, micro_batches=(1, 2, 4, 8))
        for r in rows:
            assert r["fits"] == (r["GB per device"] <= r["usable GB"] * (1 - layout.HEADROOM_FRACTION))
        best = layout.choose(rows)
        assert best["GB per device"] <= 0.95 * best["usable GB"]
        fastest = max(r["tokens/s per device"] for r in rows if r["fits"]
                      and r["global batch tokens"] <= layout.GLOBAL_BATCH_LIMIT_TOKENS)
        assert best["tokens/s per device"] >= 0.99 * fastest


def test_the_default_global_batch_is_gpt3s_for_the_nearest_size():
    m = catalog.model("gpt-30b")  # nearest GPT-3 size by parameter ratio: 13B, 2M tokens
    assert layout.default_global_batch(m, 128, 1, 2048) == 1024
    assert layout.default_global_batch(m, 4096, 1, 2048) == 4096  # at least one micro-batch per replica
    assert math.isclose(layout.default_global_batch(catalog.model("tiny"), 2, 1, 128) * 128, 0.5e6, rel_tol=0.01)


def test_the_days_carry_the_planners_error_on_the_published_runs():
    spread = published.error_spread()
    ratios = sorted(r["ratio"] for r in published.compare(published.load(RUNS)))
    assert spread.runs == len(ratios) and ratios[0] <= spread.low < spread.median < spread.high <= ratios[-1]
    assert spread.days(10.0) == pytest.approx((10 * spread.low, 10 * spread.high))
    out = subprocess.run([sys.executable, "-m", "fmlab", "plan", "--model", "gpt-30b", "--tokens", "300e9",
                          "--instance", "ml.p4d.24xlarge", "--count", "16", "--json"],
                         capture_output=True, text=True, timeout=120)
    whole = json.loads(out.stdout)
    assert whole["days_range"] == pytest.approx(list(spread.days(whole["days"])))
    assert whole["error_spread"]["runs"] == spread.runs
    typed = subprocess.run([sys.executable, "-m", "fmlab", "plan", "--model", "gpt-30b", "--tokens", "300e9",
                            "--instance", "ml.p4d.24xlarge", "--count", "16", "--mfu", "0.4"],
                           capture_output=True, text=True, timeout=120)
    assert "percentile error" not in typed.stdout  # a typed MFU is the learner's own what-if: no spread to give


def test_recomputation_hides_backward_gathers_not_forward_ones():
    """Full recomputation re-runs each layer's forward in the backward pass, just before its backward: it adds
    compute the backward's gathers can hide behind, never the forward's (issue 64's lab 07b finding: the planner had
    counted it beside the forward and hid forward gathers the lab's arithmetic exposes)."""
    base = dict(model=catalog.model("gpt-30b"), hardware=speed.Hardware("A100-40GB", 128, 8, 400.0),
                micro_batch=1, global_batch=128)
    plain = speed.step_time(speed.Workload(parallel=ParallelConfig(sharding="hybrid", hybrid_shard_degree=32), **base))
    full = speed.step_time(speed.Workload(parallel=ParallelConfig(sharding="hybrid", hybrid_shard_degree=32,
                                                                  activation_checkpointing="full"), **base))
    assert full.communication["fsdp_all_gather_forward"] == pytest.approx(plain.communication["fsdp_all_gather_forward"])
    assert full.communication["fsdp_all_gather_forward"] > 0.3  # one sequence per GPU: the gathers show
    assert full.communication["fsdp_backward"] < plain.communication["fsdp_backward"]
