"""One training step on one GPU, measured four ways in one process: fmlab's engine eager and compiled, and a bare
loop eager and compiled, at a Llama shape (issue 41, item 4; how it was first done by hand:
docs/measurements/h200-2026-11-26.md).

    python benchmarks/gpu_step.py                         # the Llama 3.2 1B shape, all four contenders, 20 steps
    python benchmarks/gpu_step.py --contenders engine,bare --json rows.json
    python benchmarks/gpu_step.py --contenders engine --sweep "micro_batch=1,4,16;recompute=none,full"
    python benchmarks/gpu_step.py --setting micro_batch=16 --setting seq=4096,micro_batch=4
    python benchmarks/gpu_step.py --contenders engine --steps 6 --snapshot snapshots/   # what fills the memory
    .venv/bin/python benchmarks/gpu_step.py --hidden 64 --layers 2 --heads 4 --kv-heads 2 --ffn 176 --vocab 512 \\
        --seq 64 --micro-batch 2 --steps 3 --contenders engine,bare     # a CPU (fp32), as the test runs it

Runs from a plain checkout with whatever PyTorch (2.9 or newer) and transformers the machine has: when `fmlab` is
not installed, the repository's src/ is put on sys.path. The shape's model is registered in the catalog at run
time (a ModelPreset named gpu-step-...), and every contender trains it from the same initial weights (seed 0) on
the same batches: the course corpus packed at --seq (the engine prepares it, fmlab.train.loop.open_dataset; the
bare loops read that very dataset in the engine's sampler order).

The contenders:
- engine: `fmlab.train.loop.train(TrainConfig(...))` in this process, world size 1, --compile false: autocast bf16
  forward over fp32 master weights (fp32 on a CPU), fused AdamW, its clip, --loss (chunked by default) and
  --recompute (ParallelConfig.activation_checkpointing). No output dir, TensorBoard, checkpoint or export.
  Its tokens/s are the engine's own (StepTimer.steady_rate, TrainResult.tokens_per_s): StepTimer waits for the
  CUDA device at every step boundary (fmlab.train.log.cuda_sync), so they are GPU-true;
- engine-compiled: the same with --compile true (torch.compile of each decoder layer, fmlab.parallel.compiled);
- bare: the loop a reader writes on the same model and batches: transformers' "sdpa" attention and full loss,
  torch.autocast bf16 on CUDA, fused AdamW, clip_grad_norm_(1.0), zero_grad(set_to_none=True); --recompute full
  is transformers' gradient_checkpointing_enable (the bare loop has no selective recomputation: skipped);
- bare-compiled: the same loop on torch.compile(model).

Each row: tokens/s over the steps after the first (synchronized, so the clock is the GPU's), MFU = tokens/s x
fmlab.plan.compute.flops_per_token / the device's dense bf16 peak (fmlab.train.log.peak_tflops_of: the catalog's
figure for the GPU's name, or --peak-tflops; none on a CPU), the first step's seconds (compilation, allocation),
peak memory (torch.cuda.max_memory_allocated, reset before each contender, the cache emptied between) and the
planner's figure for it: sum(fmlab.plan.layout.memory_per_device(preset, ParallelConfig(activation_checkpointing=
recompute), 1, micro_batch, seq, loss=...)), with loss="full" for the bare loops; an installed planner without the
loss= keyword is called without it and the row says so (compiled=, and precision="fp32" for an fp32 run, are passed
where the planner takes them).
GB here are 2^30 bytes. A contender that fails (no CUDA kernel, no transformers, torch.compile failing, out of
memory) fills its row with the reason and the run goes on.

--matmul-precision: by default torch's own setting is left as it is ("highest" unless the machine changed it), as
the engine runs in training; "high" lets fp32 matrix products use TF32.

--snapshot DIR records the CUDA allocator's history (torch.cuda.memory._record_memory_history) while the engine
contender runs (the first of engine, engine-compiled in --contenders, for each setting; the recording slows that
row), writes DIR/<setting>-<contender>.pickle (open it at https://pytorch.org/memory_viz) and prints the 15
largest allocations alive at the peak with the Python frame that made each: what the planner misses. Allocations
made in the backward pass have no Python frame (autograd runs it in its own thread); --snapshot-stacks all records
C++ frames too and names their backward node, at a higher cost.
Tests: tests/train/test_gpu_step_benchmark.py (a tiny shape on a CPU).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import gc
import inspect
import itertools
import json
import os
import pickle
import platform
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from unittest import mock

REPO = Path(__file__).resolve().parents[1]
CONTENDERS = ("engine", "engine-compiled", "bare", "bare-compiled")
RECOMPUTE = ("none", "selective", "full")
LOSSES = ("chunked", "full")
MATMUL_PRECISIONS = ("default", "highest", "high", "medium")
GIB = 2**30
SNAPSHOT_ENTRIES = 500_000  # allocator events kept (a ring buffer): tens of thousands per step at the 1B shape
TOP_ALLOCATIONS = 15


def import_fmlab():
    """fmlab, from the installed package or else from this checkout's src/."""
    try:
        import fmlab
    except ImportError:
        sys.path.insert(0, str(REPO / "src"))
        import fmlab
    return fmlab


# ---------------------------------------------------------------- settings


@dataclass(frozen=True)
class Setting:
    """One shape and run setting; every field is a flag and a --sweep / --setting key."""

    hidden: int = 2048
    layers: int = 16
    heads: int = 32
    kv_heads: int = 8
    ffn: int = 8192
    vocab: int = 128256
    seq: int = 2048
    micro_batch: int = 8
    steps: int = 20
    recompute: str = "none"
    loss: str = "chunked"
    matmul_precision: str = "default"
    loss_chunk_mib: int = 0  # the chunked loss's chunk in MiB, fixed (no chunk-count rule), engine and planner; 0: as set

    def check(self) -> Setting:
        for name, choices in (("recompute", RECOMPUTE), ("loss", LOSSES), ("matmul_precision", MATMUL_PRECISIONS)):
            if getattr(self, name) not in choices:
                raise ValueError(f"{name} must be one of {', '.join(choices)}, not {getattr(self, name)!r}")
        if self.steps < 2:
            raise ValueError("steps must be at least 2: the first step is left out of tokens/s")
        if min(self.hidden, self.layers, self.heads, self.kv_heads, self.ffn, self.vocab, self.seq,
               self.micro_batch) < 1:
            raise ValueError("every size must be at least 1")
        if self.hidden % self.heads or self.heads % self.kv_heads:
            raise ValueError(f"hidden {self.hidden} must divide into heads {self.heads}, and heads into kv_heads "
                             f"{self.kv_heads}")
        return self

    def preset(self):
        """The shape as a catalog ModelPreset, registered in fmlab.plan.catalog.MODELS (the engine looks it up)."""
        from fmlab.plan import catalog

        name = (f"gpu-step-h{self.hidden}-l{self.layers}-a{self.heads}-kv{self.kv_heads}-f{self.ffn}-v{self.vocab}"
                f"-s{self.seq}")
        preset = catalog.ModelPreset(name, "llama", hidden=self.hidden, layers=self.layers, heads=self.heads,
                                     vocab=self.vocab, seq_len=self.seq, intermediate=self.ffn,
                                     kv_heads=self.kv_heads, source="benchmarks/gpu_step.py, registered at run time")
        catalog.MODELS[name] = preset
        return preset

    def label(self, keys) -> str:
        """`micro_batch=4 recompute=full`: the keys that differ between settings, or "-"."""
        return " ".join(f"{k}={getattr(self, k)}" for k in keys) or "-"


FIELDS = {f.name: f for f in dataclasses.fields(Setting)}


def parse_assignments(text: str, sep: str) -> dict[str, list]:
    """`k=v1,v2;k2=v` (sep ";") or `k=v,k2=v` (sep ",") as {field: [values]}, each value as the field's type."""
    out: dict[str, list] = {}
    for part in filter(None, (p.strip() for p in text.split(sep))):
        key, eq, values = part.partition("=")
        key = key.strip().replace("-", "_")
        if not eq or key not in FIELDS:
            raise ValueError(f"{part!r}: expected key=value with a key among {', '.join(FIELDS)}")
        kind = type(FIELDS[key].default)
        out[key] = [kind(v.strip()) for v in values.split(",")] if sep == ";" else [kind(values.strip())]
    return out


def expand_settings(base: Setting, settings: list[str], sweep: str) -> tuple[list[Setting], list[str]]:
    """The settings to run: each --setting over `base` (or `base` alone), crossed with the --sweep's product;
    and the keys that vary (for labels)."""
    starts = [dataclasses.replace(base, **{k: v[0] for k, v in parse_assignments(s, ",").items()})
              for s in settings] or [base]
    grid = parse_assignments(sweep, ";") if sweep else {}
    out = [dataclasses.replace(start, **dict(zip(grid, values, strict=True)))
           for start in starts for values in itertools.product(*grid.values())]
    out = [s.check() for s in dict.fromkeys(out)]  # duplicates run once
    varying = [k for k in FIELDS if len({getattr(s, k) for s in out}) > 1]
    return out, varying


# ---------------------------------------------------------------- the machine


@dataclass
class Machine:
    """Where the contenders run and what that machine has."""

    device: str  # "cuda" or "cpu"
    device_name: str
    dtype: str  # the forward's compute dtype: bfloat16 on a GPU that has it, else float32
    torch: str
    transformers: str  # version, or "" when not installed
    peak_tflops: float | None  # dense bf16 peak of one device, for MFU
    peak_source: str
    python: str = platform.python_version()
    notes: list[str] = field(default_factory=list)


def find_machine(peak_override: float) -> Machine:
    import torch

    from fmlab.train.log import peak_tflops_of

    notes = []
    try:
        import transformers
        tf_version = transformers.__version__
    except ImportError as e:
        tf_version = ""
        notes.append(f"transformers is not installed ({e}): every contender needs it")
    if torch.cuda.is_available():
        device, name = "cuda", torch.cuda.get_device_name()
        bf16 = torch.cuda.is_bf16_supported()
        if not bf16:
            notes.append(f"{name} has no bf16: every contender runs in fp32")
    else:
        device, name, bf16 = "cpu", platform.processor() or platform.machine(), False
        notes.append("no CUDA: the contenders run on the CPU in fp32 (as the engine does on a CPU)")
    peak = peak_tflops_of(torch.device(device), peak_override)
    source = ("--peak-tflops" if peak_override > 0 else "catalog (GPU name)" if peak else
              "none known: no MFU (give --peak-tflops)")
    return Machine(device, name, "bfloat16" if bf16 else "float32", torch.__version__, tf_version, peak, source,
                   notes=notes)


# ---------------------------------------------------------------- rows


@dataclass
class Measured:
    """What a contender measured."""

    tokens_per_s: float
    first_step_s: float
    final_loss: float | None
    notes: list[str] = field(default_factory=list)


class Skipped(Exception):
    """A contender that does not apply to a setting."""


@dataclass
class Row:
    """One contender at one setting."""

    contender: str
    setting: str  # the keys that vary between settings, or "-"
    config: dict  # the whole Setting
    status: str = "ok"  # ok | error | skipped
    reason: str = ""  # why not ok
    device: str = ""
    dtype: str = ""
    params: int = 0
    tokens_per_step: int = 0
    flops_per_token: float = 0.0
    tokens_per_s: float | None = None  # steady state: the steps after the first
    mfu: float | None = None
    first_step_s: float | None = None
    peak_bytes: int | None = None  # torch.cuda.max_memory_allocated over the contender (None on a CPU)
    peak_gib: float | None = None
    planner_bytes: float | None = None
    planner_gib: float | None = None
    planner_over_measured: float | None = None
    planner_call: str = ""  # the keywords the planner was called with, and any it lacked
    final_loss: float | None = None
    wall_s: float = 0.0  # the contender in all: build, data, compile, steps
    notes: list[str] = field(default_factory=list)


def describe(error: BaseException) -> str:
    """One line: what failed, without the traceback."""
    import torch

    if isinstance(error, torch.cuda.OutOfMemoryError):
        return "out of memory: " + str(error).split(". ")[0]
    if isinstance(error, ImportError):
        return f"missing: {error}"
    first = (str(error).strip().splitlines() or [""])[0]
    return f"{type(error).__name__}: {first}"[:300]


def planner_bytes(preset, recompute: str, micro_batch: int, seq: int, loss: str, compiled: bool,
                  dtype: str = "bfloat16") -> tuple[float | None, str]:
    """The planner's bytes on one device, and how it was called (keywords it lacked are named). compiled=,
    grad_accum=1 and, for an fp32 run, precision="fp32" are passed only where the installed planner takes them."""
    from fmlab.plan.layout import memory_per_device
    from fmlab.plan.parallelism import ParallelConfig

    layout = ParallelConfig(activation_checkpointing=recompute)
    extra: dict = {"loss": loss}
    takes = inspect.signature(memory_per_device).parameters
    if "compiled" in takes:
        extra["compiled"] = compiled
    if "grad_accum" in takes:  # every contender steps once per micro-batch
        extra["grad_accum"] = 1
    if "precision" in takes and dtype == "float32":
        extra["precision"] = "fp32"
    try:
        parts = memory_per_device(preset, layout, 1, micro_batch, seq, **extra)
        said = ", ".join(f"{k}={v!r}" for k, v in extra.items())
    except TypeError as e:
        parts = memory_per_device(preset, layout, 1, micro_batch, seq)
        said = f"planned without loss= and the rest (the installed planner raised TypeError: {e})"
    return float(sum(parts.values())), said


# ---------------------------------------------------------------- the contenders


def engine_config(setting: Setting, preset, compiled: bool, peak_tflops: float):
    from fmlab.plan.parallelism import ParallelConfig
    from fmlab.train.config import TrainConfig

    return TrainConfig(model=preset.name, data="", seq_len=setting.seq, micro_batch=setting.micro_batch,
                       max_steps=setting.steps, log_every=setting.steps, output_dir="", tensorboard=False,
                       model_dir="", checkpoint_dir="", resume="none", loss=setting.loss,
                       compile="true" if compiled else "false", peak_tflops=peak_tflops,
                       parallel=ParallelConfig(activation_checkpointing=setting.recompute))


def first_step_timer(seen: list):
    """fmlab's StepTimer, also keeping the first step's seconds (from the timer's start, just before step 1)."""
    from fmlab.train.log import StepTimer

    class FirstStepTimer(StepTimer):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.started, self.first_step_s = self.window_start, None
            seen.append(self)

        def step_done(self) -> None:
            super().step_done()
            if self.first_step_s is None:
                self.first_step_s = self.steady_start - self.started

    return FirstStepTimer


def run_engine(setting: Setting, machine: Machine, compiled: bool, peak_tflops: float) -> Measured:
    from fmlab.train import log as train_log
    from fmlab.train.loop import train

    cfg = engine_config(setting, setting.preset(), compiled, peak_tflops)
    timers: list = []
    with mock.patch.object(train_log, "StepTimer", first_step_timer(timers)):
        result = train(cfg)
    return Measured(result.tokens_per_s, timers[0].first_step_s, result.losses.get(result.steps))


def batch_stream(setting: Setting, preset, device):
    """The engine's batches: the same dataset (open_dataset) in its sampler's order (seed 0, shuffled)."""
    from fmlab.data import ResumableSampler
    from fmlab.train.loop import open_dataset
    from fmlab.train.step import batches

    cfg = engine_config(setting, preset, False, 0.0)
    ds = open_dataset(cfg, preset.vocab)
    sampler = ResumableSampler(len(ds), 0, 1, seed=cfg.seed, shuffle=cfg.shuffle, drop_last=True)
    return batches(ds, sampler, setting.micro_batch, device)


def bare_model(setting: Setting, preset, device):
    """The preset's transformers model (seed 0, as the engine builds it) with "sdpa" attention, on `device`."""
    from fmlab.models import build_model

    model = build_model(preset, seed=0)
    if hasattr(model, "set_attn_implementation"):
        model.set_attn_implementation("sdpa")
    else:
        model.config._attn_implementation = "sdpa"
    if setting.recompute == "full":
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    return model.to(device).train()


def fused_adamw(model, notes: list):
    import torch

    from fmlab.train.config import TrainConfig

    lr = TrainConfig.lr
    try:
        return torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.1, fused=True)
    except (RuntimeError, TypeError) as e:
        notes.append(f"no fused AdamW here ({e}): the default one")
        return torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.1)


def synchronize(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run_bare(setting: Setting, machine: Machine, compiled: bool) -> Measured:
    import torch

    if setting.recompute == "selective":
        raise Skipped("the bare loop has no selective recomputation")
    preset, device, notes = setting.preset(), torch.device(machine.device), []
    model = bare_model(setting, preset, device)
    if setting.recompute == "full":
        notes.append("recompute full: transformers' gradient_checkpointing_enable")
    optimizer = fused_adamw(model, notes)
    forward = torch.compile(model) if compiled else model
    data = batch_stream(setting, preset, device)
    autocast = (torch.autocast(device.type, dtype=torch.bfloat16) if machine.dtype == "bfloat16"
                else contextlib.nullcontext())

    def step():
        x = next(data)
        with autocast:
            loss = forward(input_ids=x, labels=x).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.detach()

    synchronize(device)
    start = time.perf_counter()
    step()
    synchronize(device)
    steady_start = time.perf_counter()
    for _ in range(setting.steps - 1):
        loss = step()
    synchronize(device)
    seconds = time.perf_counter() - steady_start
    tokens = setting.micro_batch * setting.seq * (setting.steps - 1)
    return Measured(tokens / seconds, steady_start - start, float(loss), notes)


# ---------------------------------------------------------------- measuring one row


def clean_device(machine: Machine) -> None:
    """Free what the last contender left: Python garbage, compiled graphs, the CUDA cache; reset the peak."""
    import torch

    gc.collect()
    with contextlib.suppress(Exception):
        torch._dynamo.reset()
    if machine.device == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def set_matmul_precision(setting: Setting, found: str) -> None:
    """torch's float32 matmul precision for this setting ("default": as it was found)."""
    import torch

    wanted = found if setting.matmul_precision == "default" else setting.matmul_precision
    if torch.get_float32_matmul_precision() != wanted:
        torch.set_float32_matmul_precision(wanted)


def run_contender(name: str, setting: Setting, machine: Machine, peak_tflops: float) -> Measured:
    compiled = name.endswith("-compiled")
    if name.startswith("engine"):
        return run_engine(setting, machine, compiled, peak_tflops)
    return run_bare(setting, machine, compiled)


@contextlib.contextmanager
def chunk_bytes(setting: Setting):
    """The chunked loss's chunk as the setting asks: CHUNK_LOGIT_BYTES of fp32 logits and no cap on the number of
    chunks (fmlab.plan.memory), for the run and its planner figure."""
    from fmlab.plan import memory

    if not setting.loss_chunk_mib:
        yield
        return
    with mock.patch.object(memory, "CHUNK_LOGIT_BYTES", setting.loss_chunk_mib * 2**20), \
            mock.patch.object(memory, "MAX_LOSS_CHUNKS", 2**31):
        yield


def measure(name: str, setting: Setting, label: str, machine: Machine, peak_tflops: float,
            snapshot: Path | None, stacks: str = "python") -> Row:
    """One row: run the contender, and whatever happens, fill its row."""
    import torch

    from fmlab.plan import compute

    preset = setting.preset()
    row = Row(name, label, dataclasses.asdict(setting), device=machine.device_name, dtype=machine.dtype,
              params=compute.param_count(preset), tokens_per_step=setting.micro_batch * setting.seq,
              flops_per_token=compute.flops_per_token(preset, setting.seq))
    clean_device(machine)
    start = time.perf_counter()
    if snapshot is not None:
        try:
            torch.cuda.memory._record_memory_history(stacks=stacks, max_entries=SNAPSHOT_ENTRIES)
            row.notes.append("CUDA memory history recorded during this row: its timing pays for the recording")
        except Exception as e:  # noqa: BLE001 - a snapshot is extra: the row still runs
            row.notes.append(f"no memory snapshot: recording failed ({describe(e)})")
            snapshot = None
    try:
        with chunk_bytes(setting):
            got = run_contender(name, setting, machine, peak_tflops)
    except Skipped as e:
        row.status, row.reason = "skipped", str(e)
    except Exception as e:  # noqa: BLE001 - one contender failing must not end the run
        row.status, row.reason = "error", describe(e)
    else:
        row.tokens_per_s, row.first_step_s, row.final_loss = got.tokens_per_s, got.first_step_s, got.final_loss
        row.notes += got.notes
        if machine.peak_tflops:
            row.mfu = got.tokens_per_s * row.flops_per_token / (machine.peak_tflops * 1e12)
    row.wall_s = time.perf_counter() - start
    if machine.device == "cuda":
        row.peak_bytes = torch.cuda.max_memory_allocated()
        row.peak_gib = row.peak_bytes / GIB
    if snapshot is not None:
        try:
            finish_snapshot(snapshot, f"{label}-{name}".replace(" ", "_").replace("=", "-").strip("-") or name)
        except Exception as e:  # noqa: BLE001
            row.notes.append(f"no memory snapshot: {describe(e)}")
            with contextlib.suppress(Exception):
                torch.cuda.memory._record_memory_history(enabled=None)
    fill_planner(row, setting, preset, name)
    clean_device(machine)
    return row


def fill_planner(row: Row, setting: Setting, preset, name: str) -> None:
    loss = "full" if name.startswith("bare") else setting.loss
    try:
        with chunk_bytes(setting):
            row.planner_bytes, row.planner_call = planner_bytes(preset, setting.recompute, setting.micro_batch,
                                                                setting.seq, loss, name.endswith("-compiled"),
                                                                row.dtype)
    except Exception as e:  # noqa: BLE001 - the planner failing is a finding, not a reason to stop
        row.planner_call = f"planner failed: {describe(e)}"
        return
    row.planner_gib = row.planner_bytes / GIB
    if row.peak_bytes and row.status == "ok":
        row.planner_over_measured = row.planner_bytes / row.peak_bytes


# ---------------------------------------------------------------- memory snapshots


def finish_snapshot(folder: Path, tag: str) -> None:
    """Stop recording, write the snapshot pickle and print the largest allocations alive at the peak."""
    import torch

    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{tag}.pickle"
    with open(path, "wb") as f:
        pickle.dump(snap, f)
    device = torch.cuda.current_device()
    print(f"\nmemory snapshot: {path} (open it at https://pytorch.org/memory_viz)")
    print(format_peak(live_at_peak(snap, device), torch_dir=os.path.dirname(torch.__file__)))


@dataclass
class PeakState:
    """The allocations alive when the replayed allocated bytes were highest."""

    peak_bytes: int
    event: int  # index of the trace event that reached the peak (-1: before the trace)
    events: int
    live: list[tuple[int, list]]  # (bytes, frames), largest first
    truncated: bool  # the trace filled its ring buffer: events before it are lost


def live_at_peak(snapshot: dict, device: int = 0, top: int = TOP_ALLOCATIONS) -> PeakState:
    """Replay the allocator's trace (alloc / free_completed) to its highest allocated bytes and list what was alive
    then. Allocations made before the recording began count as alive from its start: those freed during it (their
    free event has no alloc) and those still alive at the end that no alloc event made (from the segments)."""
    trace = snapshot["device_traces"][device] if device < len(snapshot["device_traces"]) else []
    before: dict[int, tuple[int, list]] = {}
    live: dict[int, tuple[int, list]] = {}
    for e in trace:  # pass 1: what was alive before the trace
        if e["action"] == "alloc":
            live[e["addr"]] = (e["size"], e.get("frames", []))
        elif e["action"] == "free_completed" and live.pop(e["addr"], None) is None:
            before[e["addr"]] = (e["size"], [])
    for seg in snapshot.get("segments", []):
        if seg.get("device", device) != device:
            continue
        for b in seg.get("blocks", []):
            if b.get("state") in ("active_allocated", "active_pending_free") and b["address"] not in live:
                before.setdefault(b["address"], (b["size"], b.get("frames", [])))
    total = peak = sum(size for size, _ in before.values())
    peak_at = -1
    for i, e in enumerate(trace):  # pass 2: when the peak was
        if e["action"] == "alloc":
            total += e["size"]
        elif e["action"] == "free_completed":
            total -= e["size"]
        if total > peak:
            peak, peak_at = total, i
    live = dict(before)
    for e in trace[:peak_at + 1]:  # pass 3: who was alive then
        if e["action"] == "alloc":
            live[e["addr"]] = (e["size"], e.get("frames", []))
        elif e["action"] == "free_completed":
            live.pop(e["addr"], None)
    largest = sorted(live.values(), key=lambda sf: -sf[0])[:top]
    return PeakState(peak, peak_at, len(trace), largest, len(trace) >= SNAPSHOT_ENTRIES)


def frame_text(frames: list, torch_dir: str = "") -> str:
    """The first frame outside torch (the code that asked), and the torch call it went through; with no Python
    frame (autograd's backward runs in its own thread), the backward node when C++ frames were recorded."""
    def fmt(f):
        return f"{f['filename'].split('/')[-1]}:{f['line']} {f['name']}"

    python = [f for f in frames if f.get("filename", "").endswith(".py")]
    if not python:
        node = next((part for f in frames for part in f.get("name", "").split("::") if "Backward" in part), "")
        return (f"autograd backward: {node.split('(')[0]}" if node else
                "(no Python frame: made by autograd's backward, or before the recording began)")
    ours = next((f for f in python if not (torch_dir and f["filename"].startswith(torch_dir))), None)
    if ours is None:
        return fmt(python[0])
    return fmt(ours) if ours is python[0] else f"{fmt(ours)} (via {fmt(python[0])})"


def format_peak(state: PeakState, torch_dir: str = "") -> str:
    shown = sum(size for size, _ in state.live)
    lines = [f"peak of the recorded allocations: {state.peak_bytes / GIB:.2f} GB at event {state.event + 1} of "
             f"{state.events}; the {len(state.live)} largest alive then hold {shown / GIB:.2f} GB:"]
    if state.truncated:
        lines.append(f"  (the trace filled its {SNAPSHOT_ENTRIES:,} entries: earlier events are lost; fewer --steps)")
    lines += [f"  {size / GIB:8.3f} GB  {frame_text(frames, torch_dir)}" for size, frames in state.live]
    return "\n".join(lines)


# ---------------------------------------------------------------- output


def fmt(value, spec: str, missing: str = "-") -> str:
    return missing if value is None else format(value, spec)


def gb(value) -> str:
    """GB (2^30) to two decimals; three significant digits below one."""
    return fmt(value, ".2f" if value is None or value >= 0.995 else ".3g")


def table(rows: list[Row]) -> str:
    head = ["contender", "setting", "tokens/s", "MFU", "first step s", "peak GB", "planner GB", "planner/measured"]
    body = [[r.contender, r.setting, fmt(r.tokens_per_s, ",.0f"), fmt(r.mfu and 100 * r.mfu, ".1f") +
             ("%" if r.mfu else ""), fmt(r.first_step_s, ".2f"), gb(r.peak_gib), gb(r.planner_gib),
             fmt(r.planner_over_measured, ".2f")] for r in rows]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body, strict=True)]
    lines = ["  ".join(str(x).ljust(w) if i < 2 else str(x).rjust(w) for i, (x, w) in enumerate(zip(line, widths, strict=True)))
             for line in [head, *body]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    for r in rows:
        said = [f"{r.status}: {r.reason}"] if r.status != "ok" else []
        said += r.notes + [r.planner_call for word in ("without", "failed") if word in r.planner_call][:1]
        lines += [f"  {r.contender} [{r.setting}]: {s}" for s in said]
    return "\n".join(lines)


def header(machine: Machine, settings: list[Setting], found_precision: str) -> str:
    from fmlab.plan import compute

    s = settings[0]
    preset = s.preset()
    lines = [f"device: {machine.device_name} ({machine.device}), compute dtype {machine.dtype}; torch "
             f"{machine.torch}, transformers {machine.transformers or 'not installed'}, python {machine.python}",
             f"peak: {fmt(machine.peak_tflops, 'g')} TFLOP/s dense bf16 ({machine.peak_source}); float32 matmul "
             f"precision as found: {found_precision}",
             f"shape: hidden {s.hidden}, {s.layers} layers, {s.heads} heads, {s.kv_heads} KV heads, FFN {s.ffn}, "
             f"vocabulary {s.vocab}: {compute.param_count(preset):,} parameters; seq {s.seq}, micro-batch "
             f"{s.micro_batch}, {s.steps} steps, recompute {s.recompute}, loss {s.loss}, matmul precision "
             f"{s.matmul_precision}" + (f" ({len(settings)} settings)" if len(settings) > 1 else "")]
    return "\n".join(lines + [f"note: {n}" for n in machine.notes])


def bare_key(setting: Setting) -> tuple:
    """What the bare loop's run depends on (not --loss or its chunk: it always takes transformers' full loss)."""
    return dataclasses.astuple(dataclasses.replace(setting, loss="full", loss_chunk_mib=0))


# ---------------------------------------------------------------- main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False,
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="Sweep keys: " + ", ".join(FIELDS))
    d = Setting()
    for name in ("hidden", "layers", "heads", "kv_heads", "ffn", "vocab", "seq", "micro_batch", "steps"):
        p.add_argument(f"--{name.replace('_', '-')}", type=int, default=getattr(d, name),
                       help=f"(default {getattr(d, name)})")
    p.add_argument("--recompute", choices=RECOMPUTE, default=d.recompute, help="activation checkpointing")
    p.add_argument("--loss", choices=LOSSES, default=d.loss, help="the engine's loss (the bare loops: full)")
    p.add_argument("--compile", choices=("both", "false", "true"), default="both",
                   help="of --contenders, run the eager ones (false), the compiled ones (true) or both")
    p.add_argument("--loss-chunk-mib", type=int, default=d.loss_chunk_mib,
                   help="the chunked loss's chunk, fixed, in MiB of fp32 logits (default 0: fmlab.plan.memory's rule)")
    p.add_argument("--contenders", default=",".join(CONTENDERS), help=f"comma-separated, of {', '.join(CONTENDERS)}")
    p.add_argument("--matmul-precision", choices=MATMUL_PRECISIONS, default=d.matmul_precision,
                   help="torch.set_float32_matmul_precision; default: leave torch's setting as found")
    p.add_argument("--peak-tflops", type=float, default=0.0, help="the device's dense bf16 peak for MFU "
                   "(default: the catalog's figure for the GPU's name)")
    p.add_argument("--sweep", default="", help='a cross product of settings, e.g. "micro_batch=1,4,16;recompute=none,full"')
    p.add_argument("--setting", action="append", default=[], help="one setting, e.g. micro_batch=16,seq=4096 "
                   "(repeatable; crossed with --sweep)")
    p.add_argument("--json", default="", help="write the machine and every row to this file")
    p.add_argument("--snapshot", default="", help="record CUDA memory history for the engine contender into DIR")
    p.add_argument("--snapshot-stacks", choices=("python", "all"), default="python",
                   help="frames recorded with each allocation: python, or all (C++ too: names backward nodes, slower)")
    return p.parse_args(argv)


def chosen_contenders(args) -> list[str]:
    names = [c.strip() for c in args.contenders.split(",") if c.strip()]
    unknown = [c for c in names if c not in CONTENDERS]
    if unknown:
        raise SystemExit(f"unknown contender(s) {', '.join(unknown)}: choose from {', '.join(CONTENDERS)}")
    if args.compile != "both":
        names = [c for c in names if c.endswith("-compiled") == (args.compile == "true")]
    if not names:
        raise SystemExit(f"no contender left of --contenders {args.contenders} with --compile {args.compile}")
    return names


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    base = Setting(**{k: getattr(args, k) for k in FIELDS})
    try:
        settings, varying = expand_settings(base, args.setting, args.sweep)
    except ValueError as e:
        raise SystemExit(f"error: {e}") from None
    names = chosen_contenders(args)
    import_fmlab()
    import torch

    found_precision = torch.get_float32_matmul_precision()
    machine = find_machine(args.peak_tflops)
    print(header(machine, settings, found_precision), flush=True)
    snapshot_dir = Path(args.snapshot) if args.snapshot else None
    if snapshot_dir and machine.device != "cuda":
        print("note: --snapshot needs CUDA: no memory history recorded", flush=True)
        snapshot_dir = None
    rows, bare_seen = [], {}
    for setting in settings:
        set_matmul_precision(setting, found_precision)
        label = setting.label(varying)
        recorded = next((n for n in names if n.startswith("engine")), None) if snapshot_dir else None
        for name in names:
            print(f"\n== {name} [{label}]", flush=True)
            if name.startswith("bare") and (name, bare_key(setting)) in bare_seen:
                same = bare_seen[(name, bare_key(setting))]
                rows.append(Row(name, label, dataclasses.asdict(setting), status="skipped",
                                reason=f"the same run as [{same}]: the bare loop's loss is always the full one"))
                continue
            if name.startswith("bare"):
                bare_seen[(name, bare_key(setting))] = label
            rows.append(measure(name, setting, label, machine, args.peak_tflops,
                                snapshot_dir if name == recorded else None, args.snapshot_stacks))
    print("\n" + table(rows), flush=True)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"machine": dataclasses.asdict(machine),
                                               "rows": [dataclasses.asdict(r) for r in rows]}, indent=1))
        print(f"rows: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
