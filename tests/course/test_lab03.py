"""Lab 03's checks, without the notebook: the lab's own solution passes each, and a plausible wrong solution of
each exercise fails with a hint that says what differed.

Exercises 2 and 3 run on stand-in jobs (subclasses of fmlab.jobs.Job whose describe() and metrics() answer as a
finished sandbox job's would), so they take milliseconds; the notebook test (tests/course/test_labs.py) runs the
real sandbox sweep. Exercise 4 runs the real 2-process gloo worlds: 2 to 10 s per test.
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from fmlab.jobs import Job, JobSpec, parse_metrics
from fmlab.labs import lab03


@pytest.fixture(autouse=True)
def fresh_lab(monkeypatch, tmp_path):
    """A clean lab state per test, and a base spec that needs no dataset (the stand-in jobs read nothing)."""
    monkeypatch.setattr(lab03.LAB, "results", {})
    monkeypatch.setattr(lab03, "_SWEEP", {})
    monkeypatch.setattr(lab03, "base_spec", lambda work: JobSpec("lab03-sweep",
                                                                 hyperparameters=dict(lab03.HYPERPARAMETERS)))
    monkeypatch.setenv("FMLAB_SANDBOX_DIR", str(tmp_path / "sandbox"))
    monkeypatch.setenv("FMLAB_LOCAL_BUCKET", str(tmp_path / "bucket"))


# ---------------------------------------------------------------- exercise 1


def test_ex1_the_fix_passes_and_a_partial_fix_names_what_is_still_wrong(capsys):
    request = lab03.broken_request()
    request["TrainingJobName"] = "fmlab-lr-sweep-3e-4"
    request["ResourceConfig"]["InstanceType"] = "ml.g5.xlarge"
    assert lab03.check_fixed_request(request) is False  # the keep-alive is still 86,400 s
    assert "KeepAlivePeriodInSeconds" in capsys.readouterr().out
    request["ResourceConfig"]["KeepAlivePeriodInSeconds"] = 3600
    assert lab03.check_fixed_request(request) is True
    capsys.readouterr()
    other = lab03.broken_request()
    other["TrainingJobName"] = "fmlab-lr-sweep-3e-4"
    other["ResourceConfig"].update(InstanceType="ml.g5.48xlarge", KeepAlivePeriodInSeconds=3600)
    assert lab03.check_fixed_request(other) is False  # valid, but another instance than the one meant
    assert "the request is valid, but keep what it meant" in capsys.readouterr().out
    assert lab03.check_fixed_request(None) is False
    assert "not answered" in capsys.readouterr().out


# ---------------------------------------------------------------- exercise 2: stand-in jobs


def _curve(lr: float, seed: int, steps: int = 6) -> str:
    """A job's log: a loss that falls faster with a larger lr, its last step not its lowest for lr 0.01."""
    lines = []
    for step in range(1, steps + 1):
        loss = 6.25 - 80 * lr * step ** 0.5 + 0.02 * seed + (0.3 if lr == 0.01 and step == steps else 0.0)
        lines.append(f"[algo-1] step={step} loss={loss:.4f} lr={lr:.6f} tokens_per_s=1000.0")
    return "\n".join(lines) + "\n"


class FakeJob(Job):
    """A finished sandbox job, as describe() and metrics() would show it."""

    def describe(self) -> dict:
        hps = self.request["HyperParameters"]
        start = "2024-01-01T00:00:00.000+00:00"
        return {"TrainingJobName": self.name, "TrainingJobStatus": "Completed", "SecondaryStatus": "Completed",
                "HyperParameters": dict(hps), "TrainingStartTime": start,
                "SecondaryStatusTransitions": [{"Status": "Training", "StartTime": start,
                                                "EndTime": "2024-01-01T00:00:05.000+00:00"}]}

    def logs(self) -> str:
        hps = self.request["HyperParameters"]
        return _curve(float(hps["lr"]), int(hps.get("seed", 0)))

    def metrics(self):
        return parse_metrics(self.logs())


def fake_launch(base, runs, wait=False, merge=True):
    launched = []
    for i, run in enumerate(runs):
        hps = {**base.hyperparameters, **run} if merge else dict(run)
        job = FakeJob(f"fmlab-{base.name}-{i}-20240101000000", "local",
                      {"HyperParameters": {k: str(v).lower() if isinstance(v, bool) else str(v)
                                           for k, v in hps.items()}})
        if wait:
            job.wait()
        launched.append(job)
    return launched


def test_ex2_the_lab_gather_passes_on_the_same_jobs(tmp_path, capsys):
    assert lab03.check_sweep(fake_launch, lab03.reference_gather, tmp_path) is True
    out = capsys.readouterr().out
    assert "your table matches the lab's" in out and "fmlab-lab03-sweep-failed" in out


def test_ex2_a_launch_that_waits_for_each_job_fails(tmp_path, capsys):
    assert lab03.check_sweep(lambda base, runs: fake_launch(base, runs, wait=True), lab03.reference_gather,
                             tmp_path) is False
    out = capsys.readouterr().out
    assert "launch_sweep called wait (" in out and "it waited for jobs to end" in out


def test_ex2_a_launch_that_replaces_the_base_hyperparameters_fails(tmp_path, capsys):
    assert lab03.check_sweep(lambda base, runs: fake_launch(base, runs, merge=False), lab03.reference_gather,
                             tmp_path) is False
    assert "lost the base's hyperparameters max_steps" in capsys.readouterr().out


def _gather_from_the_list(jobs):
    """Takes lr and seed from the order of lab03.RUNS, not from the jobs: wrong once the order differs."""
    rows = lab03.reference_gather(jobs)
    runs = lab03.RUNS + [{"lr": 0.03, "seed": 0}]
    rows["lr"] = [r["lr"] for r in runs[:len(rows)]]
    rows["seed"] = [r["seed"] for r in runs[:len(rows)]]
    return rows


def _gather_last_row(jobs):
    """m["loss"].iloc[-1] on every job: a job that logged nothing has no loss column."""
    rows = []
    for job in jobs:
        d = job.describe()
        rows.append({"job": job.name, "lr": float(d["HyperParameters"]["lr"]),
                     "seed": int(d["HyperParameters"]["seed"]), "status": d["TrainingJobStatus"],
                     "final_loss": float(job.metrics()["loss"].iloc[-1]), "failure": d.get("FailureReason", "")})
    return pd.DataFrame(rows)


def _gather_lowest(jobs):
    rows = lab03.reference_gather(jobs)
    rows["final_loss"] = [float(j.metrics()["loss"].min()) if len(j.metrics()) else math.nan for j in jobs]
    return rows


def test_ex2_gather_that_mixes_up_jobs_and_hyperparameters_fails(tmp_path, capsys):
    assert lab03.check_sweep(fake_launch, _gather_from_the_list, tmp_path) is False
    out = capsys.readouterr().out
    assert "but it ran with lr 0.01, seed 1 (its HyperParameters)" in out


def test_ex2_gather_that_crashes_on_a_job_without_metrics_fails(tmp_path, capsys):
    assert lab03.check_sweep(fake_launch, _gather_last_row, tmp_path) is False
    assert "gather raised KeyError: 'loss' on a job that failed before its first step" in capsys.readouterr().out


def test_ex2_gather_that_reports_the_lowest_loss_fails(tmp_path, capsys):
    assert lab03.check_sweep(fake_launch, _gather_lowest, tmp_path) is False
    assert "the lowest loss of the curve, not the last" in capsys.readouterr().out


def test_ex2_unanswered(tmp_path, capsys):
    def stub(*args):
        raise NotImplementedError

    assert lab03.check_sweep(stub, stub, tmp_path) is False
    assert "not answered yet: launch_sweep" in capsys.readouterr().out
    assert lab03.check_sweep(fake_launch, stub, tmp_path) is False
    assert "gather is not answered yet" in capsys.readouterr().out


# ---------------------------------------------------------------- exercise 3


def _lowest_average(table, margin):
    """Averages the seeds and skips failures, but ignores the margin: picks a winner inside the noise."""
    done = table[(table["status"] == "Completed") & table["final_loss"].map(math.isfinite)]
    return float(done.groupby("lr")["final_loss"].mean().idxmin())


def _lowest_row(table, margin):
    """The single best run, not the best learning rate: a lucky seed wins."""
    done = table[(table["status"] == "Completed") & table["final_loss"].map(math.isfinite)]
    means = done.groupby("lr")["final_loss"].mean().sort_values()
    if len(means) > 1 and means.iloc[1] - means.iloc[0] <= margin:
        return None
    return float(done.loc[done["final_loss"].idxmin(), "lr"])


def _counting_failures(table, margin):
    means = table[table["final_loss"].map(math.isfinite)].groupby("lr")["final_loss"].mean().sort_values()
    if len(means) > 1 and means.iloc[1] - means.iloc[0] <= margin:
        return None
    return float(means.index[0])


def test_ex3_the_rule_passes_and_winners_inside_the_noise_fail(tmp_path, capsys):
    jobs = fake_launch(lab03.base_spec(tmp_path), lab03.RUNS)
    assert lab03.check_best(lab03.reference_best, tmp_path, jobs) is True
    assert "the sweep you ran: 0.01" in capsys.readouterr().out
    assert lab03.check_best(_lowest_average, tmp_path, jobs) is False
    assert "a gap inside the noise" in (out := capsys.readouterr().out) and "expected None (inconclusive)" in out
    assert lab03.check_best(_lowest_row, tmp_path, jobs) is False
    assert "one lucky seed" in (out := capsys.readouterr().out) and "best returned 0.003, expected 0.01" in out
    assert lab03.check_best(_counting_failures, tmp_path, jobs) is False
    assert "a failed job with a low last loss" in (out := capsys.readouterr().out) and "returned 0.03" in out


def test_ex3_unanswered_launches_nothing(tmp_path, capsys):
    def stub(table, margin):
        raise NotImplementedError

    assert lab03.check_best(stub, tmp_path) is False  # no jobs given and none launched: it stops at the first table
    assert "not answered yet" in capsys.readouterr().out


# ---------------------------------------------------------------- exercise 4: real 2-process worlds


class _Logs(lab03.ReferenceWatchdog):
    """Notices the hang and says so, in a daemon thread, but never ends the process."""

    def _watch(self):
        while not self.stopped.wait(self.timeout / 10):
            if time.monotonic() - self.last > self.timeout:
                print(f"rank {self.rank} stuck in step {self.step}", file=sys.stderr, flush=True)
                return


class _SinceStart(lab03.ReferenceWatchdog):
    """Measures from the start, not from the last beat: slow but healthy runs are killed."""

    def beat(self, step):
        self.step = step


class _NeverStops(lab03.ReferenceWatchdog):
    def stop(self):
        pass


class _TwiceTheTimeout(lab03.ReferenceWatchdog):
    """'To be safe', fires only at twice the timeout: later than the bound."""

    def __init__(self, rank, timeout, failure_file):
        super().__init__(rank, 2 * timeout, failure_file)


class _StepNeverRecorded(lab03.ReferenceWatchdog):
    def beat(self, step):
        self.last = time.monotonic()


def test_ex4_the_lab_watchdog_fails_the_hang_fast_and_spares_the_healthy_run(tmp_path, capsys):
    assert lab03.check_watchdog(lab03.ReferenceWatchdog, tmp_path) is True
    out = capsys.readouterr().out
    assert "no false alarm" in out and "rank 1 made no progress in step 3" in out


def test_ex4_a_watchdog_that_only_logs_leaves_the_job_hanging(tmp_path, capsys):
    assert lab03.check_watchdog(_Logs, tmp_path) is False
    assert "the world was still running" in capsys.readouterr().out


def test_ex4_a_watchdog_that_counts_from_the_start_kills_a_healthy_run(tmp_path, capsys):
    assert lab03.check_watchdog(_SinceStart, tmp_path) is False
    assert "your watchdog stopped a healthy run" in (out := capsys.readouterr().out)
    assert "measure the time since the last beat()" in out


def test_ex4_a_watchdog_that_is_never_stopped_kills_the_export(tmp_path, capsys):
    assert lab03.check_watchdog(_NeverStops, tmp_path) is False
    assert "stop() must end the watching" in capsys.readouterr().out


def test_ex4_a_timeout_longer_than_the_bound_fails(tmp_path, capsys):
    assert lab03.check_watchdog(_TwiceTheTimeout, tmp_path) is False
    assert "more than the bound of 2.5 s" in capsys.readouterr().out


def test_ex4_a_reason_without_the_step_fails(tmp_path, capsys):
    assert lab03.check_watchdog(_StepNeverRecorded, tmp_path) is False
    assert "name the rank (rank 1) and the step (step 3)" in capsys.readouterr().out


def test_ex4_unanswered(tmp_path, capsys):
    class Stub:
        def __init__(self, rank, timeout, failure_file):
            raise NotImplementedError

    assert lab03.check_watchdog(Stub, tmp_path) is False
    assert "not answered yet" in capsys.readouterr().out


def test_ex4_a_reference_watchdog_keeps_a_reason_already_written(tmp_path):
    """The first reason stays (SDK v3's launcher appends its generic message only to an empty file)."""
    failure = tmp_path / "failure"
    failure.write_text("rank 0 made no progress in step 2\n")
    done = threading.Event()
    exits = []

    class Left(Exception):
        pass

    class Caught(lab03.ReferenceWatchdog):
        def _watch(self):
            def leave(code):  # instead of ending the test's process: end this thread
                exits.append(code)
                done.set()
                raise Left

            real = os._exit
            os._exit = leave
            try:
                super()._watch()
            except Left:
                pass
            finally:
                os._exit = real

    Caught(1, 0.1, failure)
    assert done.wait(3) and exits == [1]
    assert Path(failure).read_text() == "rank 0 made no progress in step 2\n"
