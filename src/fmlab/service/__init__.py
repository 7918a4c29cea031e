"""What SageMaker accepts and what its images hold (ground floor: no torch, no AWS calls).

    from fmlab.service import refusals, service_findings, manifest_for
    refusals(request)     # [Finding("max-runtime", "fail", "MaxRuntimeInSeconds 2,592,000 s ... ", source), ...]

Files:
- rules.py     the service's rules beyond botocore's API model (28-day run time across retries, NVMe volumes, what
               RetryStrategy retries, warm-pool keep-alive, SMDDP's instances, InstancePreferences, training plans,
               the checkpoint path), each with its source and date read; Finding, the verdict of one check
- images.py    a manifest per training image the course uses: PyTorch, Python, CUDA, NCCL, EFA, SMDDP/SMP/NxD
               inside, end of patch, source
- features.py  what the training script needs for each feature (FSDP2 >= 2.6, DTensor TP >= 2.5, smddp, SMP, NxD),
               the features a request uses (from its HyperParameters) and the image check
- checks.py    all of the above plus EFA settings: service_findings(request), refusals(request)
- retry.py     how SageMaker classifies a failed attempt (AlgorithmError or InternalServerError) and what it retries
- launch.py    how SDK v3's MPI driver launches ranks (-np is Open MPI's total) and the settings that place N per
               instance: used by jobs.request and the sandbox alike

Used by fmlab.sandbox.validate (the sandbox refuses what SageMaker refuses) and fmlab.jobs.preflight (`fmlab
preflight`). Tested by tests/service/.
"""

from fmlab.service.checks import refusals, service_findings
from fmlab.service.features import FEATURES, features_of, image_findings
from fmlab.service.images import MANIFESTS, manifest, manifest_for
from fmlab.service.rules import RULES, Finding, Rule, rule_findings

__all__ = ["FEATURES", "MANIFESTS", "RULES", "Finding", "Rule", "features_of", "image_findings", "manifest",
           "manifest_for", "refusals", "rule_findings", "service_findings"]
