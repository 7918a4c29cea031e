"""The layouts the notebooks and decks present as fitting (or not) are re-planned here with the course's own
planner, so an edit to the planner or the prose cannot leave them contradicting each other (issue 40)."""

from __future__ import annotations

import json
from pathlib import Path

from fmlab.plan.layout import make_plan
from fmlab.plan.parallelism import ParallelConfig

ROOT = Path(__file__).resolve().parents[2]


def _text(path: str) -> str:
    p = ROOT / path
    if p.suffix == ".ipynb":
        return "\n".join("".join(c["source"]) for c in json.loads(p.read_text())["cells"])
    return p.read_text()


def test_30b_on_p4de_with_one_node_per_group_fits_only_with_full_recomputation():
    plans = {r: make_plan("gpt-30b", 300e9, "ml.p4de.24xlarge", 16, parallel=ParallelConfig(
        sharding="hybrid", hybrid_shard_degree=8, activation_checkpointing=r)) for r in ("none", "selective", "full")}
    assert [plans[r].fits for r in ("none", "selective", "full")] == [False, False, True]
    assert "D = 8** (one node per group) fits only with full recomputation" in _text("slides/05_sharded_data_parallel.md")
    assert "fits with $D=8$ only with full recomputation" in _text("notebooks/05_sharded_data_parallel.ipynb")


def test_tp_inside_a_node_with_sharding_over_the_rest_does_not_hold_a_30b_on_a100s():
    one_node = make_plan("gpt-30b", 300e9, "ml.p4d.24xlarge", 256, parallel=ParallelConfig(
        sharding="hybrid", hybrid_shard_degree=4, tp=2, activation_checkpointing="full"))
    assert not one_node.fits  # notebook 06 shows this and lets the planner pick the group instead
    assert "one_node" in _text("notebooks/06_tensor_parallel.ipynb")
