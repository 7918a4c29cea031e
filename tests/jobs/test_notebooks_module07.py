"""Module 7: notebook 07 (the sharded 30B GPT run), executed with papermill on its default, laptop-sized settings.

Run: .venv/bin/pytest tests/jobs/test_notebooks_module07.py -q   (about 70 s: two sandbox jobs and a gate)

The notebook's figures are checked against the package (the planner's candidates, choice and predicted step) and
against what it ran: the local ladder's gates (computed from the rungs' real checkpoints and held-out losses),
the damaged checkpoint that must fail its gate, the captured 30B request, and the twin job on 2 instances.
"""

import json
import math

import pytest

from fmlab.course import guide
from fmlab.plan import catalog, compute, layout
from fmlab.plan.planned import planned_run

pytestmark = pytest.mark.notebook

NOTEBOOK = "notebooks/07_gpt30b_sharded_training.ipynb"


def test_notebook07_plans_climbs_and_runs_the_twin(run_notebook, local_env):
    # the ladder's mechanism: 30 steps beat the base rung's gate too. The throughput gate is loosened to 8x: this test
    # shares the 2 cores with two other test workers, and once (stop 59's second clean clone) the base rung ran 5.3x
    # below the speed the notebook measured before it (10,881 tokens/s against 57,882 planned)
    r = run_notebook(NOTEBOOK, local_medium_steps=30, gate_factor=8.0)
    assert r.ok, r.error
    guide.assert_quoted(r.records, "nb07")  # the figures docs/instructor.md quotes
    rec = r.records

    # 1. the plan, from the planner
    assert rec["nb07.params"] == compute.param_count(catalog.model("gpt-30b"))
    rows = layout.candidates("gpt-30b", 300e9, "ml.p4d.24xlarge", 16, attention="flash", micro_batches=(1, 2, 4, 8))
    choice = layout.choose(rows)
    assert rec["nb07.choice"] == {k: choice[k] for k in ("sharding", "shard degree", "tp", "recompute", "micro-batch")}
    assert rec["nb07.choice_gb"] == pytest.approx(choice["GB per device"], abs=0.01)
    assert rec["nb07.choice_in_table"] == pytest.approx(choice["GB per device"], abs=0.01)
    assert choice["GB per device"] <= 0.95 * choice["usable GB"]  # the planner's headroom
    # the predicted step: one sequence per GPU leaves the EFA gathers exposed (network-bound); the choice hides them
    steps = rec["nb07.step_seconds"]
    one, chosen = steps["one_sequence"], steps["chosen"]
    assert one["exposed_communication_s"] > one["compute_s"] > 0
    assert chosen["exposed_communication_s"] < 0.05 * chosen["compute_s"] and chosen["mfu"] > 2 * one["mfu"]
    assert 5 < rec["nb07.rehearsal_days"] < 60  # the ladder's calendar time is printed beside its cost
    assert rec["nb07.full_none_gb"] == {"flash": 32.22, "eager": 96.65}  # fmlab.plan.memory
    assert rec["nb07.global_batch_tokens"] == choice["global batch tokens"] == 1024 * 2048  # GPT-3's 2M
    run = layout.make_plan("gpt-30b", 300e9, "ml.p4d.24xlarge", 16, parallel=choice["parallel"],
                           micro_batch=choice["micro-batch"])
    assert rec["nb07.days"] == pytest.approx(run.days, abs=0.01) and rec["nb07.mfu"] == pytest.approx(run.mfu, abs=1e-4)
    assert rec["nb07.cost_usd"] == pytest.approx(run.cost_usd, abs=1)
    # the job is rendered from the planned run: its hyperparameters carry the plan's batch and interval
    plan = planned_run("gpt-30b", 300e9, "ml.p4d.24xlarge", 16)
    assert rec["nb07.planned"] == {"days": round(plan.days, 2), "mfu": round(plan.mfu, 4),
                                   "micro_batch": plan.micro_batch, "global_batch": plan.global_batch,
                                   "checkpoint_every": plan.checkpoint_every, "reserved_days": plan.reserved_days,
                                   "hyperparameters": {"micro_batch": str(plan.micro_batch), "global_batch": "1024",
                                                       "checkpoint_every": str(plan.checkpoint_every),
                                                       "hybrid_shard_degree": "32"}}
    low, high = rec["nb07.measured_mfu_range"]  # one GPU, eager to compiled
    assert low < high
    published = rec["nb07.published"]  # the chart: the same figures as tests/plan/test_speed.py holds
    assert published["runs"] >= 24 and published["within_20"] >= 0.8 * published["runs"]
    assert published["beyond_35"] <= 3  # each with its missing term in its note (tests/plan/test_speed_terms.py)
    assert abs(published["smp_ratio"] - 1) < 0.2

    # 2. the ladder: both rungs pass every check; the damaged checkpoint fails its gate
    gates = rec["nb07.gates"]
    assert list(gates) == ["base", "medium"]
    for rung in gates.values():
        assert rung["passed"] and rung["checks"] == {"checkpoint": True, "improves": True, "throughput": True}
        assert rung["reloaded"] == pytest.approx(rung["val_loss"], abs=1e-3)
    assert gates["medium"]["val_loss"] < gates["base"]["val_loss"] < math.log(512)
    assert rec["nb07.damaged_gate"] == {"passed": False, "checks": {"checkpoint": False, "improves": True,
                                                                     "throughput": True}}

    # 3. the cloud request carries the chosen SMP layout, the SMP v2 image and the EFA environment
    req = rec["nb07.request"]
    assert req["problems"] == 0 and (req["count"], req["type"]) == (16, "ml.p4d.24xlarge")
    assert req["image"].endswith("/smdistributed-modelparallel:2.5.1-gpu-py311-cu124")
    assert json.loads(req["mp_parameters"]) == rec["nb07.smp"] == {
        "hybrid_shard_degree": choice["shard degree"], "tensor_parallel_degree": 1}
    assert req["environment"]["FI_PROVIDER"] == "efa" and req["environment"]["NCCL_PROTO"] == "simple"
    # ~35 planned days (+20%) do not fit SageMaker's 28 days per job: a chain of jobs, one checkpoint URI
    chain = rec["nb07.chain"]
    assert chain["jobs"] == ["gpt30b-1of2", "gpt30b-2of2"] and len(chain["checkpoint_uris"]) == 1
    assert all(s <= 28 * 86400 for s in chain["max_run_s"]) and req["max_run_s"] == chain["max_run_s"][0]
    assert sum(chain["max_run_s"]) >= run.days * 1.2 * 86400
    # the guard prices the whole chain: never below the planned cost (one capped job's worst case was)
    assert rec["nb07.worst_case_usd"] >= rec["nb07.cost_usd"] > rec["nb07.single_job_worst_case_usd"]
    storage = rec["nb07.storage"]
    assert storage == {"requested VolumeSizeInGB": storage["requested VolumeSizeInGB"], "instance storage GB": 8000,
                       "fits": True}

    # 4. the twin crossed two sandbox instances with hybrid sharding, and learned
    medium = rec["nb07.medium"]
    assert medium["status"] == "Completed" and medium["instances"] == 2 and medium["processes_per_host"] == 2
    assert medium["hosts"] == ["algo-1", "algo-2"]
    assert medium["last_loss"] < medium["first_loss"]
    assert medium["checkpoint_files"] > 0 and medium["tensorboard_files"] >= 1
    # its run time is printed and recorded (make course's report shows it), not asserted: tests never assert on time,
    # and under four test workers the same notebook took 120.4 s against 81 s on three
    assert rec["nb07.seconds"] > 0
