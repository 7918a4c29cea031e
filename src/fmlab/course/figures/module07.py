"""Module 7's deck figures, and the run every other module's figures refer to: gpt-30b on 16 x ml.p4d.24xlarge.

Registered in fmlab.course.figures.FIGURES; the package's docstring says how figures are drawn and added.
"""

from __future__ import annotations

from fmlab.course.figures.canvas import log_bars, new_figure, usd
from fmlab.course.params import module7_plan
from fmlab.plan import catalog, compute
from fmlab.plan.layout import TrainingPlan, make_plan
from fmlab.plan.parallelism import ParallelConfig

# The module 7 run: gpt-30b on 16 x p4d.24xlarge (128 A100 40 GB), 300B tokens; MFU None: the predicted step
# (notebook 07's parameters, which a test holds these to).
MODEL, INSTANCE, INSTANCES, TOKENS, MFU = "gpt-30b", "ml.p4d.24xlarge", 16, 300e9, None
ATTENTION = "flash"  # FlashAttention / PyTorch SDPA: the attention scores are never stored
# (group, label, layout): the candidate layouts of gpt30b_memory, in the order drawn
GPT30B_LAYOUTS: tuple[tuple[str, str, ParallelConfig], ...] = (
    ("sharding", "full (128)", ParallelConfig(sharding="full")),
    ("sharding", "hybrid 8", ParallelConfig(sharding="hybrid", hybrid_shard_degree=8)),
    ("sharding", "hybrid 16", ParallelConfig(sharding="hybrid", hybrid_shard_degree=16)),
    ("sharding", "hybrid 32", ParallelConfig(sharding="hybrid", hybrid_shard_degree=32)),
    ("sharding", "hybrid 64", ParallelConfig(sharding="hybrid", hybrid_shard_degree=64)),
    ("full sharding + tensor parallel", "TP 2", ParallelConfig(sharding="full", tp=2)),
    ("full sharding + tensor parallel", "TP 4", ParallelConfig(sharding="full", tp=4)),
    ("full sharding + tensor parallel", "TP 8", ParallelConfig(sharding="full", tp=8)),
    ("full sharding + recomputation", "selective", ParallelConfig(sharding="full", activation_checkpointing="selective")),
    ("full sharding + recomputation", "full", ParallelConfig(sharding="full", activation_checkpointing="full")),
    ("full sharding + recomputation", "offload", ParallelConfig(sharding="full", activation_checkpointing="full",
                                                                activation_offloading=True)),
)
HYBRID_DEGREES = (1, 2, 4, 8, 16, 32, 64, 128)


_PARTS = (  # (legend label, keys of TrainingPlan.memory_breakdown_gb, colour)
    ("weights", ("weights", "compute_weights", "ddp_buckets"), "#4c72b0"),
    ("gradients", ("gradients",), "#55a868"),
    ("optimizer state", ("optimizer",), "#dd8452"),
    ("activations", ("activations_stored", "activations_working", "activations_logits"), "#8172b3"),
)


def gpt30b_plans(attention: str = ATTENTION) -> dict[str, TrainingPlan]:
    """The planner's TrainingPlan of every candidate layout of gpt30b_memory, by label (micro-batch 1)."""
    return {label: make_plan(MODEL, TOKENS, INSTANCE, INSTANCES, parallel=layout, mfu=MFU,
                             micro_batch=1, attention=attention, suggest=False)
            for _, label, layout in GPT30B_LAYOUTS}


def gpt30b_memory():
    """Memory per GPU (GB) of gpt-30b on 16 x ml.p4d.24xlarge for candidate layouts, stacked by part.

    Layouts: full sharding over the 128 GPUs; hybrid sharding within groups of 8, 16, 32 and 64; full sharding with
    tensor parallelism 2, 4 and 8; full sharding with selective or full recomputation, or offloading. Each bar is
    fmlab.plan.layout.make_plan(..., attention="flash", micro_batch=1), split into weights, gradients, optimizer
    state and activations. The dashed line is what a plan may fill (90% of 40 GB usable, less the planner's 5%
    headroom); layouts above it are hatched and pale, their labels red. Which of those that fit is chosen is a
    question of speed, not memory (notebook 07's predicted step): no bar is marked.
    """
    plans = gpt30b_plans()
    labels = list(plans)
    first = next(iter(plans.values()))
    usable, limit = first.usable_memory_gb, first.memory_limit_gb
    fig = new_figure(11, 5.2)
    ax = fig.subplots()
    x = list(range(len(labels)))
    bottom = [0.0] * len(labels)
    for name, keys, colour in _PARTS:
        values = [sum(p.memory_breakdown_gb[k] for k in keys) for p in plans.values()]
        for i, (value, plan) in enumerate(zip(values, plans.values(), strict=True)):
            fits = plan.fits
            ax.bar(i, value, 0.7, bottom=bottom[i], color=colour, alpha=1.0 if fits else 0.35,
                   hatch=None if fits else "//", edgecolor="white" if fits else colour, linewidth=0.6,
                   label=name if i == 0 else None)
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    ax.axhline(limit, color="black", linestyle="--", linewidth=1.2,
               label=f"what a plan may fill per GPU ({limit:.1f} GB: {usable:.0f} usable of "
                     f"{first.device_memory_gb:.0f}, less 5% headroom)")
    for i, plan in enumerate(plans.values()):
        verdict = "fits" if plan.fits else "does not fit"
        ax.annotate(f"{plan.memory_gb_per_device:.0f} GB\n{verdict}", (i, bottom[i]), ha="center", va="bottom",
                    fontsize=8, xytext=(0, 3), textcoords="offset points",
                    color="black" if plan.fits else "#b22222",
                    bbox={"facecolor": "white", "edgecolor": "none", "pad": 0.5, "alpha": 0.8})
    ax.set_xticks(x, [label.replace(" (", "\n(") for label in labels], fontsize=9)
    for tick, plan in zip(ax.get_xticklabels(), plans.values(), strict=True):
        tick.set_color("black" if plan.fits else "#b22222")
    # the three groups of candidates, named above their bars and separated by dotted lines
    groups: dict[str, list[int]] = {}
    for i, (group, _, _) in enumerate(GPT30B_LAYOUTS):
        groups.setdefault(group, []).append(i)
    top = max(bottom) * 1.25
    for n, (group, members) in enumerate(groups.items()):
        if n:
            ax.axvline(members[0] - 0.5, color="grey", linestyle=":", linewidth=1)
        ax.text((members[0] + members[-1]) / 2, top * 0.97, group, ha="center", va="top", fontsize=9, color="dimgrey")
    ax.set_ylim(0, top)
    ax.set_xlim(-0.6, len(labels) - 0.4)
    ax.set_ylabel("memory per GPU (GB)")
    ax.set_title(f"{MODEL} on {INSTANCES} x {INSTANCE} (128 A100 40 GB): memory per GPU by layout "
                 "(micro-batch 1, FlashAttention)", fontsize=11)
    ax.legend(fontsize=8, loc="center right", bbox_to_anchor=(1.0, 0.62))
    return fig


def gpt30b_ladder():
    """The phased scaling plan of gpt-30b (fmlab.plan.compute.phased_plan): days and cost of each phase.

    300B tokens at the module 7 run's predicted MFU, on up to 16 x ml.p4d.24xlarge: base, medium, large, then the
    full run (jumbo), each
    on a larger model, more data and more GPUs. Two bar charts on log scales, days on the left and on-demand
    cost on the right, each bar labelled with its value.
    """
    mfu = module7_plan().mfu
    phases = compute.phased_plan(MODEL, TOKENS, INSTANCE, INSTANCES, mfu)
    names = [f"{p.name}\n{p.estimate.params / 1e9:.2g}B params\n{p.data_fraction:.0%} of data\n"
             f"{p.devices} GPU{'s' if p.devices > 1 else ''}" for p in phases]
    fig = new_figure(11, 4.6)
    left, right = fig.subplots(1, 2)
    days = [p.estimate.days for p in phases]
    costs = [p.estimate.cost_usd for p in phases]
    for ax, values, colour, text, ylabel in (
            (left, days, "#4c72b0", lambda v: f"{v:.2g} d" if v < 10 else f"{v:.0f} d", "time (days, log scale)"),
            (right, costs, "#c44e52", usd, "on-demand cost (USD, log scale)")):
        log_bars(ax, values, names, colour, text, ylabel, width=0.65, headroom=4.0)
    left.set_title("days per phase", fontsize=10)
    right.set_title("cost per phase", fontsize=10)
    fig.suptitle(f"{MODEL} phased plan: {TOKENS / 1e9:.0f}B tokens at MFU {mfu:.0%} (predicted), up to {INSTANCES} x {INSTANCE}",
                 fontsize=11)
    return fig


def hybrid_traffic():
    """Bytes per training step against the hybrid shard degree D, gpt-30b on 128 GPUs (16 nodes).

    fmlab.plan.scaling.hybrid_traffic for D = 1 (plain data parallelism), 2, 4, ... 128 (full sharding):
    bars of gigabytes each GPU sends inside its node (NVLink) and each node sends out over EFA (bf16 gathers,
    fp32 reductions, as the engine runs FSDP2); on the right axis, the model states each GPU keeps (16 bytes per
    parameter / D). A shard group within one node (D <= 8) keeps its all-gathers on NVLink; a larger one sends
    them over EFA, about one GPU's ring traffic per node.
    """
    from fmlab.plan.scaling import hybrid_traffic as traffic

    inst = catalog.instance(INSTANCE)
    params = compute.param_count(catalog.model(MODEL))
    world = INSTANCES * inst.accelerators
    rows = [traffic(params, world, d, gpus_per_node=inst.accelerators) for d in HYBRID_DEGREES]
    fig = new_figure(10, 4.2)
    ax = fig.subplots()
    x = list(range(len(HYBRID_DEGREES)))
    nvlink = [r["intra_node_bytes"] / 1e9 for r in rows]
    efa = [r["node_efa_bytes"] / 1e9 for r in rows]
    ax.bar([i - 0.19 for i in x], nvlink, 0.38, color="#55a868", label="each GPU, inside the node (NVLink)")
    ax.bar([i + 0.19 for i in x], efa, 0.38, color="#c44e52", label="each node, out over EFA")
    for i in x:
        for dx, v in ((-0.19, nvlink[i]), (0.19, efa[i])):
            if v:
                ax.annotate(f"{v:.0f}", (i + dx, v), ha="center", va="bottom", fontsize=8, xytext=(0, 2),
                            textcoords="offset points")
    notes = {1: "\n(no sharding)", inst.accelerators: "\n(one node)", world: "\n(full)"}
    ax.set_xticks(x, [f"{d}{notes.get(d, '')}" for d in HYBRID_DEGREES])
    ax.set_xlabel("hybrid shard degree D (GPUs that share one copy of the model states)")
    ax.set_ylabel("GB sent per step")
    ax.set_ylim(0, max(nvlink + efa) * 1.5)
    twin = ax.twinx()
    states = [r["state_bytes"] / 1e9 for r in rows]
    twin.plot(x, states, "o:", color="black", label="model states per GPU (GB, right axis)")
    twin.set_yscale("log")
    twin.set_ylabel("model states per GPU (GB, log scale)")
    handles = ax.get_legend_handles_labels()
    more = twin.get_legend_handles_labels()
    ax.legend(handles[0] + more[0], handles[1] + more[1], fontsize=8, loc="upper right")
    ax.set_title(f"{MODEL} on {world} GPUs ({INSTANCES} x {INSTANCE}): traffic per step vs hybrid shard degree",
                 fontsize=11)
    return fig
