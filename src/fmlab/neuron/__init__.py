"""Trainium (module 9): Hugging Face Llama <-> Neuron Distributed (NxD) checkpoints, and the trn1 job.

    from fmlab import neuron
    neuron.hf_to_nxd("hf-llama/", "nxd/", tp=8, pp=4)     # TP/PP shards, as NxD's own converter writes them
    neuron.nxd_to_hf("nxd/step_100/", "hf-back/")          # and back

Files, from a Hugging Face folder to a trn1 job and back:
- sharding.py  the rules: how NxD splits each tensor family over TP ranks and PP stages (LlamaShape, NxdLayout)
- files.py     reading and writing HF folders and NxD shard files (both NxD file layouts)
- convert.py   hf_to_nxd / nxd_to_hf and the tables the notebook shows
- model.py     a Llama built on NxD's parallel layers, with the converter's key names and shard shapes
- train.py     the training script the trn1 job runs (entrypoints/neuron_train.py calls its main)
- job.py       the trn1 job: Trn1TrainingSettings -> a JobSpec for fmlab.jobs, pinned to the last NxD container
- status.py    which Trainium training stack is current and which is at end of support, with sources and dates
- native.py    the native path: the course's own FSDP2/DTensor script on trn2 with TorchNeuron (no conversion)
"""

from fmlab.neuron.convert import (
    DTYPES,
    ConversionReport,
    detect_layout,
    hf_state_to_nxd,
    hf_to_nxd,
    nxd_to_hf,
    shard_table,
)
from fmlab.neuron.sharding import NeuronLayoutError

__all__ = ["DTYPES", "ConversionReport", "NeuronLayoutError", "detect_layout", "hf_state_to_nxd", "hf_to_nxd",
           "nxd_to_hf", "shard_table"]
