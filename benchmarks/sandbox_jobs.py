"""How long local sandbox jobs take: launch, start-up overhead, and a 4-job sweep of the real training script.

Run: .venv/bin/python benchmarks/sandbox_jobs.py [--steps 10] [--slots 2]

Uses a throwaway local bucket and sandbox (a temporary folder). Prints:
  - launch: seconds for jobs.launch (ModelTrainer request captured in-process + sandbox submit), per job
  - start-up overhead of a job whose script does nothing: submit -> Completed, for the plain driver and for
    torchrun (one agent, one worker: the torch import is the cost)
  - a 4-job learning-rate sweep of entrypoints/train.py on the tiny model: wall time, peak concurrency, and
    each job's start-up (queue wait excluded) as jobs.startup_seconds reports it
Timings depend on the machine and its load; they are reported, never asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=10, help="optimizer steps of each sweep job")
    parser.add_argument("--slots", type=int, default=2, help="FMLAB_SANDBOX_CPUS for the run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fmlab-bench-") as tmp:
        os.environ.update(FMLAB_LOCAL_BUCKET=f"{tmp}/bucket", FMLAB_SANDBOX_DIR=f"{tmp}/sandbox",
                          FMLAB_SANDBOX_CPUS=str(args.slots), FMLAB_BACKEND="local")
        from fmlab import jobs

        noop = Path(tmp) / "noop.py"
        noop.write_text("print('step=1 loss=1.0 lr=0.1')\n")
        print(f"machine: {os.cpu_count()} CPUs, {args.slots} sandbox slots, load {os.getloadavg()[0]:.1f}")

        t = time.perf_counter()
        jobs.launch(jobs.JobSpec("warmup", entry_point=str(noop)), quiet=True).wait()
        print(f"first launch + run (imports the SageMaker SDK): {time.perf_counter() - t:.1f} s")

        for label, extra in (("plain driver", {}), ("torchrun 1x1", {"distribution": "torchrun",
                                                                      "processes_per_host": 1})):
            launches, totals = [], []
            for i in range(3):
                t = time.perf_counter()
                job = jobs.launch(jobs.JobSpec(f"noop-{label.split()[0]}-{i}", entry_point=str(noop), **extra),
                                  quiet=True)
                launches.append(time.perf_counter() - t)
                d = job.wait()
                totals.append(time.perf_counter() - t - launches[-1])
                assert d["TrainingJobStatus"] == "Completed", d.get("FailureReason")
            print(f"{label:<13} launch {statistics.median(launches):.2f} s, submit -> Completed "
                  f"{statistics.median(totals):.2f} s (median of 3)")

        data = jobs.course_dataset_uri("local")
        base = jobs.JobSpec("bench-sweep", hyperparameters={"max_steps": args.steps, "micro_batch": 8,
                                                            "tensorboard": False}, inputs={"train": data})
        t = time.perf_counter()
        launched = [jobs.launch(s, quiet=True) for s in jobs.sweep(base, "lr", [1e-3, 3e-3, 1e-2, 3e-2])]
        launched_at = time.perf_counter() - t
        results = jobs.wait_all(launched, progress=False)
        wall = time.perf_counter() - t
        print(f"4-job sweep ({args.steps} steps each): {wall:.1f} s wall ({launched_at:.1f} s launching), "
              f"peak {jobs.peak_concurrency(results)} at once, statuses "
              f"{sorted({d['TrainingJobStatus'] for d in results})}")
        print("start-up per job (end of queue wait -> first step):",
              [round(jobs.startup_seconds(d), 1) for d in results])


if __name__ == "__main__":
    main()
