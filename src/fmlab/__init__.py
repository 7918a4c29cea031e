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

import sys as _sys

__version__ = "0.1.0"

# jsonschema (imported by the SageMaker SDK for its config schema, and by nbformat) imports rfc3987_syntax when it
# is installed (Jupyter's jsonschema[format-nongpl] installs it) only to check "iri" formats, and that import
# compiles 38 lark grammars: 2.3 s of CPU in every process that launches a job, a third of a local launch.
# Nothing fmlab validates uses those formats, so fmlab's processes go without it. (measured 2026-11-25, jsonschema
# 4.26.0, rfc3987-syntax 1.1.0: `import sagemaker.core` 4.2 s -> 1.3 s)
_sys.modules.setdefault("rfc3987_syntax", None)
