"""TEST DOUBLE of torch_xla.distributed (see tests/neuron/standin/torch_xla/__init__.py)."""
