"""Checks for labs/lab_11_hyperpod_slurm.ipynb: a reservation that holds the job, and an sbatch script that survives a
node fault on a two-node Slurm.

    lab11.check_reservation(reservation_days)    # ex1: the days to buy, as the course's rule gives them, in 9 cases
    lab11.check_sbatch(batch_script, work)       # ex2: the script's shape; on the local Slurm, a fault, a node
                                                 # replaced, a requeue and a resume across two nodes
    lab11.summary()                              # raises LabIncomplete while any check fails

Exercise 1: the learner's `reservation_days(run_days, kind, margin, start_up_hours)` returns the whole days of
reserved capacity to buy for a run of `run_days`: the job's MaxRuntime (run x margin), its start-up and the 30
minutes at the end when the plan is already ending its instances, rounded up to what `kind` sells (a training plan:
whole days from 1 to 182; EC2 Capacity Blocks: whole days up to 14, then whole weeks up to 182). Beyond 182 days, or
with a margin under 1, it raises ValueError. It must give `fmlab.plan.capacity.reservation(...).days` in every case of
RESERVATIONS (one of them module 7's 30B run on 16 p5, its days from the planner).

Exercise 2: the learner's `batch_script(spec, port)` returns the text of the sbatch script for an
`fmlab.hyperpod.slurm.SlurmTrainSpec` of 2 nodes x 1 process. The check reads its #SBATCH lines and its `srun` line
(one task per node, --requeue, --open-mode=append, the output file, the spec's training flags, checkpoint and output
folders, the rendezvous). Then, where this machine runs its two-node Slurm (requirements/slurm.sh), it runs the
script for real with module 8's fault (rank 1 killed at step 7, a checkpoint every 4 steps) through
`run_with_auto_resume`: it must span both nodes, fail once, have the faulty node replaced, be requeued under the same
job id, resume from the step-4 checkpoint and complete (about 20 s on 2 cores). A script whose only fault is its
rendezvous runs too, and fails for real (torchrun's default static rendezvous: every node's torchrun believes it is
node 0 and hosts the store; here the second one cannot bind the port, on two hosts each waits for a peer that never
comes). Without Slurm the shape check alone decides, and says so.
"""

from __future__ import annotations

import inspect
import re
import shlex
from collections.abc import Callable
from pathlib import Path

from fmlab.environment import free_port
from fmlab.hyperpod import slurm
from fmlab.labs import Lab, fresh_folder
from fmlab.plan import capacity, regions
from fmlab.plan.compute import PlanError

LAB = Lab("lab 11", ["ex1_reservation", "ex2_sbatch"])

MODEL, TOKENS = "gpt-30b", 300e9
P5 = "ml.p5.48xlarge"
STEPS, CHECKPOINT_EVERY, FAULT_STEP = 12, 4, 7
NODES, PROCESSES_PER_NODE = 2, 1
RUN_TIMEOUT = 180.0
TRAINING_PLAN, CAPACITY_BLOCK = "training plan", "capacity block"


def run_days_30b_p5() -> float:
    """Module 7's 30B run on 16 p5, its days from the planner's predicted step: what a reservation is sized from."""
    rows = regions.options(MODEL, TOKENS, deadline_days=60, quotas={}, instances_by_type={P5: 16})
    return rows[0].days


def reservations() -> list[tuple[str, dict]]:
    """(label, reservation arguments): each rule of the sizing decides in at least one case."""
    run = run_days_30b_p5()
    return [
        (f"the 30B run on 16 p5 ({run:.2f} days), a training plan", dict(run_days=run, kind=TRAINING_PLAN, margin=1.2)),
        ("the same run as EC2 Capacity Blocks (whole days up to 14)", dict(run_days=run, kind=CAPACITY_BLOCK,
                                                                           margin=1.2)),
        ("the same run without a margin", dict(run_days=run, kind=TRAINING_PLAN, margin=1.0)),
        ("13 days as Capacity Blocks (weeks after 14 days)", dict(run_days=13.0, kind=CAPACITY_BLOCK, margin=1.2)),
        ("a 3-hour rehearsal (at least one day)", dict(run_days=0.125, kind=TRAINING_PLAN, margin=1.2)),
        ("a long start-up: 12 hours", dict(run_days=11.5, kind=TRAINING_PLAN, margin=1.2, start_up_hours=12.0)),
        ("a job whose start-up and run end 15 minutes before its 10th day does (the last half hour decides)",
         dict(run_days=10 - 75 / 1440, kind=TRAINING_PLAN, margin=1.0)),
        ("160 days: more than one reservation holds", dict(run_days=160.0, kind=TRAINING_PLAN, margin=1.2)),
        ("a margin under 1", dict(run_days=5.0, kind=TRAINING_PLAN, margin=0.9)),
    ]


def _reference(args: dict) -> int | None:
    try:
        return capacity.reservation(**args).days
    except PlanError:
        return None  # refused: the learner must raise ValueError


_REFERENCE_CALLS = ("capacity.reservation(", "buyable_days(", "reserved_days(", ".reservation(")


def check_reservation(reservation_days: Callable) -> bool:
    """Ex 1: the learner's days equal the course's rule in every case, and the refusals raise ValueError."""
    def test(fn):
        try:
            source = inspect.getsource(fn)
        except (OSError, TypeError):
            source = ""
        used = [c for c in _REFERENCE_CALLS if c in source]
        if used:
            print(f"  write the sizing yourself: your function calls {used[0].rstrip('(')}, the course's own answer")
            return False
        wrong = []
        for label, args in reservations():
            want = _reference(args)
            try:
                got = fn(**args)
            except ValueError as e:
                got = f"ValueError ({e})"
            if want is None:
                if not str(got).startswith("ValueError"):
                    wrong.append(f"{label}: you gave {got}; it must raise ValueError")
                else:
                    print(f"  {label}: refused, as it should be")
                continue
            if got != want:
                wrong.append(f"{label}: you buy {got} days, the rule buys {want}")
            else:
                held = capacity.reservation(**args)
                print(f"  {label}: {want} days ({held.spare_hours:.0f} h spare)")
        for line in wrong:
            print("  " + line)
        return not wrong
    return LAB.check("ex1_reservation", reservation_days, test,
                     f"the same days as the course's rule in all {len(reservations())} cases",
                     "needed = run_days x margin + (start_up_hours x 60 + PLAN_END_MINUTES) / 1440 days; a training "
                     "plan buys ceil(needed) (at least 1); Capacity Blocks too up to CAPACITY_BLOCK_DAILY_UP_TO days, "
                     "then whole weeks (7 x ceil(days / 7)); raise ValueError above 182 days or for a margin under 1")


def shape_problems(script: str, spec: slurm.SlurmTrainSpec, port: int | None = None) -> list[str]:
    """What the script lacks for a requeue-and-resume job on Slurm (empty when nothing). The rendezvous must be
    c10d on the allocation's first node: torchrun's default (static, on localhost) works on one node and leaves
    every other node waiting for a peer that never comes."""
    options = dict(re.findall(r"^#SBATCH\s+--([\w-]+)(?:=(\S+))?", script, re.M))
    out = []
    if not script.startswith("#!"):
        out.append("the first line must be the interpreter: #!/bin/bash")
    for name, value in (("nodes", str(spec.nodes)), ("ntasks-per-node", "1"), ("requeue", None),
                        ("open-mode", "append"), ("output", str(spec.output_file))):
        if name not in options:
            out.append(f"#SBATCH --{name}{'=' + value if value else ''} is missing")
        elif value and options[name] != value:
            out.append(f"#SBATCH --{name}={options[name]}: want {value}")
    srun = [line for line in script.splitlines() if line.strip().startswith("srun ")]
    if len(srun) != 1:
        return out + [f"want one `srun` line that starts torchrun on every node, found {len(srun)}"]
    words = shlex.split(srun[0].replace("$", "DOLLAR_"))
    if "torch.distributed.run" not in words and not any(w.endswith("torchrun") for w in words):
        out.append("srun must start torchrun (python -m torch.distributed.run)")
    for flag, want in (("--rdzv-id", "DOLLAR_SLURM_JOB_ID"), ("--nproc-per-node", str(spec.processes_per_node)),
                       ("--checkpoint-dir", str(spec.checkpoint_dir))):
        if flag not in words or words.index(flag) + 1 >= len(words) or words[words.index(flag) + 1] != want:
            out.append(f"the srun line needs {flag} {want.replace('DOLLAR_', '$')}")
    out += _rendezvous_problems(words, port)
    missing = [a for a in spec.train_args if a not in words]
    if missing:
        out.append(f"the srun line lacks training flags {missing[:4]}")
    return out


def rendezvous_problems(script: str, port: int | None = None) -> list[str]:
    """What the script's one `srun` line gets wrong about the rendezvous (empty when nothing, or no single srun)."""
    srun = [line for line in script.splitlines() if line.strip().startswith("srun ")]
    if len(srun) != 1:
        return []
    return _rendezvous_problems(shlex.split(srun[0].replace("$", "DOLLAR_")), port)


def _rendezvous_problems(words: list[str], port: int | None) -> list[str]:
    """--nnodes from Slurm, a c10d rendezvous, and its endpoint on a host the script reads from Slurm (not localhost)
    at `port`."""
    def value(flag: str) -> str | None:
        for i, w in enumerate(words):
            if w == flag and i + 1 < len(words):
                return words[i + 1]
            if w.startswith(flag + "="):
                return w.split("=", 1)[1]
        return None

    out = []
    if value("--nnodes") is None:
        out.append("the srun line needs --nnodes $SLURM_JOB_NUM_NODES (every node's torchrun waits for them all)")
    if value("--rdzv-backend") != "c10d":
        out.append("the srun line needs --rdzv-backend c10d: torchrun's default static rendezvous works on one node "
                   "and leaves the others waiting")
    endpoint = value("--rdzv-endpoint")
    if endpoint is None:
        out.append("the srun line needs --rdzv-endpoint on the allocation's first node, e.g. $HEAD_NODE:PORT")
    else:
        host, _, at = endpoint.rpartition(":")
        if host in ("", "localhost", "127.0.0.1") or not host.startswith("DOLLAR_"):
            out.append(f"--rdzv-endpoint {endpoint.replace('DOLLAR_', '$')}: the host must be the allocation's first "
                       "node, read from Slurm ($HEAD_NODE from scontrol show hostnames), not a fixed name")
        if port is not None and at != str(port):
            out.append(f"--rdzv-endpoint {endpoint.replace('DOLLAR_', '$')}: use the port given, {port}")
    return out


def _first_error(output: str) -> str:
    """The line of a failed job's output that says why (torchrun's rendezvous error, else srun's)."""
    lines = output.splitlines()
    for pattern in (r"(DistNetworkError|RendezvousError|RendezvousTimeoutError|TimeoutError)", r"^srun: error"):
        found = [ln for ln in lines if re.search(pattern, ln)]
        if found:
            return found[0].strip()[:220]
    return lines[-1].strip()[:220] if lines else "(no output)"


def check_sbatch(batch_script: Callable, work: str | Path) -> bool:
    """Ex 2: the script's shape, then (where Slurm runs here) a real run across two nodes with a fault, a node
    replaced, a requeue and a resume."""
    folder = fresh_folder(work, "ex2")

    def test(fn):
        from fmlab.data import course_dataset

        data = course_dataset(seq_len=128, vocab_size=512)
        spec = slurm.SlurmTrainSpec(folder / "run", job_name="lab11", nodes=NODES,
                                    processes_per_node=PROCESSES_PER_NODE, train_args=[
            "--model", "tiny", "--data", str(data), "--max-steps", str(STEPS), "--checkpoint-every",
            str(CHECKPOINT_EVERY), "--micro-batch", "4", "--log-every", "2", "--tensorboard", "false",
            "--fault", "kill", "--fault-step", str(FAULT_STEP), "--fault-rank", "1"])
        port = free_port()
        script = fn(spec, port)
        problems = shape_problems(script, spec, port)
        rendezvous = rendezvous_problems(script, port)
        for line in problems:
            print("  " + line)
        if [p for p in problems if p not in rendezvous]:
            return False
        cluster = slurm.ensure_cluster()
        if not cluster.available:
            print(f"  no Slurm here to run it ({cluster.reason}): the shape check alone decides")
            return not problems
        run = slurm.run_with_auto_resume(spec, max_requeues=1, timeout=RUN_TIMEOUT, script=script)
        print(f"  job {run.job_id} on {run.final.get('NodeList', '?')}: "
              f"{' -> '.join(run.states)}, Restarts={run.restarts}, node replaced: {run.replaced or 'none'}, "
              f"resumed at {run.resumed_at}")
        if rendezvous:
            print(f"  it ran, and failed as the rendezvous predicts: {_first_error(run.output)}")
            return False
        want = CHECKPOINT_EVERY * ((FAULT_STEP - 1) // CHECKPOINT_EVERY)
        ok = run.state == "COMPLETED" and run.restarts == 1 and run.resumed_at == [want] and len(run.replaced) == 1
        if not ok and run.state != "COMPLETED":
            print(f"  why it ended {run.state}: {_first_error(run.output)}")
        return ok
    return LAB.check("ex2_sbatch", batch_script, test,
                     "the script ran on two nodes, failed at the fault, its node was replaced, and it was requeued "
                     "and resumed from its checkpoint",
                     "#SBATCH --nodes, --ntasks-per-node=1, --requeue, --open-mode=append, --output=spec.output_file; "
                     "then one `srun` line running torchrun with --nnodes $SLURM_JOB_NUM_NODES, --rdzv-backend c10d, "
                     "--rdzv-endpoint $HEAD_NODE:port, --rdzv-id $SLURM_JOB_ID and the spec's flags")


def summary() -> None:
    LAB.summary()
