"""Every service check on a CreateTrainingJob request that needs no AWS account: the rules, the image against what
the script needs, EFA settings on EFA instances. The sandbox refuses the failures; `fmlab preflight` prints all.

    from fmlab.service.checks import service_findings, refusals
    refusals(request)          # the failing findings only: what SageMaker refuses or the job dies of on start
"""

from __future__ import annotations

from fmlab.service.features import image_findings, image_processor, training_image
from fmlab.service.images import (
    DO_NOT_SET_PREFIX,
    EFA_ENV_DOC,
    EFA_RDMA_GPU_FAMILIES,
    OLD_PLUGIN_ENVIRONMENT,
    PLUGIN_DEFAULTS,
    efa_environment,
    manifest_for,
)
from fmlab.service.rules import Finding, instance_types, rule_findings, runs_course_script

EFA_SOURCE = f"{EFA_ENV_DOC.cite()}; {PLUGIN_DEFAULTS.cite()}"
EFA_GPU_FAMILIES = EFA_RDMA_GPU_FAMILIES  # where the cheatsheet's presets apply
EFA_TRAINIUM_FAMILIES = ("trn1", "trn1n", "trn2")  # EFA without NCCL's GPU presets; RDMAV_* still does not belong


def _instance_count(request: dict) -> int:
    rc = request.get("ResourceConfig") or {}
    counts = [rc.get("InstanceCount")] + [g.get("InstanceCount") for g in rc.get("InstanceGroups") or []]
    return sum(c for c in counts if isinstance(c, int) and not isinstance(c, bool))


def _settings(env: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in env.items())


def efa_findings(request: dict) -> list[Finding]:
    """On a multi-instance job on EFA instances: what the image's aws-ofi-nccl needs in Environment (nothing from
    1.7.0, fmlab.service.images.efa_environment), and a warning for variables its cheatsheet says not to set."""
    count = _instance_count(request)
    families = {k: k.removeprefix("ml.").split(".")[0] for k in instance_types(request)}
    gpu = [k for k, fam in families.items() if fam in EFA_GPU_FAMILIES]
    trn = [k for k, fam in families.items() if fam in EFA_TRAINIUM_FAMILIES]
    if not (gpu or trn) or count < 2:
        return []
    env = request.get("Environment") or {}
    out = []
    banned = {k: v for k, v in env.items() if k.startswith(DO_NOT_SET_PREFIX)}
    if banned:
        out.append(Finding("efa/rdmav", "warn", f"{_settings(banned)} in Environment: aws-ofi-nccl's EFA cheatsheet "
                           "says not to set RDMAV_* (an rdma-core variable; on newer kernels RDMAV_FORK_SAFE=1 'can "
                           "break things'); remove it, and where fork safety matters prefer FI_EFA_FORK_SAFE=1",
                           EFA_ENV_DOC.cite(), f"Environment.{next(iter(banned))}"))
    if not gpu:
        return out
    where = f"{count} x {gpu[0]}"
    uri = training_image(request)
    m = manifest_for(uri) if uri else None
    needed = efa_environment(m)
    if needed is None:  # an image the course has no manifest for, or one whose plug-in version no source gives
        image = f"{m.repository}:{m.tag}" if m else (uri or "the image")
        missing = {k: v for k, v in OLD_PLUGIN_ENVIRONMENT.items() if env.get(k) != v}
        if not missing:
            return out + [Finding("efa", "pass", f"{where}: {_settings(OLD_PLUGIN_ENVIRONMENT)} set, what "
                                  "aws-ofi-nccl <= 1.5.0 needs (newer plug-ins need none of them); the version in "
                                  f"{image} was not checked", EFA_SOURCE)]
        return out + [Finding("efa", "warn", f"{where} talk over EFA; which aws-ofi-nccl {image} carries was not "
                              "checked (no source gives it): from 1.7.0 the plug-in needs no EFA variable, up to "
                              f"1.5.0 it needs {_settings(OLD_PLUGIN_ENVIRONMENT)} (missing here: "
                              f"{_settings(missing)})", EFA_SOURCE)]
    image = f"{m.repository}:{m.tag} has aws-ofi-nccl {m.aws_ofi_nccl}"
    missing = {k: v for k, v in needed.items() if env.get(k) != v}
    if missing:
        how = (" (fmlab.jobs.sharded.environment() computes them from the image)" if runs_course_script(request)
               else "")
        return out + [Finding("efa", "warn", f"{where} talk over EFA and {image}: set {_settings(missing)} in "
                              f"Environment, as the plug-in's cheatsheet says for that version{how}", EFA_SOURCE)]
    needless = {k: v for k, v in env.items() if k in OLD_PLUGIN_ENVIRONMENT and k not in needed}
    extra = f"; {_settings(needless)} set, which this plug-in does not need" if needless else ""
    if "NCCL_PROTO" in needless:
        extra += (" (NCCL_PROTO=simple keeps NCCL off its LL/LL128 protocols, which the plug-in allows where EFA "
                  "orders the bytes)")
    done = (f"{_settings(needed)} set, as its cheatsheet says" if needed
            else "its defaults are right, no EFA variable needed")
    return out + [Finding("efa", "pass", f"{where}: {image}: {done}{extra}", EFA_SOURCE)]


def service_findings(request: dict) -> list[Finding]:
    """The rules, the image and EFA, in that order (pass, warn and fail)."""
    if not isinstance(request, dict):
        return []
    return rule_findings(request, image_processor(request)) + image_findings(request) + efa_findings(request)


def refusals(request: dict) -> list[Finding]:
    """The failures only: what SageMaker would refuse, or what would stop the job as it starts."""
    return [f for f in service_findings(request) if f.level == "fail"]
