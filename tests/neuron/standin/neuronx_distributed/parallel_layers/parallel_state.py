"""TEST DOUBLE of neuronx_distributed.parallel_layers.parallel_state: tensor and pipeline size 1, so every
process is its own data-parallel replica (rank and size from torch.distributed)."""

import torch.distributed as dist

_sizes = {"tp": 1, "pp": 1}


def initialize_model_parallel(tensor_model_parallel_size=1, pipeline_model_parallel_size=1, **_):
    if tensor_model_parallel_size != 1 or pipeline_model_parallel_size != 1:
        raise NotImplementedError("the neuronx_distributed stand-in runs tensor and pipeline size 1 only")


def model_parallel_is_initialized():
    return dist.is_initialized()


def get_tensor_model_parallel_size():
    return 1


def get_tensor_model_parallel_rank():
    return 0


def get_pipeline_model_parallel_size():
    return 1


def get_pipeline_model_parallel_rank():
    return 0


def get_data_parallel_size():
    return dist.get_world_size() if dist.is_initialized() else 1


def get_data_parallel_rank():
    return dist.get_rank() if dist.is_initialized() else 0
