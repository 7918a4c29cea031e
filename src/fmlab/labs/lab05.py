"""Checks for labs/lab_05_sharded.ipynb: ZeRO-3 memory, the hybrid shard degree, checkpointing, SMP v2 settings."""

from __future__ import annotations

from fmlab.labs import Lab, close
from fmlab.plan import catalog, compute, layout
from fmlab.plan.catalog import GB

LAB = Lab("lab 05", ["ex1_full_shard_gb", "ex2_hybrid_degree", "ex3_checkpoint_ratio", "ex4_smp_config"])

# The questions' inputs live here so that the notebook and its checks cannot drift apart.
EX1 = dict(model="gpt-30b", instance="ml.p4d.24xlarge", instances=16)
EX2 = dict(model="gpt-30b", tokens=300e9, instance="ml.p4de.24xlarge", instances=16, recompute="full",
           micro_batch=1, degrees=[1, 2, 4, 8, 16, 32, 64, 128])
EX3 = dict(preset="tiny", batch=2, seq_len=128)
EX4 = dict(hybrid_shard_degree=8, sm_activation_offloading=True, activation_loading_horizon=2)


def check_full_shard_gb(answer: float) -> bool:
    m = catalog.model(EX1["model"])
    devices = EX1["instances"] * catalog.instance(EX1["instance"]).accelerators
    states = layout.model_state_bytes(compute.param_count(m), layout.Layout(devices, sharding="full"))
    expected = sum(states.values()) / GB
    return LAB.check("ex1_full_shard_gb", answer, lambda a: close(a, expected), f"{expected:.2f} GB per GPU",
                     "16 bytes per parameter (2 weights + 2 gradients + 12 fp32 Adam state) divided by the number "
                     "of GPUs; layout.model_state_bytes(params, layout.Layout(devices, sharding='full'))")


def expected_hybrid_degree() -> int:
    for d in EX2["degrees"]:
        plan = layout.make_plan(EX2["model"], EX2["tokens"], EX2["instance"], EX2["instances"], sharding=f"hybrid:{d}",
                                recompute=EX2["recompute"], micro_batch=EX2["micro_batch"], suggest=False)
        if plan.fits:
            return d
    raise AssertionError("no hybrid degree fits: the exercise's inputs are wrong")


def check_hybrid_degree(answer: int) -> bool:
    expected = expected_hybrid_degree()
    return LAB.check("ex2_hybrid_degree", answer, lambda a: int(a) == a and int(a) == expected,
                     f"D = {expected}: the smallest shard group that fits, one node, keeps the all-gathers on NVLink",
                     "try layout.make_plan(..., sharding=f'hybrid:{D}', recompute='full').fits for D = 1, 2, 4, ... "
                     "and keep the smallest D that fits (smaller groups send less between nodes)")


def expected_checkpoint_ratio() -> float:
    from fmlab.models import build_model
    from fmlab.parallel.activations import apply_activation_checkpointing, saved_bytes_for_backward
    from fmlab.parallel.parity import make_tokens

    tokens = make_tokens(catalog.model(EX3["preset"]).vocab, EX3["batch"], EX3["seq_len"])
    kept = {}
    for mode in ("none", "full"):
        model = apply_activation_checkpointing(build_model(EX3["preset"]), mode)
        kept[mode] = saved_bytes_for_backward(model, {"input_ids": tokens, "labels": tokens})["on_device"]
    return kept["none"] / kept["full"]


def check_checkpoint_ratio(answer: float) -> bool:
    expected = expected_checkpoint_ratio()
    return LAB.check("ex3_checkpoint_ratio", answer, lambda a: close(a, expected), f"{expected:.2f}x fewer bytes",
                     "build the model twice, apply_activation_checkpointing(model, 'none' / 'full'), and divide the "
                     "two saved_bytes_for_backward(...)['on_device'] counts")


def check_smp_config(answer) -> bool:
    from fmlab.parallel import from_mp_parameters

    def same(a) -> bool:
        settings = a._to_mp_hyperparameters()["mp_parameters"] if hasattr(a, "_to_mp_hyperparameters") else a
        got, want = from_mp_parameters(settings), from_mp_parameters(EX4)
        return got == want

    return LAB.check("ex4_smp_config", answer, same, "the SMP v2 settings of hybrid groups of 8 with offloading",
                     "SMP(hybrid_shard_degree=..., sm_activation_offloading=..., activation_loading_horizon=...) "
                     "from sagemaker.train.distributed")


def summary() -> None:
    LAB.summary()
