"""Sentences that notebooks render from computed values, so that a changed parameter never leaves the prose wrong.

    from IPython.display import Markdown, display
    from fmlab.course import prose
    display(Markdown(prose.layout_reason(rows, choice, params)))

Each function takes the numbers a notebook has just computed and returns Markdown. Used by notebooks 07
(the layout, its traffic and its global batch), 08 (interruptions over the run) and 10 (what the load test
measured); tests in
tests/course/test_prose.py change a parameter and check that the sentence changes with it.
"""

from __future__ import annotations

from fmlab.plan.layout import GLOBAL_BATCH_LIMIT_TOKENS, RECOMPUTE_CHOICES, global_batch_tokens
from fmlab.plan.scaling import hybrid_traffic


def _gpus(n: int, per_node: int) -> str:
    nodes = n / per_node
    return f"{n} GPUs ({nodes:g} node{'s' if nodes != 1 else ''})" if nodes >= 1 else f"{n} GPUs"


def _least_recompute(rows: list[dict], degree: int, tp: int) -> tuple[str | None, float]:
    """The least recomputation with which shard degree `degree` fits, and its states in GB per GPU."""
    mine = [r for r in rows if r["shard degree"] == degree and r["tp"] == tp]
    fitting = sorted((r for r in mine if r["fits"]), key=lambda r: RECOMPUTE_CHOICES.index(r["recompute"]))
    states = mine[0]["states GB"] if mine else float("nan")
    return (fitting[0]["recompute"] if fitting else None), states


def layout_reason(rows: list[dict], choice: dict, params: float, gpus_per_node: int = 8) -> str:
    """Why the chosen layout: how much of the states each GPU holds, and what the smaller groups would need."""
    degree, tp = choice["shard degree"], choice["tp"]
    world = max(r["shard degree"] for r in rows)
    setting = f"hybrid_shard_degree={degree}" if choice["sharding"].startswith("hybrid") else "full sharding"
    recompute = ("without recomputing anything" if choice["recompute"] == "none"
                 else f"with {choice['recompute']} recomputation")
    text = (f"Why this one (`{setting}`, tensor parallelism {tp}): shared by a group of {_gpus(degree, gpus_per_node)}, "
            f"the {16 * params / 1e9:,.0f} GB of model states are {choice['states GB']:.1f} GB per GPU. That "
            f"leaves room for the activations {recompute} ({choice['GB per device']:.1f} GB per GPU in all).")
    replicas = world // degree // tp if degree else 1
    if replicas > 1:
        text += (f" The cluster holds {replicas} such groups, each a replica of the model that all-reduces its "
                 "gradient shards with the others.")
    smaller = sorted({r["shard degree"] for r in rows if r["shard degree"] < degree and r["tp"] == tp})
    notes = []
    for d in smaller:
        least, states = _least_recompute(rows, d, tp)
        notes.append(f"Groups of {d} GPUs fit only with {least} recomputation." if least
                     else f"In groups of {d} GPUs no layout fits: the states alone are {states:.1f} GB per GPU.")
    if notes:
        text += " " + " ".join(notes)
    return text


def layout_traffic(params: float, world: int, shard_degree: int, gpus_per_node: int = 8,
                   seconds: dict | None = None) -> str:
    """Bytes per step in the chosen group against sharding over the whole cluster (module 5's model), the step's
    EFA time against its compute when `seconds` (plan.scaling.step_communication) is given, and why the
    smaller group is preferred all the same."""
    mine, whole = hybrid_traffic(params, world, shard_degree, gpus_per_node), hybrid_traffic(params, world, world,
                                                                                                gpus_per_node)
    group, full = mine["group_bytes"], whole["group_bytes"]
    text = (f"Bytes are not the reason for the smaller group. Per GPU and step, the group of {shard_degree} "
            f"gathers and reduce-scatters {group / 1e9:,.1f} GB: (D-1)/D of every layer, in two bf16 gathers and an "
            f"fp32 reduce-scatter. The whole cluster of {world} moves {full / 1e9:,.1f} GB, the same within "
            f"{abs(full - group) / full:.1%}. Out of each node go {mine['node_efa_bytes'] / 1e9:,.0f} GB against "
            f"{whole['node_efa_bytes'] / 1e9:,.0f}. NCCL's rings cross a node once, so a node sends about one GPU's "
            "share, plus hybrid sharding's all-reduce across the replicas.")
    if seconds:
        verdict = ("more than the compute. The run is then bound by the network, and its MFU falls unless the "
                   "overlap hides it" if seconds["comms_bound"] else "less than the compute, which hides it")
        text += (f" At the node's EFA bandwidth that is {seconds['efa_seconds']:.1f} s per step against "
                 f"{seconds['compute_seconds']:.1f} s of compute: {verdict}.")
    return text + (f" The reason for the smaller group is the size of each collective group. A ring over "
                   f"{shard_degree} GPUs has {shard_degree - 1} latency steps instead of {world - 1}. Every layer "
                   f"waits for the slowest of {shard_degree} GPUs rather than of {world}. And the groups' "
                   "collectives run side by side: the MiCS idea behind SMP's sharded data parallelism, which shards "
                   "over the smallest group that holds the states.")


def global_batch(choice: dict, devices: int, seq_len: int, micro_batch: int | None = None,
                 limit: int = GLOBAL_BATCH_LIMIT_TOKENS) -> str:
    """The chosen layout's global batch (a candidates row: its micro-batch and accumulation), against module 6's
    limit, and how far the cluster could grow before its smallest batch passes it."""
    tp = choice["tp"]
    micro_batch = micro_batch or choice.get("micro-batch", 1)
    accum = choice.get("grad accum", 1)
    replicas = devices // tp
    tokens = choice.get("global batch tokens") or global_batch_tokens(devices, tp, 1, micro_batch, seq_len, accum)
    smallest = global_batch_tokens(devices, tp, 1, micro_batch, seq_len)
    largest = int(limit // (micro_batch * seq_len / tp))
    verdict = "within" if tokens <= limit else "above"
    return (f"The global batch of this plan: {replicas} data-parallel replicas x micro-batch {micro_batch} x "
            f"{accum} accumulation step{'s' * (accum != 1)} x {seq_len:,} tokens = **{tokens:,} tokens "
            f"({tokens / 2**20:.2f}M) per optimizer step**. That is GPT-3's batch for the nearest model size, {verdict} "
            f"module 6's limit of {limit / 2**20:g}M tokens (Llama 2's batch). The smallest this layout can take is "
            f"one micro-batch per replica, {smallest:,} tokens. With sharded data parallelism every replica takes at "
            f"least that, so the smallest batch grows with the cluster: this layout reaches the limit at "
            f"{largest:,} GPUs. Past that, tensor parallelism (or pipeline stages) divides the replicas, the SMP v2 "
            "release post's case for TP on clusters of 256 nodes and more. The limit is part of the rule "
            "(`layout.choose(rows, max_global_batch_tokens=...)`).")


def interruptions(nodes: int, job_mtbf_hours: float, run_days: float) -> str:
    """How many interruptions a run of `run_days` on `nodes` nodes should expect."""
    return (f"module 07's job on {nodes} nodes: one interruption every {job_mtbf_hours:.0f} h "
            f"({job_mtbf_hours / 24:.1f} days); over its {run_days:.1f} days, about "
            f"{run_days * 24 / job_mtbf_hours:.1f} interruptions")


def _trend(values: list[float], flat_within: float) -> str:
    """How a series moves from its first to its last value: rises, falls or stays within `flat_within`."""
    first, last, top = values[0], values[-1], max(values)
    peak = values.index(top)
    if 0 < peak < len(values) - 1 and top > (1 + flat_within) * max(first, last):
        return f"peaks in the middle and ends at {last / first:.2f}x its first value"
    if abs(last / first - 1) <= flat_within:
        return f"stays within {100 * flat_within:.0f}% (x{last / first:.2f})"
    return f"{'rises' if last > first else 'falls'} to {last / first:.2f}x"


def serving_sweep(measured: dict[str, list[tuple[int, float, float]]], flat_within: float = 0.15) -> str:
    """What a load test measured, per server setting: `measured[label]` = [(clients, tokens_per_s, p95_s), ...]
    in the order of the levels. Says how throughput and p95 latency moved from the fewest clients to the most
    (flat only when within `flat_within`), and compares the settings at the most clients."""
    parts, last = [], {}
    for label, rows in measured.items():
        clients = [c for c, _, _ in rows]
        rates = [t for _, t, _ in rows]
        p95 = [1000 * p for _, _, p in rows]
        listed = ", ".join(f"{t:,.0f}" for t in rates)
        at = ", ".join(str(c) for c in clients[:-1]) + f" and {clients[-1]}" if len(clients) > 1 else str(clients[0])
        parts.append(f"**{label}**: {listed} tokens/s at {at} clients, so throughput {_trend(rates, flat_within)}. "
                     f"Its p95 latency goes from {p95[0]:,.0f} ms to {p95[-1]:,.0f} ms (x{p95[-1] / p95[0]:.1f}).")
        last[label] = (clients[-1], rates[-1], p95[-1])
    text = "Measured here. " + " ".join(parts)
    if len(last) == 2:
        (a, (n, ta, pa)), (b, (_, tb, pb)) = last.items()
        text += (f" At {n} clients {a} serves {ta / tb:.2f}x the tokens/s of {b}, at {pa / pb:.2f}x its p95 latency"
                 " (a CPU run of a tiny model: timings move from run to run).")
    return text
