"""TEST DOUBLE of neuronx_distributed.parallel_layers (see neuronx_distributed/__init__.py)."""
