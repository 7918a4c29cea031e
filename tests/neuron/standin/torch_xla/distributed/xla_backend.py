"""TEST DOUBLE of torch_xla.distributed.xla_backend: registers a torch.distributed backend named "xla" that is
really gloo on the CPU, so `init_process_group("xla")` works as in the Neuron containers."""

import torch.distributed as dist


def _create_gloo_group(store, rank, world_size, timeout):
    return dist.ProcessGroupGloo(store, rank, world_size, timeout)


if "xla" not in dist.Backend.backend_list:
    dist.Backend.register_backend("xla", _create_gloo_group, devices=["cpu"])
