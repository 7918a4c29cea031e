"""Sentences that notebooks render from computed values, so that a changed parameter never leaves the prose wrong.

    from IPython.display import Markdown, display
    from fmlab.course import prose
    display(Markdown(prose.layout_reason(rows, choice, params)))

Each function takes the numbers a notebook has just computed and returns Markdown. Used by notebooks 07
(the layout, its traffic and its global batch) and 08 (interruptions over the run); tests in
tests/course/test_prose.py change a parameter and check that the sentence changes with it.
"""

from __future__ import annotations

from fmlab.parallel.scaling import hybrid_traffic
from fmlab.plan.layout import GLOBAL_BATCH_LIMIT_TOKENS, RECOMPUTE_CHOICES, global_batch_tokens


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
            f"the {16 * params / 1e9:,.0f} GB of model states are {choice['states GB']:.1f} GB per GPU, which "
            f"leaves room for the activations {recompute} ({choice['GB per device']:.1f} GB per GPU in all).")
    replicas = world // degree // tp if degree else 1
    if replicas > 1:
        text += (f" The cluster holds {replicas} such groups, each a replica of the model that all-reduces its "
                 "gradient shards with the others.")
    smaller = sorted({r["shard degree"] for r in rows if r["shard degree"] < degree and r["tp"] == tp})
    notes = []
    for d in smaller:
        least, states = _least_recompute(rows, d, tp)
        notes.append(f"groups of {d} GPUs fit only with {least} recomputation" if least
                     else f"groups of {d} GPUs: no layout fits (the states alone are {states:.1f} GB per GPU)")
    if notes:
        text += " Smaller groups: " + "; ".join(notes) + "."
    return text


def layout_traffic(params: float, world: int, shard_degree: int, gpus_per_node: int = 8) -> str:
    """Bytes per GPU and step in the chosen group against sharding over the whole cluster (module 5's model),
    and why the smaller group is preferred all the same."""
    mine, whole = hybrid_traffic(params, world, shard_degree, gpus_per_node), hybrid_traffic(params, world, world,
                                                                                                gpus_per_node)
    size = params * 2  # bf16 bytes of the model
    group = 3 * (shard_degree - 1) / shard_degree * size
    full = 3 * (world - 1) / world * size
    cross = mine["inter_node_bytes"] - (0 if shard_degree <= gpus_per_node else group)
    return (f"Bytes are not the reason for the smaller group. Per GPU and step, the group of {shard_degree} "
            f"gathers and reduce-scatters {group / 1e9:,.1f} GB ((D-1)/D of every layer, three times), the whole "
            f"cluster of {world} {full / 1e9:,.1f} GB: the same within {abs(full - group) / full:.1%}; hybrid "
            f"sharding adds {cross / 1e9:,.2f} GB of cross-replica all-reduce (module 5's traffic model: "
            f"{mine['inter_node_bytes'] / 1e9:,.1f} GB between nodes against {whole['inter_node_bytes'] / 1e9:,.1f}). "
            f"The reason is the size of each collective group: a ring over {shard_degree} GPUs has "
            f"{shard_degree - 1} latency steps instead of {world - 1}, every layer waits for the slowest of "
            f"{shard_degree} GPUs rather than of {world}, and the groups' collectives run side by side (the MiCS "
            "idea behind SMP's sharded data parallelism: shard over the smallest group that holds the states).")


def global_batch(choice: dict, devices: int, seq_len: int, micro_batch: int = 1,
                 limit: int = GLOBAL_BATCH_LIMIT_TOKENS) -> str:
    """The chosen layout's global batch, against module 6's limit, and how far the cluster could grow."""
    tp = choice["tp"]
    tokens = global_batch_tokens(devices, tp, 1, micro_batch, seq_len)
    replicas = devices // tp
    per_gpu = micro_batch * seq_len / tp
    largest = int(limit // per_gpu)
    verdict = ("within" if tokens <= limit else "above")
    return (f"The global batch of this layout: {replicas} data-parallel replicas x micro-batch {micro_batch} x "
            f"{seq_len:,} tokens = **{tokens:,} tokens ({tokens / 2**20:.2f}M) per optimizer step**, with no "
            f"gradient accumulation: {verdict} module 6's limit of {limit / 2**20:g}M tokens (Llama 2's batch). "
            f"With sharded data parallelism every replica takes at least one sequence, so the batch grows with "
            f"the cluster: this layout reaches the limit at {largest:,} GPUs. Past that, tensor parallelism (or "
            "pipeline stages) divides the replicas, the SMP v2 release post's case for TP on clusters of 256 "
            "nodes and more. The limit is part of the rule (`layout.choose(rows, max_global_batch_tokens=...)`).")


def interruptions(nodes: int, job_mtbf_hours: float, run_days: float) -> str:
    """How many interruptions a run of `run_days` on `nodes` nodes should expect."""
    return (f"module 07's job on {nodes} nodes: one interruption every {job_mtbf_hours:.0f} h "
            f"({job_mtbf_hours / 24:.1f} days); over its {run_days:.1f} days, about "
            f"{run_days * 24 / job_mtbf_hours:.1f} interruptions")
