"""fmlab: the helper package of the course "Pretraining Foundation Models on AWS".

One subpackage per concept the course teaches; each __init__.py says what it owns and how data flows
through it, and src/fmlab/README.md is the map (a line per file):

    plan/      module 1: facts with sources (catalog) and the arithmetic of a run (compute, layout)
    data/      module 2: corpus -> tokenizer -> packed token shards -> manifest -> resumable sampler
    parallel/  modules 4-6: DDP, FSDP2 full/hybrid, tensor parallelism, activation checkpointing, SMP v2, SMDDP
    train/     the training entry point (python -m fmlab.train), its config, loop, logs and checkpoints
    jobs/      one job description -> a SageMaker SDK v3 ModelTrainer; cost and quota guards; images
    sandbox/   the local SageMaker: the same CreateTrainingJob request, validated and run on this machine
    neuron/    module 9: Llama <-> Neuron Distributed checkpoints, the trn1 job and its script
    course/    running the notebooks, their recorded figures, slides, the report, widgets and plots
    labs/      the checks of each lab
    cli.py (the `fmlab` command), environment.py (this machine, credentials, the repository root),
    models.py (the model shapes as transformers models), storage.py (S3 URIs and the local bucket)
"""

__version__ = "0.1.0"
