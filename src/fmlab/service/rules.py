"""SageMaker's training rules that the API model cannot state, as data with their sources, and the pure checks.

botocore's model carries shapes, enums and ranges; the service enforces more, written only in the prose of the
API reference and the developer guide: MaxRuntimeInSeconds stops at 28 days for all attempts together, NVMe
instances ignore VolumeSizeInGB, a RetryStrategy retries InternalServerError only, a warm pool is kept for at
most an hour by the guide (six by the model), SMDDP runs on P4 only, InstancePreferences excludes InstanceType.
Each rule (fmlab.service.rule_book) says what, where it is written and when it was read; `rule_findings(request)`
applies them to a CreateTrainingJob request (the dict boto3's create_training_job takes) and names the rule and
source in each finding. Used by fmlab.service.api_model (the sandbox refuses what SageMaker refuses) and fmlab.jobs.preflight.

    from fmlab.service.rules import rule_findings
    [f for f in rule_findings(request) if f.level == "fail"]   # -> [Finding("max-runtime", "fail", "...", source)]
"""

from __future__ import annotations

from dataclasses import dataclass

from fmlab.service.rule_book import RULES


@dataclass(frozen=True)
class Finding:
    """One check's verdict on a request: pass, warn (accepted, but not what you meant) or fail (refused, or the
    job cannot start or will die on start)."""

    check: str
    level: str  # "pass" | "warn" | "fail"
    message: str
    source: str = ""
    field: str = ""  # the request field at fault, where one is (e.g. "ResourceConfig.KeepAlivePeriodInSeconds")

    def __str__(self) -> str:
        return f"{self.level.upper():<4} {self.check}: {self.message}" + (f" [{self.source}]" if self.source else "")


MAX_RUNTIME_SECONDS = 28 * 86400  # 2,419,200
MAX_PENDING_SECONDS = (1_800, 28 * 86400)  # StoppingCondition.MaxPendingTimeInSeconds' min and max in the model
KEEP_ALIVE_API_MAX = 21_600  # ResourceConfig.KeepAlivePeriodInSeconds: the API reference and model (3,600 before 2025-12-17)
KEEP_ALIVE_GUIDE_MAX = 3_600  # the developer guide's warm-pool pages, older than the API's change: warned, not refused
SMDDP_INSTANCES = ("ml.p4d.24xlarge", "ml.p4de.24xlarge")
# Instance families whose storage is NVMe instance store. The first three are the API reference's own examples;
# the others carry NVMe SSD instance storage on the EC2 instance-type pages (NOT re-read in this session).
NVME_FAMILIES_API = ("p4d", "g4dn", "g5")
NVME_FAMILIES_EC2 = ("p4de", "p5", "p5e", "p5en", "g6", "g6e", "trn1", "trn1n", "trn2")
CHECKPOINT_PATH = "/opt/ml/checkpoints"


# The course's own script says so in the request (fmlab.jobs.request sets it): rules about that script apply then
COURSE_SCRIPT_ENV = "FMLAB_SCRIPT"
SMP_INSTANCES = ("ml.p4d.24xlarge", "ml.p4de.24xlarge", "ml.p5.48xlarge")
# Built-in algorithm images (repository name in the ECR URI) that train on GPU instances only
GPU_ONLY_ALGORITHMS = ("image-classification", "object-detection", "semantic-segmentation")
# The built-in algorithms' repositories (sagemaker-core's image_uri_config): those that checkpoint ("sagemaker-xgboost"
# is XGBoost 0.90-1 and later; "xgboost" the 0.72 image), and the others
CHECKPOINTING_ALGORITHMS = GPU_ONLY_ALGORITHMS + ("sagemaker-xgboost",)
BUILTIN_ALGORITHMS = CHECKPOINTING_ALGORITHMS + (
    "blazingtext", "factorization-machines", "forecasting-deepar", "ipinsights", "kmeans", "knn", "lda",
    "linear-learner", "ntm", "object2vec", "pca", "randomcutforest", "seq2seq", "xgboost")
SPOT_WAIT_WITHOUT_CHECKPOINTS = 3_600
PROFILING_INTERVALS_MS = (100, 200, 500, 1_000, 5_000, 60_000)


def runs_course_script(request: dict) -> bool:
    """Whether the request runs fmlab's training script (its Environment carries FMLAB_SCRIPT)."""
    return bool((request.get("Environment") or {}).get(COURSE_SCRIPT_ENV))


def _family(instance_type: str) -> str:
    return instance_type.removeprefix("ml.").split(".")[0]


def has_nvme(instance_type: str) -> bool:
    """True for instance types whose storage is NVMe instance store (VolumeSizeInGB is ignored)."""
    return _family(instance_type) in NVME_FAMILIES_API + NVME_FAMILIES_EC2


def instance_types(request: dict) -> list[str]:
    """Every instance type a request may run on: InstanceType, each instance group's, each preference's."""
    rc = request.get("ResourceConfig") or {}
    kinds = [rc.get("InstanceType")] + [g.get("InstanceType") for g in rc.get("InstanceGroups") or []]
    kinds += [p.get("InstanceType") for p in rc.get("InstancePreferences") or []]
    return [k for k in kinds if isinstance(k, str)]


def _fail(rule: str, message: str, field: str = "") -> Finding:
    return Finding(rule, "fail", message, RULES[rule].cite(), field)


def _warn(rule: str, message: str) -> Finding:
    return Finding(rule, "warn", message, RULES[rule].cite())


def _rule_jobs(request: dict) -> list[Finding]:
    rules = [*(request.get("DebugRuleConfigurations") or []), *(request.get("ProfilerRuleConfigurations") or [])]
    if not rules:
        return []
    kinds: dict[str, int] = {}
    for rule in rules:  # each rule job runs on its own instance: the rule's InstanceType, or one SageMaker picks
        kind = rule.get("InstanceType") or "an instance SageMaker picks"
        kinds[kind] = kinds.get(kind, 0) + 1
    listed = ", ".join(f"{n} x {kind}" for kind, n in kinds.items())
    return [_warn("rule-processing-jobs", f"{len(rules)} Debugger/Profiler rule(s) start {len(rules)} processing-job "
                  f"instance(s) beside the training job ({listed}): the account's 'Number of instances across all "
                  "processing jobs' quota, and each type's processing quota, must hold them, or CreateTrainingJob is "
                  "refused (ResourceLimitExceeded). Drop the rules you will not read")]


def _runtime(request: dict) -> list[Finding]:
    stop = request.get("StoppingCondition") or {}
    run = stop.get("MaxRuntimeInSeconds", 86400)
    if not isinstance(run, int) or isinstance(run, bool):
        return []
    retries = (request.get("RetryStrategy") or {}).get("MaximumRetryAttempts")
    if run > MAX_RUNTIME_SECONDS:
        return [_fail("max-runtime", f"MaxRuntimeInSeconds {run:,} s ({run / 86400:.1f} days) is above the maximum "
                      f"of 28 days ({MAX_RUNTIME_SECONDS:,} s): split a longer run into a chain of jobs that resume "
                      "from checkpoints")]
    note = f"MaxRuntimeInSeconds {run:,} s ({run / 86400:.2f} days) is within 28 days"
    if retries:
        note += f"; with {retries} retries it bounds all {retries + 1} attempts together"
    return [Finding("max-runtime", "pass", note, RULES["max-runtime"].cite())]


SDK_DEFAULT_VOLUME_GB = 30  # what SDK v3's Compute sends when no volume is asked for (sagemaker-core's Compute)


def _volume(request: dict) -> list[Finding]:
    rc = request.get("ResourceConfig") or {}
    kind, size = rc.get("InstanceType"), rc.get("VolumeSizeInGB")
    if isinstance(kind, str) and has_nvme(kind) and isinstance(size, int) and size > SDK_DEFAULT_VOLUME_GB:
        return [_warn("nvme-volume", f"{kind} has NVMe instance storage: VolumeSizeInGB={size} is ignored (no EBS "
                      "volume is attached); what fits on disk is the instance's own storage")]
    return []


def _retry(request: dict) -> list[Finding]:
    retries = (request.get("RetryStrategy") or {}).get("MaximumRetryAttempts")
    if not retries:
        return []
    out = [Finding("retry-scope", "pass", f"RetryStrategy retries InternalServerError up to {retries} times; a "
                   "script failure (AlgorithmError, an OOM-killed process included) is not retried",
                   RULES["retry-scope"].cite())]
    if not (request.get("CheckpointConfig") or {}).get("S3Uri"):
        out.append(_warn("retry-scope", "a retried job starts again on new instances with nothing on disk: without "
                         "CheckpointConfig it restarts from step 0"))
    return out


def _warm_pool(request: dict) -> list[Finding]:
    keep = (request.get("ResourceConfig") or {}).get("KeepAlivePeriodInSeconds")
    if not isinstance(keep, int) or isinstance(keep, bool) or keep <= 0:
        return []
    if keep > KEEP_ALIVE_API_MAX:
        return [_fail("warm-pool", f"KeepAlivePeriodInSeconds {keep:,} is above the API model's maximum "
                      f"{KEEP_ALIVE_API_MAX:,} s (the developer guide gives {KEEP_ALIVE_GUIDE_MAX:,} s)",
                      "ResourceConfig.KeepAlivePeriodInSeconds")]
    guide_note = []
    if keep > KEEP_ALIVE_GUIDE_MAX:  # the API's own contract allows it; the guide's older text does not
        guide_note = [_warn("warm-pool", f"KeepAlivePeriodInSeconds {keep:,}: the API accepts up to "
                            f"{KEEP_ALIVE_API_MAX:,} s (its reference and model since 2025-12-17), but the developer "
                            f"guide still says {KEEP_ALIVE_GUIDE_MAX:,}; an account's IAM policy may cap it "
                            "(condition key sagemaker:KeepAlivePeriod)")]
    clash = []
    if request.get("EnableManagedSpotTraining"):
        clash.append("managed spot training")
    if (request.get("ResourceConfig") or {}).get("InstanceGroups"):
        clash.append("a heterogeneous cluster (InstanceGroups)")
    if clash:
        return [Finding("warm-pool-with", "fail", f"a warm pool (KeepAlivePeriodInSeconds {keep:,}) cannot be used "
                        f"with {' or '.join(clash)}: drop KeepAlivePeriodInSeconds",
                        RULES["warm-pool-with"].cite(), "ResourceConfig.KeepAlivePeriodInSeconds")]
    if guide_note:
        return guide_note
    return [Finding("warm-pool", "pass", f"KeepAlivePeriodInSeconds {keep:,} s is within both the API model "
                    f"({KEEP_ALIVE_API_MAX:,}) and the developer guide ({KEEP_ALIVE_GUIDE_MAX:,})",
                    RULES["warm-pool"].cite())]


def _preferences(request: dict) -> list[Finding]:
    rc = request.get("ResourceConfig") or {}
    prefs = rc.get("InstancePreferences")
    out = []
    if prefs:
        clash = [k for k in ("InstanceType", "InstanceGroups", "InstancePlacementConfig") if rc.get(k)]
        if request.get("EnableManagedSpotTraining"):
            clash.append("EnableManagedSpotTraining")
        if clash:
            out.append(_fail("instance-preferences", f"InstancePreferences cannot be combined with "
                             f"{', '.join(clash)}: give the instance types only in the preference list"))
        kinds = [p.get("InstanceType") for p in prefs if isinstance(p, dict)]
        repeated = sorted({k for k in kinds if kinds.count(k) > 1})
        if repeated:
            out.append(_fail("instance-preferences", f"{', '.join(repeated)} appears more than once in "
                             "InstancePreferences: each instance type may appear once"))
        per_pref_plans = any(p.get("TrainingPlanArns") for p in prefs if isinstance(p, dict))
        if per_pref_plans and rc.get("TrainingPlanArn"):
            out.append(_fail("instance-preferences", "set a training plan either per preference (TrainingPlanArns) "
                             "or for the job (ResourceConfig.TrainingPlanArn), not both"))
    if rc.get("TrainingPlanArn"):
        out.append(_warn("training-plan", f"not checked without your account: training plan {rc['TrainingPlanArn']}"
                         "'s state, instance type and capacity (ListTrainingPlans with credentials)"))
    return out


def _checkpoint(request: dict) -> list[Finding]:
    cc = request.get("CheckpointConfig") or {}
    if not cc.get("S3Uri"):
        return []
    local = (cc.get("LocalPath") or CHECKPOINT_PATH).rstrip("/") or "/"
    if not runs_course_script(request):
        return [Finding("checkpoint-path", "pass", f"{local} is synced with {cc['S3Uri']}: your script must write "
                        "its checkpoints there", RULES["checkpoint-path"].cite())]
    written = str((request.get("HyperParameters") or {}).get("checkpoint_dir") or CHECKPOINT_PATH).strip('"')
    if written.rstrip("/") != local:
        return [_fail("checkpoint-path", f"CheckpointConfig.LocalPath {local!r} is synced, but the course's script "
                      f"writes to {written!r} (its checkpoint_dir): set checkpoint_dir={local} or LocalPath="
                      f"{written}, or the checkpoints never reach S3", "CheckpointConfig.LocalPath")]
    return [Finding("checkpoint-path", "pass", f"{local} (where the course's script writes) is synced with "
                    f"{cc['S3Uri']}", RULES["checkpoint-path"].cite())]


def _groups(request: dict) -> list[Finding]:
    rc = request.get("ResourceConfig") or {}
    groups = [g for g in rc.get("InstanceGroups") or [] if isinstance(g, dict)]
    out = []
    if not groups:
        return out
    both = [k for k in ("InstanceType", "InstanceCount") if rc.get(k) is not None]
    if both:
        out.append(_fail("instance-groups", f"{' and '.join(both)} cannot be given with InstanceGroups: each group "
                         "names its own type and count", "ResourceConfig." + both[0]))
    names = {g.get("InstanceGroupName") for g in groups}
    channels = [c for c in request.get("InputDataConfig") or [] if isinstance(c, dict)]
    named = [c.get("ChannelName") for c in channels
             if ((c.get("DataSource") or {}).get("S3DataSource") or {}).get("InstanceGroupNames")]
    if named and len(named) < len(channels):
        out.append(_fail("instance-groups", f"channels {', '.join(map(str, named))} name InstanceGroupNames and "
                         "the others do not: name the groups on every channel, or on none",
                         "InputDataConfig"))
    for c in channels:
        wanted = ((c.get("DataSource") or {}).get("S3DataSource") or {}).get("InstanceGroupNames") or []
        unknown = [n for n in wanted if n not in names]
        if unknown:
            out.append(_fail("instance-groups", f"channel {c.get('ChannelName')!r} names instance group(s) "
                             f"{', '.join(map(str, unknown))}, which the request does not have (groups: "
                             f"{', '.join(sorted(map(str, names)))})"))
    return out


def _kms(request: dict) -> list[Finding]:
    rc = request.get("ResourceConfig") or {}
    if not rc.get("VolumeKmsKeyId"):
        return []
    local = [k for k in instance_types(request) if has_nvme(k)]
    if local:
        return [_fail("local-storage-kms", f"VolumeKmsKeyId on {', '.join(sorted(set(local)))}, whose storage is "
                      "local NVMe (encrypted by the instance's own hardware): drop VolumeKmsKeyId",
                      "ResourceConfig.VolumeKmsKeyId")]
    return []


def _builtin(request: dict) -> list[Finding]:
    repo = algorithm_repository(request)
    if repo not in GPU_ONLY_ALGORITHMS:
        return []
    cpu = [k for k in instance_types(request) if processor_of(k) != "gpu"]
    if cpu:
        return [_fail("builtin-algorithm", f"the built-in {repo} algorithm trains on GPU instances only, not "
                      f"{', '.join(cpu)}: choose an ml.p* or ml.g* instance", "ResourceConfig.InstanceType")]
    return []


def algorithm_repository(request: dict) -> str:
    """The ECR repository of the request's TrainingImage ('' when it names none)."""
    image = (request.get("AlgorithmSpecification") or {}).get("TrainingImage") or ""
    return image.split("/", 1)[-1].split(":", 1)[0] if "/" in image else ""


def _spot_wait(request: dict) -> list[Finding]:
    wait = (request.get("StoppingCondition") or {}).get("MaxWaitTimeInSeconds")
    if not request.get("EnableManagedSpotTraining") or not isinstance(wait, int) or wait <= SPOT_WAIT_WITHOUT_CHECKPOINTS:
        return []
    repo = algorithm_repository(request)
    if repo in BUILTIN_ALGORITHMS and repo not in CHECKPOINTING_ALGORITHMS:
        return [_fail("spot-wait-builtin", f"the built-in {repo} algorithm does not checkpoint: on managed spot it may "
                      f"wait at most {SPOT_WAIT_WITHOUT_CHECKPOINTS:,} s, not {wait:,}; lower MaxWaitTimeInSeconds "
                      "(and MaxRuntimeInSeconds with it), or train on demand",
                      "StoppingCondition.MaxWaitTimeInSeconds")]
    if (request.get("AlgorithmSpecification") or {}).get("AlgorithmName"):
        return [_warn("spot-wait-builtin", f"a Marketplace algorithm on managed spot waits {wait:,} s: refused unless "
                      f"it checkpoints (those that do not may wait at most {SPOT_WAIT_WITHOUT_CHECKPOINTS:,} s)")]
    return []


def _profiler(request: dict) -> list[Finding]:
    interval = (request.get("ProfilerConfig") or {}).get("ProfilingIntervalInMilliseconds")
    if isinstance(interval, int) and not isinstance(interval, bool) and interval not in PROFILING_INTERVALS_MS:
        return [_fail("profiling-interval", f"ProfilingIntervalInMilliseconds {interval:,}: choose one of "
                      f"{', '.join(f'{v:,}' for v in PROFILING_INTERVALS_MS)}",
                      "ProfilerConfig.ProfilingIntervalInMilliseconds")]
    return []


def uses_smddp(request: dict) -> bool:
    """True when the request's script is told to use the smddp backend (the course's --backend hyperparameter)."""
    hps = request.get("HyperParameters") or {}
    return str(hps.get("backend", "")).strip('"') == "smddp"


def uses_smp(request: dict) -> bool:
    """True for an SMP v2 job: its image is SMP v2's (smdistributed-modelparallel). The image decides, not the
    hyperparameters: SDK v2 passes mp_parameters for SMP v1 too, which ran inside the PyTorch 1.x DLCs on other
    instance types (ml.p3.16xlarge in AWS's example CI)."""
    image = (request.get("AlgorithmSpecification") or {}).get("TrainingImage") or ""
    return "smdistributed-modelparallel" in image


def processor_of(instance_type: str) -> str:
    """"gpu" (ml.p*, ml.g*), "neuron" (ml.trn*, ml.inf*) or "cpu"."""
    family = _family(instance_type)
    if family.startswith(("trn", "inf")):
        return "neuron"
    return "gpu" if family[:1] in ("p", "g") else "cpu"


def _library_instances(request: dict, image_processor: str | None) -> list[Finding]:
    out = []
    kinds = instance_types(request)
    if uses_smddp(request):
        wrong = [k for k in kinds if k not in SMDDP_INSTANCES]
        if wrong:
            out.append(_fail("smddp-instances", f"backend smddp on {', '.join(wrong)}: SMDDP supports "
                             f"{' and '.join(SMDDP_INSTANCES)} only; use backend nccl there",
                             "ResourceConfig.InstanceType"))
    if uses_smp(request):
        wrong = [k for k in kinds if k not in SMP_INSTANCES]
        if wrong:
            out.append(_fail("smp-instances", f"an SMP v2 job on {', '.join(wrong)}: SMP v2 runs on "
                             f"{', '.join(SMP_INSTANCES)} only", "ResourceConfig.InstanceType"))
    if image_processor in ("gpu", "neuron"):
        wrong = [k for k in kinds if processor_of(k) != image_processor]
        if (request.get("ResourceConfig") or {}).get("InstanceGroups") and len(wrong) < len(kinds):
            wrong = []  # every group runs the job's one image: a CPU group beside a GPU group is the guide's example
        if wrong:
            need = "an NVIDIA GPU instance (ml.p*, ml.g*)" if image_processor == "gpu" else "Trainium (ml.trn*)"
            out.append(_fail("image-instance", f"a {image_processor.upper() if image_processor == 'gpu' else 'Neuron'}"
                             f" image on {', '.join(wrong)}: it needs {need}"))
    return out


def rule_findings(request: dict, image_processor: str | None = None) -> list[Finding]:
    """Every service rule applied to a CreateTrainingJob request (PascalCase): pass, warn and fail findings."""
    if not isinstance(request, dict):
        return []
    return (_runtime(request) + _volume(request) + _retry(request) + _warm_pool(request) + _preferences(request)
            + _groups(request) + _kms(request) + _checkpoint(request) + _builtin(request) + _spot_wait(request)
            + _profiler(request) + _rule_jobs(request) + _library_instances(request, image_processor))
