"""Python's cyclic garbage collector on the training loop's schedule, not whenever it likes.

    with collector.scheduled():         # fmlab.train.loop.train, around the steps
        ... collector.after_step(step)  # a young-generation pass every GC_EVERY steps, the same step on every rank

An automatic pass stops one rank at a moment of its own, and every other rank then waits for it at the next
collective: a straggler that moves from step to step. torchtitan turns the collector off and collects generation 1
every `training.gc_freq` = 50 steps ("used to avoid stragglers in garbage collection": torchtitan/tools/utils.py
GarbageCollection and torchtitan/config/job_config.py, read 2026-11-26); fmlab does the same, and first freezes what
exists when training starts (the modules, the model, the optimizer: gc.freeze), so a pass only walks what the
steps made.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

GC_EVERY = 50  # steps between young-generation passes: torchtitan's default gc_freq


@contextlib.contextmanager
def scheduled() -> Iterator[None]:
    """Within: the automatic collector off and what exists now frozen; after: the collector as it was (a notebook
    kernel that trains in-process keeps its own collector) and the frozen objects collectable again."""
    was_enabled = gc.isenabled()
    gc.disable()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
        if was_enabled:
            gc.enable()


def after_step(step: int, every: int | None = None) -> bool:
    """Collect generations 0 and 1 when `step` is a multiple of `every` (default GC_EVERY); True when it did."""
    every = GC_EVERY if every is None else every
    if every > 0 and step % every == 0:
        gc.collect(1)
        return True
    return False
