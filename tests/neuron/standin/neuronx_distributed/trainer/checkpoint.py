"""TEST DOUBLE of neuronx_distributed.trainer.checkpoint, written from NxD's documented current layout (not from
fmlab.neuron.files), single process:

    <dir>/<tag>/checkpoint                                 "1", written first
    <dir>/<tag>/model/dp_rank_00_tp_rank_00_pp_rank_00.pt  torch.save(model.state_dict())
    <dir>/<tag>/optim/dp_rank_00_tp_rank_00_pp_rank_00.pt  the optimizer state dict
    <dir>/<tag>/scheduler.pt, <dir>/<tag>/user_content.pt
    <dir>/<tag>/done                                       "1", written last
Loading without a tag takes the newest tag that has `done` (by the marker's modification time); saving with
num_kept_ckpts removes the oldest completed tags beyond that many, their `done` marker first.
"""

import os
import shutil

import torch

RANK_FILE = "dp_rank_00_tp_rank_00_pp_rank_00.pt"


def _completed(root):
    if not os.path.isdir(root):
        return []
    tags = [t for t in os.listdir(root) if os.path.isfile(os.path.join(root, t, "done"))]
    return sorted(tags, key=lambda t: os.stat(os.path.join(root, t, "done")).st_mtime_ns)


def _write_text(path, text):
    with open(path, "w") as f:
        f.write(text)


def save_checkpoint(checkpoint_dir_str, tag, model=None, optimizer=None, scheduler=None, user_content=None,
                    num_workers=8, use_xser=False, num_kept_ckpts=None, async_save=False, zero1_optimizer=False):
    folder = os.path.join(checkpoint_dir_str, tag)
    os.makedirs(folder, exist_ok=True)
    _write_text(os.path.join(folder, "checkpoint"), "1")
    for kind, obj in (("model", model), ("optim", optimizer)):
        if obj is not None:
            os.makedirs(os.path.join(folder, kind), exist_ok=True)
            torch.save(obj if isinstance(obj, dict) else obj.state_dict(), os.path.join(folder, kind, RANK_FILE))
    if scheduler is not None:
        torch.save(scheduler.state_dict(), os.path.join(folder, "scheduler.pt"))
    if user_content is not None:
        torch.save(user_content, os.path.join(folder, "user_content.pt"))
    _write_text(os.path.join(folder, "done"), "1")
    completed = _completed(checkpoint_dir_str)
    if num_kept_ckpts is not None and num_kept_ckpts != -1 and len(completed) > num_kept_ckpts:
        for old in completed[: len(completed) - num_kept_ckpts]:
            os.remove(os.path.join(checkpoint_dir_str, old, "done"))
            shutil.rmtree(os.path.join(checkpoint_dir_str, old))


def load_checkpoint(path, tag=None, model=None, optimizer=None, scheduler=None, num_workers=8, strict=True):
    if tag is None:
        tags = _completed(path)
        if not tags:
            raise RuntimeError(f"Error: no checkpoint under directory {path}")
        tag = tags[-1]
    folder = os.path.join(path, tag)
    if model is not None:
        state = torch.load(os.path.join(folder, "model", RANK_FILE), map_location="cpu", weights_only=True)
        model.load_state_dict(state, strict=strict)
    if optimizer is not None:
        optimizer.load_state_dict(torch.load(os.path.join(folder, "optim", RANK_FILE), map_location="cpu"))
    if scheduler is not None:
        scheduler.load_state_dict(torch.load(os.path.join(folder, "scheduler.pt"), map_location="cpu"))
    content = os.path.join(folder, "user_content.pt")
    return torch.load(content, map_location="cpu", weights_only=False) if os.path.isfile(content) else None
