"""Module 9 notebook 09 (Trainium continued pretraining), run with papermill (lab 09: tests/course/test_labs.py
and tests/course/test_lab09.py).

Run: .venv/bin/pytest tests/neuron/test_notebooks_module09.py -q   (about a minute: two notebook runs)

Notebook 09 states the Trainium training status (fmlab.neuron.status), converts a tiny Llama to NxD shards and
back, builds and validates the pinned Llama 2 70B trn1 request and the native trn2 request, shows that a DCP
checkpoint holds no device, and compares trn1 with p4d (and trn1, trn2, p5) through the planner; the tests read what it recorded and check it against the
package (estimate_run, LLAMA2_70B_TRN1, the files on disk), not against copied numbers. The 70B settings come
from the aws-samples Llama 2 70B continued-pretraining notebook (tests/neuron/test_neuron_trn1.py cites it).
"""

from pathlib import Path

import pytest

from fmlab.course import guide
from fmlab.jobs.images import torchneuron_image_uri
from fmlab.neuron import status
from fmlab.neuron.job import LLAMA2_70B_TRN1
from fmlab.plan.compute import estimate_run

pytestmark = pytest.mark.notebook

NOTEBOOK = "notebooks/09_trainium_continuous_pretraining.ipynb"
SLIDES = Path(__file__).resolve().parents[2] / "slides" / "09_trainium_continuous_pretraining.md"


def test_notebook09_converts_validates_and_costs(run_notebook, tmp_path):
    work = tmp_path / "work"
    r = run_notebook(NOTEBOOK, work_dir=str(work))  # defaults: TP 4 x PP 2, GQA tiling x2, current layout, bf16
    assert r.ok, r.error
    guide.assert_quoted(r.records, "nb09")  # the figures docs/instructor.md quotes
    assert r.records["nb09.trn1_train_dtype"] == "bf16"  # planned and priced at bf16, and trained at it (issue 40)
    rec = r.records
    tp, pp = rec["nb09.tp"], rec["nb09.pp"]
    assert (tp, pp) == (4, 2)

    # conversion: one file per rank + the `checkpoint` and `done` markers + config.json, all on disk
    assert rec["nb09.files_written"] == tp * pp + 2 + 1
    shards = sorted((work / "nxd" / "pretrained_weight" / "model").glob("dp_rank_00_tp_rank_*_pp_rank_*.pt"))
    assert len(shards) == tp * pp
    on_disk = [p for p in (work / "nxd").rglob("*") if p.is_file()]
    assert rec["nb09.shard_bytes"] == sum(p.stat().st_size for p in on_disk) > 0
    assert rec["nb09.convert_seconds"] > 0
    # the tiny Llama has 4 layers: 8 tensors each (gate and up fused), + embedding, final norm and lm_head
    assert rec["nb09.tensors_checked"] == tp * (4 * 8 + 1 + 2)
    planned = rec["nb09.planned_kib_per_rank"]
    assert len(planned) == tp * pp and len({v for k, v in planned.items() if k.endswith("pp0")}) == 1
    order = rec["nb09.q_head_order"]  # tiled KV heads [0, 1, 0, 1]: rank t holds KV head t % 2
    assert sorted(order) == [0, 1, 2, 3] and order != [0, 1, 2, 3]
    assert all(q // 2 == t % 2 for t, q in enumerate(order))  # Q head q uses KV head q // 2 (4 Q heads, 2 KV)

    # the 70B trn1 request: valid, 8 instances, one process per NeuronCore, DP 4, FastFile data
    assert rec["nb09.request_problems"] == 0
    assert rec["nb09.trn1_instance_count"] == LLAMA2_70B_TRN1.instance_count == 8
    assert rec["nb09.trn1_processes_per_node"] == rec["nb09.trn1_neuron_cores"] == 32
    assert rec["nb09.trn1_data_parallel"] == LLAMA2_70B_TRN1.data_parallel == 4
    assert rec["nb09.trn1_tokens_per_step"] == LLAMA2_70B_TRN1.tokens_per_step
    # pinned to the last container with NxD Training (fmlab.neuron.status; tests/neuron/test_neuron_status.py)
    assert rec["nb09.trn1_image"] == LLAMA2_70B_TRN1.image_uri("us-west-2")
    assert rec["nb09.trn1_image"].endswith(":" + status.LAST_NXD_TRAINING_IMAGE_TAG) and "sdk2.30.0" in rec["nb09.trn1_image"]
    modes = rec["nb09.channel_modes"]
    assert modes["train"] == modes["weights"] == "FastFile"
    assert rec["nb09.refused_layouts"] == 2

    # round trip: exact in the conversion's dtype; bf16 itself does change the logits (so the comparison bites)
    assert rec["nb09.roundtrip_max_abs_diff"] == 0.0
    assert rec["nb09.dtype_cast_max_abs_diff"] > 0.0

    # cost: the planner's figures, trn1 cheaper at the same MFU, and the break-even MFU that equalises them
    trn1 = estimate_run("llama2-70b", 100e9, "ml.trn1.32xlarge", 8, 0.4)
    p4d = estimate_run("llama2-70b", 100e9, "ml.p4d.24xlarge", 8, 0.4)
    assert rec["nb09.trn1_days"] == pytest.approx(trn1.days, rel=1e-12)
    assert rec["nb09.trn1_cost_usd"] == pytest.approx(trn1.cost_usd, rel=1e-12)
    assert rec["nb09.p4d_days"] == pytest.approx(p4d.days, rel=1e-12)
    assert rec["nb09.p4d_cost_usd"] == pytest.approx(p4d.cost_usd, rel=1e-12)
    assert rec["nb09.trn1_cost_usd"] < rec["nb09.p4d_cost_usd"]
    assert rec["nb09.trn1_savings_fraction"] == pytest.approx(1 - trn1.cost_usd / p4d.cost_usd, abs=1e-4)
    at_break_even = estimate_run("llama2-70b", 100e9, "ml.trn1.32xlarge", 8, rec["nb09.trn1_break_even_mfu"])
    assert at_break_even.cost_usd == pytest.approx(p4d.cost_usd, rel=1e-3)

    # 0. status, from the package's one source of these facts
    assert rec["nb09.status_read_on"] == status.READ_ON == "2026-11-23"
    assert rec["nb09.nxd_status"] == "end of support" and rec["nb09.nxd_end_of_support_as_of"] == "2.32"
    assert rec["nb09.torchneuron_release"] == "2.33.0" and rec["nb09.status_sources"] == len(status.sources()) >= 8
    # 7. the native path: the device chosen here, the trn2 request (valid, 64 processes per node, your image)
    assert rec["nb09.device_here"] == "cpu"  # this machine: no GPU, no Neuron device
    assert rec["nb09.backend_of"] == {"cuda": "nccl", "neuron": "neuron", "cpu": "gloo"}
    assert rec["nb09.trn2_processes_per_instance"] == rec["nb09.trn2_processes_per_node"] == 64
    assert rec["nb09.trn2_peak_tflops_per_instance"] == 16 * 667.0 and rec["nb09.trn2_price_known"] is False
    assert rec["nb09.trn2_fit_problems"] == rec["nb09.trn2_request_problems"] == 0
    assert rec["nb09.trn2_instance_type"] == "ml.trn2.48xlarge"
    assert rec["nb09.trn2_image"] == torchneuron_image_uri("111122223333", "us-east-2")
    assert rec["nb09.trn2_layout"] == {"sharding": "full", "tp": "4", "backend": "auto", "mixed_precision": "bf16"}
    # the DCP checkpoint holds no device: the same files load on GPU, Trainium or CPU
    assert rec["nb09.dcp_entries"] == 4 * 9 + 3 and rec["nb09.dcp_device_fields"] == 0
    assert rec["nb09.dcp_roundtrip_equal"] is True
    # 8. choosing: cost per million tokens from the planner, and trn2's break-even price
    per_m = rec["nb09.usd_per_million_tokens"]
    assert set(per_m) == {"ml.trn1.32xlarge", "ml.p5.48xlarge"}  # trn2: no published price
    assert per_m["ml.trn1.32xlarge"] == pytest.approx(trn1.cost_usd / 100e9 * 1e6, abs=1e-4)
    trn2 = estimate_run("llama2-70b", 100e9, "ml.trn2.48xlarge", 8, 0.4)
    break_even = rec["nb09.trn2_break_even_usd_per_hour"]
    for name in ("ml.trn1.32xlarge", "ml.p5.48xlarge"):  # SageMaker's training prices (catalog)
        other = estimate_run("llama2-70b", 100e9, name, 8, 0.4)
        assert break_even[name] * trn2.days * 24 * 8 == pytest.approx(other.cost_usd, rel=1e-3), name
    # the same p5 run at EC2's on-demand price of today: a break-even of that kind, for an EC2 quote
    p5 = estimate_run("llama2-70b", 100e9, "ml.p5.48xlarge", 8, 0.4)
    assert break_even["ml.p5.48xlarge on EC2"] == pytest.approx(55.04 * p5.days / trn2.days, abs=0.01)
    assert break_even["ml.p5.48xlarge on EC2"] < break_even["ml.p5.48xlarge"] / 1.9


def test_notebook09_cost_slide_quotes_what_the_notebook_computes(run_notebook, tmp_path):
    """The deck's cost table must match the planner's figures that notebook 09 records (same defaults)."""
    r = run_notebook(NOTEBOOK, work_dir=str(tmp_path / "work"), tp=2, pp=2, qkv_linear=False, kv_size_multiplier=1,
                     layout="legacy", dtype="fp32")
    assert r.ok, r.error
    rec = r.records
    # the other branch of the notebook: legacy layout, no KV tiling (TP 2 divides the 2 KV heads), fp32
    assert rec["nb09.files_written"] == 2 * 2 + 1  # legacy: one folder per rank, no markers; + config.json
    assert sorted(p.name for p in (tmp_path / "work" / "nxd").iterdir()) == ["config.json"] + [
        f"tp_rank_{t:02d}_pp_rank_{p:02d}" for t in range(2) for p in range(2)]
    assert rec["nb09.q_head_order"] == [0, 1, 2, 3]  # no tiling, no reordering
    assert rec["nb09.roundtrip_max_abs_diff"] == 0.0 and rec["nb09.dtype_cast_max_abs_diff"] == 0.0
    deck = SLIDES.read_text(encoding="utf-8")
    for kind, days, cost in (("trn1.32xlarge", rec["nb09.trn1_days"], rec["nb09.trn1_cost_usd"]),
                             ("p4d.24xlarge", rec["nb09.p4d_days"], rec["nb09.p4d_cost_usd"])):
        row = f"| 8 x {kind} | {days:.1f} | ${cost / 1e3:.0f}k |"
        assert row in deck, f"the cost slide should read {row!r}"
    assert f"About {rec['nb09.trn1_savings_fraction']:.0%} less" in deck
    assert f"its MFU is above {rec['nb09.trn1_break_even_mfu']:.1%}" in deck
