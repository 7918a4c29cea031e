"""TrainConfig.to_hyperparameters is parse_config's inverse: what a job sends is what its script reads."""

from __future__ import annotations

import json

import pytest

from fmlab.plan.parallelism import ParallelConfig
from fmlab.train.config import TrainConfig, parse_config


@pytest.mark.parametrize("cfg", [
    TrainConfig(),
    TrainConfig(model="gpt-30b", seq_len=2048, micro_batch=1, lr=1e-4, tensorboard=False, loss="full",
                parallel=ParallelConfig(sharding="hybrid", hybrid_shard_degree=8, activation_checkpointing="full")),
    TrainConfig(max_steps=7, fault="kill", fault_step=3, collective_timeout=12.5,
                parallel=ParallelConfig(tp=2, activation_offloading=True, offload_horizon=2)),
], ids=["defaults", "sharded", "drill"])
def test_hyperparameters_parse_back_into_the_same_config(cfg):
    hps = cfg.to_hyperparameters()
    assert all(isinstance(v, str) for v in hps.values())  # as SageMaker stores them
    assert parse_config([], {"SM_HPS": json.dumps(hps)}) == cfg
    assert parse_config([], {"SM_HPS": json.dumps(cfg.to_hyperparameters(defaults=True))}) == cfg
    argv = [x for k, v in hps.items() for x in (f"--{k}", v)]  # and as flags, as SageMaker's launcher passes them
    assert parse_config(argv, {}) == cfg


def test_the_layout_is_sent_whole_and_the_rest_only_where_it_differs_from_the_defaults():
    layout = ParallelConfig(tp=2)
    assert TrainConfig(micro_batch=2, parallel=layout).to_hyperparameters() == {
        "micro_batch": "2", **{k: str(v).lower() if isinstance(v, bool) else str(v)
                               for k, v in layout.hyperparameters().items()}}
    assert set(TrainConfig().to_hyperparameters()) == set(ParallelConfig().hyperparameters())
