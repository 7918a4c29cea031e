"""TEST DOUBLE of neuronx_distributed.modules (see neuronx_distributed/__init__.py)."""
