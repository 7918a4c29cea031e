"""Two gloo processes: DDP, FSDP full shard, hybrid shard (replicate=2, shard=1), TP=2 and FSDP + checkpointing
+ offloading give the single-process first-step loss and gradients; the hand-written column/row-parallel MLP
equals nn.Linear; and an FSDP1 HYBRID_SHARD control shows the check catches a layout that stops averaging.

One world is spawned for the whole module (each process pays ~4 s to import transformers).
Tolerance (fp32, only the order of the sums differs): |loss difference| <= 1e-5, max |gradient difference|
<= 1e-6 with gradients up to ~0.3; measured differences are ~1e-7 and below.
"""

import pytest

from fmlab.measure.launch import run_worker_task

pytestmark = pytest.mark.distributed

LOSS_TOL, GRAD_TOL = 1e-5, 1e-6
PRESETS = ["tiny", "tiny-gpt"]  # Llama and OPT (GPT-3 layout)
LAYOUTS = [
    {"name": "ddp"},
    {"name": "ddp_default_group", "no_mesh": True},  # plain DDP as it runs on SMDDP: no mesh, no subgroups
    {"name": "fsdp_full", "sharding": "full"},
    {"name": "hybrid_2x1", "sharding": "hybrid", "hybrid_shard_degree": 1},  # replicate=2, shard=1
    {"name": "tp2", "tp": 2},
    {"name": "fsdp_ckpt_offload", "sharding": "full", "activation_checkpointing": "full",
     "activation_offloading": True},
    {"name": "fsdp1_hybrid_control", "sharding": "hybrid", "hybrid_shard_degree": 1, "control": "fsdp1_hybrid"},
]


@pytest.fixture(scope="module")
def world():
    return run_worker_task("suite", 2, {"parity": {"presets": PRESETS, "layouts": LAYOUTS, "global_batch": 4, "seq_len": 32},
                                  "tp_mlp": {"hidden": 16, "width": 64, "tokens": 8}}, progress=False)


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("layout", ["ddp", "ddp_default_group", "fsdp_full", "hybrid_2x1", "tp2", "fsdp_ckpt_offload"])
def test_layout_matches_single_process(world, preset, layout):
    for rank in world:
        r = rank["result"]["parity"][preset][layout]
        assert r["loss_diff"] <= LOSS_TOL, f"rank {rank['rank']}: loss {r['loss']} vs {r['ref_loss']}"
        assert r["max_grad_diff"] <= GRAD_TOL, f"rank {rank['rank']}: max |grad diff| {r['max_grad_diff']:.2e}"
        assert r["max_grad"] > 100 * GRAD_TOL  # the gradients are not trivially small


@pytest.mark.parametrize("preset", PRESETS)
def test_fsdp1_hybrid_shard_control_is_caught(world, preset):
    # FSDP1 HYBRID_SHARD on a (replicate=2, shard=1) mesh leaves each replica's gradients unaveraged on
    # CPU/gloo: the parity check must see it (if a torch release fixes FSDP1, this control needs a new bug).
    r = world[0]["result"]["parity"][preset]["fsdp1_hybrid_control"]
    assert r["max_grad_diff"] > 1000 * GRAD_TOL


def test_parallel_mlp_equals_plain_linear(world):
    for rank in world:
        r = rank["result"]["tp_mlp"]
        assert r["local_up_shape"] == [32, 16] and r["full_up_shape"] == [64, 16]  # half the rows each
        assert r["local_down_shape"] == [16, 32] and r["full_down_shape"] == [16, 64]  # half the columns
        for key in ("output_diff", "input_grad_diff", "up_grad_diff", "down_grad_diff"):
            assert r[key] <= GRAD_TOL, (rank["rank"], key, r[key])


def test_every_process_imported_transformers(world):
    assert all(0 < r["import_seconds"] < 120 for r in world)
