"""The two file layouts of Neuron Distributed (NxD) checkpoints, and Hugging Face model folders, on disk.

current layout, written by `neuronx_distributed.trainer.save_checkpoint` and read by `load_checkpoint`:
    <dir>/<tag>/checkpoint                                 marker "1", written when a save begins
    <dir>/<tag>/model/dp_rank_00_tp_rank_XX_pp_rank_YY.pt  one flat state dict per (tp, pp) rank
    <dir>/<tag>/user_content.pt                            optional, whatever the trainer stored (steps, ...)
    <dir>/<tag>/done                                       marker "1", written last, when the save completed
  Loading without a tag picks the newest tag that has `done` (newest by the marker's modification time).
legacy layout, written by `neuronx_distributed.parallel_layers.checkpointing.save` (the 2024 SageMaker
Llama 2 70B example converts its pretrained weights into this one):
    <dir>/tp_rank_XX_pp_rank_YY/checkpoint.pt

    >>> files = find_shard_files("ckpt/")       # either layout; a tag or model folder works too
    >>> shards = read_shards(files)             # {(tp_rank, pp_rank): state dict}

Matched against github.com/aws-neuron/neuronx-distributed: src/neuronx_distributed/trainer/checkpoint.py and
trainer/checkpoint_storage.py @ 0f2a90f6ba2dc8fb12833d85e48732ca36717611 / 0598cd8bfc046daf1105b79acd283ff5b6db657e
(`_get_path`, the `checkpoint` and `done` markers, `list_completed_checkpoint_tags` sorted by mtime,
`user_content.pt`), parallel_layers/checkpointing.py @ 0598cd8bfc046daf1105b79acd283ff5b6db657e (legacy names;
`load` unwraps a "model" key), and scripts/checkpoint_converter.py @ 28e9923d443c2d99eb6029803d3a16f9dea72344
(`get_input_filename`/`get_output_filename`). Every file here loads with torch.load(weights_only=True).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from fmlab.neuron.sharding import NeuronLayoutError, Shards

CURRENT_FILE = "dp_rank_00_tp_rank_{tp:02d}_pp_rank_{pp:02d}.pt"
LEGACY_DIR, LEGACY_FILE = "tp_rank_{tp:02d}_pp_rank_{pp:02d}", "checkpoint.pt"
DONE, BEGUN, USER_CONTENT = "done", "checkpoint", "user_content.pt"
LAYOUTS = ("current", "legacy")
_CURRENT_NAME = re.compile(r"^dp_rank_00_tp_rank_(\d+)_pp_rank_(\d+)\.pt$")
_LEGACY_NAME = re.compile(r"^tp_rank_(\d+)_pp_rank_(\d+)$")


@dataclass
class ShardFiles:
    """The shard files found under a folder: which layout, which tag, and one path per (tp_rank, pp_rank)."""

    layout: str
    root: Path
    files: dict[tuple[int, int], Path]
    tag: str = ""
    user_content: Path | None = None
    tp: int = field(init=False)
    pp: int = field(init=False)

    def __post_init__(self):
        if not self.files:
            raise NeuronLayoutError(f"no NxD shard files under {self.root}")
        self.tp = 1 + max(t for t, _ in self.files)
        self.pp = 1 + max(p for _, p in self.files)
        missing = [(t, p) for t in range(self.tp) for p in range(self.pp) if (t, p) not in self.files]
        if missing:
            names = ", ".join(f"tp_rank_{t:02d}_pp_rank_{p:02d}" for t, p in missing[:6])
            raise NeuronLayoutError(f"the shard set under {self.root} is incomplete: files for tp 0..{self.tp - 1} "
                                    f"x pp 0..{self.pp - 1} are expected, but {names} are missing")


def write_shards(shards: Shards, out_dir: str | Path, layout: str = "current", tag: str = "pretrained_weight",
                 user_content: dict | None = None, overwrite: bool = False) -> list[Path]:
    """Save every shard in the chosen NxD layout; return the files written, the `done` marker last.

    Shards already in the target (the legacy folder, or the same tag) are an error unless `overwrite`, which
    first deletes them, so that no stale rank from an earlier layout is left behind to be read back.
    """
    if layout not in LAYOUTS:
        raise NeuronLayoutError(f"layout {layout!r} is unknown: choose 'current' (trainer.save_checkpoint) or "
                                "'legacy' (parallel_layers.checkpointing.save)")
    if layout == "current" and (not tag or "/" in tag or tag in (".", "..")):
        raise NeuronLayoutError(f"tag {tag!r} must be a plain folder name, e.g. 'pretrained_weight' or 'step_100'")
    out = Path(out_dir)
    stale = (_files_in(out, _LEGACY_NAME, LEGACY_FILE) if layout == "legacy"
             else _files_in(out / tag / "model", _CURRENT_NAME))
    if stale and not overwrite:
        where = out if layout == "legacy" else out / tag
        raise NeuronLayoutError(f"{where} already holds NxD shards; choose an empty folder (or another tag), "
                                "or pass overwrite=True (--overwrite) to replace them")
    for path in stale.values():
        path.unlink()
    if stale and layout == "current":
        (out / tag / USER_CONTENT).unlink(missing_ok=True)
    written = []
    if layout == "legacy":
        for (t, p), state in sorted(shards.items()):
            path = out / LEGACY_DIR.format(tp=t, pp=p) / LEGACY_FILE
            path.parent.mkdir(parents=True, exist_ok=True)
            torch.save(state, path)
            written.append(path)
        return written
    folder = out / tag
    (folder / "model").mkdir(parents=True, exist_ok=True)
    (folder / DONE).unlink(missing_ok=True)  # an overwrite is incomplete until it completes again
    (folder / BEGUN).write_text("1")
    for (t, p), state in sorted(shards.items()):
        path = folder / "model" / CURRENT_FILE.format(tp=t, pp=p)
        torch.save(state, path)
        written.append(path)
    if user_content is not None:
        torch.save(user_content, folder / USER_CONTENT)
        written.append(folder / USER_CONTENT)
    (folder / DONE).write_text("1")
    return [folder / BEGUN, *written, folder / DONE]


def completed_tags(root: str | Path) -> list[str]:
    """Tags under `root` that have a `done` marker, oldest first (by the marker's modification time)."""
    markers = sorted(Path(root).glob(f"*/{DONE}"), key=lambda m: (m.stat().st_mtime_ns, m.parent.name))
    return [m.parent.name for m in markers]


def _files_in(folder: Path, pattern: re.Pattern, inner: str = "") -> dict[tuple[int, int], Path]:
    """{(tp_rank, pp_rank): file} for the entries of `folder` named like `pattern` (the file `inner` inside each)."""
    found = {}
    for path in folder.iterdir() if folder.is_dir() else []:
        match = pattern.match(path.name)
        file = path / inner if inner else path
        if match and file.is_file():
            found[(int(match.group(1)), int(match.group(2)))] = file
    return found


def find_shard_files(path: str | Path, tag: str | None = None) -> ShardFiles:
    """Locate the shards under `path`: a legacy folder, a current-layout folder (newest completed tag, or `tag`),
    a tag folder, or a tag's `model` folder."""
    root = Path(path)
    if not root.is_dir():
        raise NeuronLayoutError(f"{root} is not a folder of NxD shards")
    xser = next(root.glob("**/*.tensors"), None)
    if xser is not None:
        raise NeuronLayoutError(f"{xser} is torch-xla serialization (use_xser / save_xser), which needs torch_xla to "
                                "read; convert it with NxD's checkpoint_converter --convert_from_xser on a Neuron "
                                "machine, or save with use_xser=False")
    legacy = _files_in(root, _LEGACY_NAME, LEGACY_FILE)
    if legacy:
        return ShardFiles("legacy", root, legacy)
    if (root / "model").is_dir():  # a tag folder
        folder = root
    elif _files_in(root, _CURRENT_NAME):  # a model folder
        return ShardFiles("current", root, _files_in(root, _CURRENT_NAME), tag=root.parent.name)
    else:
        tags = completed_tags(root)
        if tag is None:
            if not tags:
                begun = sorted(p.parent.name for p in root.glob(f"*/{BEGUN}"))
                hint = f" (tags {', '.join(begun)} were begun but never marked done)" if begun else ""
                raise NeuronLayoutError(f"no completed NxD checkpoint under {root}: no <tag>/{DONE} marker{hint} "
                                        "and no tp_rank_XX_pp_rank_YY/checkpoint.pt folders")
            tag = tags[-1]
        elif tag not in tags:
            raise NeuronLayoutError(f"tag {tag!r} under {root} has no {DONE} marker; completed tags: "
                                    f"{', '.join(tags) or 'none'}")
        folder = root / tag
    content = folder / USER_CONTENT
    return ShardFiles("current", root, _files_in(folder / "model", _CURRENT_NAME), tag=folder.name,
                      user_content=content if content.is_file() else None)


def read_shards(files: ShardFiles) -> Shards:
    """Load every shard (weights_only=True); a state dict wrapped as {"model": ...} is unwrapped, as NxD's load does."""
    shards = {}
    for rank, path in sorted(files.files.items()):
        state = torch.load(path, map_location="cpu", weights_only=True)
        if isinstance(state, dict) and isinstance(state.get("model"), dict):
            state = state["model"]
        if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
            raise NeuronLayoutError(f"{path} is not a flat state dict of tensors")
        shards[rank] = state
    return shards


def read_hf_folder(folder: str | Path) -> tuple[dict, dict[str, torch.Tensor]]:
    """The config.json dict and full state dict of a Hugging Face model folder (safetensors, sharded or not)."""
    folder = Path(folder)
    config = read_config(folder)
    index = folder / "model.safetensors.index.json"
    if (folder / "model.safetensors").is_file():
        state = load_file(folder / "model.safetensors")
    elif index.is_file():
        state = {}
        for name in sorted(set(json.loads(index.read_text())["weight_map"].values())):
            state.update(load_file(folder / name))
    elif (folder / "pytorch_model.bin").is_file():
        state = torch.load(folder / "pytorch_model.bin", map_location="cpu", weights_only=True)
    else:
        raise NeuronLayoutError(f"{folder} has no model.safetensors, model.safetensors.index.json or "
                                "pytorch_model.bin: save the model with save_pretrained first")
    return config, state


def read_config(path: str | Path) -> dict:
    """A Hugging Face config.json, given the file or the folder that holds it."""
    path = Path(path)
    file = path / "config.json" if path.is_dir() else path
    if not file.is_file():
        raise NeuronLayoutError(f"no config.json at {path}: pass the Hugging Face config of the model")
    return json.loads(file.read_text())


def write_config(config: dict, out_dir: str | Path) -> Path:
    """Write a Hugging Face config dict as <out_dir>/config.json."""
    path = Path(out_dir) / "config.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    return path


def write_hf_folder(state: dict[str, torch.Tensor], config: dict, out_dir: str | Path) -> list[Path]:
    """Save a state dict as a Hugging Face folder that `from_pretrained` loads: model.safetensors + config.json."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    dtypes = {v.dtype for v in state.values()}
    config = dict(config)
    if len(dtypes) == 1:
        config["dtype"] = config["torch_dtype"] = str(dtypes.pop()).removeprefix("torch.")
    save_file({k: v.contiguous() for k, v in state.items()}, out / "model.safetensors", metadata={"format": "pt"})
    return [out / "model.safetensors", write_config(config, out)]
