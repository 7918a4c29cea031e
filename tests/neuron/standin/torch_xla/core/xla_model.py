"""TEST DOUBLE of torch_xla.core.xla_model: the device is the CPU, and mark_step runs the step closures.

Real XLA builds a lazy graph and executes it at `mark_step()`; eager CPU tensors need nothing, so the only
behaviour kept is the order of `add_step_closure` callbacks (run at the next mark_step, as on the device).
"""

import torch

_closures = []


def xla_device(n=None, devkind=None):
    return torch.device("cpu")


def add_step_closure(closure, args=(), run_async=False):
    _closures.append((closure, args))


def mark_step(wait=False):
    while _closures:
        closure, args = _closures.pop(0)
        closure(*args)


def rendezvous(tag, payload=b"", replicas=()):
    return []


def get_local_ordinal():
    return 0
