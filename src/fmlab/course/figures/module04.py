"""Module 4's deck figure: data-parallel traffic per step, parameter server against ring all-reduce and Herring.

Registered in fmlab.course.figures.FIGURES; the package's docstring says how figures are drawn and added.
"""

from __future__ import annotations

from fmlab.course.figures.canvas import new_figure
from fmlab.course.figures.module07 import INSTANCE
from fmlab.plan import catalog, compute

# Module 4: data-parallel traffic of llama2-7b's bf16 gradients on p4d instances (notebook 04, section 2)
DP_MODEL, DP_BYTES_PER_VALUE = "llama2-7b", 2
DP_INSTANCE_COUNTS = (2, 4, 8, 16, 32, 64)


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
    fig = new_figure(11, 4.4)
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
