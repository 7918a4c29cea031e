"""Every service check on a CreateTrainingJob request that needs no AWS account: the rules, the image against what
the script needs, EFA settings on EFA instances. The sandbox refuses the failures; `fmlab preflight` prints all.

    from fmlab.service.checks import service_findings, refusals
    refusals(request)          # the failing findings only: what SageMaker refuses or the job dies of on start
"""

from __future__ import annotations

from fmlab.service.features import image_findings, image_processor
from fmlab.service.rules import READ, Finding, instance_types, rule_findings

EFA_SOURCE = ("aws/deep-learning-containers docs/pytorch/deployment/sagemaker.md ('SageMaker provisions EFA on the "
              "instance types that support it (e.g., ml.p5.48xlarge, ml.p4d.24xlarge)'); Amazon EC2 user guide, "
              f"'Get started with EFA and NCCL for ML workloads' (FI_PROVIDER, FI_EFA_USE_DEVICE_RDMA); read {READ}")
EFA_GPU_FAMILIES = ("p4d", "p4de", "p5", "p5e", "p5en")
EFA_VARIABLES = {"FI_PROVIDER": "efa", "FI_EFA_USE_DEVICE_RDMA": "1"}


def efa_findings(request: dict) -> list[Finding]:
    """On a multi-instance job on EFA GPU instances: the EFA/NCCL variables fmlab.jobs.sharded sets."""
    rc = request.get("ResourceConfig") or {}
    count = rc.get("InstanceCount") or 0
    efa = [k for k in instance_types(request) if k.removeprefix("ml.").split(".")[0] in EFA_GPU_FAMILIES]
    if not efa or not isinstance(count, int) or count < 2:
        return []
    env = request.get("Environment") or {}
    missing = {k: v for k, v in EFA_VARIABLES.items() if env.get(k) != v}
    if missing:
        wanted = ", ".join(f"{k}={v}" for k, v in missing.items())
        return [Finding("efa", "warn", f"{count} x {efa[0]} talk over EFA: set {wanted} in Environment "
                        "(fmlab.jobs.sharded.environment()); without them an older aws-ofi-nccl may fall back to "
                        "TCP sockets", EFA_SOURCE)]
    return [Finding("efa", "pass", f"{count} x {efa[0]}: " + ", ".join(f"{k}={v}" for k, v in EFA_VARIABLES.items()),
                    EFA_SOURCE)]


def service_findings(request: dict) -> list[Finding]:
    """The rules, the image and EFA, in that order (pass, warn and fail)."""
    if not isinstance(request, dict):
        return []
    return rule_findings(request, image_processor(request)) + image_findings(request) + efa_findings(request)


def refusals(request: dict) -> list[Finding]:
    """The failures only: what SageMaker would refuse, or what would stop the job as it starts."""
    return [f for f in service_findings(request) if f.level == "fail"]
