"""The on-disk format of fmlab checkpoints for everything that is not a tensor, and safe reading of DCP's index.

Used by fmlab.checkpoint.checkpointer (see there for the folder layout). Nothing here pickles: RNG states, the data
position, optimizer hyper-parameters and the LR scheduler are JSON; DCP's own index (`.metadata`, a pickle
that torch's FileSystemReader would load with plain `pickle.load`) is read with an unpickler that admits only
DCP's metadata classes, and a checkpoint holding pickled objects is refused.
Tested by tests/train/test_checkpoint.py.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import json
import os
import pathlib
import pickle
import random
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed.checkpoint.filesystem as fs
import torch.distributed.checkpoint.metadata as md
import torch.serialization as ser
from torch.distributed.checkpoint import FileSystemReader, Metadata
from torch.distributed.checkpoint.metadata import BytesStorageMetadata, StorageMeta


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be saved or loaded, with what to do about it in the message."""


# ---------------------------------------------------------------- JSON for everything that is not a tensor


def _pack(array) -> str:
    return base64.b64encode(np.ascontiguousarray(array).tobytes()).decode()


def _unpack(text: str, dtype) -> Any:
    return np.frombuffer(base64.b64decode(text), dtype=dtype).copy()


def rng_state() -> dict:
    """This process's random-number generators (torch, CUDA, Python, NumPy) as JSON-ready text."""
    version, internal, gauss = random.getstate()
    name, keys, pos, has_gauss, cached = np.random.get_state()
    state = {"torch": _pack(torch.get_rng_state().numpy()),
             "python": [version, _pack(np.array(internal, dtype=np.uint32)), gauss],
             "numpy": [name, _pack(keys.astype(np.uint32)), int(pos), int(has_gauss), float(cached)]}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = [_pack(s.numpy()) for s in torch.cuda.get_rng_state_all()]
    return state


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(torch.from_numpy(_unpack(state["torch"], np.uint8)))
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(int(v) for v in _unpack(internal, np.uint32)), gauss))
    name, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((name, _unpack(keys, np.uint32), pos, has_gauss, cached))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([torch.from_numpy(_unpack(s, np.uint8)) for s in state["cuda"]])


def json_ready(value: Any, where: str) -> Any:
    """`value` made JSON-serialisable (tuples become lists), or a CheckpointError naming what cannot be."""
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return value.item()
    if isinstance(value, dict):
        return {str(k): json_ready(v, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_ready(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    raise CheckpointError(f"{where} is a {type(value).__name__}, which a checkpoint stores only as a tensor or "
                          f"JSON (fmlab never pickles): convert it to a tensor, a number or a string")


def restore_groups(saved: list[dict], live: list[dict]) -> list[dict]:
    """The saved optimizer hyper-parameters on the live groups, keeping the live types (tuples stay tuples)."""
    if len(saved) != len(live):
        raise CheckpointError(f"the checkpoint has {len(saved)} optimizer parameter groups, this optimizer "
                              f"{len(live)}: build the optimizer the way the checkpointed run did")
    groups = []
    for old, new in zip(saved, live, strict=True):
        group = dict(new)
        for k, v in old.items():
            if k != "params":
                group[k] = tuple(v) if isinstance(new.get(k), tuple) else v
        groups.append(group)
    return groups


def require_tensors(tree: Any, where: str) -> None:
    """Refuse anything that DCP would have to pickle."""
    if isinstance(tree, dict):
        for k, v in tree.items():
            require_tensors(v, f"{where}.{k}")
    elif not isinstance(tree, torch.Tensor):
        raise CheckpointError(f"{where} is a {type(tree).__name__}, not a tensor; DCP would pickle it and fmlab "
                              f"never loads pickles: keep only tensors in model and optimizer state")


# ---------------------------------------------------------------- reading DCP's index without arbitrary pickles


@functools.cache
def _allowed_globals() -> dict[tuple[str, str], Any]:
    allowed: dict[tuple[str, str], Any] = {
        ("torch", "Size"): torch.Size,
        ("torch.serialization", "_get_layout"): ser._get_layout,
        ("torch.distributed.checkpoint.filesystem", "_StorageInfo"): fs._StorageInfo,
        ("collections", "OrderedDict"): __import__("collections").OrderedDict,
    }
    for name in ("Metadata", "TensorStorageMetadata", "BytesStorageMetadata", "TensorProperties",
                 "ChunkStorageMetadata", "MetadataIndex", "StorageMeta", "_MEM_FORMAT_ENCODING"):
        allowed[("torch.distributed.checkpoint.metadata", name)] = getattr(md, name)
    for name in ("PosixPath", "WindowsPath", "PurePosixPath", "PureWindowsPath", "Path"):
        allowed[("pathlib", name)] = getattr(pathlib, name)
        allowed[("pathlib._local", name)] = getattr(pathlib, name)
    for name in dir(torch):
        if isinstance(getattr(torch, name, None), torch.dtype):
            allowed[("torch", name)] = getattr(torch, name)
    return allowed


class _MetadataUnpickler(pickle.Unpickler):
    """Admits only the classes DCP's metadata is made of; anything else is refused before it can run."""

    def find_class(self, module: str, name: str) -> Any:
        try:
            return _allowed_globals()[(module, name)]
        except KeyError:
            raise CheckpointError(f"refusing to load {module}.{name} from a checkpoint index: only DCP metadata "
                                  f"classes are allowed (fmlab never unpickles arbitrary objects). The checkpoint "
                                  f"was not written by fmlab, or it was tampered with") from None


def safe_reader(path: Path):
    class SafeReader(FileSystemReader):
        def read_metadata(self, *args, **kwargs) -> Metadata:
            with open(Path(self.path) / ".metadata", "rb") as f:
                metadata = _MetadataUnpickler(f).load()
            if not isinstance(metadata, Metadata):
                raise CheckpointError(f"{self.path}/.metadata is not a DCP index")
            pickled = [k for k, v in metadata.state_dict_metadata.items() if isinstance(v, BytesStorageMetadata)]
            if pickled:
                raise CheckpointError(f"{self.path} holds pickled objects ({', '.join(pickled[:3])}); fmlab loads "
                                      f"tensors only: re-save the state with tensors and JSON")
            if getattr(metadata, "storage_meta", None) is None:
                metadata.storage_meta = StorageMeta()
            metadata.storage_meta.load_id = self.load_id
            return metadata

    return SafeReader(path)


@contextlib.contextmanager
def quiet_single_process():
    """DCP warns that it assumes one process when there is no process group: that is what we asked for."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="torch.distributed is disabled")
        yield


def write_json(path: Path, data: Any, atomic: bool = False) -> None:
    text = json.dumps(data, indent=1)
    target = path.with_name(path.name + ".partial") if atomic else path
    with open(target, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    if atomic:
        os.replace(target, path)


