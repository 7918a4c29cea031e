"""SageMaker model parallelism v2's settings ("SMP v2"): `--mp_parameters` to a ParallelConfig and back, torch-free.

    from_mp_parameters('{"hybrid_shard_degree": 8, "tensor_parallel_degree": 2}')   # -> ParallelConfig
    to_mp_parameters(cfg)                                                              # -> the same dict back

SageMaker passes SMP's settings to the training script as one hyperparameter, `--mp_parameters`, holding a
JSON object (SDK v3 builds it from `Torchrun(smp=SMP(...))`). The jobs layer writes them and the training
script's config reads them (fmlab.train.config checks they agree with its layout flags), so they live here,
beside SageMaker's other library facts, without torch; fmlab.parallel.smp runs SMP v2 itself where it is installed.

Settings read (names as in the SMP v2 reference, "SMP v2 core feature configuration parameters"):
  hybrid_shard_degree         0 = shard over every data-parallel rank; D >= 1 = shard within groups of D
  tensor_parallel_degree      tensor-parallel degree
  sm_activation_offloading    offload checkpointed activations to host memory (needs checkpointing)
  activation_loading_horizon  how many layers' activations are prefetched back ahead of the backward pass
"""

from __future__ import annotations

import ast
import json
import warnings

from fmlab.plan.compute import PlanError
from fmlab.plan.parallelism import ParallelConfig, parse_bool

SMP_KEYS = ("hybrid_shard_degree", "tensor_parallel_degree", "sm_activation_offloading", "activation_loading_horizon")
# SMP settings that change nothing the native path computes (performance or bookkeeping knobs).
SMP_PASSIVE_KEYS = ("fsdp_cache_flush_warnings", "allow_empty_shards", "random_seed")
SMP_ONLY_KEYS = ("context_parallel_degree", "expert_parallel_degree")


def _as_dict(mp) -> dict:
    if mp is None or mp == "":
        return {}
    if isinstance(mp, dict):
        return dict(mp)
    if isinstance(mp, str):
        try:
            value = json.loads(mp)
        except json.JSONDecodeError:
            try:
                value = ast.literal_eval(mp)  # a Python dict literal, as some launchers print it
            except (ValueError, SyntaxError):
                raise ValueError(f"--mp_parameters must be a JSON object such as "
                                 f"'{{\"hybrid_shard_degree\": 8}}', got {mp!r}") from None
        if isinstance(value, dict):
            return value
    raise ValueError(f"--mp_parameters must be a JSON object (or a dict), got {type(mp).__name__}: {mp!r}")


def _int(key: str, value) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ValueError(f"SMP setting {key} must be a whole number, got {value!r}") from None


def _bool(key: str, value) -> bool:
    try:
        return parse_bool(value)
    except ValueError:
        raise ValueError(f"SMP setting {key} must be true or false, got {value!r}") from None


def from_mp_parameters(mp: str | dict):
    """The ParallelConfig that SMP v2 settings describe (a JSON string as SageMaker passes it, or a dict).

    SMP v2 always shards with FSDP: hybrid_shard_degree 0 means full sharding, D >= 1 hybrid sharding in
    groups of D. SMP's activation offloading works on checkpointed layers, so it turns full checkpointing on.
    """
    settings = _as_dict(mp)
    for key in SMP_ONLY_KEYS:
        if _int(key, settings.get(key, 1)) > 1:
            raise PlanError(f"{key}={settings[key]} needs SMP v2 itself (torch.sagemaker, in the SMP v2 "
                            f"image smdistributed-modelparallel); the native path here has no {key.split('_')[0]} parallelism: set it to 1")
    unknown = sorted(set(settings) - set(SMP_KEYS) - set(SMP_PASSIVE_KEYS) - set(SMP_ONLY_KEYS))
    if unknown:
        warnings.warn(f"ignoring SMP settings this course does not use: {', '.join(unknown)}", stacklevel=2)
    degree = _int("hybrid_shard_degree", settings.get("hybrid_shard_degree", 0))
    offload = _bool("sm_activation_offloading", settings.get("sm_activation_offloading", False))
    return ParallelConfig(
        sharding="hybrid" if degree >= 1 else "full",
        hybrid_shard_degree=max(degree, 0),
        tp=_int("tensor_parallel_degree", settings.get("tensor_parallel_degree", 1)),
        activation_checkpointing="full" if offload else "none",
        activation_offloading=offload,
        offload_horizon=_int("activation_loading_horizon", settings.get("activation_loading_horizon", 2)),
    )


def to_mp_parameters(cfg) -> dict:
    """The SMP v2 settings for a ParallelConfig (what `SMP(**to_mp_parameters(cfg))` takes in SDK v3)."""
    if cfg.sharding == "none":
        raise ValueError("SMP v2 always shards the model with FSDP: use sharding='full' or 'hybrid' "
                         "(or launch plain DDP with Torchrun() and no smp=...)")
    out = {"hybrid_shard_degree": cfg.hybrid_shard_degree if cfg.sharding == "hybrid" else 0,
           "tensor_parallel_degree": cfg.tp}
    if cfg.activation_offloading:
        out["sm_activation_offloading"] = True
        out["activation_loading_horizon"] = cfg.offload_horizon
    return out
