"""What the training entry point reports: one parseable line per log step, a JSONL file and TensorBoard events.

    log = TrainLog(output_dir, flops_per_token=..., world_size=2, peak_tflops=312.0)
    log.step(step=10, loss=5.12, lr=3e-3, tokens=40960, seconds=1.7)
    # stdout: step=10 loss=5.1200 lr=3.000e-03 tokens_per_s=24094 tflops=0.0012 mfu=0.0000 ...

The stdout line is what SageMaker's metric definitions read (see METRIC_DEFINITIONS, regexes over it);
`metrics.jsonl` holds the same numbers for notebooks; TensorBoard files go to `<output_dir>/tensorboard`.
Throughput is model FLOPs (fmlab.plan.compute.flops_per_token: 6N + attention, PaLM appendix B) per device
per second, and MFU is that over the device's dense bf16 peak from the catalog (or --peak-tflops).
Only rank 0 writes; the other ranks' TrainLog is silent.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from fmlab.plan import catalog

# For SDK v3 ModelTrainer / CreateTrainingJob AlgorithmSpecification.MetricDefinitions.
_NUMBER = r"([-+0-9.eE]+|nan)"
METRIC_DEFINITIONS = [
    {"Name": "train:loss", "Regex": rf"step=\d+ loss={_NUMBER}"},
    {"Name": "train:lr", "Regex": rf" lr={_NUMBER}"},
    {"Name": "train:tokens_per_s", "Regex": rf" tokens_per_s={_NUMBER}"},
    {"Name": "train:tflops_per_device", "Regex": rf" tflops={_NUMBER}"},
    {"Name": "train:mfu", "Regex": rf" mfu={_NUMBER}"},
]
# The held-out loss has its own line (`step=N val_loss=...`), logged when the run evaluates.
VALIDATION_METRIC_DEFINITIONS = [{"Name": "validation:loss", "Regex": rf"step=\d+ val_loss={_NUMBER}"}]


def peak_tflops_of(device, override: float = 0.0) -> float | None:
    """Dense bf16 peak TFLOP/s of one device: the override, else the SageMaker instance type (catalog), else the
    GPU's name (catalog.ACCELERATOR_PEAK_TFLOPS); None for a CPU or an unknown device."""
    if override > 0:
        return override
    instance = os.environ.get("SM_CURRENT_INSTANCE_TYPE", "")
    if instance in catalog.INSTANCES:  # per process: a Trainium chip runs several (one per logical NeuronCore)
        inst = catalog.INSTANCES[instance]
        return inst.peak_tflops_bf16 / catalog.PROCESSES_PER_DEVICE.get(inst.accelerator, 1)
    if getattr(device, "type", "cpu") == "cuda":
        import torch

        name = torch.cuda.get_device_name(device)
        for key, peak in catalog.ACCELERATOR_PEAK_TFLOPS.items():
            if key in name:
                return peak
    return None


def format_line(record: dict) -> str:
    """`step=10 loss=5.1234 lr=3.000e-03 tokens_per_s=24094 tflops=0.0012 mfu=0.0000 step_s=0.170 data_s=0.002`."""
    def num(v, fmt):
        return "nan" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, fmt)

    return (f"step={record['step']} loss={num(record['loss'], '.4f')} lr={num(record['lr'], '.3e')} "
            f"tokens_per_s={num(record['tokens_per_s'], '.1f')} tflops={num(record['tflops'], '.4g')} "
            f"mfu={num(record['mfu'], '.4f')} step_s={num(record['step_s'], '.4f')} "
            f"data_s={num(record['data_s'], '.4f')}")


@dataclass
class TrainLog:
    """Rank 0's log of one run; `records` keeps every logged step in memory too."""

    output_dir: str | Path | None
    flops_per_token: float
    world_size: int
    peak_tflops: float | None = None
    rank: int = 0
    tensorboard: bool = True
    records: list[dict] = field(default_factory=list)
    validations: list[dict] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._jsonl = None
        self._writer = None
        if self.rank != 0 or not self.output_dir:
            return
        out = Path(self.output_dir)
        out.mkdir(parents=True, exist_ok=True)
        self._jsonl = open(out / "metrics.jsonl", "a")
        if self.tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError:  # tensorboard is an optional extra (`pip install fmlab[course]`)
                print("note: tensorboard is not installed; writing stdout and metrics.jsonl only", flush=True)
            else:
                self._writer = SummaryWriter(str(out / "tensorboard"))

    def step(self, step: int, loss: float, lr: float, tokens: int, seconds: float, data_seconds: float = 0.0,
             steps: int = 1) -> dict:
        """Log `steps` optimizer steps ending at `step` that processed `tokens` (all ranks) in `seconds`."""
        tokens_per_s = tokens / seconds if seconds > 0 else float("nan")
        tflops = self.flops_per_token * tokens_per_s / self.world_size / 1e12
        mfu = tflops / self.peak_tflops if self.peak_tflops else None
        record = {"step": step, "loss": loss, "lr": lr, "tokens_per_s": tokens_per_s, "tflops": tflops, "mfu": mfu,
                  "step_s": seconds / steps, "data_s": data_seconds / steps, "tokens": tokens}
        self.records.append(record)
        if self.rank != 0:
            return record
        print(format_line(record), flush=True)
        if self._jsonl:
            self._jsonl.write(json.dumps(record) + "\n")
            self._jsonl.flush()
        if self._writer:
            for name in ("loss", "lr", "tokens_per_s", "tflops", "mfu"):
                if record[name] is not None:
                    self._writer.add_scalar(f"train/{name}", record[name], step)
        return record

    def validation(self, step: int, loss: float, seconds: float) -> dict:
        """Log the held-out loss at `step`: `step=20 val_loss=5.1234 val_ppl=168.9 val_s=0.210`."""
        record = {"step": step, "val_loss": loss, "val_ppl": math.exp(min(loss, 50.0)), "val_s": seconds}
        self.validations.append(record)
        if self.rank != 0:
            return record
        print(f"step={step} val_loss={loss:.4f} val_ppl={record['val_ppl']:.2f} val_s={seconds:.3f}", flush=True)
        if self._jsonl:
            self._jsonl.write(json.dumps(record) + "\n")
            self._jsonl.flush()
        if self._writer:
            self._writer.add_scalar("validation/loss", loss, step)
        return record

    def close(self) -> None:
        if self._jsonl:
            self._jsonl.close()
            self._jsonl = None
        if self._writer:
            self._writer.close()
            self._writer = None


def cuda_sync() -> None:
    """Wait until the current CUDA device has run all the work queued on it, when this process uses CUDA (a
    no-op otherwise, torch not even imported): a host clock read afterwards times the GPU's work, not its
    launch."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        torch.cuda.synchronize()


class StepTimer:
    """The run's clocks, so the training loop only marks what happened.

    A window runs from one log line to the next (its logging and checkpoint time count in the next window, so
    windows tile the run); the steady state is every step after the first (warm-up and allocation left out).
    Waiting for data is counted apart, and evaluation is left out of both (it is not training).

    On a GPU the host runs ahead of the device: a clock read right after a step's launches would time the
    launches. So at each step boundary (step_done, exclude, take_window, steady_rate) the timer first calls
    `sync` (default cuda_sync: waits for the CUDA device when the process uses one; None: never), and the
    throughput is the GPU's. The price is one wait per step: the device idles while the host fetches the next
    batch and launches its first kernels. The data() clocks do not wait.

        timer = StepTimer()
        with timer.data():
            batch = next(loader)
        ...                                   # the step
        timer.step_done()
        spent = timer.exclude(since=t0)       # after an evaluation that started at t0
        steps, seconds, data_seconds = timer.take_window()   # at a log line
        timer.steady_rate(tokens_per_step)    # tokens/s over every step after the first
    """

    def __init__(self, clock=time.perf_counter, sync=cuda_sync) -> None:
        self.clock = clock
        self.sync = sync or (lambda: None)
        self.window_start, self.window_steps, self.window_data = clock(), 0, 0.0
        self.steady_start: float | None = None
        self.steady_steps = 0

    @contextlib.contextmanager
    def data(self):
        """Time spent waiting for the next batch."""
        start = self.clock()
        try:
            yield
        finally:
            self.window_data += self.clock() - start

    def step_done(self) -> None:
        self.sync()
        self.window_steps += 1
        if self.steady_start is None:
            self.steady_start = self.clock()
        else:
            self.steady_steps += 1

    def exclude(self, since: float) -> float:
        """Leave the time from `since` to now out of the throughput; returns those seconds."""
        self.sync()
        spent = self.clock() - since
        self.window_start += spent
        if self.steady_start is not None:
            self.steady_start += spent
        return spent

    def take_window(self) -> tuple[int, float, float]:
        """(steps, seconds, data seconds) since the last log line, and start the next window."""
        self.sync()
        now = self.clock()
        window = (self.window_steps, now - self.window_start, self.window_data)
        self.window_start, self.window_steps, self.window_data = now, 0, 0.0
        return window

    def steady_rate(self, per_step: float) -> float:
        """`per_step` (e.g. tokens) per second over the steps after the first; 0 when there were none."""
        if not self.steady_steps:
            return 0.0
        self.sync()
        return per_step * self.steady_steps / (self.clock() - self.steady_start)


def read_metrics(path: str | Path, kind: str = "train") -> list[dict]:
    """The records of a metrics.jsonl file (or of the folder holding one): "train" steps or "validation" ones."""
    path = Path(path)
    if path.is_dir():
        path = path / "metrics.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    key = "val_loss" if kind == "validation" else "loss"
    return [r for r in records if key in r]
