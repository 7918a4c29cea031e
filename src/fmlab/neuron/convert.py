"""Hugging Face Llama <-> AWS Neuron Distributed (NxD) checkpoints, and the settings of a trn1 training job.

Trainium trains with NxD's tensor- and pipeline-parallel layers, which load one state dict per (tp, pp) rank. To
continue pretraining a Hugging Face Llama on trn1, convert it to that layout; to serve the result, convert back.
No Neuron package is needed (or available on PyPI): the rules are in `neuron_layout`, the file formats in
`neuron_files`, and both match NxD's source (cited there).

    from fmlab.neuron import hf_to_nxd, nxd_to_hf
    hf_to_nxd("tiny-llama/", "nxd/", tp=2, pp=2)       # nxd/config.json, nxd/pretrained_weight/model/*.pt + done
    hf_to_nxd("tiny-llama/", "nxd-legacy/", tp=4, pp=1, layout="legacy", qkv_linear=True, kv_size_multiplier=2)
    nxd_to_hf("nxd/", "restored/")                     # newest completed tag (and nxd/config.json), back to HF

The trn1 training job that continues pretraining from such a checkpoint is in `fmlab.neuron.job`.

The same from a shell: `fmlab convert hf-to-nxd --input HF_DIR --output DIR --tp 2 --pp 2` and
`fmlab convert nxd-to-hf --input DIR --output HF_DIR --config HF_DIR/config.json`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import torch

from fmlab.neuron.files import (
    find_shard_files,
    read_config,
    read_hf_folder,
    read_shards,
    write_config,
    write_hf_folder,
    write_shards,
)
from fmlab.neuron.sharding import (
    HEAD,
    LAYER_KEY,
    NORM,
    LlamaShape,
    NeuronLayoutError,
    NxdLayout,
    Shards,
    merge_shards,
    pipeline_stages,
    shard_shape,
    shard_state_dict,
    stage_keys,
)

DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32, "keep": None}
IGNORED_HF_KEYS = ("rotary_emb.inv_freq",)  # a buffer older Llama checkpoints saved; recomputed at load time


@dataclass
class ConversionReport:
    """What a conversion did: where, how, how many files and bytes, how long."""

    direction: str
    source: Path
    target: Path
    layout: str
    nxd: NxdLayout
    dtype: str
    files: list[Path]
    seconds: float
    tag: str = ""

    @property
    def total_bytes(self) -> int:
        return sum(f.stat().st_size for f in self.files)

    def tree(self) -> str:
        """The files written, relative to the target folder, with their sizes."""
        return "\n".join(f"{f.relative_to(self.target)}  ({f.stat().st_size:,} bytes)" for f in self.files)

    def summary(self) -> str:
        n = self.nxd
        return (f"{self.direction}: {len(self.files)} files, {self.total_bytes / 1e6:.2f} MB in {self.seconds:.2f} s "
                f"({self.layout} layout, tp={n.tp}, pp={n.pp}, qkv_linear={n.qkv_linear}, "
                f"kv_size_multiplier={n.kv_size_multiplier}, dtype {self.dtype})")


def _checked_hf_state(state: dict[str, torch.Tensor], shape: LlamaShape) -> dict[str, torch.Tensor]:
    """The state dict restricted to the keys of the config's Llama, or an error naming what is missing or extra."""
    state = {k: v for k, v in state.items() if not k.endswith(IGNORED_HF_KEYS)}
    expected = shape.hf_keys()
    missing = [k for k in expected if k not in state]
    extra = sorted(set(state) - set(expected))
    if missing or extra:
        raise NeuronLayoutError(f"the Hugging Face weights do not match their config ({shape.layers} layers): "
                                f"missing {missing[:4] or 'nothing'}, unexpected {extra[:4] or 'nothing'}")
    return {k: state[k] for k in expected}


def _cast(state: dict[str, torch.Tensor], dtype: str) -> dict[str, torch.Tensor]:
    if dtype not in DTYPES:
        raise NeuronLayoutError(f"dtype {dtype!r} is unknown: choose bf16 (Trainium's training type), fp32 or keep")
    target = DTYPES[dtype]
    return state if target is None else {k: v.to(target) for k, v in state.items()}


def hf_state_to_nxd(state: dict[str, torch.Tensor], config: dict, layout: NxdLayout, dtype: str = "keep") -> Shards:
    """In memory: a Hugging Face Llama state dict and its config -> NxD shards {(tp_rank, pp_rank): state dict}."""
    shape = LlamaShape.from_config(config)
    layout.check(shape)
    return shard_state_dict(_cast(_checked_hf_state(state, shape), dtype), shape, layout)


def hf_to_nxd(hf_dir: str | Path, output_dir: str | Path, tp: int = 1, pp: int = 1, layout: str = "current",
              qkv_linear: bool = False, kv_size_multiplier: int = 1, dtype: str = "bf16",
              tag: str = "pretrained_weight", user_content: dict | None = None,
              overwrite: bool = False) -> ConversionReport:
    """Convert a Hugging Face Llama folder into an NxD checkpoint for tensor size `tp` and `pp` pipeline stages.

    layout "current" writes <output>/<tag>/model/dp_rank_00_tp_rank_XX_pp_rank_YY.pt and the `done` marker (NxD
    trainers load the tag "pretrained_weight" as their starting weights); "legacy" writes
    <output>/tp_rank_XX_pp_rank_YY/checkpoint.pt. dtype: bf16 (default, what trn1 trains in), fp32, or keep.
    The model's config.json goes to <output>/config.json: the trn1 training script builds the model from it, and
    `nxd_to_hf` finds it there.
    """
    start = time.perf_counter()
    nxd = NxdLayout(tp=tp, pp=pp, qkv_linear=qkv_linear, kv_size_multiplier=kv_size_multiplier)
    config, state = read_hf_folder(hf_dir)
    shards = hf_state_to_nxd(state, config, nxd, dtype)
    files = write_shards(shards, output_dir, layout=layout, tag=tag, user_content=user_content, overwrite=overwrite)
    files.append(write_config(config, output_dir))
    return ConversionReport("hf-to-nxd", Path(hf_dir), Path(output_dir), layout, nxd, dtype, files,
                            time.perf_counter() - start, tag if layout == "current" else "")


def detect_layout(shards: Shards, shape: LlamaShape) -> NxdLayout:
    """Read T, P, qkv_linear and the KV multiplier off a complete grid of shards, or say which rank is missing."""
    tp = 1 + max(t for t, _ in shards)
    pp = 1 + max(p for _, p in shards)
    first = shards[(0, 0)]
    if any(k.endswith("qkv_proj.weight_qkv") for k in first):
        raise NeuronLayoutError("these shards fuse q, k and v into qkv_proj.weight_qkv (NxD's fuse_qkv); convert them "
                                "with fuse_qkv off, or split weight_qkv into weight_q/_k/_v first")
    down = next((v for k, v in first.items() if k.endswith("mlp.down_proj.weight")), None)
    if down is None:
        raise NeuronLayoutError("tp_rank_00_pp_rank_00 holds no mlp.down_proj.weight: not a Llama NxD shard")
    tp_from_shape = shape.intermediate // down.shape[1]
    if tp_from_shape != tp:
        raise NeuronLayoutError(f"each shard holds 1/{tp_from_shape} of down_proj, so {tp_from_shape} tensor-parallel "
                                f"ranks are expected, but files exist for tp ranks 0..{tp - 1}: a rank is missing "
                                "or the config belongs to another model")
    layers = {int(m.group(1)) for state in shards.values() for k in state if (m := LAYER_KEY.match(k))}
    absent = sorted(set(range(shape.layers)) - layers)
    ends = [k for k in (NORM, HEAD) if not any(k in state for state in shards.values())]
    if absent or ends:
        raise NeuronLayoutError(f"layers {absent} and {ends} are in no shard: a pipeline rank is missing (found pp "
                                f"ranks 0..{pp - 1}) or the config has more layers than the checkpoint")
    firsts = [min((int(m.group(1)) for k in shards[(0, p)] if (m := LAYER_KEY.match(k))), default=-1)
              for p in range(pp)]
    if pp > shape.layers or firsts != [s.start for s in pipeline_stages(shape.layers, pp)]:
        raise NeuronLayoutError(f"the layers are not cut into {pp} stages the way NxD cuts them "
                                f"({pipeline_stages(shape.layers, pp)})")
    key_k = next((k for k in first if k.endswith("qkv_proj.weight_k")), None)
    if key_k is None:
        return NxdLayout(tp=tp, pp=pp)
    multiplier, rest = divmod(first[key_k].shape[0] * tp, shape.kv_heads * shape.head_dim)
    if rest:
        raise NeuronLayoutError(f"{key_k} has {first[key_k].shape[0]} rows per rank: not whole replicated KV heads")
    layout = NxdLayout(tp=tp, pp=pp, qkv_linear=True, kv_size_multiplier=multiplier)
    try:
        layout.check(shape)
    except NeuronLayoutError as e:
        raise NeuronLayoutError(f"these shards do not fit the given config ({e}); pass the model's own config") from e
    return layout


def nxd_to_hf(nxd_dir: str | Path, output_dir: str | Path, config: str | Path | None = None,
              tag: str | None = None) -> ConversionReport:
    """Convert an NxD checkpoint (either layout; the newest completed tag unless `tag`) back to a Hugging Face
    folder (model.safetensors + config.json) that `LlamaForCausalLM.from_pretrained` loads. dtype is kept.
    config: the model's config.json (or its folder); None reads the one `hf_to_nxd` put at <nxd_dir>/config.json."""
    start = time.perf_counter()
    cfg = read_config(config if config is not None else _config_beside(nxd_dir))
    shape = LlamaShape.from_config(cfg)
    found = find_shard_files(nxd_dir, tag)
    shards = read_shards(found)
    nxd = detect_layout(shards, shape)
    full = merge_shards(shards, shape, nxd)
    files = write_hf_folder(full, cfg, output_dir)
    dtype = str(next(iter(full.values())).dtype).removeprefix("torch.")
    return ConversionReport("nxd-to-hf", Path(nxd_dir), Path(output_dir), found.layout, nxd, dtype, files,
                            time.perf_counter() - start, found.tag)


def _config_beside(nxd_dir: str | Path) -> Path:
    """<nxd_dir>/config.json, also when nxd_dir is a tag folder or its model folder."""
    folder = Path(nxd_dir)
    for candidate in (folder, folder.parent, folder.parent.parent):
        if (candidate / "config.json").is_file():
            return candidate / "config.json"
    raise NeuronLayoutError(f"no config.json at {folder} or above it: pass the model's Hugging Face config "
                            "(config=..., --config) to say which model these shards belong to")


def shard_table(shape: LlamaShape, layout: NxdLayout, pp_rank: int = 0) -> list[dict]:
    """One row per NxD key of stage `pp_rank`: how it is split and its shape on every tensor-parallel rank."""
    rows = []
    for key in stage_keys(shape, layout, pp_rank):
        part = LAYER_KEY.match(key).group(2) if LAYER_KEY.match(key) else key
        if "layernorm" in part or key == NORM:
            rule = "whole on every rank (RMSNorm)"
        elif part in ("model.embed_tokens.weight", HEAD):
            rule = "vocabulary split, dim 0"
        elif part in ("self_attn.o_proj.weight", "mlp.down_proj.weight"):
            rule = "row-parallel, dim 1"
        elif "gate_up" in part:
            rule = "column-parallel, dim 0: [gate rows; up rows] of this rank"
        elif layout.qkv_linear and part.endswith(("weight_k", "weight_v")):
            rule = f"column-parallel, dim 0, after tiling K/V heads x{layout.kv_size_multiplier}"
        else:
            rule = "column-parallel, dim 0"
        rows.append({"key": key, "split": rule, "shape_per_rank": shard_shape(key, shape, layout)})
    return rows
