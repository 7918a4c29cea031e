"""fmlab: the helper package of the course "Pretraining Foundation Models on AWS".

One idea per module (see README.md's layout and ../shared/DESIGN.md): catalog (facts with sources),
planning and layout (FLOPs, time, cost, memory per device), data/ and storage (tokenize, pack, shard;
S3 URIs and the local bucket), models, parallel/ (DDP, FSDP, hybrid sharding, tensor parallelism,
activation checkpointing/offloading, SMP v2), checkpoint and train (the training entry point), job_* and
jobs (SageMaker SDK v3 ModelTrainer, cost and quota guards), sandbox* (the same jobs on this machine),
neuron* (Trainium checkpoints), record and labs (notebook figures, exercise checks), widgets and plots,
slides, report, course_index, course and cli (the `fmlab` command).
"""

__version__ = "0.1.0"
