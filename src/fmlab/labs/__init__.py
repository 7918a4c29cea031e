"""Checks for the course labs: each exercise prints a clear PASS or FAIL and records the result.

A lab notebook calls its module's checks with the learner's code, e.g. `from fmlab.labs import lab04;
lab04.check_buckets(BucketedDDP, work)`, which runs it on real processes (`fmlab.labs.world`), and ends
with `lab04.summary()`, which raises `LabIncomplete` while any exercise fails. The results are
recorded in the notebook's output (see `fmlab.course.records`) under `lab.<exercise>`, so tests can assert that the
solved lab passes every check and the unsolved one fails every check.
"""

from __future__ import annotations

import math
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from fmlab.course.records import record


def fresh_folder(work: str | os.PathLike, name: str) -> Path:
    """`work/name`, emptied: each check starts from a clean folder, so leftovers of an earlier run never count.
    Here rather than in fmlab.labs.world, which imports torch: lab 11's checks need the folder, not torch."""
    base = Path(work) / name
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    return base


class LabIncomplete(AssertionError):
    """Raised by `summary()` while exercises remain unsolved."""


def close(a: float, b: float, rel: float = 0.02) -> bool:
    """True when a is within `rel` (relative) of b."""
    return isinstance(a, int | float) and math.isclose(a, b, rel_tol=rel)


@dataclass
class Lab:
    """The state of one lab: which exercises passed."""

    name: str
    exercises: list[str]
    results: dict[str, bool] = field(default_factory=dict)

    def report(self, exercise: str, passed: bool, message: str) -> bool:
        if exercise not in self.exercises:
            raise KeyError(f"{self.name} has no exercise {exercise!r}")
        self.results[exercise] = bool(passed)
        mark = "PASS" if passed else "FAIL"
        print(f"[{mark}] {self.name} {exercise}: {message}")
        record(f"lab.{exercise}", bool(passed), show=False)
        return bool(passed)

    def check(self, exercise: str, answer, test: Callable[[object], bool], ok: str, hint: str) -> bool:
        """Run `test(answer)`; an unanswered exercise (None or ...) fails with the hint."""
        if answer is None or answer is Ellipsis:
            return self.report(exercise, False, f"not answered yet. Hint: {hint}")
        try:
            passed = bool(test(answer))
        except Exception as e:  # a wrong type of answer is a failed check, not a crash
            return self.report(exercise, False, f"could not check this answer ({type(e).__name__}: {e}). Hint: {hint}")
        return self.report(exercise, passed, ok if passed else f"not yet. Hint: {hint}")

    def summary(self) -> None:
        done = [e for e in self.exercises if self.results.get(e)]
        record("lab.passed", len(done), show=False)
        record("lab.total", len(self.exercises), show=False)
        print(f"{self.name}: {len(done)} of {len(self.exercises)} exercises pass")
        if len(done) < len(self.exercises):
            todo = ", ".join(e for e in self.exercises if not self.results.get(e))
            raise LabIncomplete(f"{self.name}: still to solve: {todo}")
