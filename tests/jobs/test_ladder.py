"""The scaling ladder's gate, run on a real sandbox job: it passes a good rung, and fails a rung whose checkpoint
is damaged, whose held-out loss does not improve, or whose throughput is far below plan; a failed gate stops the
climb before the next rung is launched."""

import math
import shutil

import pytest

from fmlab import jobs, storage
from fmlab.jobs.ladder import Rung, check_gate, climb, gate_table
from fmlab.jobs.sharded import ShardedRun

pytestmark = pytest.mark.slow  # the module climbs a ladder of sandbox jobs


@pytest.fixture(scope="module")
def climbed(tmp_path_factory):
    root = tmp_path_factory.mktemp("ladder")
    env = {"FMLAB_LOCAL_BUCKET": str(root / "bucket"), "FMLAB_SANDBOX_DIR": str(root / "sandbox"),
           "FMLAB_SANDBOX_CPUS": "2", "FMLAB_BACKEND": "local"}
    with pytest.MonkeyPatch.context() as mp:
        for k, v in env.items():
            mp.setenv(k, v)
        data_uri = jobs.course_dataset_uri(validation_units=2)
        base = ShardedRun().shrink(name="test-base", model="tiny-gpt", instances=1, processes_per_host=1,
                                   sharding="full", hybrid_shard_degree=0, max_steps=12, micro_batch=8, lr=3e-3,
                                   warmup_steps=2, checkpoint_every=0, async_checkpoint=False, eval_sequences=16,
                                   log_every=3, max_run_hours=1)
        never = base.shrink(name="test-never")
        launched = []
        results = climb([Rung("base", base), Rung("never", never)], data_uri, "s3://fmlab-local/ladder-test",
                        plan=lambda run, earlier: 1e12, on_job=lambda job: launched.append(job) or job.wait())
        yield dict(env=env, data_uri=data_uri, base=base, results=results, job=launched[0], launched=launched,
                   data=str(storage.to_local_path(data_uri)), mp=mp)


def test_a_failed_gate_stops_the_climb(climbed):
    results = climbed["results"]
    assert len(results) == 1 and len(climbed["launched"]) == 1  # rung "never" was not launched
    r = results[0]
    assert r.status == "Completed" and r.checks == {"checkpoint": True, "improves": True, "throughput": False}
    assert "below the plan" in r.reasons[0]
    assert r.reported_val_loss < math.log(512) and r.reloaded_val_loss == pytest.approx(r.reported_val_loss, abs=1e-3)
    table = gate_table(results)
    assert table.loc["base", "gate"] == "FAIL" and table.loc["base", "checkpoint loads"]


def test_a_good_rung_passes(climbed):
    r = check_gate(Rung("base", climbed["base"]), climbed["job"], climbed["data"], "s3://fmlab-local/ladder-test/base",
                   previous_val_loss=math.log(512), planned_tokens_per_s=climbed["results"][0].tokens_per_s)
    assert r.passed and r.checkpoint.endswith("step_00000012")


def test_a_damaged_checkpoint_fails_its_gate(climbed):
    source = storage.to_local_path("s3://fmlab-local/ladder-test/base")
    damaged = storage.to_local_path("s3://fmlab-local/ladder-test/damaged")
    shutil.copytree(source, damaged)
    shard = next(damaged.glob("step_*/__0_0.distcp"))
    shard.write_bytes(shard.read_bytes()[:100])
    r = check_gate(Rung("base", climbed["base"]), climbed["job"], climbed["data"], "s3://fmlab-local/ladder-test/damaged",
                   previous_val_loss=math.log(512), planned_tokens_per_s=None)
    assert not r.passed and r.checks["checkpoint"] is False
    assert "checkpoint does not load" in r.reasons[0]


def test_no_improvement_fails_its_gate(climbed):
    r = check_gate(Rung("base", climbed["base"]), climbed["job"], climbed["data"], "s3://fmlab-local/ladder-test/base",
                   previous_val_loss=1.0, planned_tokens_per_s=None)
    assert not r.passed and r.checks == {"checkpoint": True, "improves": False}
    assert "is not 10% lower in perplexity than 1.0000" in r.reasons[0]
