"""Published training runs, predicted: the step-time model (fmlab.plan.speed) held against what others measured.

    fmlab plan --published tests/plan/published_runs.json [--json]

    from fmlab.plan import published
    runs = published.load("tests/plan/published_runs.json")
    rows = published.compare(runs)        # one dict per run: predicted and reported tokens/s per GPU, the ratio

A runs file is a JSON list, one object per run (docs/published-runs.md gives the format): the model's shape, the
hardware, the layout, the batch, the precision and the reported throughput in tokens per second per GPU. Anyone can
hold the planner against runs of their own by writing one.
"""

from __future__ import annotations

import functools
import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from statistics import NormalDist

from fmlab.plan.catalog import ModelPreset
from fmlab.plan.compute import PlanError
from fmlab.plan.parallelism import ParallelConfig
from fmlab.plan.speed import Hardware, Workload, step_time

COURSE_RUNS = Path(__file__).resolve().parents[3] / "tests" / "plan" / "published_runs.json"  # the course's own file

ARCHS = {"gpt": "opt", "llama": "llama"}  # the format's architectures as fmlab's model families
PRECISIONS = ("bf16", "fp16")
# none; selective (Korthikanti et al.'s: the attention core re-run, nothing extra under a fused attention kernel; or
# fmlab's engine: every matmul output kept); per_op (torchtitan's default selective: every second matmul re-run,
# fmlab.plan.speed.MATMUL_ORDER); full (every layer's forward re-run)
CHECKPOINTING = ("none", "selective", "per_op", "full")
# none (replicated weights: DDP); zero1 (optimizer states sharded: ZeRO-1, Megatron's distributed optimizer, with its
# overlapped gradient reduce-scatter and parameter all-gather); full (ZeRO-3, FSDP); hybrid (HSDP, MiCS)
SHARDINGS = ("none", "zero1", "full", "hybrid")
REQUIRED = {"name": str, "model": dict, "hardware": dict, "layout": dict, "batch": dict, "reported": dict}
# The format, read strictly: every field a section may hold, and whether a run must give it. A field not listed is an
# error (a misspelling must not pass as a default); the three optional ones have a stated default (docs/published-runs.md).
FORMAT = {
    "": {"name": True, "source": True, "precision": True, "model": True, "hardware": True, "layout": True,
         "batch": True, "reported": True,
         "quote": False, "conversion": False, "read": False, "notes": False, "aws": False, "unexplained": False},
    "model": {"arch": True, "hidden": True, "layers": True, "heads": True, "kv_heads": True, "intermediate": True,
              "vocab": True, "seq_len": True},
    "hardware": {"gpu": True, "gpus": True, "gpus_per_node": True, "inter_node_gbps": True, "intra_node": True,
                 "gpu_power_watts": False},
    "layout": {"tp": True, "pp": True, "sharding": True, "hybrid_shard_degree": True, "activation_checkpointing": True,
               "virtual_stages": True, "sequence_parallel": True, "attention": False, "kernels": False},
    "batch": {"micro_batch": True, "global_batch": True},
    "reported": {"tokens_per_second_per_gpu": True},
}
DEFAULTS = {"attention": "flash", "kernels": "fused", "gpu_power_watts": "the part's rated board power"}


def format_problems(run) -> list[str]:
    """Every field `run` lacks that the format requires, and every field it has that the format does not know, each
    named with the run: [] when the run is well formed."""
    name = run.get("name", "?") if isinstance(run, dict) else "?"
    if not isinstance(run, dict):
        return [f"a run must be a JSON object, not {type(run).__name__}"]
    out = []
    for section, fields in FORMAT.items():
        where = run if not section else run.get(section)
        if section and not isinstance(where, dict):
            continue  # a missing section is reported as a missing top-level field
        prefix = f"{section}." if section else ""
        out += [f"run {name!r}: {prefix}{key} is missing (required)" for key, required in fields.items()
                if required and key not in where]
        out += [f"run {name!r}: {prefix}{key} is not a field of the format (a misspelling? the format's "
                f"{section or 'top-level'} fields: {', '.join(fields)})" for key in where if key not in fields]
    return out


def _field(run: dict, section: str, key: str, kind: type | tuple[type, ...]):
    """`run[section][key]`, of type `kind` (format_problems has made sure it is there)."""
    value = run[section][key]
    if kind is int and isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) and kind is not bool or not isinstance(value, kind):
        raise PlanError(f"run {run.get('name', '?')!r}: {section}.{key} must be a "
                        f"{getattr(kind, '__name__', 'number')}, got {value!r}")
    return value


def workload(run: dict) -> Workload:
    """The Workload a run describes; PlanError naming the run and each field that is missing, unknown or wrong."""
    problems = format_problems(run)
    if problems:
        raise PlanError("; ".join(problems))
    for key, kind in REQUIRED.items():
        if not isinstance(run.get(key), kind):
            raise PlanError(f"run {run.get('name', '?')!r}: {key!r} must be a {kind.__name__} (docs/published-runs.md)")
    arch = _field(run, "model", "arch", str)
    if arch not in ARCHS:
        raise PlanError(f"run {run['name']!r}: model.arch must be one of {', '.join(ARCHS)}, not {arch!r}")
    hidden = _field(run, "model", "hidden", int)
    heads = _field(run, "model", "heads", int)
    model = ModelPreset(run["name"], ARCHS[arch], hidden=hidden, layers=_field(run, "model", "layers", int),
                        heads=heads, vocab=_field(run, "model", "vocab", int),
                        seq_len=_field(run, "model", "seq_len", int),
                        intermediate=_field(run, "model", "intermediate", int),
                        kv_heads=_field(run, "model", "kv_heads", int), source=run.get("source", ""))
    power = run["hardware"].get("gpu_power_watts")
    hw = Hardware(_field(run, "hardware", "gpu", str), _field(run, "hardware", "gpus", int),
                  _field(run, "hardware", "gpus_per_node", int),
                  float(_field(run, "hardware", "inter_node_gbps", (int, float))),
                  _field(run, "hardware", "intra_node", str), float(power) if power else None)
    sharding = _field(run, "layout", "sharding", str)
    if sharding not in SHARDINGS:
        raise PlanError(f"run {run['name']!r}: layout.sharding must be one of {', '.join(SHARDINGS)}, not {sharding!r}")
    checkpointing = _field(run, "layout", "activation_checkpointing", str)
    if checkpointing not in CHECKPOINTING:
        raise PlanError(f"run {run['name']!r}: layout.activation_checkpointing must be one of "
                        f"{', '.join(CHECKPOINTING)}, not {checkpointing!r}")
    layout = ParallelConfig(sharding=sharding, hybrid_shard_degree=_field(run, "layout", "hybrid_shard_degree", int),
                            tp=_field(run, "layout", "tp", int), pp=_field(run, "layout", "pp", int),
                            activation_checkpointing="selective" if checkpointing == "per_op" else checkpointing)
    precision = run["precision"]
    if precision not in PRECISIONS:
        raise PlanError(f"run {run['name']!r}: precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")
    return Workload(model, hw, layout, micro_batch=_field(run, "batch", "micro_batch", int),
                    global_batch=_field(run, "batch", "global_batch", int),
                    virtual_stages=_field(run, "layout", "virtual_stages", int),
                    sequence_parallel=_field(run, "layout", "sequence_parallel", bool),
                    attention=run["layout"].get("attention", DEFAULTS["attention"]),
                    kernels=run["layout"].get("kernels", DEFAULTS["kernels"]),
                    gradient_bytes=2 if precision == "fp16" else 4,
                    recompute="per_op" if checkpointing == "per_op" else "")


def load(path: str | Path) -> list[dict]:
    """The runs of a RUNS.json file; PlanError for a file that is not a JSON list of run objects."""
    try:
        runs = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise PlanError(f"cannot read the runs file {path}: {e}") from None
    if not isinstance(runs, list) or not all(isinstance(r, dict) for r in runs):
        raise PlanError(f"{path} must hold a JSON list of runs, one object each (docs/published-runs.md)")
    problems = [p for r in runs for p in format_problems(r)]
    if problems:
        raise PlanError(f"{path}: " + "; ".join(problems))
    return runs


def predict(run: dict) -> dict:
    """One run predicted: predicted and reported tokens/s per GPU, their ratio, the MFU and the step's parts."""
    reported = run["reported"].get("tokens_per_second_per_gpu") if isinstance(run.get("reported"), dict) else None
    if not isinstance(reported, int | float) or isinstance(reported, bool) or not reported > 0:
        raise PlanError(f"run {run.get('name', '?')!r}: reported.tokens_per_second_per_gpu must be a positive number")
    s = step_time(workload(run))
    return {"name": run["name"], "gpu": run["hardware"]["gpu"], "gpus": run["hardware"]["gpus"],
            "predicted_tokens_per_second_per_gpu": s.tokens_per_second_per_gpu,
            "reported_tokens_per_second_per_gpu": float(reported),
            "ratio": s.tokens_per_second_per_gpu / reported, "predicted_mfu": s.mfu,
            **s.breakdown(), "communication": s.communication, "source": run.get("source", "")}


def reported_hfu(runs: list[dict]) -> dict[str, float]:
    """{name: the share of peak each run's hardware ran at}: its reported throughput through the step model's
    hardware FLOPs per token (the recomputed forward counted), so runs with and without recomputation compare."""
    out = {}
    for run in runs:
        s = step_time(workload(run))
        out[run["name"]] = s.hfu * run["reported"]["tokens_per_second_per_gpu"] / s.tokens_per_second_per_gpu
    return out


def compare(runs: list[dict]) -> list[dict]:
    """Every run predicted (predict), in the file's order."""
    return [predict(r) for r in runs]


def summary(rows: list[dict], within: float = 0.20, beyond: float = 0.35) -> dict:
    """How many predictions land within `within` of the reported figure, how many beyond `beyond`, the median
    |log(predicted / reported)| and the worst ratio."""
    off = [abs(r["ratio"] - 1) for r in rows]
    return {"runs": len(rows), "within": within, "inside": sum(o <= within for o in off),
            "share_inside": sum(o <= within for o in off) / len(rows) if rows else 0.0,
            "beyond": beyond, "outside": sum(o > beyond for o in off),
            "median_abs_log_ratio": statistics.median(abs(math.log(r["ratio"])) for r in rows) if rows else 0.0,
            "worst": max(rows, key=lambda r: abs(r["ratio"] - 1))["name"] if rows else None,
            "worst_off": max(off) if off else 0.0}


@dataclass(frozen=True)
class ErrorSpread:
    """The planner's error on published runs: the 10th, 50th and 90th percentiles of predicted / reported."""

    low: float
    median: float
    high: float
    runs: int
    path: str

    @property
    def sigma(self) -> float:
        """The spread of log(predicted / reported) as a normal that puts its 10th and 90th percentiles where the
        runs put them (z = 1.2816): what the capstone's simulator draws each run's speed from."""
        return (math.log(self.high) - math.log(self.low)) / (2 * NormalDist().inv_cdf(0.9))

    def days(self, predicted_days: float) -> tuple[float, float]:
        """The days a run predicted at `predicted_days` takes at the low and the high end of the error: a
        prediction `ratio` times too fast takes `ratio` times the days."""
        return predicted_days * self.low, predicted_days * self.high


@functools.lru_cache(maxsize=4)
def error_spread(path: str | Path = COURSE_RUNS) -> ErrorSpread:
    """The spread of predicted / reported over every run of `path` (default: the course's file)."""
    import numpy as np

    ratios = [row["ratio"] for row in compare(load(path))]
    low, median, high = (float(v) for v in np.percentile(ratios, [10, 50, 90]))
    return ErrorSpread(low, median, high, len(ratios), str(path))
