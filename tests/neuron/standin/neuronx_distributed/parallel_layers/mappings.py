"""TEST DOUBLE of neuronx_distributed.parallel_layers.mappings: with one tensor-parallel rank every
collective is the identity, so this module only exists to be named in a pipeline config."""
