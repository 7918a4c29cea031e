"""Checks for labs/lab_03_parallel_jobs.ipynb: a job request SageMaker would accept, a sweep launched through the
local sandbox and its results gathered, a winner picked honestly about noise, and a watchdog that makes a hung
rank fail fast with a clear reason, run on 2 gloo processes.

    lab03.check_fixed_request(request)                    # ex1: the sandbox's validator is the feedback
    lab03.check_sweep(launch_sweep, gather, work)         # ex2: 3 real sandbox jobs; gather on the same jobs
    lab03.check_best(best, work)                          # ex3: 5 tables, one of them the sweep's own
    lab03.check_watchdog(Watchdog, work)                  # ex4: a healthy run, then rank 1 hangs at step 3
    lab03.summary()                                       # raises LabIncomplete while any check fails

How each is checked, and how long it takes on 2 cores (the solved lab: about 25 s in all):
- ex1 runs `fmlab.service.api_model.problems_in`, the check the sandbox (and botocore's API model) applies to a
  CreateTrainingJob request, and compares the fixed request with what the broken one meant.
- ex2 calls the learner's `launch_sweep(base, RUNS)` with `Job.wait`, `Job.stream_logs` and `jobs.wait_all` wrapped
  so that a launch that waits for each job before the next is caught, checks each launched request's
  hyperparameters, waits for the 3 tiny jobs (6 steps each, about 15 s with 2 CPU slots), then calls the learner's
  `gather` on the same jobs in another order plus a stand-in for a job that failed before its first step, and
  compares each row (by job name) with `reference_gather`: lr and seed as the job ran them, status, the last
  logged training loss (exactly: both parse the same log), the failure reason.
- ex3 calls the learner's `best(table, margin)` on four small tables made to separate the rule from its usual
  mistakes (a lucky seed, a gap inside the noise, a failed job with a low last loss, a diverged run) and on the
  sweep's own table; each answer must equal `reference_best`'s.
- ex4 runs the lab's training loop (`train`, given) on 2 forked gloo processes (`fmlab.labs.world.run_world`)
  with the learner's `Watchdog` twice: a healthy run whose rank 1 reads slowly for 3 steps (0.6 s each, below
  the 1.5 s timeout) and whose rank 0 then exports the model for 2 s after `stop()`: nothing may fire, and both
  ranks' losses must equal a single-process replay of the same steps (to 1e-6: the same two gradients summed,
  one thread each, so a watchdog that disturbs nothing matches); then a run where rank 1 hangs in its data
  loader at step 3 (sleeps for ever): the world must end within STEP_TIMEOUT + 1 s of the hang, well below the
  30 s collective timeout (the check kills the world at 6 s), with rank 1's exit code non-zero and a reason in
  the failure file that names rank 1 and step 3. About 6 s.
"""

from __future__ import annotations

import copy
import math
import os
import re
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.distributed as dist

from fmlab.labs import Lab, world
from fmlab.service.api_model import problems_in

LAB = Lab("lab 03", ["ex1_fix_request", "ex2_sweep", "ex3_best", "ex4_watchdog"])


# ---------------------------------------------------------------- exercise 1: a request SageMaker would accept

# A request as boto3 would send it, with three errors SageMaker would reject (botocore lets all three through).
BROKEN_REQUEST = {
    "TrainingJobName": "fmlab_lr_sweep_3e-4",
    "RoleArn": "arn:aws:iam::111122223333:role/fmlab-course",
    "AlgorithmSpecification": {
        "TrainingImage": "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:"
                         "2.3.0-gpu-py311-cu121-ubuntu20.04-sagemaker",
        "TrainingInputMode": "File"},
    "HyperParameters": {"lr": "0.0003", "max_steps": "200"},
    "InputDataConfig": [{"ChannelName": "train", "DataSource": {"S3DataSource": {
        "S3DataType": "S3Prefix", "S3Uri": "s3://fmlab-course/fmlab/data/tiny"}}}],
    "OutputDataConfig": {"S3OutputPath": "s3://fmlab-course/fmlab/output"},
    "ResourceConfig": {"InstanceType": "ml.g5.xlarg", "InstanceCount": 1, "VolumeSizeInGB": 30,
                       "KeepAlivePeriodInSeconds": 86400},
    "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
}


def broken_request() -> dict:
    """A fresh copy of the broken request to fix (the original stays as it is)."""
    return copy.deepcopy(BROKEN_REQUEST)


def check_fixed_request(request: dict) -> bool:
    remaining = problems_in(request) if isinstance(request, dict) else []
    if not isinstance(request, dict):
        feedback = "fix the three fields that problems_in(lab03.broken_request()) names, in a copy of the request"
    elif remaining:
        feedback = "SageMaker would still reject: " + "; ".join(str(p) for p in remaining)
    else:
        feedback = ("the request is valid, but keep what it meant: same hyperparameters, data, instance count, a "
                    "warm pool, the single-GPU g5 instance, and a name that still starts fmlab-lr-sweep")

    def ok(answer) -> bool:
        rc = answer["ResourceConfig"]
        return (not remaining and answer["HyperParameters"] == BROKEN_REQUEST["HyperParameters"]
                and answer["InputDataConfig"] == BROKEN_REQUEST["InputDataConfig"]
                and rc["InstanceCount"] == 1 and rc["InstanceType"] == "ml.g5.xlarge"
                and 0 < rc.get("KeepAlivePeriodInSeconds", 0) <= 21600
                and answer["TrainingJobName"].startswith("fmlab-lr-sweep"))

    return LAB.check("ex1_fix_request", request, ok, "SageMaker would accept it, and it still means the same job",
                     feedback + " (run fmlab.service.api_model.problems_in(request) to see every problem)")


# ---------------------------------------------------------------- the sweep: given pieces and the lab's solution

# The sweep every check runs: two learning rates, the second repeated with another seed to see the noise.
RUNS = [{"lr": 0.003, "seed": 0}, {"lr": 0.01, "seed": 0}, {"lr": 0.01, "seed": 1}]
# What every job of the sweep shares: 6 steps of the tiny model, a log line per step, no TensorBoard files.
HYPERPARAMETERS = {"max_steps": 6, "micro_batch": 8, "warmup_steps": 2, "log_every": 1, "tensorboard": False}
# best()'s margin in nats. The final losses of seeds 0, 1 and 2 of these 6-step jobs span 0.04 at lr 0.003 and 0.06
# at lr 0.01 (measured on 2 CPU cores): a gap smaller than about twice that could be the seed, not the lr.
MARGIN = 0.1
COLUMNS = ["job", "lr", "seed", "status", "final_loss", "failure"]
SWEEP_TIMEOUT = 240.0  # seconds the check waits for the sweep's jobs
_SWEEP: dict = {}  # the jobs the last check_sweep launched (exercise 3 reuses them)


def use_sandbox(work) -> Path:
    """Send this kernel's jobs to the local sandbox, with its bucket and job folders under `work` (the jobs'
    supervisors inherit these variables)."""
    work = Path(work).resolve()
    os.environ["FMLAB_BACKEND"] = "local"
    os.environ["FMLAB_SANDBOX_DIR"] = str(work / "sandbox")
    os.environ["FMLAB_LOCAL_BUCKET"] = str(work / "bucket")
    return work


def base_spec(work):
    """The job every run of the sweep starts from: the tiny model on the course's dataset, in the sandbox."""
    from fmlab import jobs

    use_sandbox(work)
    return jobs.JobSpec("lab03-sweep", hyperparameters=dict(HYPERPARAMETERS),
                        inputs={"train": jobs.course_dataset_uri("local")}, max_run_seconds=600)


def reference_launch(base, runs: list[dict]) -> list:
    """The lab's solution to the launch: every job started, none waited for."""
    from fmlab import jobs

    return [jobs.launch(base.with_(name=f"{base.name}-{i}", hyperparameters={**base.hyperparameters, **run}),
                        quiet=True) for i, run in enumerate(runs)]


def reference_gather(jobs: list):
    """The lab's solution to gather: one row per job, read from the job itself."""
    import pandas as pd

    rows = []
    for job in jobs:
        d = job.describe()
        hps = d.get("HyperParameters") or {}
        m = job.metrics()
        losses = m["loss"].dropna() if "loss" in m else []
        rows.append({"job": job.name, "lr": float(hps["lr"]), "seed": int(hps.get("seed", 0)),
                     "status": d["TrainingJobStatus"],
                     "final_loss": float(losses.iloc[-1]) if len(losses) else math.nan,
                     "failure": (d.get("FailureReason") or "").split("\n")[0]})
    return pd.DataFrame(rows, columns=COLUMNS)


def reference_best(table, margin: float) -> float | None:
    """The lab's solution to best: the learning rate whose completed runs average the lowest final loss, if it
    beats the runner-up by more than `margin`; None (inconclusive) otherwise."""
    import pandas as pd

    table = pd.DataFrame(table)
    done = table[(table["status"] == "Completed") & table["final_loss"].map(math.isfinite)]
    means = done.groupby("lr")["final_loss"].mean().sort_values()
    if len(means) == 0:
        return None
    if len(means) > 1 and means.iloc[1] - means.iloc[0] <= margin:
        return None
    return float(means.index[0])


class _StandIn:
    """A job that failed before its first step, as `describe()` and `metrics()` show one (the check adds it)."""

    backend = "local"

    def __init__(self, name: str, lr: float, seed: int):
        self.name = name
        self.request = {"HyperParameters": {**{k: str(v).lower() for k, v in HYPERPARAMETERS.items()},
                                            "lr": str(lr), "seed": str(seed)}}

    def describe(self) -> dict:
        return {"TrainingJobName": self.name, "TrainingJobStatus": "Failed", "SecondaryStatus": "Failed",
                "HyperParameters": dict(self.request["HyperParameters"]),
                "FailureReason": "AlgorithmError: the entry script exited with code 2 on algo-1. Last lines of its "
                                 "log:\nerror: no channel 'train'"}

    def metrics(self):
        import pandas as pd

        return pd.DataFrame()

    def logs(self) -> str:
        return "error: no channel 'train'\n"


def _lr_text(value) -> str:
    try:
        return f"{float(value):g}"
    except (TypeError, ValueError):
        return repr(value)


class _Waited:
    """Wraps Job.wait, Job.stream_logs and jobs.wait_all while the learner's launch runs, to see if it waits."""

    def __init__(self):
        from fmlab import jobs
        from fmlab.jobs import job as job_module

        self.calls: list[str] = []
        self.targets = [(job_module.Job, "wait"), (job_module.Job, "stream_logs"), (jobs, "wait_all"),
                        (job_module, "wait_all")]
        self.saved = [(t, n, getattr(t, n)) for t, n in self.targets]

    def __enter__(self):
        for target, name, original in self.saved:
            def wrapper(*args, _original=original, _name=name, **kwargs):
                self.calls.append(_name)
                return _original(*args, **kwargs)
            setattr(target, name, wrapper)
        return self

    def __exit__(self, *exc):
        for target, name, original in self.saved:
            setattr(target, name, original)


def _launch_problems(launched, seconds: float, waited: list[str]) -> list[str]:
    from fmlab.jobs import Job

    if not isinstance(launched, list | tuple) or not all(isinstance(j, Job) for j in launched):
        return [f"launch_sweep returned {type(launched).__name__}: return the list of Job objects that "
                "jobs.launch(spec) returns, one per run"]
    if len(launched) != len(RUNS):
        return [f"launch_sweep launched {len(launched)} job(s), expected {len(RUNS)}: one per run in RUNS"]
    out = []
    if waited:
        out.append(f"launch_sweep called {', '.join(sorted(set(waited)))} ({seconds:.1f} s): it waited for jobs to "
                   "end; launch every job first, and gather afterwards. Each launch returns as soon as the job is "
                   "accepted, which is what lets them run at the same time")
    asked = sorted((float(j.request["HyperParameters"].get("lr", "nan")),
                    int(j.request["HyperParameters"].get("seed", "0"))) for j in launched)
    wanted = sorted((r["lr"], r["seed"]) for r in RUNS)
    if asked != wanted:
        out.append(f"the jobs ran with (lr, seed) = {asked}, expected {wanted}: one job per run in RUNS, its lr "
                   "and seed added to the base's hyperparameters")
    for j in launched:
        hps = j.request["HyperParameters"]
        lost = [k for k in HYPERPARAMETERS if k not in hps]
        if lost:
            out.append(f"{j.name} lost the base's hyperparameters {', '.join(lost)}: merge them, "
                       "{**base.hyperparameters, **run}, instead of replacing them")
            break
    return out


def _gather_problems(gather, jobs: list) -> tuple[list[str], object]:
    """Differences between the learner's gather and the lab's on the same jobs (in another order, plus a
    stand-in for a job that failed before its first step); also the learner's table."""
    import pandas as pd

    stand_in = _StandIn("fmlab-lab03-sweep-failed-20240101000000", 0.03, 0)
    given = list(reversed(jobs)) + [stand_in]
    want = reference_gather(given)
    try:
        got = gather(given)
    except NotImplementedError:
        raise
    except Exception as e:
        where = (" on a job that failed before its first step (its metrics() is an empty table, and "
                 "its status Failed)" if isinstance(e, KeyError | IndexError) else "")
        return [f"gather raised {type(e).__name__}: {e}{where}"], None
    try:
        got = pd.DataFrame(got)
    except Exception as e:
        return [f"gather returned {type(got).__name__}, which is not a table ({e}): return a pandas DataFrame"], None
    missing = [c for c in COLUMNS if c not in got.columns]
    if missing:
        return [f"the table has no column {', '.join(missing)}: expected columns {COLUMNS}"], got
    out = []
    for _, w in want.iterrows():
        rows = got[got["job"] == w["job"]]
        if len(rows) != 1:
            out.append(f"{len(rows)} rows for job {w['job']}, expected 1")
            continue
        g = rows.iloc[0]
        try:
            lr_ok = math.isclose(float(g["lr"]), w["lr"], rel_tol=1e-9)
            seed_ok = int(g["seed"]) == w["seed"]
        except (TypeError, ValueError):
            lr_ok = seed_ok = False
        if not (lr_ok and seed_ok):
            out.append(f"job {w['job']}: lr {_lr_text(g['lr'])}, seed {g['seed']}, but it ran with lr "
                       f"{w['lr']:g}, seed {w['seed']} (its HyperParameters): read them from the job, not from "
                       "the order of a list")
        if g["status"] != w["status"]:
            out.append(f"job {w['job']}: status {g['status']!r}, expected {w['status']!r}")
        try:
            loss = float(g["final_loss"])
        except (TypeError, ValueError):
            loss = None
        if math.isnan(w["final_loss"]):
            if loss is None or not math.isnan(loss):
                shown = f"{loss:.4f}" if loss is not None else repr(g["final_loss"])
                out.append(f"job {w['job']} logged no loss (it failed before its first step): final_loss "
                           f"{shown}, expected NaN")
        elif loss is None or not math.isclose(loss, w["final_loss"], rel_tol=0, abs_tol=1e-9):
            m = next(j for j in given if j.name == w["job"]).metrics()
            curve = m["loss"].dropna()
            why = (": the lowest loss of the curve, not the last" if loss is not None and
                   math.isclose(loss, float(curve.min()), abs_tol=1e-9) else "")
            shown = f"{loss:.4f}" if loss is not None else repr(g["final_loss"])
            out.append(f"job {w['job']}: final_loss {shown}, expected {w['final_loss']:.4f}, the loss "
                       f"at its last logged step ({int(m.loc[curve.index[-1], 'step'])}){why}")
        if w["status"] == "Failed" and w["failure"] not in str(g["failure"]):
            out.append(f"job {w['job']} failed, and its failure column says {str(g['failure'])[:80]!r}: give the "
                       f"first line of its FailureReason ({w['failure'][:80]!r})")
    return out, got


def _stop_sweep() -> None:
    """Stop the sandbox jobs still running (a failed check should not leave them training); say so if any."""
    import contextlib
    import io

    from fmlab import jobs

    with contextlib.redirect_stdout(io.StringIO()):
        actions = jobs.cleanup("local")
    for line in actions:
        print(line)


def _table_text(table) -> str:
    shown = table.copy()
    try:  # shorter job names (no timestamp) and failures, when they are text
        shown["job"] = shown["job"].astype(str).str.replace(r"-\d{14}$", "", regex=True)
        shown["failure"] = shown["failure"].astype(str).str.slice(0, 40)
    except (KeyError, AttributeError, TypeError):
        pass
    return shown.to_string(index=False, float_format=lambda v: f"{v:.4f}")


def check_sweep(launch_sweep, gather, work) -> bool:
    """Launch the sweep with the learner's launch_sweep, wait for it, and compare the learner's gather with the
    lab's on the same jobs."""
    from fmlab import jobs

    ex = "ex2_sweep"
    if not callable(launch_sweep) or not callable(gather):
        return LAB.report(ex, False, "give the functions launch_sweep and gather themselves (no parentheses)")
    base = base_spec(work)
    start = time.perf_counter()
    try:
        with _Waited() as waited:
            launched = launch_sweep(base, [dict(r) for r in RUNS])
    except NotImplementedError:
        return LAB.report(ex, False, "not answered yet: launch_sweep still raises NotImplementedError. Hint: one "
                          "jobs.launch(spec) per run, each spec a base.with_(...) copy with its own name and the run's "
                          "hyperparameters added; return the jobs")
    except Exception as e:
        _stop_sweep()
        return LAB.report(ex, False, f"launch_sweep raised {type(e).__name__}: {str(e)[:400]}")
    seconds = time.perf_counter() - start
    problems = _launch_problems(launched, seconds, waited.calls)
    if problems:
        _stop_sweep()
        return LAB.report(ex, False, "; ".join(problems))
    try:
        ended = jobs.wait_all(launched, timeout=SWEEP_TIMEOUT, progress=False)
    except TimeoutError as e:
        _stop_sweep()
        return LAB.report(ex, False, f"the sweep did not end within {SWEEP_TIMEOUT:.0f} s ({e}); its logs are in "
                          f"{Path(os.environ['FMLAB_SANDBOX_DIR']) / 'jobs'}")
    failed = [(j.name, d.get("FailureReason", "")) for j, d in zip(launched, ended, strict=True)
              if d["TrainingJobStatus"] != "Completed"]
    if failed:
        return LAB.report(ex, False, f"{len(failed)} job(s) did not complete: " + "; ".join(
            f"{n}: {r.splitlines()[0] if r else 'no reason'}" for n, r in failed))
    _SWEEP["jobs"] = launched
    peak = jobs.peak_concurrency(ended)
    try:
        problems, table = _gather_problems(gather, launched)
    except NotImplementedError:
        return LAB.report(ex, False, "the sweep ran, but gather is not answered yet (it still raises "
                          "NotImplementedError). Hint: for each job, job.describe() has its HyperParameters (strings), "
                          "TrainingJobStatus and FailureReason; job.metrics() its loss curve")
    if problems:
        shown = f"\nyour table:\n{_table_text(table)}" if table is not None and not table.empty \
            and all(c in table.columns for c in COLUMNS) else ""
        return LAB.report(ex, False, f"{len(problems)} difference(s) from the lab's gather on the same jobs (given "
                          "in another order, with a job that failed before its first step): "
                          + "; ".join(problems[:3]) + (f" (and {len(problems) - 3} more)" if len(problems) > 3 else "")
                          + shown)
    return LAB.report(ex, True, f"{len(launched)} jobs launched in {seconds:.1f} s without waiting, up to {peak} "
                      f"training at once; your table matches the lab's on the same jobs:\n{_table_text(table)}")


# ---------------------------------------------------------------- exercise 3: a winner, or "inconclusive"


def _rows(name: str, *rows) -> tuple[str, object]:
    import pandas as pd

    table = pd.DataFrame([dict(job=f"fmlab-{name}-{i}", lr=lr, seed=seed, status=status, final_loss=loss,
                               failure="" if status == "Completed" else "AlgorithmError: the entry script exited "
                               "with code 1 on algo-1")
                          for i, (lr, seed, status, loss) in enumerate(rows)], columns=COLUMNS)
    return name, table


# (what the table shows, the table, the margin) — each separates the rule from one usual mistake
CASES = [
    (*_rows("one lucky seed", (0.003, 0, "Completed", 5.10), (0.003, 1, "Completed", 5.50),
            (0.01, 0, "Completed", 5.22), (0.01, 1, "Completed", 5.24)), 0.05),
    (*_rows("a gap inside the noise", (0.003, 0, "Completed", 5.30), (0.01, 0, "Completed", 5.26),
            (0.01, 1, "Completed", 5.27)), MARGIN),
    (*_rows("a failed job with a low last loss", (0.003, 0, "Completed", 5.61), (0.01, 0, "Completed", 5.32),
            (0.03, 0, "Failed", 5.01)), MARGIN),
    (*_rows("a diverged run", (0.003, 0, "Completed", 5.61), (0.01, 0, "Completed", 5.42),
            (0.1, 0, "Completed", math.nan)), MARGIN),
]
BEST_HINT = ("keep the completed jobs with a finite final loss; average each learning rate's seeds; the lowest "
             "average wins only if the runner-up's is more than `margin` higher, else return None (inconclusive)")


def _described(table) -> str:
    return ", ".join(f"lr {r.lr:g} seed {r.seed} {r.status} {r.final_loss:.2f}" for r in table.itertuples())


def _answer_text(value) -> str:
    return "None (inconclusive)" if value is None else _lr_text(value)


def check_best(best, work, jobs: list | None = None) -> bool:
    """best(table, margin) on the four CASES, then on the sweep's table (the jobs of the last check_sweep, else
    `jobs`, else a sweep the lab launches itself)."""
    ex = "ex3_best"
    if not callable(best):
        return LAB.report(ex, False, "give the function best itself (no parentheses)")
    wrong, rows = [], []

    def ask(name, table, margin):
        want = reference_best(table, margin)
        try:
            got = best(table.copy(), margin)
        except NotImplementedError:
            raise
        except Exception as e:
            wrong.append(f"{name}: best raised {type(e).__name__}: {e}")
            return
        try:
            same = (got is None and want is None) or (got is not None and want is not None
                                                      and math.isclose(float(got), want, rel_tol=1e-9))
        except (TypeError, ValueError):
            same = False
        if same:
            rows.append(f"  {name}: {_answer_text(want)}")
        else:
            wrong.append(f"{name} ({_described(table)}; margin {margin:g}): best returned {_answer_text(got)}, "
                         f"expected {_answer_text(want)}")

    try:
        for name, table, margin in CASES:
            ask(name, table, margin)
    except NotImplementedError:
        return LAB.report(ex, False, f"not answered yet: best still raises NotImplementedError. Hint: {BEST_HINT}")
    launched = jobs or _SWEEP.get("jobs")
    if not launched:
        print("no sweep from exercise 2 in this kernel: the lab launches its own (about 15 s)")
        from fmlab import jobs as jobs_api

        launched = reference_launch(base_spec(work), RUNS)
        jobs_api.wait_all(launched, timeout=SWEEP_TIMEOUT, progress=False)
        _SWEEP["jobs"] = launched
    ask("the sweep you ran", reference_gather(launched), MARGIN)
    if wrong:
        return LAB.report(ex, False, f"{len(wrong)} of {len(CASES) + 1} tables differ: " + "; ".join(wrong)
                          + f". Hint: {BEST_HINT}")
    return LAB.report(ex, True, "the same answer as the lab's rule on every table:\n" + "\n".join(rows))


# ---------------------------------------------------------------- exercise 4: fail fast, given pieces

WORLD = 2
STEPS = 8
SEED = 0
FEATURES, HIDDEN, BATCH, LR = 8, 16, 16, 0.05
STEP_TIMEOUT = 1.5  # seconds without a beat() before the watchdog fails the process
HANG_RANK, HANG_STEP = 1, 3  # ex4's hang: rank 1's data loader never returns at step 3
SLOW_RANK, SLOW_STEPS, SLOW_SECONDS = 1, (4, 5, 6), 0.6  # the healthy run: slow reads, each below the timeout
EXPORT_SECONDS = 2.0  # rank 0 exports the model after training, with the watchdog stopped
HANG_BOUND = STEP_TIMEOUT + 1.0  # seconds from the hang to the end of the world
COLLECTIVE_TIMEOUT = 30.0  # a rank waits this long for its peers: the bound a watchdog must beat by far
WORLD_LIMIT = 6.0  # seconds a hanging world may run before the check kills it


def make_training():
    """The model and optimizer: the same initial weights on every rank."""
    torch.manual_seed(SEED)
    model = torch.nn.Sequential(torch.nn.Linear(FEATURES, HIDDEN), torch.nn.Tanh(), torch.nn.Linear(HIDDEN, 1))
    return model, torch.optim.SGD(model.parameters(), lr=LR)


def batch(step: int, rank: int, world_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Rank `rank`'s batch of step `step`, a stand-in for the data loader (the check's faults strike here)."""
    g = torch.Generator().manual_seed(SEED * 1_000_003 + step * world_size + rank)
    x = torch.randn(BATCH, FEATURES, generator=g)
    return x, torch.sin(x.sum(dim=1, keepdim=True))


def export(model, rank: int) -> None:
    """Rank 0 writes the trained model, which takes EXPORT_SECONDS (an upload to S3 can take minutes)."""
    if rank == 0:
        time.sleep(EXPORT_SECONDS)


def wait_for_peers(work, watchdog, step: int, limit: float = COLLECTIVE_TIMEOUT) -> None:
    """Wait for an asynchronous collective, calling watchdog.beat(step) while waiting: a rank that waits for its
    peers is not hung, and its wait is bounded by the collective timeout (`limit`), not by the watchdog."""
    start = time.monotonic()
    while not work.is_completed():
        if time.monotonic() - start > limit:
            raise RuntimeError(f"step {step}: waited {limit:g} s for the other ranks in an all-reduce (collective "
                               "timeout)")
        watchdog.beat(step)
        time.sleep(0.005)
    work.wait()


def train(rank: int, world_size: int, make_watchdog, failure_file, steps: int = STEPS,
          timeout: float = STEP_TIMEOUT) -> dict:
    """The lab's training loop, data parallel by hand, with a watchdog: beat() at every step and while waiting
    for peers, stop() when training ends. Returns this rank's {step: loss}."""
    model, optimizer = make_training()
    watchdog = make_watchdog(rank, timeout, failure_file)
    losses = {}
    for step in range(1, steps + 1):
        watchdog.beat(step)
        x, y = batch(step, rank, world_size)
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        for p in model.parameters():
            wait_for_peers(dist.all_reduce(p.grad, async_op=True), watchdog, step)
            p.grad /= world_size
        optimizer.step()
        losses[step] = loss.item()
    watchdog.stop()
    export(model, rank)
    return losses


def replay(steps: int = STEPS, world_size: int = WORLD) -> list[dict]:
    """The same steps in one process: each rank's loss on its own batch, the gradients averaged by hand."""
    model, optimizer = make_training()
    losses = [{} for _ in range(world_size)]
    for step in range(1, steps + 1):
        grads = [torch.zeros_like(p) for p in model.parameters()]
        for rank in range(world_size):
            x, y = batch(step, rank, world_size)
            loss = torch.nn.functional.mse_loss(model(x), y)
            model.zero_grad()
            loss.backward()
            for g, p in zip(grads, model.parameters(), strict=True):
                g += p.grad
            losses[rank][step] = loss.item()
        for g, p in zip(grads, model.parameters(), strict=True):
            p.grad = g / world_size
        optimizer.step()
    return losses


class ReferenceWatchdog:
    """The lab's solution to exercise 4: a thread that fails this process when beat() stops for `timeout` s."""

    def __init__(self, rank: int, timeout: float, failure_file):
        self.rank, self.timeout, self.failure_file = rank, timeout, Path(failure_file)
        self.step, self.last = 0, time.monotonic()
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._watch, name=f"watchdog-rank{rank}", daemon=True)
        self.thread.start()

    def beat(self, step: int) -> None:
        self.step, self.last = step, time.monotonic()

    def stop(self) -> None:
        self.stopped.set()

    def _watch(self) -> None:
        while not self.stopped.wait(self.timeout / 10):
            idle = time.monotonic() - self.last
            if idle > self.timeout:
                reason = (f"rank {self.rank} made no progress in step {self.step} for {idle:.1f} s (watchdog "
                          f"timeout {self.timeout:g} s)")
                if not self.failure_file.exists() or not self.failure_file.stat().st_size:
                    self.failure_file.write_text(reason + "\n")
                print(f"watchdog: {reason}", file=sys.stderr, flush=True)
                os._exit(1)


# ---------------------------------------------------------------- exercise 4: the check


def _arm(scenario: str, rank: int, logs: Path) -> None:
    """Install this rank's fault inside its own process: a hook on batch (a hang, or slow reads)."""
    real = globals()["batch"]

    def hooked(step, rank_, world_size):
        if scenario == "hang" and rank == HANG_RANK and step == HANG_STEP:
            (logs / "hang-time").write_text(repr(time.time()))
            (logs / f"rank{rank}.fault").write_text(f"rank {rank} hangs in its data loader at step {step}")
            print(f"fault: rank {rank} hangs in its data loader at step {step} (sleeps for ever)", flush=True)
            while True:
                time.sleep(3600)
        if scenario == "slow" and rank == SLOW_RANK and step in SLOW_STEPS:
            time.sleep(SLOW_SECONDS)
        return real(step, rank_, world_size)

    globals()["batch"] = hooked  # what lab03.batch(...) finds in this process from now on


def run_world(make_watchdog, logs, scenario: str, limit: float | None = None) -> world.World:
    """`train` with the learner's watchdog on WORLD forked gloo processes, `scenario` ("slow" or "hang") armed;
    the failure file both ranks share (one host's /opt/ml/output/failure) is `<logs>/failure`."""
    logs = Path(logs)

    def fn(rank, world_size):
        return train(rank, world_size, make_watchdog, logs / "failure")

    return world.run_world(fn, logs, WORLD, limit or WORLD_LIMIT, prepare=lambda rank, logs_: _arm(scenario, rank, logs_),
                           collective_timeout=COLLECTIVE_TIMEOUT)


def _reason(logs: Path) -> str:
    f = logs / "failure"
    return f.read_text(errors="replace").strip() if f.exists() else ""


def _mentions(reason: str, word: str, number: int) -> bool:
    return re.search(rf"\b{word}\s*[:=#]?\s*{number}\b", reason, re.IGNORECASE) is not None


WATCHDOG_HINT = ("a thread that checks, about ten times per timeout, how long ago beat() was last called; past the "
                 "timeout it writes a reason naming its rank and step to failure_file, then ends the process with "
                 "os._exit(1); stop() ends the checking")


def _healthy_problems(make_watchdog, base: Path) -> tuple[list[str], str]:
    logs = base / "healthy"
    w = run_world(make_watchdog, logs, "slow", limit=30.0)
    if w.unanswered():
        return ["not answered yet: Watchdog still raises NotImplementedError"], ""
    reason = _reason(logs)
    if not w.ok:
        if reason:
            step = re.search(r"\bstep\s*(\d+)", reason, re.IGNORECASE)
            if step and int(step.group(1)) == STEPS:
                why = (f"it fired after the last step, while rank 0 exported the model for {EXPORT_SECONDS:g} s: "
                       "stop() must end the watching")
            else:
                why = (f"rank {SLOW_RANK} read slowly at steps {SLOW_STEPS[0]}-{SLOW_STEPS[-1]} ({SLOW_SECONDS:g} s "
                       f"each, below the {STEP_TIMEOUT:g} s timeout): measure the time since the last beat(), not "
                       "since the start, and compare it with `timeout`")
            return [f"your watchdog stopped a healthy run, with the reason {reason[:200]!r}: {why}"], ""
        return [f"the healthy run failed: {w.failure() or 'exit codes ' + str(w.exitcodes)}"], ""
    if reason:
        return [f"the healthy run finished, but the failure file holds {reason[:200]!r}: write it only when the "
                "watchdog fires"], ""
    try:
        got = [{int(k): float(v) for k, v in r.items()} for r in w.results]
    except (AttributeError, TypeError, ValueError):
        return ["the training loop's results are unreadable"], ""
    diffs = world.differences(got, replay(), atol=1e-6, rtol=0, name="losses")
    if diffs:
        return [f"the healthy run's losses differ from a single-process replay of the same steps: "
                f"{world.first_lines(diffs)}"], ""
    return [], (f"  healthy: slow reads of {SLOW_SECONDS:g} s on rank {SLOW_RANK}, then a {EXPORT_SECONDS:g} s "
                f"export after stop(): no false alarm in {w.seconds:.1f} s; losses equal a single-process replay")


def _hang_problems(make_watchdog, base: Path) -> tuple[list[str], str]:
    logs = base / "hang"
    w = run_world(make_watchdog, logs, "hang")
    ended = time.time()
    if w.unanswered():
        return ["not answered yet: Watchdog still raises NotImplementedError"], ""
    reason = _reason(logs)
    hang_file = logs / "hang-time"
    if not hang_file.exists():
        return [f"the run failed before rank {HANG_RANK} hung at step {HANG_STEP}: "
                f"{w.failure() or 'exit codes ' + str(w.exitcodes)}"], ""
    after = ended - float(hang_file.read_text())
    fault = f"rank {HANG_RANK} hung in its data loader at step {HANG_STEP}"
    if w.timed_out:
        kept = (f"; your watchdog wrote {reason[:160]!r} but the process kept running: end it with os._exit(1) "
                "(an exception raised in a thread, or sys.exit there, ends only that thread)" if reason else
                "; nothing wrote a failure reason either")
        return [f"{fault}, and {after:.1f} s later the world was still running (killed by the check; a job would "
                f"run to MaxRuntimeInSeconds){kept}. Logs: {logs}"], ""
    if w.exitcodes[HANG_RANK] in (0, None):
        return [f"{fault}, but it was not its watchdog that ended the run: exit codes {w.exitcodes}, "
                f"{w.failure()}"], ""
    if after > HANG_BOUND:
        return [f"{fault}; the job did fail, but {after:.1f} s after the hang, more than the bound of "
                f"{HANG_BOUND:g} s (timeout {STEP_TIMEOUT:g} s + 1 s): fire as soon as `timeout` seconds pass without a "
                "beat (compare with timeout itself, and check about ten times per timeout)"], ""
    if not reason:
        return [f"{fault}; the process ended {after:.1f} s later, but failure_file is empty: SageMaker would report "
                "only a generic message and the log's last lines. Write a reason there before exiting"], ""
    if not (_mentions(reason, "rank", HANG_RANK) and _mentions(reason, "step", HANG_STEP)):
        return [f"{fault}; the reason written is {reason[:200]!r}: name the rank (rank {HANG_RANK}) and the step "
                f"(step {HANG_STEP}) where progress stopped, so that whoever reads the FailureReason knows where "
                "to look"], ""
    return [], (f"  hang: {fault}; the job failed {after:.1f} s later (bound {HANG_BOUND:g} s, collective timeout "
                f"{COLLECTIVE_TIMEOUT:g} s) with exit code {w.exitcodes[HANG_RANK]} and the reason:\n    {reason}")


def check_watchdog(make_watchdog: Callable, work) -> bool:
    ex = "ex4_watchdog"
    if not callable(make_watchdog):
        return LAB.report(ex, False, "give the class Watchdog itself (no parentheses)")
    base = Path(work) / "ex4"
    rows = []
    for attempt in (_healthy_problems, _hang_problems):
        out, row = attempt(make_watchdog, base)
        if out:
            return LAB.report(ex, False, out[0] + ("" if out[0].endswith(".") else ".") + f" Hint: {WATCHDOG_HINT}")
        rows.append(row)
    return LAB.report(ex, True, "no false alarm, and a hang fails fast with a clear reason:\n" + "\n".join(rows))


def summary() -> None:
    LAB.summary()
