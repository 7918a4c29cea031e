"""SageMaker training jobs: one job description, two places to run it.

    from fmlab import jobs
    spec = jobs.JobSpec("gpt-30b", instance_type="ml.p4d.24xlarge", instance_count=16, ...)
    job = jobs.launch(spec)          # backend "sagemaker" with AWS credentials, else the local sandbox
    job.wait(); job.metrics()

How a job flows:
    spec.py    JobSpec: what the notebook writes (script, instances, distribution, channels, checkpoints)
      -> request.py  the SageMaker SDK v3 ModelTrainer built from it; capture_request() records the exact
                     CreateTrainingJob request without AWS, and checks it against botocore's API model
      -> preflight.py  `fmlab preflight`: the API model, SageMaker's rules and the image against the script
                     (fmlab.service), EFA, checkpoints, quotas, the chain's cost; launch() runs it first
      -> guards.py   worst-case cost against your budget, account quotas (before anything is sent)
      -> job.py      launch(): to SageMaker, or to fmlab.sandbox (the local SageMaker); Job handles, sweeps,
                     wait_all, timing tables, cleanup
    images.py  the one source of container image URIs (PyTorch 2.13 DLC, frozen SMDDP DLC, SMP v2, Neuron)
    sharded.py module 7's sharded GPT run as one description (SMP v2, EFA, FastFile, checkpoints) and its twin
    ladder.py  the gated scaling ladder: rungs as jobs, each checked before the next starts
    cli.py     `fmlab job run|list|logs|describe|cleanup` (`fmlab job request` lives in fmlab.cli)
"""

from fmlab.jobs.job import (
    FINAL,
    Job,
    JobSpec,
    JobSpecInvalid,
    OverBudget,
    QuotaTooLow,
    RequestInvalid,
    cleanup,
    course_dataset_uri,
    launch,
    list_jobs,
    parse_metrics,
    peak_concurrency,
    startup_seconds,
    status_table,
    sweep,
    training_span,
    wait_all,
)

__all__ = ["FINAL", "Job", "JobSpec", "JobSpecInvalid", "OverBudget", "QuotaTooLow", "RequestInvalid", "cleanup",
           "course_dataset_uri", "launch", "list_jobs", "parse_metrics", "peak_concurrency", "startup_seconds",
           "status_table", "sweep", "training_span", "wait_all"]
