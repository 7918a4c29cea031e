"""When the reserved capacity ends: a training plan's expiration, and the step at which the run saves and stops.

    end = CapacityEnd.from_env()                 # None outside a training plan (the variable unset or "0")
    end.must_stop(now=time.time(), reserve_s=900)   # True once the next step and a save would not finish in time

A job on a SageMaker training plan keeps its instances until 30 minutes before the reservation ends; then the plan
starts ending them, whatever the job is doing. SageMaker tells the script when its capacity ends in the environment
variable SAGEMAKER_CURRENT_CAPACITY_BLOCK_EXPIRATION_TIMESTAMP, and the developer guide asks the script to
checkpoint before then ("Training plans utilization for SageMaker training jobs", read 2026-11-26; its example
reads "0" as unset). No source read gives the value's unit, so an epoch time in seconds or milliseconds and an
ISO 8601 time are all accepted, and anything else is refused with the value quoted.

fmlab.train checks after every step (the ranks agree with one all-reduce of the verdict, so no rank stops alone):
once the time left before the plan starts ending instances is less than `reserve_s` (two steps and the last save's
duration, at least 10 minutes), the run saves a checkpoint and ends as interrupted; the next job, on the next plan
or on demand, resumes from it. Tested by tests/train/test_capacity_end.py.
"""

from __future__ import annotations

import datetime as dt
import math
import os
from dataclasses import dataclass

from fmlab.plan.capacity import PLAN_END_MINUTES

EXPIRATION_VARIABLE = "SAGEMAKER_CURRENT_CAPACITY_BLOCK_EXPIRATION_TIMESTAMP"
MIN_RESERVE_S = 600.0  # the least time kept for the last save, before any save has been timed


class CapacityEndError(ValueError):
    """The expiration variable holds something that is not a time."""


def parse_expiration(value: str) -> float | None:
    """Epoch seconds of an expiration value (None for "" and "0": not on a training plan)."""
    text = str(value).strip()
    if text in ("", "0"):
        return None
    try:
        number = float(text)
    except ValueError:
        try:
            when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise CapacityEndError(f"{EXPIRATION_VARIABLE}={text!r} is neither an epoch time nor an ISO 8601 time"
                                   ) from None
        return (when if when.tzinfo else when.replace(tzinfo=dt.UTC)).timestamp()
    if not math.isfinite(number) or number <= 0:
        raise CapacityEndError(f"{EXPIRATION_VARIABLE}={text!r} is not a time")
    return number / 1000 if number > 1e11 else number  # epoch milliseconds from 1973 on are above 1e11


@dataclass(frozen=True)
class CapacityEnd:
    """The end of the reserved capacity this job runs on."""

    expires_at: float  # epoch seconds: the reservation's end

    @classmethod
    def from_env(cls, env: dict | None = None) -> CapacityEnd | None:
        env = os.environ if env is None else env
        at = parse_expiration(env.get(EXPIRATION_VARIABLE, ""))
        return None if at is None else cls(at)

    @property
    def stop_by(self) -> float:
        """When the plan starts ending the job's instances: 30 minutes before the reservation ends."""
        return self.expires_at - PLAN_END_MINUTES * 60

    def seconds_left(self, now: float) -> float:
        return self.stop_by - now

    def must_stop(self, now: float, reserve_s: float) -> bool:
        """Whether to save and stop now: less than `reserve_s` (at least MIN_RESERVE_S) is left before stop_by."""
        return self.seconds_left(now) < max(reserve_s, MIN_RESERVE_S)


def reserve_seconds(step_seconds: float, save_seconds: float | None) -> float:
    """What to keep before the plan's instances start ending: two steps and the last save (or MIN_RESERVE_S)."""
    return max(MIN_RESERVE_S, 2 * step_seconds + (save_seconds or 0.0))
