"""What SageMaker accepts and what its images hold (ground floor: no torch, no AWS calls).

    from fmlab.service import refusals, service_findings, manifest_for
    refusals(request)     # [Finding("max-runtime", "fail", "MaxRuntimeInSeconds 2,592,000 s ... ", source), ...]

Files:
- api_model.py the API model's checks (botocore's SageMaker model walked field by field: types, ranges, enums,
               patterns) and the cross-field rules it cannot state; problems_in / validate_request add the rules
               below: what preflight, the sandbox and jobs all ask
- rules.py     the service's rules beyond botocore's API model (28-day run time across retries, NVMe volumes, what
               RetryStrategy retries, warm-pool keep-alive and what a warm pool excludes, SMDDP's and SMP's
               instances, InstancePreferences, heterogeneous clusters, KMS keys on local storage, GPU-only built-in
               algorithms, training plans, the checkpoint path), each with its source and date read; Finding, the
               verdict of one check. Rules about the course's own script apply when the request says it runs it
               (Environment FMLAB_SCRIPT, set by fmlab.jobs.request)
- images.py    a manifest per training image the course uses: PyTorch, Python, CUDA, NCCL, EFA, aws-ofi-nccl,
               SMDDP/SMP/NxD inside, end of patch, source; efa_environment(manifest), what a multi-node job on p4/p5
               must set for the image's aws-ofi-nccl (nothing from 1.7.0), with aws-ofi-nccl's cheatsheet as source
- features.py  what the training script needs for each feature (FSDP2 >= 2.6, DTensor TP >= 2.5, smddp, SMP, NxD),
               the features a request uses (from its HyperParameters) and the image check (a warning past the
               image's end of patch, and for SMDDP under SDK v3's launcher)
- checks.py    all of the above plus EFA settings by the image's plug-in: service_findings(request),
               refusals(request)
- retry.py     how SageMaker classifies a failed attempt (AlgorithmError or InternalServerError) and what it retries
- iam.py       the least-privilege execution role of a course job as an IAM policy (data read, output written,
               checkpoints written and read back at every start, the ECR image pulled, logs, metrics), and
               allows/missing: what a policy grants, checked against what a training job does (notebook 00)
- mpi_launch.py how SDK v3's MPI driver launches ranks (-np is Open MPI's total) and the settings that place N per
               instance: used by jobs.request and the sandbox alike
- libraries.py SageMaker's own parallel libraries, SMP v2 and SMDDP: frozen, dated and sourced, beside the current
               path (FSDP2 / DDP over NCCL and EFA); LAUNCH_DECISION (notebooks 04, 05 and their decks)
- smddp.py     SMDDP's facts: the instances it supports, the launcher each collective needs (smddp_advice), the
               command SDK v3's driver builds for a job (run offline through the installed driver), driver_drift
               against the pinned sagemaker-train, and what SDK v2's SMDDP runner set (v2_runner_gaps)
- sources.py   Source: a page read, what it says, the date read; sources_of / cited for the status tables

Used by the sandbox (it refuses what SageMaker refuses) and fmlab.jobs.preflight (`fmlab preflight`, which adds
the account's side: quotas, training plans, input data, cost). Tested by tests/service/, against the course's jobs
and against 45 requests the course did not write (tests/service/corpus/, test_request_corpus.py).
"""

from fmlab.service.checks import refusals, service_findings
from fmlab.service.features import FEATURES, features_of, image_findings
from fmlab.service.images import MANIFESTS, efa_environment, manifest, manifest_for
from fmlab.service.rule_book import RULES, Rule
from fmlab.service.rules import Finding, rule_findings

__all__ = ["FEATURES", "MANIFESTS", "RULES", "Finding", "Rule", "efa_environment", "features_of", "image_findings",
           "manifest", "manifest_for", "refusals", "rule_findings", "service_findings"]
