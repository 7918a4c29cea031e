"""The trained model as a complete Hugging Face folder: weights, config, tokenizer, generation config, model card.

    card = ModelCard(name="fmlab-tiny", data="...", tokens=1_228_800, hardware="2 CPU cores", evals={...})
    folder = export_model(model, "runs/export", tokenizer_dir=data / "tokenizer", card=card)
    check_round_trip(model, folder)      # AutoModelForCausalLM loads it; its logits equal the training model's

`fmlab.checkpoint.export_hf` writes the weights (model.safetensors, gathered from every rank) and
config.json; this adds what a server needs to run the folder on its own (transformers' serve, vLLM, the
SageMaker LMI container all read the same files): the tokenizer (tokenizer.json, tokenizer_config.json, with
the context length as model_max_length), generation_config.json (end-of-text as eos and pad, greedy by
default), `architectures` and `use_cache=True` in config.json (training turns the KV cache off), and a model
card (README.md) whose figures come from the run. `check_model_folder` names what a folder lacks before a
server is pointed at it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

from fmlab.checkpoint import export_hf
from fmlab.data import tokenizer_info

REQUIRED_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")


class NotAModelFolder(ValueError):
    """A folder a server or from_pretrained cannot load: the message names the missing files."""


@dataclass
class ModelCard:
    """What the model card states; every figure comes from the run that made the model."""

    name: str
    data: str  # what it was trained on
    tokens: int  # training tokens seen
    hardware: str
    steps: int = 0
    evals: dict[str, str] = field(default_factory=dict)  # figure -> value, e.g. {"held-out perplexity": "73.1"}
    notes: str = ""

    def markdown(self, config) -> str:
        rows = "\n".join(f"| {k} | {v} |" for k, v in self.evals.items()) or "| (none recorded) | |"
        shape = (f"{config.model_type}, {config.num_hidden_layers} layers, hidden {config.hidden_size}, "
                 f"{config.num_attention_heads} heads ({getattr(config, 'num_key_value_heads', None) or config.num_attention_heads} "
                 f"key/value), vocabulary {config.vocab_size}, context {config.max_position_embeddings}")
        return f"""---
library_name: transformers
pipeline_tag: text-generation
tags: [fmlab, pretraining, base-model]
---

# {self.name}

A base (pretrained, not instruction-tuned) causal language model made by the fmlab course.

* **Architecture**: {shape}
* **Training data**: {self.data}
* **Training tokens**: {self.tokens:,} ({self.steps} optimizer steps)
* **Hardware**: {self.hardware}

## Evaluation

| figure | value |
| --- | --- |
{rows}

## Use

```python
from transformers import AutoModelForCausalLM, AutoTokenizer
model = AutoModelForCausalLM.from_pretrained("<this folder>")
tokenizer = AutoTokenizer.from_pretrained("<this folder>")
```

{self.notes}
"""


def export_model(model, out_dir: str | Path, tokenizer_dir: str | Path, card: ModelCard | None = None,
                 max_new_tokens: int = 32) -> Path:
    """Write `model` (one process) with its tokenizer, generation config and card to `out_dir`; returns it."""
    info = tokenizer_info(tokenizer_dir)
    out = export_hf(model, out_dir)
    if out is None:  # another rank: rank 0 writes
        return Path(out_dir)
    config = model.config
    context = config.max_position_embeddings
    config.architectures = [type(getattr(model, "module", model)).__name__]
    config.use_cache = True  # serving reuses keys and values; training had it off
    config.eos_token_id = config.bos_token_id = config.pad_token_id = info.eot_id
    config.save_pretrained(out)
    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    tokenizer.model_max_length = context
    tokenizer.pad_token = tokenizer.eos_token = info.eot_token
    tokenizer.save_pretrained(out)
    GenerationConfig(eos_token_id=info.eot_id, pad_token_id=info.eot_id, bos_token_id=info.eot_id,
                     max_new_tokens=max_new_tokens, do_sample=False).save_pretrained(out)
    config.use_cache = False  # the training model keeps training as it was
    if card is not None:
        (out / "README.md").write_text(card.markdown(config))
    return out


def check_model_folder(folder: str | Path) -> Path:
    """`folder`, if a server can load it; NotAModelFolder naming what is missing otherwise."""
    folder = Path(folder)
    if not folder.is_dir():
        raise NotAModelFolder(f"{folder} is not a folder: export the model first (fmlab.serve.export_model)")
    missing = [f for f in REQUIRED_FILES if not (folder / f).is_file()]
    if missing:
        raise NotAModelFolder(f"{folder} is not a Hugging Face model folder: it lacks {', '.join(missing)} "
                              "(export it with fmlab.serve.export_model, which writes weights, config and tokenizer)")
    try:
        config = json.loads((folder / "config.json").read_text())
    except ValueError as e:
        raise NotAModelFolder(f"{folder / 'config.json'} is not valid JSON ({e}): export the model again") from None
    if not config.get("architectures"):
        raise NotAModelFolder(f"{folder / 'config.json'} names no architectures: a server cannot tell which model "
                              "class to build; export with fmlab.serve.export_model")
    return folder


def load_exported(folder: str | Path):
    """(model, tokenizer) from an exported folder, with transformers' Auto classes, in eval mode."""
    folder = check_model_folder(folder)
    return AutoModelForCausalLM.from_pretrained(str(folder)).eval(), AutoTokenizer.from_pretrained(str(folder))


def check_round_trip(model, folder: str | Path, text: str = "To be, or not to be, that is the question",
                     atol: float = 0.0) -> float:
    """Load `folder` back with AutoModelForCausalLM and compare its logits with `model`'s on `text`; returns
    the largest absolute difference, raising AssertionError when it exceeds `atol` (0: bit for bit)."""
    loaded, tokenizer = load_exported(folder)
    ids = tokenizer(text, return_tensors="pt")["input_ids"]
    was_training = model.training
    model.eval()
    with torch.no_grad():
        diff = (loaded(input_ids=ids).logits - model(input_ids=ids).logits).abs().max().item()
    model.train(was_training)
    if diff > atol:
        raise AssertionError(f"the exported model's logits differ from the training model's by {diff:.3g} "
                             f"(allowed {atol:g}): the folder is not the trained model")
    return diff


__all__ = ["ModelCard", "NotAModelFolder", "REQUIRED_FILES", "check_model_folder", "check_round_trip",
           "export_model", "load_exported"]
