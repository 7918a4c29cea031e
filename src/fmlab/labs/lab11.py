"""Checks for labs/lab_11_hyperpod_slurm.ipynb: the capacity choice, and an sbatch script that survives a fault.

    lab11.check_capacity(choose_capacity)        # ex1: the same choice as the reference in every scenario
    lab11.check_sbatch(batch_script, work)       # ex2: the script's shape; on a local Slurm, a fault, a requeue, a resume
    lab11.summary()                              # raises LabIncomplete while any check fails

Exercise 1: the learner's `choose_capacity(rows, deadline_days, reserve_from_instances)` gets the rows of
`fmlab.plan.capacity.options` (instance type, Region, count, days, fit, quota, on-demand and reserved prices) and
returns the row to use, or None when none is feasible (quota >= count, days <= deadline, fits in memory, and, from
`reserve_from_instances` instances on, a published reserved rate); among the feasible, the cheapest, priced
reserved from that count on and on demand below it. It is run on the SCENARIOS below and must give the reference's
row (`fmlab.plan.capacity.choose`) in every one.

Exercise 2: the learner's `batch_script(spec, port)` returns the text of the sbatch script for an
`fmlab.hyperpod.slurm.SlurmTrainSpec`. The check reads its #SBATCH lines and its `srun` line (one task per node,
--requeue, --open-mode=append, the output file, the rendezvous on the first node with the job id, the spec's
training flags, checkpoint and output folders). Then, where this machine runs a Slurm that takes jobs
(requirements/slurm.sh), it runs the script for real with module 8's fault (rank 1 killed at step 7, a checkpoint
every 4 steps) through `run_with_auto_resume`: it must fail once, be requeued under the same job id, resume from
the step-4 checkpoint and complete (about 20 s on 2 cores). Without Slurm the shape check alone decides, and says so.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from pathlib import Path

from fmlab.environment import free_port
from fmlab.hyperpod import slurm
from fmlab.labs import Lab
from fmlab.labs.world import fresh_folder
from fmlab.plan import capacity
from fmlab.plan.compute import PlanError

LAB = Lab("lab 11", ["ex1_capacity", "ex2_sbatch"])

# (label, options(...) arguments): quotas, deadline and counts that make each rule decide once
SCENARIOS = [
    ("quota for p5 in us-east-1 only", dict(deadline_days=30, quotas={("us-east-1", "ml.p5.48xlarge"): 16})),
    ("no p5 quota: p5en in us-east-2, on demand below 16 instances",
     dict(deadline_days=30, quotas={("us-east-2", "ml.p5en.48xlarge"): 8, ("us-west-2", "ml.p4d.24xlarge"): 16})),
    ("a long deadline lets p4d in", dict(deadline_days=60, quotas={("us-west-2", "ml.p4d.24xlarge"): 16})),
    ("nothing has quota", dict(deadline_days=30, quotas={})),
    ("reserve from 8 instances: p5en has no published rate",
     dict(deadline_days=30, quotas={("us-east-2", "ml.p5en.48xlarge"): 8}, reserve_from_instances=8)),
]
MODEL, TOKENS = "gpt-30b", 300e9
STEPS, CHECKPOINT_EVERY, FAULT_STEP = 12, 4, 7
RUN_TIMEOUT = 180.0


def _reference(rows, reserve_from_instances):
    try:
        return capacity.choose(rows, reserve_from_instances)
    except PlanError:
        return None


def _key(row) -> tuple | None:
    return None if row is None else (row.instance, row.region, row.instances)


def check_capacity(choose_capacity: Callable) -> bool:
    """Ex 1: the learner's choice equals the reference's in every scenario."""
    def test(fn):
        wrong = []
        for label, args in SCENARIOS:
            reserve = args.get("reserve_from_instances", 16)
            rows = capacity.options(MODEL, TOKENS, **args)
            want, got = _key(_reference(rows, reserve)), _key(fn(rows, args["deadline_days"], reserve))
            if got != want:
                wrong.append(f"{label}: you chose {got}, the rule gives {want}")
        for line in wrong:
            print("  " + line)
        return not wrong
    return LAB.check("ex1_capacity", choose_capacity, test,
                     f"the same choice as the rule in all {len(SCENARIOS)} scenarios",
                     "feasible = quota >= instances, days <= deadline, fits, and a reserved rate when the count needs "
                     "a reservation; then the lowest price (reserved_usd from reserve_from_instances on, else "
                     "on_demand_usd); None when nothing is feasible")


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


def check_sbatch(batch_script: Callable, work: str | Path) -> bool:
    """Ex 2: the script's shape, then (where Slurm runs here) a real run with a fault, a requeue and a resume."""
    folder = fresh_folder(work, "ex2")

    def test(fn):
        from fmlab.data import course_dataset

        data = course_dataset(seq_len=128, vocab_size=512)
        spec = slurm.SlurmTrainSpec(folder / "run", job_name="lab11", train_args=[
            "--model", "tiny", "--data", str(data), "--max-steps", str(STEPS), "--checkpoint-every",
            str(CHECKPOINT_EVERY), "--micro-batch", "4", "--log-every", "2", "--tensorboard", "false",
            "--fault", "kill", "--fault-step", str(FAULT_STEP), "--fault-rank", "1"])
        port = free_port()
        script = fn(spec, port)
        problems = shape_problems(script, spec, port)
        for line in problems:
            print("  " + line)
        if problems:
            return False
        cluster = slurm.ensure_cluster()
        if not cluster.available:
            print(f"  the script has the right shape; no Slurm here to run it ({cluster.reason})")
            return True
        run = slurm.run_with_auto_resume(spec, max_requeues=1, timeout=RUN_TIMEOUT, script=script)
        print(f"  job {run.job_id}: {' -> '.join(run.states)}, Restarts={run.restarts}, resumed at {run.resumed_at}")
        want = CHECKPOINT_EVERY * ((FAULT_STEP - 1) // CHECKPOINT_EVERY)
        return run.state == "COMPLETED" and run.restarts == 1 and run.resumed_at == [want]
    return LAB.check("ex2_sbatch", batch_script, test,
                     "the script ran on Slurm, failed at the fault, was requeued and resumed from its checkpoint",
                     "#SBATCH --nodes, --ntasks-per-node=1, --requeue, --open-mode=append, --output=spec.output_file; "
                     "then one `srun` line running torchrun with --rdzv-id $SLURM_JOB_ID and the spec's flags")


def summary() -> None:
    LAB.summary()
