"""HyperPod EKS: the course's training as a HyperPodPyTorchJob for the HyperPod training operator, and its check.

    from fmlab.hyperpod import eks
    job = eks.manifest("gpt30b", image=..., nodes=16, instance_type="ml.p5.48xlarge", train_args=[...],
                       elastic=(8, 16))
    eks.problems(job)        # [] or one line per problem: the operator's schema, then the course's rules
    print(eks.to_yaml(job))  # kubectl apply -f -

The schema is the operator's own, transcribed with its source into hyperpodpytorchjob.schema.json (the
HyperPod CLI's models of the CRD); `schema_problems` applies it with a small JSON-Schema reader (type, enum,
required, properties, additionalProperties, items). `rule_problems` adds what the schema cannot say: the spec
ignores unknown fields silently, so a misspelt one is reported; nprocPerNode must match the GPUs each pod asks
for; an elastic range must contain the starting replicas, and its steps must divide it.

What the settings do (sources: the SageMaker developer guide, "Using the HyperPod training operator" and "Using
elastic training in Amazon SageMaker HyperPod"; the hyperpod-elastic-agent page on PyPI; read 2026-11-24):
- the container runs `hyperpodrun` (the HyperPod elastic agent, torchrun's arguments plus its own) instead of
  torchrun; the operator restarts the failed processes, not the whole job, where it can;
- runPolicy.jobMaxRetryCount and restartPolicy bound the restarts; logMonitoringConfiguration marks a job
  HANGING when no line matches `logPattern` within expectedStartCutOffInSeconds of the start or
  expectedRecurringFrequencyInSeconds of the last match (the course's `step=` lines), and the operator restarts it:
  auto-resume from the newest checkpoint, as on Slurm;
- elasticPolicy (operator >= 1.2) scales the data-parallel replicas between minReplicas and maxReplicas as
  capacity comes and goes, resuming from a DCP checkpoint at the new world size: module 8's reshard drill.
"""

from __future__ import annotations

import json
from pathlib import Path

SCHEMA_PATH = Path(__file__).with_name("hyperpodpytorchjob.schema.json")
GPUS = {"ml.p5.48xlarge": 8, "ml.p5en.48xlarge": 8, "ml.p5e.48xlarge": 8, "ml.p4d.24xlarge": 8,
        "ml.p6-b200.48xlarge": 8}
# EFA devices a pod asks for, where an AWS manifest shows it: aws/sagemaker-hyperpod-checkpointless-training,
# examples/llama3/launch/pretrain_llama3_70b_p5.yaml (vpc.amazonaws.com/efa: 32 on ml.p5.48xlarge), read 2026-11-24.
# Elsewhere: `kubectl describe node` shows what the EFA device plugin offers.
EFA_DEVICES = {"ml.p5.48xlarge": 32}


def schema() -> dict:
    return json.loads(SCHEMA_PATH.read_text())


def manifest(name: str, image: str, nodes: int, instance_type: str, train_args: list[str],
             elastic: tuple[int, int] | None = None, max_retries: int = 10, namespace: str = "default") -> dict:
    """The HyperPodPyTorchJob of the course's training script on `nodes` pods, one per instance."""
    gpus = GPUS.get(instance_type)
    if gpus is None:
        raise ValueError(f"{instance_type} is not a GPU type the course knows; use one of {', '.join(GPUS)}")
    command = ["hyperpodrun", f"--nnodes={nodes}", f"--nproc-per-node={gpus}", "entrypoints/train.py", *train_args]
    resources = {"nvidia.com/gpu": gpus}
    if instance_type in EFA_DEVICES:
        resources["vpc.amazonaws.com/efa"] = EFA_DEVICES[instance_type]
    job = {
        "apiVersion": "sagemaker.amazonaws.com/v1", "kind": "HyperPodPyTorchJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "nprocPerNode": str(gpus),
            "replicaSpecs": [{"name": "pods", "replicas": nodes, "template": {"spec": {
                "containers": [{"name": "train", "image": image, "command": command,
                                "resources": {"requests": resources, "limits": dict(resources)}}],
                "nodeSelector": {"node.kubernetes.io/instance-type": instance_type}}}}],
            "runPolicy": {
                "cleanPodPolicy": "None", "jobMaxRetryCount": max_retries,
                "restartPolicy": {"evalPeriodSeconds": 3600, "numRestartBeforeFullJobRestart": 3,
                                  "maxFullJobRestarts": 2},
                "logMonitoringConfiguration": [
                    {"name": "started", "logPattern": r"^step=\d+", "expectedStartCutOffInSeconds": 1800},
                    {"name": "progressing", "logPattern": r"^step=\d+", "expectedRecurringFrequencyInSeconds": 900}],
            },
        },
    }
    if elastic:
        low, high = elastic
        job["spec"]["elasticPolicy"] = {"minReplicas": low, "maxReplicas": high, "replicaIncrementStep": low,
                                        "gracefulShutdownTimeoutInSeconds": 600}
        job["spec"]["replicaSpecs"][0]["maxReplicas"] = high
    return job


_TYPES = {"object": dict, "array": list, "string": str, "integer": int, "boolean": bool}


def _walk(value, rule: dict, path: str, out: list[str]) -> None:
    if "enum" in rule and value not in rule["enum"]:
        out.append(f"{path}: {value!r} is not one of {rule['enum']}")
        return
    kind = rule.get("type")
    if kind and (not isinstance(value, _TYPES[kind]) or (kind == "integer" and isinstance(value, bool))):
        out.append(f"{path}: must be {'an' if kind[0] in 'aeio' else 'a'} {kind}, not {type(value).__name__}")
        return
    if kind == "object":
        for key in rule.get("required", []):
            if key not in value:
                out.append(f"{path}.{key}: is required")
        known = rule.get("properties", {})
        for key, item in value.items():
            if key in known:
                _walk(item, known[key], f"{path}.{key}", out)
            elif rule.get("additionalProperties") is False:
                out.append(f"{path}.{key}: is not a field here (known: {', '.join(known)})")
    elif kind == "array" and "items" in rule:
        for i, item in enumerate(value):
            _walk(item, rule["items"], f"{path}[{i}]", out)


def schema_problems(job: dict) -> list[str]:
    """What the operator's schema refuses, one line each with the field's path."""
    out: list[str] = []
    _walk(job, schema(), "job", out)
    return out


def rule_problems(job: dict) -> list[str]:
    """What the schema cannot say, one line each."""
    spec = job.get("spec") or {}
    out = []
    known = schema()["properties"]["spec"]["properties"]
    out += [f"job.spec.{key}: not a field of HyperPodPyTorchJob; the operator drops it without a word (known: "
            f"{', '.join(known)})" for key in spec if key not in known]
    for i, replica in enumerate(spec.get("replicaSpecs") or []):
        for container in (((replica.get("template") or {}).get("spec") or {}).get("containers") or []):
            gpus = ((container.get("resources") or {}).get("limits") or {}).get("nvidia.com/gpu")
            if gpus is not None and str(gpus) != str(spec.get("nprocPerNode")):
                out.append(f"job.spec.replicaSpecs[{i}]: {gpus} GPUs per pod but nprocPerNode "
                           f"{spec.get('nprocPerNode')!r}: start one process per GPU")
    elastic = spec.get("elasticPolicy")
    if elastic:
        low, high = elastic.get("minReplicas"), elastic.get("maxReplicas")
        counts = [r.get("replicas", 0) for r in spec.get("replicaSpecs") or []]
        start = sum(c for c in counts if isinstance(c, int))  # a count of the wrong type is the schema's to report
        if not all(isinstance(v, int) for v in (low, high)) or not 1 <= low <= start <= high:
            out.append(f"job.spec.elasticPolicy: want 1 <= minReplicas ({low}) <= replicas ({start}) <= maxReplicas "
                       f"({high})")
        step = elastic.get("replicaIncrementStep")
        if isinstance(step, int) and step > 0 and all(isinstance(v, int) for v in (low, high)) and (high - low) % step:
            out.append(f"job.spec.elasticPolicy: replicaIncrementStep {step} does not lead from {low} to {high}")
    return out


def problems(job: dict) -> list[str]:
    return schema_problems(job) + rule_problems(job)


def to_yaml(job: dict) -> str:
    import yaml

    return yaml.safe_dump(job, sort_keys=False, width=120)
