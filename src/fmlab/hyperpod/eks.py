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

from fmlab.plan.compute import PlanError
from fmlab.train import planned
from fmlab.train.config import TrainConfigError, accumulation_for, parse_config

SCHEMA_PATH = Path(__file__).with_name("hyperpodpytorchjob.schema.json")
GPUS = {"ml.p5.48xlarge": 8, "ml.p5en.48xlarge": 8, "ml.p5e.48xlarge": 8, "ml.p4d.24xlarge": 8,
        "ml.p6-b200.48xlarge": 8}
# EFA devices a pod asks for, where an AWS manifest shows it: aws/sagemaker-hyperpod-checkpointless-training,
# examples/llama3/launch/pretrain_llama3_70b_p5.yaml (vpc.amazonaws.com/efa: 32 on ml.p5.48xlarge), read 2026-11-24.
# Elsewhere: `kubectl describe node` shows what the EFA device plugin offers.
EFA_DEVICES = {"ml.p5.48xlarge": 32}
# What AWS's own p5 HyperPodPyTorchJob sets besides: the pod on the host's network (EFA and NCCL see the node's
# interfaces), 2 MiB huge pages for EFA's registered buffers, the FSx claim every pod mounts, and /dev/shm in memory.
AWS_P5_EXAMPLE = ("aws/sagemaker-hyperpod-checkpointless-training, examples/llama3/launch/pretrain_llama3_70b_p5.yaml "
                  "@24520b41: hostNetwork true; limits hugepages-2Mi 5120Mi, vpc.amazonaws.com/efa 32; volumes "
                  "persistentVolumeClaim fsx-claim and emptyDir medium Memory at /dev/shm; read 2026-11-26")
HUGEPAGES = {"ml.p5.48xlarge": "5120Mi"}
# The training image for a pod: the PyTorch DLC's EC2 flavour (no SageMaker training toolkit), in the DLC registry.
EKS_IMAGE_TAG = "pytorch:2.13-cu130-amzn2023"  # fmlab.service.images, manifest "pytorch-2.13-ec2-gpu"
DLC_ACCOUNT = "763104351884"  # the DLC registry the course's SageMaker images come from (fmlab.jobs.images)


def eks_image(region: str = "us-east-1") -> str:
    """The course's PyTorch 2.13 image as EKS pulls it: the EC2 flavour of the DLC."""
    return f"{DLC_ACCOUNT}.dkr.ecr.{region}.amazonaws.com/{EKS_IMAGE_TAG}"


# The script's flags that name a folder: each must lie on a volume the pod mounts, or it dies with the pod.
PATH_FLAGS = ("--checkpoint-dir", "--data", "--output-dir", "--model-dir", "--trace-dir")


def schema() -> dict:
    return json.loads(SCHEMA_PATH.read_text())


def manifest(name: str, image: str, nodes: int, instance_type: str, train_args: list[str],
             elastic: tuple[int, int] | None = None, max_retries: int = 10, namespace: str = "default",
             fsx_claim: str = "fsx-claim", fsx_mount: str = "/fsx", service_account: str | None = None) -> dict:
    """The HyperPodPyTorchJob of the course's training script on `nodes` pods, one per instance: the FSx claim
    mounted at `fsx_mount` (the checkpoint folder a replacement pod must see), /dev/shm in memory, the host's
    network and huge pages as AWS's p5 example sets them, and `service_account` (its IAM role reads the data and
    writes the checkpoints: EKS Pod Identity or IRSA). With `elastic=(low, high)` hyperpodrun starts on any count
    of nodes in that range (`--nnodes=low:high`)."""
    gpus = GPUS.get(instance_type)
    if gpus is None:
        raise ValueError(f"{instance_type} is not a GPU type the course knows; use one of {', '.join(GPUS)}")
    nnodes = f"{elastic[0]}:{elastic[1]}" if elastic else str(nodes)
    command = ["hyperpodrun", f"--nnodes={nnodes}", f"--nproc-per-node={gpus}", "entrypoints/train.py", *train_args]
    resources = {"nvidia.com/gpu": gpus}
    if instance_type in EFA_DEVICES:
        resources["vpc.amazonaws.com/efa"] = EFA_DEVICES[instance_type]
    if instance_type in HUGEPAGES:
        resources["hugepages-2Mi"] = HUGEPAGES[instance_type]
    pod = {"hostNetwork": True,
           "containers": [{"name": "train", "image": image, "command": command,
                           "resources": {"requests": resources, "limits": dict(resources)},
                           "volumeMounts": [{"name": "fsx", "mountPath": fsx_mount},
                                            {"name": "dshm", "mountPath": "/dev/shm"}]}],
           "volumes": [{"name": "fsx", "persistentVolumeClaim": {"claimName": fsx_claim}},
                       {"name": "dshm", "emptyDir": {"medium": "Memory"}}],
           "nodeSelector": {"node.kubernetes.io/instance-type": instance_type}}
    if service_account:
        pod["serviceAccountName"] = service_account
    job = {
        "apiVersion": "sagemaker.amazonaws.com/v1", "kind": "HyperPodPyTorchJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "nprocPerNode": str(gpus),
            "replicaSpecs": [{"name": "pods", "replicas": nodes, "template": {"spec": pod}}],
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


def _containers(job: dict):
    for replica in (job.get("spec") or {}).get("replicaSpecs") or []:
        spec = (replica.get("template") or {}).get("spec") or {}
        for container in spec.get("containers") or []:
            yield replica, spec, container


def script_args(command: list) -> list[str] | None:
    """The arguments after the training script in a container's command (None: not the course's script)."""
    for i, word in enumerate(command):
        if str(word).endswith("train.py"):
            return [str(w) for w in command[i + 1:]]
    return None


def image_problems(job: dict) -> list[str]:
    """A SageMaker-flavoured image on EKS: it is built around SageMaker's training toolkit and entry; a pod runs the
    EC2 flavour of the same DLC (eks_image)."""
    out = []
    for replica, _pod, container in _containers(job):
        image = str(container.get("image", ""))
        if image.endswith("-sagemaker") or "-sagemaker" in image.rsplit(":", 1)[-1]:
            out.append(f"replica {replica.get('name')!r}: {image} is the SageMaker flavour of the DLC; on EKS use the "
                       f"EC2 flavour, e.g. {eks_image()}")
    return out


def volume_problems(job: dict) -> list[str]:
    """Folders the script is told to use that no volume holds (they die with the pod, and a replacement pod never
    sees the checkpoints), and a /dev/shm left at the container runtime's 64 MiB."""
    out = []
    for replica, _pod, container in _containers(job):
        mounts = [str(m.get("mountPath", "")).rstrip("/") for m in container.get("volumeMounts") or []]
        args = script_args(container.get("command") or []) or []
        for flag, value in zip(args, args[1:], strict=False):
            if flag in PATH_FLAGS and value.startswith("/") and not value.startswith("s3://"):
                if not any(value == m or value.startswith(m + "/") for m in mounts if m):
                    out.append(f"replica {replica.get('name')!r}: {flag} {value} is on no volume of the pod: mount "
                               f"the FSx claim there (volumes + volumeMounts), or the folder dies with the pod")
        if "/dev/shm" not in mounts:
            out.append(f"replica {replica.get('name')!r}: no /dev/shm volume: the container runtime's 64 MiB is too "
                       f"small for NCCL and data-loader workers; mount an emptyDir with medium Memory there")
    return out


def layout_problems(job: dict) -> list[str]:
    """Re-plan the script's own flags for the job's own instance type (fmlab.train.planned.problems: its layout,
    micro-batch, global batch and context), at the starting node count and, for an elastic job, at its fewest nodes,
    where every shard is larger: a layout that does not fit with the planner's headroom, a checkpoint interval (in
    hours of the step those flags give) shorter than one save's upload or far from Daly's."""
    out = []
    elastic = (job.get("spec") or {}).get("elasticPolicy") or {}
    for replica, spec, container in _containers(job):
        args = script_args(container.get("command") or [])
        instance_type = (spec.get("nodeSelector") or {}).get("node.kubernetes.io/instance-type")
        if args is None or instance_type is None:
            continue
        try:
            config = parse_config(args, env={})
        except TrainConfigError as e:
            out.append(f"replica {replica.get('name')!r}: the script's flags do not parse: {e}")
            continue
        out += _batch_problems(replica, config, elastic, GPUS.get(instance_type, 1))
        counts = {replica.get("replicas"), elastic.get("minReplicas")}  # a count of the wrong type: the schema's
        for nodes in sorted(n for n in counts if isinstance(n, int) and not isinstance(n, bool) and n >= 1):
            if config.global_batch and nodes != replica.get("replicas"):
                try:  # an elastic job on fewer nodes accumulates more passes (_batch_problems reports a bad split)
                    accumulation_for(config, config.parallel.dp(nodes * GPUS.get(instance_type, 1)))
                except (TrainConfigError, PlanError):
                    continue
            out += planned.problems(config, instance_type, nodes, f"replica {replica.get('name')!r} on {nodes} nodes")
    return out


def _batch_problems(replica: dict, config, elastic: dict, gpus: int) -> list[str]:
    """An elastic job must fix its global batch (--global-batch): at a fixed micro-batch, 8 of 16 replicas would
    halve it, and the optimizer and the LR schedule, counted in steps, would see half the tokens per step."""
    if not elastic:
        return []
    name = replica.get("name")
    if not config.global_batch:
        return [f"replica {name!r}: an elastic job without --global-batch changes its batch with its node count: "
                f"set --global-batch (sequences per step), and the script accumulates what fewer replicas lack"]
    low, high, step = (elastic.get(k) for k in ("minReplicas", "maxReplicas", "replicaIncrementStep"))
    if not all(isinstance(v, int) and v >= 1 for v in (low, high, step)):
        return []  # the schema and rule_problems report these
    out = []
    for nodes in range(low, high + 1, step):
        try:
            accumulation_for(config, config.parallel.dp(nodes * gpus))
        except TrainConfigError as e:
            out.append(f"replica {name!r} on {nodes} nodes: {e}")
    return out


def checkpoint_problems(job: dict) -> list[str]:
    """A job the operator restarts (runPolicy's retries and restart policy) or rescales (elasticPolicy) comes back
    from the newest checkpoint: the script must save one into a folder the pods share, every so many steps. The
    course's --checkpoint-every 0 saves only at the end, so every restart would start from step 0."""
    spec = job.get("spec") or {}
    run_policy = spec.get("runPolicy") or {}
    resumes = [name for name, on in (("runPolicy.jobMaxRetryCount", (run_policy.get("jobMaxRetryCount") or 0) > 0),
                                     ("runPolicy.restartPolicy", bool(run_policy.get("restartPolicy"))),
                                     ("elasticPolicy", bool(spec.get("elasticPolicy")))) if on]
    if not resumes:
        return []
    out = []
    for replica, _pod, container in _containers(job):
        args = script_args(container.get("command") or [])
        if args is None:
            continue
        try:
            config = parse_config(args, env={})
        except TrainConfigError:
            continue  # layout_problems reports flags that do not parse
        why = f"{' and '.join(resumes)} resume from the newest checkpoint"
        if not config.checkpoint_dir:
            out.append(f"replica {replica.get('name')!r}: {why}, and the script saves none: set --checkpoint-dir to "
                       f"a folder on the FSx claim")
        elif config.checkpoint_every <= 0:
            out.append(f"replica {replica.get('name')!r}: {why}, but --checkpoint-every is 0 (a save only at the "
                       f"end): every restart would begin at step 0. Render the flags from the planned run "
                       f"(fmlab.train.planned.flags: Daly's interval in steps, asynchronous saves)")
    return out


def problems(job: dict) -> list[str]:
    """Every problem of the manifest: the operator's schema, the course's rules, its image, the volumes its paths
    need, the checkpoints its restarts resume from, and its layout re-planned for its own instance type."""
    return (schema_problems(job) + rule_problems(job) + image_problems(job) + volume_problems(job)
            + checkpoint_problems(job) + layout_problems(job))


def to_yaml(job: dict) -> str:
    import yaml

    return yaml.safe_dump(job, sort_keys=False, width=120)
