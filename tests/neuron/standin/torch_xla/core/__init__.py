"""TEST DOUBLE of torch_xla.core (see tests/neuron/standin/torch_xla/__init__.py)."""
