"""Four gloo processes: hybrid sharding on a (replicate=2, shard=2) mesh, FSDP + TP on a 2x2 mesh and TP=2 with
two plain replicas give the single-process first-step loss and gradients; the measured bytes of weights,
gradients and optimizer state on each rank equal the planner's prediction; delayed (meta-device) parameter
initialisation allocates only the local shards.

One world for the module. Tolerance as in test_parallel_2proc.py: |loss diff| <= 1e-5, max |grad diff| <= 1e-6.
"""

import math

import pytest

from fmlab.measure.launch import run_worker_task

pytestmark = pytest.mark.distributed

LOSS_TOL, GRAD_TOL = 1e-5, 1e-6
PRESETS = ["tiny", "tiny-gpt"]
PARITY = [
    {"name": "hybrid_2x2", "sharding": "hybrid", "hybrid_shard_degree": 2},
    {"name": "fsdp_tp_2x2", "sharding": "full", "tp": 2, "activation_checkpointing": "selective"},
    {"name": "tp2_replicas2", "tp": 2},
]
MEMORY = [
    {"name": "ddp"},
    {"name": "full", "sharding": "full"},
    {"name": "hybrid_2x2", "sharding": "hybrid", "hybrid_shard_degree": 2},
    {"name": "fsdp_tp_2x2", "sharding": "full", "tp": 2},
    {"name": "full_delayed_init", "sharding": "full", "delayed_init": True},
]


@pytest.fixture(scope="module")
def world():
    return run_worker_task("suite", 4, {"parity": {"presets": PRESETS, "layouts": PARITY, "global_batch": 4, "seq_len": 32},
                                  "memory": {"preset": "tiny", "layouts": MEMORY}}, progress=False)


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("layout", [p["name"] for p in PARITY])
def test_layout_matches_single_process(world, preset, layout):
    for rank in world:
        r = rank["result"]["parity"][preset][layout]
        assert r["loss_diff"] <= LOSS_TOL, f"rank {rank['rank']}: loss {r['loss']} vs {r['ref_loss']}"
        assert r["max_grad_diff"] <= GRAD_TOL, f"rank {rank['rank']}: max |grad diff| {r['max_grad_diff']:.2e}"


@pytest.mark.parametrize("layout, rel", [("ddp", 1e-9), ("full", 0.01), ("hybrid_2x2", 0.01),
                                         ("fsdp_tp_2x2", 0.01)])  # TP keeps the small norms replicated
def test_measured_state_memory_matches_planner(world, layout, rel):
    for rank in world:
        r = rank["result"]["memory"][layout]
        for part in ("weights", "gradients", "optimizer"):
            assert math.isclose(r["measured"][part], r["predicted"][part], rel_tol=rel), (rank["rank"], part, r)


def test_sharding_divides_the_state(world):
    r = world[0]["result"]["memory"]
    total = {name: sum(r[name]["measured"].values()) for name in r}
    assert total["ddp"] == pytest.approx(4 * total["full"], rel=0.01)  # FSDP over 4 ranks: a quarter each
    assert total["ddp"] == pytest.approx(2 * total["hybrid_2x2"], rel=0.01)  # shard groups of 2: a half


def test_delayed_init_allocates_only_the_shards(world):
    for rank in world:
        r = rank["result"]["memory"]
        assert r["full_delayed_init"]["measured"] == r["full"]["measured"]
        assert r["full_delayed_init"]["finite"]
        assert r["full_delayed_init"]["loss"] == pytest.approx(math.log(512), abs=0.3)  # an untrained model
