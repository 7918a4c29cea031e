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

import json
from pathlib import Path

from fmlab.plan.catalog import ModelPreset
from fmlab.plan.compute import PlanError
from fmlab.plan.parallelism import ParallelConfig
from fmlab.plan.speed import Hardware, Workload, step_time

ARCHS = {"gpt": "opt", "llama": "llama"}  # the format's architectures as fmlab's model families
PRECISIONS = ("bf16", "fp16")
REQUIRED = {"name": str, "model": dict, "hardware": dict, "layout": dict, "batch": dict, "reported": dict}


def _field(run: dict, section: str, key: str, kind: type, default=None):
    where = run.get(section, {})
    if key not in where:
        if default is not None:
            return default
        raise PlanError(f"run {run.get('name', '?')!r}: {section}.{key} is missing (docs/published-runs.md lists "
                        f"the fields)")
    value = where[key]
    if kind is int and isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) and kind is not bool or not isinstance(value, kind):
        raise PlanError(f"run {run.get('name', '?')!r}: {section}.{key} must be a {kind.__name__}, got {value!r}")
    return value


def workload(run: dict) -> Workload:
    """The Workload a run describes; PlanError naming the field that is missing or wrong."""
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
                        intermediate=_field(run, "model", "intermediate", int, 0),
                        kv_heads=_field(run, "model", "kv_heads", int, heads), source=run.get("source", ""))
    power = run["hardware"].get("gpu_power_watts")
    hw = Hardware(_field(run, "hardware", "gpu", str), _field(run, "hardware", "gpus", int),
                  _field(run, "hardware", "gpus_per_node", int, 8),
                  float(_field(run, "hardware", "inter_node_gbps", (int, float))),
                  _field(run, "hardware", "intra_node", str, ""), float(power) if power else None)
    sharding = _field(run, "layout", "sharding", str, "none")
    layout = ParallelConfig(sharding=sharding, hybrid_shard_degree=_field(run, "layout", "hybrid_shard_degree", int, 0),
                            tp=_field(run, "layout", "tp", int, 1), pp=_field(run, "layout", "pp", int, 1),
                            activation_checkpointing=_field(run, "layout", "activation_checkpointing", str, "none"))
    precision = run.get("precision", "bf16")
    if precision not in PRECISIONS:
        raise PlanError(f"run {run['name']!r}: precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")
    return Workload(model, hw, layout, micro_batch=_field(run, "batch", "micro_batch", int),
                    global_batch=_field(run, "batch", "global_batch", int),
                    virtual_stages=_field(run, "layout", "virtual_stages", int, 1),
                    sequence_parallel=bool(run["layout"].get("sequence_parallel", False)),
                    attention=run["layout"].get("attention", "flash"), kernels=run["layout"].get("kernels", "fused"),
                    gradient_bytes=2 if precision == "fp16" else 4)


def load(path: str | Path) -> list[dict]:
    """The runs of a RUNS.json file; PlanError for a file that is not a JSON list of run objects."""
    try:
        runs = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise PlanError(f"cannot read the runs file {path}: {e}") from None
    if not isinstance(runs, list) or not all(isinstance(r, dict) for r in runs):
        raise PlanError(f"{path} must hold a JSON list of runs, one object each (docs/published-runs.md)")
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


def summary(rows: list[dict], within: float = 0.20) -> dict:
    """How many predictions land within `within` of the reported figure, and the worst ratio."""
    off = [abs(r["ratio"] - 1) for r in rows]
    return {"runs": len(rows), "within": within, "inside": sum(o <= within for o in off),
            "share_inside": sum(o <= within for o in off) / len(rows) if rows else 0.0,
            "worst": max(rows, key=lambda r: abs(r["ratio"] - 1))["name"] if rows else None,
            "worst_off": max(off) if off else 0.0}
