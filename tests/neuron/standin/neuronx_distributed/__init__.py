"""TEST DOUBLE of AWS Neuron Distributed (neuronx_distributed) for fmlab's tests: NOT the real package.

It implements only what fmlab.neuron.train and fmlab.neuron.model use, single process, with tensor- and
pipeline-parallel size 1 (it refuses anything else): the parallel layers are plain CPU layers with NxD's
names, signatures and parameter names; the trainer API configures, wraps and checkpoints in NxD's current
on-disk layout, written and read here with torch.save/torch.load (independently of fmlab.neuron.files, so the
tests check fmlab's converter against a second implementation). Put tests/neuron/standin on PYTHONPATH.
"""

from neuronx_distributed.trainer import (  # noqa: F401
    initialize_parallel_model,
    initialize_parallel_optimizer,
    load_checkpoint,
    neuronx_distributed_config,
    save_checkpoint,
)
