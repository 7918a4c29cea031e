"""Tables and figures of the parallel engine's results, for notebooks 05 and 06. Every figure has a title,
labelled axes and units.

    from fmlab.measure.views import memory_table, parity_table, pipeline_figure
    parity_table(results)            # one row per preset and layout: loss, |loss diff|, max |grad diff|
    memory_table(results)            # one row per layout and rank: measured and predicted bytes
    pipeline_figure(6, 4)            # a GPipe schedule, stage by time
"""

from __future__ import annotations

import pandas as pd

from fmlab.plan.scaling import bubble_fraction, gpipe_schedule

KIB = 1024


def parity_table(world: list[dict], task: str = "parity"):
    """Worst case over the ranks, per preset and layout."""
    rows = []
    for preset, layouts in world[0]["result"][task].items():
        for name in layouts:
            per_rank = [r["result"][task][preset][name] for r in world]
            rows.append({"preset": preset, "layout": name, "loss": per_rank[0]["loss"],
                         "single-process loss": per_rank[0]["ref_loss"],
                         "max |loss diff|": max(p["loss_diff"] for p in per_rank),
                         "max |grad diff|": max(p["max_grad_diff"] for p in per_rank),
                         "largest |grad|": per_rank[0]["max_grad"]})
    return pd.DataFrame(rows)


def memory_table(world: list[dict], task: str = "memory"):
    """KiB of weights, gradients and optimizer state per rank: measured beside the planner's prediction."""
    rows = []
    for r in world:
        for name, m in r["result"][task].items():
            rows.append({"layout": name, "rank": r["rank"],
                         **{f"{k} KiB": v / KIB for k, v in m["measured"].items()},
                         "measured total KiB": sum(m["measured"].values()) / KIB,
                         "predicted total KiB": sum(m["predicted"].values()) / KIB})
    return pd.DataFrame(rows).sort_values(["layout", "rank"]).reset_index(drop=True)


def bar_figure(values: dict[str, float], title: str, ylabel: str, ax=None, color="tab:blue"):
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(7, 3.5))
    ax.bar(list(values), list(values.values()), color=color)
    ax.set_title(title)
    ax.set_ylabel(ylabel)
    ax.set_xlabel("layout")
    ax.tick_params(axis="x", rotation=20)
    return ax


def saved_bytes_figure(saved: dict[str, dict], ax=None):
    """Stacked bars: bytes kept on the device and bytes offloaded to host, per activation setting."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(7, 3.5))
    names = list(saved)
    on = [saved[n]["on_device"] / KIB for n in names]
    off = [saved[n]["offloaded"] / KIB for n in names]
    ax.bar(names, on, label="kept on the device")
    ax.bar(names, off, bottom=on, label="offloaded to host memory")
    ax.set_title("Activations saved for the backward pass (one forward, tiny model)")
    ax.set_ylabel("KiB")
    ax.set_xlabel("activation setting")
    ax.tick_params(axis="x", rotation=20)
    ax.legend()
    return ax


def hybrid_figure(rows: list[dict], device_gb: float | None = None, ax=None):
    """Model-state GB per GPU and the GB each node sends over EFA per step, against the hybrid shard degree."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(7, 3.8))
    degrees = [r["shard degree"] for r in rows]
    ax.plot(degrees, [r["state GB per GPU"] for r in rows], "o-", color="tab:blue", label="model states per GPU")
    if device_gb:
        ax.axhline(device_gb, color="tab:blue", ls=":", label=f"GPU memory ({device_gb:.0f} GB)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("hybrid shard degree D (GPUs per shard group)")
    ax.set_ylabel("GB per GPU")
    twin = ax.twinx()
    twin.plot(degrees, [r["EFA GB per node per step"] for r in rows], "s--", color="tab:red",
              label="sent out of each node per step")
    twin.set_ylabel("GB each node sends over EFA per step", color="tab:red")
    ax.set_title("Hybrid sharding: memory against inter-node traffic")
    lines = ax.get_legend_handles_labels()[0] + twin.get_legend_handles_labels()[0]
    ax.legend(lines, [h.get_label() for h in lines], loc="upper center", fontsize=8)
    return ax


def pipeline_figure(stages: int, microbatches: int, ax=None):
    """The GPipe schedule: which stage runs which microbatch's forward (F) or backward (B) when."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(9, 0.45 * stages + 1.2))
    for slot in gpipe_schedule(stages, microbatches):
        color = "tab:blue" if slot["kind"] == "F" else "tab:orange"
        ax.barh(slot["stage"], slot["length"], left=slot["start"], color=color, edgecolor="white")
        ax.text(slot["start"] + slot["length"] / 2, slot["stage"], f"{slot['kind']}{slot['microbatch']}",
                ha="center", va="center", fontsize=7, color="white")
    ax.invert_yaxis()
    ax.set_yticks(range(stages), [f"stage {s}" for s in range(stages)])
    ax.set_xlabel("time (units of one microbatch forward on one stage)")
    ax.set_title(f"GPipe schedule: {stages} stages, {microbatches} microbatches, bubble "
                 f"{bubble_fraction(stages, microbatches):.0%} of the compute time")
    return ax


def bubble_figure(stages: int, microbatches: list[int], ax=None):
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(7, 3.5))
    for v in (1, 2):
        ax.plot(microbatches, [100 * bubble_fraction(stages, m, v) for m in microbatches], "o-",
                label="1F1B / GPipe" if v == 1 else "interleaved, 2 chunks per GPU")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("microbatches per step (m)")
    ax.set_ylabel("bubble, % of compute time")
    ax.set_title(f"Pipeline bubble with {stages} stages: (p - 1) / (v m)")
    ax.legend()
    return ax
