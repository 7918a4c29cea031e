"""What a notebook section needs from an earlier one, built once per kernel: so a workshop path can skip that section.

    from fmlab.course.section import once
    clean = once("nb08 uninterrupted run", lambda: torchrun_train(...))   # in §2, and again in §3

The first call with a name builds the value and keeps it for the kernel's life; a later call with the same name
returns that same object at once. A section that reads what an earlier section built calls `once` with the earlier
section's name and recipe: run whole, the notebook builds it once; on a path that skipped the earlier section
(`fmlab course --path`), the later section builds it itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
_BUILT: dict[str, object] = {}


def once(name: str, build: Callable[[], T]) -> T:
    """`build()`'s value, built the first time `name` is asked for in this kernel."""
    if name not in _BUILT:
        _BUILT[name] = build()
    return _BUILT[name]  # type: ignore[return-value]


def forget(name: str | None = None) -> None:
    """Drop one built value (or all): the next `once` builds it again."""
    if name is None:
        _BUILT.clear()
    else:
        _BUILT.pop(name, None)
