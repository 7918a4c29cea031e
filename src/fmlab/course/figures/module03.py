"""Module 3's deck figure: the notebook's learning-rate sweep, trained for real (a few seconds, cached).

Registered in fmlab.course.figures.FIGURES; the package's docstring says how figures are drawn and added.
"""

from __future__ import annotations

import functools

from fmlab.course.figures.canvas import new_figure
from fmlab.plan import catalog

# Module 3: the notebook 03 sweep (its default parameters): tiny model, 30 steps, 4 learning rates x 2 seeds
SWEEP_LRS, SWEEP_SEEDS, SWEEP_STEPS = (1e-3, 3e-3, 1e-2, 3e-2), (0, 1), 30
SWEEP_CONFIG = {"micro_batch": 8, "warmup_steps": 3}  # notebook 03's JobSpec hyperparameters


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
    fig = new_figure(9, 4.4)
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
