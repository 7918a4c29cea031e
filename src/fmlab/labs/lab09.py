"""Checks for labs/lab_09_trainium.ipynb: a shard's shape, which stage holds a layer, the KV multiplier, a round trip.

The questions' inputs live here, so the notebook and its checks cannot drift apart. Exercise 4 converts a tiny
Llama made on this machine (`make_tiny_llama`); nothing is downloaded.
"""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

from fmlab.labs import Lab
from fmlab.neuron.sharding import LlamaShape, NxdLayout, min_kv_size_multiplier, shard_shape, stage_of_layer
from fmlab.plan import catalog

LAB = Lab("lab 09", ["ex1_shard_shape", "ex2_stages", "ex3_kv_multiplier", "ex4_round_trip"])

EX1 = dict(model="llama2-70b", tp=8, key="model.layers.40.mlp.gate_up_proj.weight", tp_rank=3)
EX2 = dict(model="llama2-70b", pp=6, layers_asked=[13, 65, 66])
EX3 = dict(model="llama2-70b", tp=32)
EX4 = dict(tp=4, pp=2, layout="legacy")
TINY_LLAMA = dataclasses.replace(catalog.model("tiny"), layers=3)  # 4 Q heads, 2 KV heads, 3 layers


def make_tiny_llama(folder: str | Path) -> Path:
    """Save the lab's tiny GQA Llama (seed 0) as a Hugging Face folder and return it."""
    from fmlab.models import build_model

    folder = Path(folder)
    build_model(TINY_LLAMA, seed=0).save_pretrained(folder)
    return folder


def _shape(name: str) -> LlamaShape:
    return LlamaShape.from_preset(catalog.model(name))


def check_shard_shape(answer) -> bool:
    expected = shard_shape(EX1["key"], _shape(EX1["model"]), NxdLayout(tp=EX1["tp"]))
    return LAB.check("ex1_shard_shape", answer, lambda a: tuple(int(x) for x in a) == expected, f"{expected}",
                     "gate and up are column-parallel (dim 0) and fused per rank: 2 x intermediate / TP rows, "
                     "hidden columns; every rank holds the same shape")


def check_stages(answer) -> bool:
    layers = catalog.model(EX2["model"]).layers
    expected = [stage_of_layer(k, layers, EX2["pp"]) for k in EX2["layers_asked"]]
    return LAB.check("ex2_stages", answer, lambda a: [int(x) for x in a] == expected, f"stages {expected}",
                     f"{layers} layers over {EX2['pp']} stages: {layers // EX2['pp']} each, and the "
                     f"{layers % EX2['pp']} left over go to the LAST stages (neuron_layout.pipeline_stages)")


def check_kv_multiplier(answer) -> bool:
    preset = catalog.model(EX3["model"])
    expected = min_kv_size_multiplier(preset.n_kv_heads, EX3["tp"])
    return LAB.check("ex3_kv_multiplier", answer, lambda a: int(a) == expected and a == int(a), f"{expected}",
                     f"every one of the {EX3['tp']} ranks needs a whole KV head; there are "
                     f"{preset.n_kv_heads}, so each must be replicated until KV heads x multiplier divides TP")


def check_round_trip(answer) -> bool:
    """answer = (nxd_dir, restored_dir): an NxD checkpoint in the EX4 layout and the Hugging Face folder rebuilt
    from it. Passes when the shards have that layout and the rebuilt model gives the original's logits exactly."""

    def passes(a) -> bool:
        import torch
        from transformers import LlamaForCausalLM

        from fmlab.neuron import detect_layout
        from fmlab.neuron.files import find_shard_files, read_shards
        from fmlab.neuron.sharding import LlamaShape

        nxd_dir, restored_dir = (Path(p) for p in a)
        found = find_shard_files(nxd_dir)
        layout = detect_layout(read_shards(found), LlamaShape.from_preset(TINY_LLAMA))
        if (found.layout, layout.tp, layout.pp) != (EX4["layout"], EX4["tp"], EX4["pp"]):
            raise ValueError(f"the checkpoint is {found.layout} with tp={layout.tp}, pp={layout.pp}")
        restored = LlamaForCausalLM.from_pretrained(restored_dir).eval()
        with tempfile.TemporaryDirectory() as fresh:  # the original, loaded the same way and in the same dtype
            original = LlamaForCausalLM.from_pretrained(make_tiny_llama(fresh), dtype=restored.dtype).eval()
        ids = torch.arange(24).reshape(2, 12)
        with torch.no_grad():
            return torch.equal(restored(ids).logits, original(ids).logits)

    return LAB.check("ex4_round_trip", answer, passes, "bit-identical logits after HF -> NxD -> HF",
                     "neuron.hf_to_nxd(tiny_dir, nxd_dir, tp=4, pp=2, layout='legacy', ...) needs the GQA layout "
                     "(4 ranks, 2 KV heads), then neuron.nxd_to_hf(nxd_dir, restored_dir, config=tiny_dir)")


def summary() -> None:
    LAB.summary()
