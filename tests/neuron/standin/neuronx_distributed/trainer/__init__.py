"""TEST DOUBLE of neuronx_distributed.trainer (see neuronx_distributed/__init__.py)."""

from neuronx_distributed.trainer.checkpoint import load_checkpoint, save_checkpoint  # noqa: F401
from neuronx_distributed.trainer.trainer import (  # noqa: F401
    initialize_parallel_model,
    initialize_parallel_optimizer,
    neuronx_distributed_config,
)
