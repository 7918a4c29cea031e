"""What a training worker costs, started fresh by torchrun and forked from a pre-imported parent
(fmlab.train.handoff, fmlab.train.worker_zygote): CPU seconds of a 2-rank torchrun run of the tiny model.

    .venv/bin/python benchmarks/warm_workers.py               # 3 rounds, the two ways interleaved
    .venv/bin/python benchmarks/warm_workers.py --rounds 2 --steps 10 --json out.json

Each round runs `torchrun --nproc-per-node 2 entrypoints/train.py --model tiny` (fmlab.train.local.torchrun_train)
once with every worker importing for itself and once with both workers forked. A fresh run's CPU is what this
process's children used (torchrun and its two workers); a forked run's adds the workers' CPU from the zygote's
ledger (a forked worker is no child of this process). The zygote's own start-up (its imports, paid once per
interpreter and environment) is reported apart, as is whether both ways reached the same losses.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import tempfile
from pathlib import Path

from fmlab.train import handoff
from fmlab.train.local import torchrun_train


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def one_run(folder: Path | None, out: Path, steps: int) -> tuple[float, list[float]]:
    """CPU seconds of one 2-rank run (torchrun and its workers) and its losses."""
    if folder is None:
        os.environ.pop(handoff.VARIABLE, None)
    else:
        os.environ[handoff.VARIABLE] = str(folder)
    before = children_cpu() + handoff.ledger_cpu(folder)
    run = torchrun_train(2, ["--model", "tiny", "--max-steps", str(steps), "--log-every", "1"], out).check()
    return children_cpu() + handoff.ledger_cpu(folder) - before, [m["loss"] for m in run.metrics]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch) / "zygotes"
        folder.mkdir()
        first, first_losses = one_run(folder, Path(scratch) / "first", args.steps)  # starts the zygote
        zygote = sum(line["cpu"] for line in handoff.ledger(folder) if line.get("zygote"))
        fresh, forked, same = [], [], True
        for round_ in range(args.rounds):
            cpu, fresh_losses = one_run(None, Path(scratch) / f"fresh{round_}", args.steps)
            fresh.append(cpu)
            cpu, forked_losses = one_run(folder, Path(scratch) / f"forked{round_}", args.steps)
            forked.append(cpu)
            same = same and fresh_losses == forked_losses == first_losses
        handoff.disable(folder)
    result = {"machine": platform.processor() or platform.machine(), "cores": os.cpu_count(), "steps": args.steps,
              "fresh_cpu_s": [round(c, 2) for c in fresh], "forked_cpu_s": [round(c, 2) for c in forked],
              "first_forked_run_cpu_s": round(first, 2), "zygote_start_cpu_s": round(zygote, 2),
              "same_losses": same}
    print(f"2-rank tiny run of {args.steps} steps, CPU s (torchrun and both workers), {args.rounds} rounds:")
    print(f"  fresh workers:  {statistics.median(fresh):.2f} (range {min(fresh):.2f}-{max(fresh):.2f})")
    print(f"  forked workers: {statistics.median(forked):.2f} (range {min(forked):.2f}-{max(forked):.2f})")
    print(f"  the zygote's start-up (once per interpreter and environment): {zygote:.2f}; "
          f"the run that started it: {first:.2f}")
    print(f"  same losses every way: {same}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
