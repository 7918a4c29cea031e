"""TEST DOUBLE of neuronx_distributed.parallel_layers.checkpointing: the legacy per-rank `load` of
<chkpt_path>/tp_rank_00_pp_rank_00/checkpoint.pt (the only rank at tensor and pipeline size 1)."""

import os

import torch


def load(chkpt_path, model=None, model_or_optimizer=None, model_key="model", load_xser=False, sharded=True,
         strict=True, **_):
    target = model if model is not None else model_or_optimizer
    path = os.path.join(chkpt_path, "tp_rank_00_pp_rank_00", "checkpoint.pt") if sharded else chkpt_path
    checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    if target is not None:
        state = checkpoint[model_key] if model_key is not None else checkpoint
        target.load_state_dict(state, strict=strict)
    return checkpoint
