"""Figures the slide decks embed, drawn at build time from the planner: write `![caption](figure:NAME)` in a deck.

    from fmlab.course.figures import FIGURES, render_svg
    fig = FIGURES["gpt30b_memory"]()                  # a matplotlib Figure (no pyplot: safe anywhere)
    render_svg("gpt30b_memory", "build/slides/figures/gpt30b_memory.svg")

`FIGURES` maps a name to a function that takes no argument and returns a `matplotlib.figure.Figure`; each
function's docstring says what it shows. Every figure is computed from the package's own functions, never from
numbers typed here: `fmlab.plan` (memory per layout, the phased plan, reliability), the arithmetic of
`fmlab.plan.scaling` and `fmlab.plan.traffic` (hybrid traffic, pipeline bubbles, parameter server against
ring all-reduce and Herring), and, for `lr_sweep` only, a few seconds of real training of the tiny model with
`fmlab.train` (the notebook 03 sweep, deterministic on a CPU). No network. Module 8's two figures,
`job_mtbf` and `checkpoint_interval`, come from `fmlab.plan.reliability` (the latter drawn by
`fmlab.course.plots.wasted_time_vs_interval`, the notebook's plot, on the figure's axes). Module 10's two,
`eval_curve` and `serving_latency`, are measurements: they draw the figures recorded in fmlab/serve/measured.json
by benchmarks/bench_serving.py (still no training or serving at build time). To add one, write the function
here and register it in FIGURES; `python -m fmlab slides` draws the figures the decks reference.

In a notebook, `display(FIGURES[name]())` draws the figure whether or not pyplot was imported: each Figure carries
its own PNG (`_repr_png_`), where a bare matplotlib Figure shows only as the text `<Figure size ...>` without
pyplot's inline backend (notebooks 04 and 11 printed that until 2026-11-26; fmlab.course.run.bare_figures checks).

`render_svg` keeps text as paths (the SVG needs no font) and writes no date, with a fixed id salt, so the
same figure gives the same bytes on every build.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

from fmlab.course.params import module7_plan
from fmlab.plan import catalog, compute, reliability
from fmlab.plan.layout import TrainingPlan, checkpoint_gb, make_plan
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

# Module 8: checkpointing the module 7 run (the assumptions of notebook 08)
WRITE_GB_PER_S_PER_NODE = 1.0  # each node writes its checkpoint shards to its disk at 1 GB/s
S3_GB_PER_S_PER_NODE = 1.25  # each node reads from S3 at 10 Gbit/s
KEEP_CHECKPOINTS = 3  # keep-last-N: what a restart copies back to every instance
MTBF_NODES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048)

# Module 1: the notebook's memory-per-layout figure (notebooks/01_when_to_pretrain.ipynb, the same layouts)
LAYOUT_MEMORY: tuple[tuple[str, ParallelConfig], ...] = (
    ("DDP", ParallelConfig(sharding="none")),
    ("ZeRO-1", ParallelConfig(sharding="zero1")),
    ("ZeRO-2", ParallelConfig(sharding="zero2")),
    ("FSDP full", ParallelConfig(sharding="full")),
    ("FSDP full\n+ recompute", ParallelConfig(sharding="full", activation_checkpointing="full")),
    ("hybrid 8\n+ recompute", ParallelConfig(sharding="hybrid", hybrid_shard_degree=8, activation_checkpointing="full")),
    ("TP 8 + recompute", ParallelConfig(tp=8, activation_checkpointing="full")),
)
# Module 2: models whose Chinchilla-optimal data the deck sizes
DATA_MODELS = ("tiny", "llama2-7b", "gpt-30b", "llama2-70b")
# Module 3: the notebook 03 sweep (its default parameters): tiny model, 30 steps, 4 learning rates x 2 seeds
SWEEP_LRS, SWEEP_SEEDS, SWEEP_STEPS = (1e-3, 3e-3, 1e-2, 3e-2), (0, 1), 30
SWEEP_CONFIG = {"micro_batch": 8, "warmup_steps": 3}  # notebook 03's JobSpec hyperparameters
# Module 4: data-parallel traffic of llama2-7b's bf16 gradients on p4d instances (notebook 04, section 2)
DP_MODEL, DP_BYTES_PER_VALUE = "llama2-7b", 2
DP_INSTANCE_COUNTS = (2, 4, 8, 16, 32, 64)
# Module 6: the notebook's pipeline (notebooks/06_tensor_parallel.ipynb parameters)
PIPELINE_STAGES, PIPELINE_MICROBATCHES = 6, 4
BUBBLE_MICROBATCHES = (1, 2, 4, 8, 16, 32, 64)

_PARTS = (  # (legend label, keys of TrainingPlan.memory_breakdown_gb, colour)
    ("weights", ("weights", "compute_weights", "ddp_buckets"), "#4c72b0"),
    ("gradients", ("gradients",), "#55a868"),
    ("optimizer state", ("optimizer",), "#dd8452"),
    ("activations", ("activations_stored", "activations_working", "activations_logits"), "#8172b3"),
)


def _notebook_figure_class():
    """A matplotlib Figure that a notebook draws by itself: IPython shows a bare Figure only as the text
    `<Figure size ...>` unless pyplot was imported (its inline backend registers the image formatter); this one
    carries its own `_repr_png_`, so `display(fig)` or a cell's last line draws it either way. No pyplot."""
    from matplotlib.figure import Figure

    class NotebookFigure(Figure):
        def _repr_png_(self) -> bytes:
            import io

            buffer = io.BytesIO()
            self.savefig(buffer, format="png", dpi=100)
            return buffer.getvalue()

    return NotebookFigure


@functools.cache
def _figure_class():
    return _notebook_figure_class()


def _drawable(fig):
    """A Figure built below this floor (fmlab.serve.measured), made one that draws itself in a notebook too."""
    fig.__class__ = _figure_class()  # the subclass adds a method only: same state, same drawing
    return fig


def _figure(width: float, height: float, layout: str | None = "constrained"):
    return _figure_class()(figsize=(width, height), layout=layout)


def _usd(x: float) -> str:
    if x >= 1e6:
        return f"${x / 1e6:.2g}M"
    if x >= 1e3:
        return f"${x / 1e3:,.0f}k" if x >= 1e4 else f"${x / 1e3:.1f}k"
    return f"${x:,.0f}"


def _si(x: float, unit: str = "") -> str:
    """3.16e6 -> 3.2M, 1.35e11 -> 135B (with unit "B": 135 GB), 2.8e12 -> 2.8T (2.8 TB)."""
    prefixes = ((1e12, "T"), (1e9, "G" if unit else "B"), (1e6, "M"), (1e3, "k"))
    scale, prefix = next(((v, p) for v, p in prefixes if abs(x) >= v), (1.0, ""))
    return f"{x / scale:.3g}{' ' if unit else ''}{prefix}{unit}"


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
    fig = _figure(11, 5.2)
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
    fig = _figure(11, 4.6)
    left, right = fig.subplots(1, 2)
    days = [p.estimate.days for p in phases]
    costs = [p.estimate.cost_usd for p in phases]
    for ax, values, colour, text, ylabel in (
            (left, days, "#4c72b0", lambda v: f"{v:.2g} d" if v < 10 else f"{v:.0f} d", "time (days, log scale)"),
            (right, costs, "#c44e52", _usd, "on-demand cost (USD, log scale)")):
        ax.bar(range(len(phases)), values, 0.65, color=colour)
        ax.set_yscale("log")
        ax.set_ylim(min(values) / 3, max(values) * 4)
        ax.set_xticks(range(len(phases)), names, fontsize=8)
        ax.set_ylabel(ylabel)
        for i, v in enumerate(values):
            ax.annotate(text(v), (i, v), ha="center", va="bottom", fontsize=9, xytext=(0, 2), textcoords="offset points")
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
    fig = _figure(10, 4.2)
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


def checkpoint_costs() -> dict[str, float]:
    """The module 7 run's checkpoint arithmetic (fmlab.plan): size, save and restart time, job MTBF, Daly.

    Keys: state_gb (fp32 weights + Adam moments), save_s (each node writes its share at
    WRITE_GB_PER_S_PER_NODE), restart_s (every node copies KEEP_CHECKPOINTS checkpoints back from S3 at
    S3_GB_PER_S_PER_NODE: SageMaker's checkpoint sync deletes in S3 what the script prunes, so the prefix holds the
    kept checkpoints; fmlab.sandbox.host.sync_folder does the same, tests/sandbox/test_sandbox.py), mtbf_h (the 16-node job's mean time between interruptions, Llama 3's record) and
    daly_h (the checkpoint interval that wastes least).
    """
    state_gb = checkpoint_gb(compute.param_count(catalog.model(MODEL)))["training"]
    save_h = reliability.transfer_hours(state_gb / INSTANCES, WRITE_GB_PER_S_PER_NODE)
    restart_h = reliability.transfer_hours(KEEP_CHECKPOINTS * state_gb, S3_GB_PER_S_PER_NODE)
    mtbf_h = reliability.job_mtbf_hours(INSTANCES)
    return {"state_gb": state_gb, "save_s": save_h * 3600, "restart_s": restart_h * 3600, "mtbf_h": mtbf_h,
            "daly_h": reliability.daly_interval_hours(save_h, mtbf_h)}


def _duration(hours: float) -> str:
    return f"{hours:.1f} h" if hours < 48 else f"{hours:,.0f} h = {hours / 24:.0f} days"


def job_mtbf():
    """Mean time between interruptions of a synchronous job against its number of nodes, 1 to 2,048, log-log.

    From the Llama 3 record (fmlab.plan.reliability.LLAMA3_405B: 419 unexpected interruptions in 54 days on 2,048
    nodes of 8 H100s): one node is interrupted every node_mtbf_hours, and a job on N nodes, which stops when any
    one of them does, every node_mtbf_hours / N. Marked: one node, the module 7 run on 16 nodes and Llama 3's
    2,048 nodes; dotted lines at a day, a week and the length of the module 7 run.
    """
    rec = reliability.LLAMA3_405B
    hours = [reliability.job_mtbf_hours(n) for n in MTBF_NODES]
    fig = _figure(10, 4.6)
    ax = fig.subplots()
    ax.plot(MTBF_NODES, hours, "o-", color="#4c72b0", markersize=4,
            label=f"job MTBF = one node's ({rec.node_mtbf_hours / 24:.0f} days) / number of nodes")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(MTBF_NODES, [f"{n:,}" for n in MTBF_NODES])
    run_h = module7_plan().days * 24
    for h, text in ((24, "1 day"), (24 * 7, "1 week"), (run_h, f"the {run_h / 24:.0f}-day {MODEL} run")):
        ax.axhline(h, color="grey", linestyle=":", linewidth=1)
        ax.text(MTBF_NODES[-1] * 1.15, h, text, va="center", ha="left", fontsize=8, color="dimgrey")
    marks = ((1, "one node", "left", (8, 4)),
             (INSTANCES, f"{INSTANCES} nodes ({MODEL}, module 7)", "left", (8, 6)),
             (rec.gpus // rec.gpus_per_node, f"{rec.gpus // rec.gpus_per_node:,} nodes (Llama 3)", "right", (-8, 10)))
    for n, text, align, offset in marks:
        h = reliability.job_mtbf_hours(n)
        ax.plot([n], [h], "o", color="#c44e52", markersize=8, zorder=3)
        ax.annotate(f"{text}:\none interruption every {_duration(h)}", (n, h), xytext=offset,
                    textcoords="offset points", ha=align, va="bottom", fontsize=9, fontweight="bold",
                    bbox={"facecolor": "white", "edgecolor": "none", "pad": 0.5, "alpha": 0.85})
    ax.set_xlim(0.8, MTBF_NODES[-1] * 1.1)
    ax.set_ylim(min(hours) / 2, max(hours) * 4)
    ax.set_yticks([1, 10, 100, 1000, 10000], ["1", "10", "100", "1,000", "10,000"])
    ax.minorticks_off()
    ax.set_xlabel("nodes in the job (8 GPUs each; log scale)")
    ax.set_ylabel("mean time between interruptions (hours, log scale)")
    ax.set_title(f"Any node stops the whole job: Llama 3's record, {rec.unexpected_interruptions} unexpected "
                 f"interruptions in {rec.days:.0f} days on {rec.gpus:,} GPUs", fontsize=11)
    ax.legend(fontsize=8, loc="lower left")
    return fig


def checkpoint_interval():
    """Share of wall-clock time lost against the checkpoint interval, gpt-30b on 16 x ml.p4d.24xlarge.

    The save time is the training state (fmlab.plan.layout.checkpoint_gb) split over the 16 nodes, each writing at
    1 GB/s; the job's mean time between interruptions is that of 16 nodes (fmlab.plan.reliability, Llama 3's
    record); each restart first copies the 3 kept checkpoints back to every node at 1.25 GB/s. The curve is
    fmlab.course.plots.wasted_time_vs_interval (saving + redoing lost work + restarting); marked: Daly's optimum
    and AWS's best-practice range, every 1 to 3 hours (shaded), with its ends.
    """
    from fmlab.course.plots import wasted_time_vs_interval

    c = checkpoint_costs()
    lo, hi = reliability.BEST_PRACTICE_INTERVAL_HOURS
    fig = _figure(10, 4.6)
    ax = fig.subplots()
    ax.axvspan(lo, hi, color="#55a868", alpha=0.12, label=f"best practice: every {lo:g} to {hi:g} hours")
    wasted_time_vs_interval(c["save_s"] / 3600, c["mtbf_h"], restart_hours=c["restart_s"] / 3600,
                            marks={f"best practice, {lo:g} h": lo, f"best practice, {hi:g} h": hi}, ax=ax)
    ax.set_ylim(0, None)
    ticks = {5 / 60: "5 min", 0.25: "15 min", 1.0: "1 h", 3.0: "3 h", 10.0: "10 h", 24.0: "1 day", 48.0: "2 days"}
    ax.set_xticks(list(ticks), list(ticks.values()))
    ax.minorticks_off()
    ax.set_xlabel("checkpoint interval (log scale)")
    ax.set_title(f"{MODEL} on {INSTANCES} x {INSTANCE}: {c['state_gb']:.0f} GB checkpoint saved in "
                 f"{c['save_s']:.0f} s, restart {c['restart_s'] / 60:.0f} min, one interruption every "
                 f"{c['mtbf_h']:.0f} h", fontsize=11)
    ax.legend(fontsize=9, loc="upper center")
    return fig


def layout_memory():
    """Memory per device of gpt-30b on 16 x ml.p4d.24xlarge for seven layouts: notebook 01's figure.

    fmlab.course.plots.memory_breakdown (the notebook's own plot) on fmlab.plan.layout.make_plan: DDP, ZeRO-1,
    ZeRO-2, FSDP full sharding, FSDP with full recomputation, hybrid groups of 8 with recomputation and tensor
    parallelism 8 with recomputation; stacked by weights, gradients, optimizer state and activations, with the
    usable device memory dashed; a bar taller than three times the usable memory is cut and labelled.
    """
    from fmlab.course.plots import memory_breakdown

    fig = _figure(10, 4.6, layout=None)
    memory_breakdown(MODEL, INSTANCE, INSTANCES, dict(LAYOUT_MEMORY), ax=fig.subplots())
    return fig


def data_volume():
    """Chinchilla-optimal training tokens, and the bytes of their packed token shards, for four models.

    For tiny, llama2-7b, gpt-30b and llama2-70b: fmlab.plan.compute.chinchilla_tokens (about 20 tokens per
    parameter, Hoffmann et al. 2022) of fmlab.plan.compute.param_count, and the bytes of those tokens stored as
    uint16 or uint32 ids (fmlab.data.token_dtype of the model's vocabulary). Two bar charts on log scales.
    """
    from fmlab.data import token_dtype

    params = [compute.param_count(catalog.model(name)) for name in DATA_MODELS]
    tokens = [compute.chinchilla_tokens(p) for p in params]
    dtypes = [token_dtype(catalog.model(name).vocab) for name in DATA_MODELS]
    shard_bytes = [t * (2 if d == "uint16" else 4) for t, d in zip(tokens, dtypes, strict=True)]
    fig = _figure(10, 4.0)
    left, right = fig.subplots(1, 2)
    names = [f"{n}\n{_si(p)} params" for n, p in zip(DATA_MODELS, params, strict=True)]
    for ax, values, colour, text, ylabel in (
            (left, tokens, "#4c72b0", _si, "training tokens (log scale)"),
            (right, shard_bytes, "#dd8452", lambda v: _si(v, "B"), "bytes of packed token shards (log scale)")):
        ax.bar(range(len(values)), values, 0.6, color=colour)
        ax.set_yscale("log")
        ax.set_ylim(min(values) / 3, max(values) * 6)
        ax.set_xticks(range(len(values)), names, fontsize=8)
        ax.set_ylabel(ylabel)
        for i, v in enumerate(values):
            ax.annotate(text(v), (i, v), ha="center", va="bottom", fontsize=9, xytext=(0, 2), textcoords="offset points")
    left.set_title("Chinchilla-optimal tokens (20 per parameter)", fontsize=10)
    right.set_title(f"as token ids ({', '.join(sorted(set(dtypes)))})", fontsize=10)
    return fig


@functools.cache
def sweep_losses() -> dict[tuple[float, int], dict[int, float]]:
    """The notebook 03 sweep trained here: {(lr, seed): {step: loss}} of the tiny model.

    fmlab.train.loop.train on the course dataset, SWEEP_STEPS steps per run with notebook 03's settings, on one
    CPU thread as each sandbox job runs (about 10 s in all): the same losses as the notebook's jobs (same data,
    seed and code). Each run is trained once per version of the code (fmlab.train.cache.losses_cached), so
    `make lab`, `make slides` and the tests that draw the figure share it; a second call in a process returns the
    same dict."""
    import torch

    from fmlab.data import course_dataset
    from fmlab.train.cache import losses_cached
    from fmlab.train.config import TrainConfig

    data = str(course_dataset(seq_len=TrainConfig.seq_len, vocab_size=catalog.model("tiny").vocab))
    losses = {}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model: more threads only contend (and a shared machine slows ten-fold)
    try:
        for lr in SWEEP_LRS:
            for seed in SWEEP_SEEDS:
                cfg = TrainConfig(data=data, max_steps=SWEEP_STEPS, lr=lr, seed=seed, log_every=1,
                                  tensorboard=False, **SWEEP_CONFIG)
                losses[(lr, seed)] = losses_cached(cfg)
    finally:
        torch.set_num_threads(threads)
    return losses


def lr_sweep():
    """Training loss of the tiny model for 4 learning rates x 2 seeds, 30 steps each: notebook 03's sweep.

    Trained at build time with fmlab.train (a few seconds on a CPU; sweep_losses). One colour per learning rate,
    solid for seed 0 and dotted for seed 1; the shaded band on the right is the window the notebook scores (the
    last sixth of the steps). The gap between seeds of one learning rate is the noise any "best" must beat.
    """
    losses = sweep_losses()
    fig = _figure(9, 4.4)
    ax = fig.subplots()
    colours = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860")
    last = max(1, SWEEP_STEPS // 6)
    ax.axvspan(SWEEP_STEPS - last + 0.5, SWEEP_STEPS + 0.5, color="grey", alpha=0.12,
               label=f"scored window: last {last} steps")
    for i, lr in enumerate(SWEEP_LRS):
        for seed in SWEEP_SEEDS:
            curve = losses[(lr, seed)]
            ax.plot(list(curve), list(curve.values()), color=colours[i % len(colours)],
                    linestyle="-" if seed == SWEEP_SEEDS[0] else ":", linewidth=1.4,
                    label=f"lr = {lr:g}" if seed == SWEEP_SEEDS[0] else None)
    ax.set_xlim(1, SWEEP_STEPS + 0.5)
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("training loss (nats per token)")
    ax.set_title(f"Learning-rate sweep of the tiny model: {len(SWEEP_LRS)} learning rates x {len(SWEEP_SEEDS)} seeds "
                 f"(solid: seed {SWEEP_SEEDS[0]}, dotted: seed {SWEEP_SEEDS[-1]}), {SWEEP_STEPS} steps", fontsize=10)
    ax.legend(fontsize=8, loc="upper right")
    return fig


def data_parallel_traffic():
    """Bytes per training step on the busiest network link, and sequential network steps, against the cluster.

    llama2-7b's bf16 gradients (fmlab.plan.compute.param_count) on 2 to 64 ml.p4d.24xlarge (8 GPUs each). Left,
    GB per step from fmlab.plan.traffic: one classic parameter server's link (parameter_server_bytes, every GPU
    pulls the model), a ring all-reduce over all the GPUs (ring_allreduce_bytes: what one instance's EFA carries),
    Herring as SMDDP runs it, server shards on the instances' CPUs (herring_bytes, colocated), and Herring with
    the shards on separate CPU machines (herring_bytes, colocated=False). Right, sequential network steps per
    reduction: the ring's 2(W-1) against Herring's 2 hops (ring_allreduce_steps, HerringTraffic.hops).
    """
    from fmlab.plan import traffic

    params = compute.param_count(catalog.model(DP_MODEL))
    gpus = catalog.instance(INSTANCE).accelerators
    counts = list(DP_INSTANCE_COUNTS)
    workers = [n * gpus for n in counts]
    b = DP_BYTES_PER_VALUE
    lines = (
        ("parameter server, 1 server (its link)", [traffic.parameter_server_bytes(params, b, w) for w in workers],
         "o-", "#8172b3"),
        ("ring all-reduce over all GPUs (one instance's EFA)", [traffic.ring_allreduce_bytes(params, b, w)
                                                                for w in workers], "^-", "#c44e52"),
        ("Herring / SMDDP: shards on the instances' CPUs", [traffic.herring_bytes(params, b, n).network_sent
                                                            for n in counts], "s-", "#4c72b0"),
        ("Herring, shards on separate CPU machines", [traffic.herring_bytes(params, b, n, colocated=False).network_sent
                                                      for n in counts], "D--", "#55a868"),
    )
    fig = _figure(11, 4.4)
    left, right = fig.subplots(1, 2, width_ratios=(1.6, 1))
    for label, values, style, colour in lines:
        left.plot(counts, [v / 1e9 for v in values], style, color=colour, label=label, markersize=5)
    left.set_xscale("log", base=2)
    left.set_yscale("log")
    left.set_xticks(counts, [f"{n}\n({n * gpus} GPUs)" for n in counts], fontsize=8)
    left.minorticks_off()
    left.set_xlabel(f"{INSTANCE} instances")
    left.set_ylabel("GB sent per step (decimal, log scale)")
    left.set_title(f"{DP_MODEL}, bf16 gradients ({params * b / 1e9:.1f} GB): bytes on the busiest link", fontsize=10)
    left.legend(fontsize=8, loc="center right")
    ring_steps = [traffic.ring_allreduce_steps(w) for w in workers]
    hops = [traffic.herring_bytes(params, b, n).hops for n in counts]
    right.plot(counts, ring_steps, "^-", color="#c44e52", label="ring all-reduce: 2(W-1) steps")
    right.plot(counts, hops, "s-", color="#4c72b0", label="Herring: 2 hops (to the server, back)")
    right.set_xscale("log", base=2)
    right.set_yscale("log")
    right.set_xticks(counts, [str(n) for n in counts], fontsize=8)
    right.minorticks_off()
    right.set_xlabel(f"{INSTANCE} instances")
    right.set_ylabel("sequential network steps (log scale)")
    right.set_title("latency: steps one reduction waits on", fontsize=10)
    right.legend(fontsize=8, loc="center right")
    return fig


def pipeline_schedule():
    """The GPipe schedule of 6 stages and 4 microbatches, and the pipeline bubble against the microbatches.

    Top: every forward (F) and backward (B, twice a forward's time) slot of fmlab.plan.scaling.gpipe_schedule,
    one row per stage; the empty triangles are the bubble. Bottom: the bubble as a share of the compute time,
    fmlab.plan.scaling.bubble_fraction = (p - 1) / (v m), for 1 to 64 microbatches, plain (v = 1) and
    interleaved with 2 chunks per GPU (v = 2) (Narayanan et al. 2021). Notebook 06's parameters.
    """
    from fmlab.plan.scaling import bubble_fraction, gpipe_schedule

    p, m = PIPELINE_STAGES, PIPELINE_MICROBATCHES
    fig = _figure(10, 5.6)
    top, bottom = fig.subplots(2, 1, height_ratios=(1.3, 1))
    for slot in gpipe_schedule(p, m):
        colour = "#4c72b0" if slot["kind"] == "F" else "#dd8452"
        top.barh(slot["stage"], slot["length"], left=slot["start"], color=colour, edgecolor="white")
        top.text(slot["start"] + slot["length"] / 2, slot["stage"], f"{slot['kind']}{slot['microbatch']}",
                 ha="center", va="center", fontsize=7, color="white")
    top.invert_yaxis()
    top.set_yticks(range(p), [f"stage {s}" for s in range(p)], fontsize=8)
    top.set_xlabel("time (one microbatch's forward on one stage = 1)")
    top.set_title(f"GPipe schedule, {p} stages x {m} microbatches (F forward, B backward): bubble "
                  f"{bubble_fraction(p, m):.0%} of the compute time", fontsize=10)
    for v, style in ((1, "o-"), (2, "s--")):
        values = [100 * bubble_fraction(p, k, v) for k in BUBBLE_MICROBATCHES]
        bottom.plot(BUBBLE_MICROBATCHES, values, style, label="GPipe / 1F1B" if v == 1 else "interleaved, 2 chunks per GPU")
        if v == 1:
            for k, value in zip(BUBBLE_MICROBATCHES, values, strict=True):
                bottom.annotate(f"{value:.0f}%", (k, value), ha="left", va="bottom", fontsize=8, xytext=(3, 2),
                                textcoords="offset points")
    bottom.set_xscale("log", base=2)
    bottom.set_yscale("log")
    bottom.set_xticks(BUBBLE_MICROBATCHES, [str(k) for k in BUBBLE_MICROBATCHES])
    bottom.minorticks_off()
    bottom.set_xlabel("microbatches per step (m)")
    bottom.set_ylabel("bubble, % of compute (log)")
    bottom.set_title(f"bubble with {p} stages: (p - 1) / (v m)", fontsize=10)
    bottom.legend(fontsize=8)
    return fig


TRAINIUM_CHOICES = ("ml.trn1.32xlarge", "ml.trn2.48xlarge", "ml.p4d.24xlarge", "ml.p5.48xlarge")


def trainium_choice():
    """Module 9's choice: days and on-demand cost of Llama 2 70B on 100B tokens with 8 instances of each kind at
    40% MFU (fmlab.plan.compute.estimate_run, notebook 09's comparison). An instance with no published price
    (trn2) shows its days and "no price" instead of a cost."""
    import math

    from fmlab.plan import catalog, compute

    runs = {name: compute.estimate_run("llama2-70b", 100e9, name, 8, 0.4) for name in TRAINIUM_CHOICES}
    fig = _figure(10, 3.8)
    left, right = fig.subplots(1, 2)
    labels = [f"{name.removeprefix('ml.').split('.')[0]}\n{catalog.INSTANCES[name].accelerator}" for name in runs]
    days = [run.days for run in runs.values()]
    left.bar(labels, days, color="#4c72b0")
    for i, d in enumerate(days):
        left.annotate(f"{d:.0f}", (i, d), ha="center", va="bottom", fontsize=8)
    left.set_ylabel("days")
    left.set_title("Llama 2 70B, 100B tokens, 8 instances, MFU 40%", fontsize=10)
    costs = [run.cost_usd / 1e3 for run in runs.values()]
    right.bar(labels, [c if math.isfinite(c) else 0 for c in costs], color="#dd8452")
    for i, c in enumerate(costs):
        right.annotate(f"${c:,.0f}k" if math.isfinite(c) else "no published\nprice", (i, c if math.isfinite(c) else 0),
                       ha="center", va="bottom", fontsize=8)
    right.set_ylabel("on-demand cost, $ thousands")
    right.set_title("cost (prices as read, see fmlab.plan.catalog)", fontsize=10)
    return fig


def eval_curve():
    """Module 10: the tiny Llama's training loss against its held-out loss at every checkpoint (measured: read
    from fmlab/serve/measured.json, written by benchmarks/bench_serving.py --write)."""
    from fmlab.serve.measured import eval_curve_figure

    return _drawable(eval_curve_figure())


def serving_latency():
    """Module 10: p50/p95 latency and throughput of `transformers serve` against concurrent streaming requests,
    continuous batching against one request at a time (measured, as eval_curve)."""
    from fmlab.serve.measured import latency_figure

    return _drawable(latency_figure())


RECOVERY_NODES = (16, 64, 256, 1024, 2048)


def recovery_goodput(model: str = MODEL, step_seconds: float = 10.0, assumptions=None):
    """Module 11: goodput of gpt-30b against the number of nodes, for three ways back from a failure.

    fmlab.plan.recovery.sweep: checkpoints to S3, managed tiered checkpointing (memory first) and checkpointless
    recovery, each with its Daly interval, under Llama 3's failure rate per node (fmlab.plan.reliability); the
    rates and restart minutes are recovery.Assumptions; `step_seconds` the assumed optimizer step of the run.
    """
    from fmlab.plan import recovery

    state_gb = checkpoint_gb(compute.param_count(catalog.model(model)))["training"]
    results = recovery.sweep(state_gb, list(RECOVERY_NODES), step_seconds, assumptions or recovery.Assumptions())
    fig = _figure(10, 4.4)
    ax = fig.subplots()
    names = [r.name for r in results[RECOVERY_NODES[0]]]
    for i, name in enumerate(names):
        ax.plot(RECOVERY_NODES, [100 * results[n][i].goodput for n in RECOVERY_NODES], "o-", label=name)
    ax.set_xscale("log", base=2)
    ax.set_xticks(RECOVERY_NODES, [f"{n:,}" for n in RECOVERY_NODES])
    ax.minorticks_off()
    ax.set_xlabel("nodes of 8 GPUs (log scale); one interruption per node every "
                  f"{reliability.LLAMA3_405B.node_mtbf_hours / 24:.0f} days (Llama 3)")
    ax.set_ylabel("goodput (% of wall clock)")
    ax.set_title(f"{model}: {state_gb:.0f} GB of training state; goodput by recovery option", fontsize=11)
    ax.legend(fontsize=9, loc="lower left")
    return fig


def capstone_outcomes():
    """Module 12: the 30B brief's finish dates, simulated, for module 11's reservation and for none of its margin."""
    from dataclasses import replace

    from fmlab.plan import capstone, simulate

    brief = capstone.BRIEFS["gpt-30b"]
    ref = capstone.reference_plan(brief)
    fig = _figure(8, 3.4)
    ax = fig.add_subplot()
    for run, color in ((ref, "#4c72b0"), (replace(ref, reserved_days=13), "#dd8452")):
        out = simulate.simulate(capstone.scenario_of(run, brief), runs=4000, seed=1)
        ax.hist(out.finish_days, bins=80, range=(12.5, 22), alpha=0.75, color=color,
                label=f"{run.reserved_days} days reserved: P(miss) {out.p_miss(brief.deadline_hours):.0%}, "
                      f"P90 {_usd(out.cost_percentile(90))}")
    ax.axvline(brief.deadline_days, color="#c44e52", linestyle="--", label=f"deadline {brief.deadline_days:g} days")
    ax.set(xlabel="finish (days from the first reserved day)", ylabel="simulated runs (of 4,000)",
           title="gpt-30b on 16 x p5: the margin against the fallback's wait")
    ax.legend(fontsize=8)
    return fig


FIGURES: dict[str, Callable] = {
    "layout_memory": layout_memory,
    "data_volume": data_volume,
    "lr_sweep": lr_sweep,
    "data_parallel_traffic": data_parallel_traffic,
    "pipeline_schedule": pipeline_schedule,
    "gpt30b_memory": gpt30b_memory,
    "gpt30b_ladder": gpt30b_ladder,
    "hybrid_traffic": hybrid_traffic,
    "job_mtbf": job_mtbf,
    "checkpoint_interval": checkpoint_interval,
    "trainium_choice": trainium_choice,
    "eval_curve": eval_curve,
    "serving_latency": serving_latency,
    "recovery_goodput": recovery_goodput,
    "capstone_outcomes": capstone_outcomes,
}


class UnknownFigure(KeyError):
    """A figure name that is not in FIGURES; the message lists the known names."""

    def __str__(self) -> str:
        return str(self.args[0])


def known() -> list[str]:
    """The registered figure names, sorted."""
    return sorted(FIGURES)


def figure(name: str):
    """The Figure registered as `name`; raises UnknownFigure naming the known figures."""
    if name not in FIGURES:
        raise UnknownFigure(f"unknown figure {name!r}; known figures: {', '.join(known())} "
                            "(register new ones in fmlab.course.figures.FIGURES)")
    return FIGURES[name]()


def render_svg(name: str, path: str | Path) -> Path:
    """Draw figure `name` to an SVG file at `path` (folders created); the same figure gives the same bytes."""
    import matplotlib

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with matplotlib.rc_context({"svg.fonttype": "path", "svg.hashsalt": "fmlab"}):
        figure(name).savefig(path, format="svg", metadata={"Date": None})
    return path
