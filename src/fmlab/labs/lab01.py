"""Checks for labs/lab_01_compute_budget.ipynb: days, the smallest cluster, memory, a layout that fits."""

from __future__ import annotations

from fmlab.labs import Lab, close
from fmlab.plan import compute, layout

LAB = Lab("lab 01", ["ex1_days", "ex2_smallest_cluster", "ex3_memory", "ex4_layout"])

# The questions' inputs live here so that the notebook and its checks cannot drift apart.
EX1 = dict(model="llama2-7b", tokens=1e12, instance="ml.p4d.24xlarge", instances=32, mfu=0.4)
EX2 = dict(model="llama2-13b", instance="ml.p4de.24xlarge", deadline_days=14, budget_usd=600_000, mfu=0.4)
EX3 = dict(model="gpt-30b", tokens=300e9, instance="ml.p4d.24xlarge", instances=16, sharding="full",
           recompute="full", micro_batch=1)
EX4 = dict(model="llama2-70b", tokens=2e12, instance="ml.p4d.24xlarge", instances=8)


def check_days(answer: float) -> bool:
    expected = compute.estimate_run(EX1["model"], EX1["tokens"], EX1["instance"], EX1["instances"], EX1["mfu"]).days
    return LAB.check("ex1_days", answer, lambda a: close(a, expected), f"{expected:.1f} days",
                     "days = train FLOPs / (devices x peak FLOP/s x MFU) / 86,400; compute.estimate_run does it")


def check_smallest_cluster(answer: int) -> bool:
    tokens = compute.chinchilla_tokens(compute.param_count(compute.catalog.model(EX2["model"])))
    expected = compute.smallest_cluster(EX2["model"], tokens, EX2["instance"], deadline_days=EX2["deadline_days"],
                                         budget_usd=EX2["budget_usd"], mfu=EX2["mfu"]).instances
    return LAB.check("ex2_smallest_cluster", answer, lambda a: int(a) == expected and a == int(a),
                     f"{expected} instances", "train on Chinchilla-optimal tokens (20 per parameter), then find the "
                     "fewest instances whose days are within the deadline (compute.smallest_cluster)")


def check_memory(answer: float) -> bool:
    plan = layout.make_plan(EX3["model"], EX3["tokens"], EX3["instance"], EX3["instances"], sharding=EX3["sharding"],
                            recompute=EX3["recompute"], micro_batch=EX3["micro_batch"])
    expected = plan.memory_gb_per_device
    return LAB.check("ex3_memory", answer, lambda a: close(a, expected, 0.03), f"{expected:.1f} GB per device",
                     "sum the model states (16 bytes/param / shard degree) and the activations; "
                     "layout.make_plan(...).memory_gb_per_device")


def check_layout(answer: dict) -> bool:
    def fits(a: dict) -> bool:
        allowed = {"sharding", "tp", "pp", "recompute", "micro_batch"}
        extra = set(a) - allowed
        if extra:
            raise ValueError(f"only {sorted(allowed)} may be chosen, not {sorted(extra)}")
        return layout.make_plan(EX4["model"], EX4["tokens"], EX4["instance"], EX4["instances"], suggest=False, **a).fits

    return LAB.check("ex4_layout", answer, fits, "it fits",
                     "try sharding='full' with a recompute setting, or tensor parallelism within the node")


def summary() -> None:
    LAB.summary()
