"""Module 1's deck figure: memory per GPU of the module 7 run under each layout the notebook compares.

Registered in fmlab.course.figures.FIGURES; the package's docstring says how figures are drawn and added.
"""

from __future__ import annotations

from fmlab.course.figures.canvas import new_figure
from fmlab.course.figures.module07 import INSTANCE, INSTANCES, MODEL
from fmlab.plan.parallelism import ParallelConfig

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


def layout_memory():
    """Memory per device of gpt-30b on 16 x ml.p4d.24xlarge for seven layouts: notebook 01's figure.

    fmlab.course.plots.memory_breakdown (the notebook's own plot) on fmlab.plan.layout.make_plan: DDP, ZeRO-1,
    ZeRO-2, FSDP full sharding, FSDP with full recomputation, hybrid groups of 8 with recomputation and tensor
    parallelism 8 with recomputation; stacked by weights, gradients, optimizer state and activations, with the
    usable device memory dashed; a bar taller than three times the usable memory is cut and labelled.
    """
    from fmlab.course.plots import memory_breakdown

    fig = new_figure(10, 4.6, layout=None)
    memory_breakdown(MODEL, INSTANCE, INSTANCES, dict(LAYOUT_MEMORY), ax=fig.subplots())
    return fig
