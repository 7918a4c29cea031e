"""SageMaker's training rules as data: what each says, where it is written and when that was read.

    from fmlab.service.rule_book import RULES
    RULES["max-runtime"].cite()     # its source and the day it was read

The checks that apply them to a request are fmlab.service.rules (`rule_findings`); this file holds only the texts.
"""

from __future__ import annotations

from dataclasses import dataclass

READ = "2026-11-24"
BOTOCORE_MODEL = "botocore 1.44.8, data/sagemaker/2017-07-24/service-2.json"  # the model shipped in the venv


@dataclass(frozen=True)
class Rule:
    """One service rule: its id, what it says, where it is written and when that was read."""

    id: str
    text: str
    source: str
    read: str = READ

    def cite(self) -> str:
        return f"{self.source}, read {self.read}"


RULES: dict[str, Rule] = {r.id: r for r in [
    Rule("max-runtime",
         "StoppingCondition.MaxRuntimeInSeconds is at most 28 days (2,419,200 s); with a RetryStrategy it bounds "
         "all attempts together, not each one. (A job's total time, uploads included, is at most 30 days.)",
         f"API reference, StoppingCondition.MaxRuntimeInSeconds: 'The maximum value is 28 days' ({BOTOCORE_MODEL}; "
         "the model itself carries only min 1)"),
    Rule("nvme-volume",
         "On instances with NVMe SSD instance storage SageMaker provisions no EBS volume: VolumeSizeInGB is "
         "ignored and storage is the instance's own.",
         f"API reference, ResourceConfig.VolumeSizeInGB ('When using an ML instance with NVMe SSD volumes, "
         f"SageMaker doesn't provision Amazon EBS ... For example ... ml.p4d, ml.g4dn, and ml.g5'; {BOTOCORE_MODEL})"),
    Rule("retry-scope",
         "RetryStrategy retries a job that failed with an InternalServerError (the platform's fault: a lost or "
         "broken instance), up to MaximumRetryAttempts (1-30); a failure of the script itself (AlgorithmError: "
         "nonzero exit, a process killed by the OOM killer) is not retried. On a GPU fault SageMaker reboots an "
         "instance when that recovers it and replaces it when not, then restarts the job from its checkpoint.",
         "API reference, RetryStrategy ('when the job fails due to an InternalServerError'); developer guide, "
         "'Cluster repairs for GPU errors' (docs.aws.amazon.com/sagemaker/latest/dg/model-checkpoints-cluster-repair"
         ".html)"),
    Rule("warm-pool",
         "KeepAlivePeriodInSeconds: the API accepts 0-21,600 s (6 h): its reference and model say so since "
         "2025-12-17 (3,600 before). The developer guide's warm-pool pages still say 3,600 s: above that, a warning.",
         "API reference, ResourceConfig ('Valid Range: Minimum value of 0. Maximum value of 21600', "
         f"docs.aws.amazon.com/sagemaker/latest/APIReference/API_ResourceConfig.html, read 2026-11-29); {BOTOCORE_MODEL}, "
         "ResourceConfig.KeepAlivePeriodInSeconds max 21600 (raised from 3600 in botocore commit 33757792, "
         "2025-12-17, release 1.42.12); developer guide 'Train Using SageMaker Managed Warm Pools' "
         "(docs.aws.amazon.com/sagemaker/latest/dg/train-warm-pools.html): 'The maximum length of time allowed for "
         "the KeepAlivePeriodInSeconds is 3600 seconds (60 minutes)', unchanged since 2022"),
    Rule("smddp-instances",
         "The SMDDP library (the smddp backend) supports ml.p4d.24xlarge and ml.p4de.24xlarge only (not P5).",
         "developer guide, 'Compatibility with the SMDDP library optimized for AWS infrastructure' (SMP v2): 'The "
         "SMDDP library supports P4 and P4de instances'; 'Supported frameworks, AWS Regions, and instances types' "
         "(distributed-data-parallel-support)"),
    Rule("image-instance",
         "An image runs on the processor it was built for: a CUDA image (the PyTorch GPU DLC, every SMP v2 image, "
         "the SMDDP-carrying DLCs) needs an NVIDIA GPU instance (ml.p*, ml.g*); a Neuron image needs Trainium "
         "(ml.trn*); a CPU image runs anywhere but uses no accelerator.",
         "the image's tag and build (fmlab.service.images: each manifest's processor, from its Dockerfile or "
         "changelog)"),
    Rule("instance-preferences",
         "ResourceConfig.InstancePreferences (an ordered list of instance types, one is chosen) is mutually "
         "exclusive with InstanceType, InstanceGroups, InstancePlacementConfig and EnableManagedSpotTraining; each "
         "instance type may appear once; a preference's TrainingPlanArns plan must be of that instance type.",
         f"API reference, ResourceConfig.InstancePreferences and InstancePreference ({BOTOCORE_MODEL})"),
    Rule("training-plan",
         "ResourceConfig.TrainingPlanArn runs the job on a training plan's reserved capacity: the plan must exist, "
         "be Active or Scheduled and match the instance type and count; MaxPendingTimeInSeconds counts only time "
         "waiting in an Active plan. Only AWS can check the plan itself.",
         f"API reference, ResourceConfig.TrainingPlanArn and StoppingCondition.MaxPendingTimeInSeconds "
         f"({BOTOCORE_MODEL})"),
    Rule("checkpoint-path",
         "CheckpointConfig syncs CheckpointConfig.LocalPath (default /opt/ml/checkpoints) with S3Uri, whatever path "
         "the request names; the script must write there. The course's script writes to its checkpoint_dir "
         "hyperparameter (default /opt/ml/checkpoints), so for the course's script the two must agree.",
         f"API reference, CheckpointConfig.LocalPath ({BOTOCORE_MODEL}); fmlab.train.config.SAGEMAKER_CHECKPOINTS"),
    Rule("instance-groups",
         "A heterogeneous cluster (ResourceConfig.InstanceGroups) replaces InstanceType and InstanceCount: the "
         "service refuses both together ('InstanceType or InstanceCount cannot be specified with InstanceGroups'). "
         "Every group runs the job's one TrainingImage. A channel's S3DataSource.InstanceGroupNames must name "
         "groups of the request.",
         "developer guide, 'Configure a training job with a heterogeneous cluster' (docs.aws.amazon.com/sagemaker/"
         "latest/dg/train-heterogeneous-cluster-configure.html): one image for all groups, an ml.c5 group beside a "
         "GPU group; AWS's ValidationExceptions as quoted in aws/sagemaker-python-sdk PR #5564 ('InstanceType or "
         "InstanceCount cannot be specified with InstanceGroups') and issue #5225 ('Some channels have assigned "
         f"instance groups: ... while others not'); {BOTOCORE_MODEL}, InstanceGroup and "
         "S3DataSource.InstanceGroupNames", read="2026-11-26"),
    Rule("local-storage-kms",
         "VolumeKmsKeyId encrypts an EBS volume; instances with local NVMe storage get none, and the request is "
         "refused there.",
         f"API reference, ResourceConfig.VolumeKmsKeyId: 'You can't request a VolumeKmsKeyId when using an instance "
         f"type with local storage' ({BOTOCORE_MODEL})", read="2026-11-26"),
    Rule("warm-pool-with",
         "A warm pool (KeepAlivePeriodInSeconds > 0) cannot be used with managed spot training or with a "
         "heterogeneous cluster (InstanceGroups).",
         "developer guide, 'Train Using SageMaker Managed Warm Pools', Considerations (docs.aws.amazon.com/sagemaker/"
         "latest/dg/train-warm-pools.html#train-warm-pools-considerations; awsdocs/amazon-sagemaker-developer-guide "
         "doc_source/train-warm-pools.md @b01b6e4b): 'SageMaker Managed Warm Pools cannot be used with spot "
         "instances' and '... cannot be used with heterogeneous cluster training'",
         read="2026-11-26"),
    Rule("smp-instances",
         "SMP v2 (the smdistributed-modelparallel images, torch.sagemaker) runs on ml.p4d.24xlarge, "
         "ml.p4de.24xlarge and ml.p5.48xlarge.",
         "SMP v2 release notes and 'Supported frameworks, AWS Regions, and instance types' (model parallel v2); "
         "fmlab.service.libraries.SMP", read="2026-11-26"),
    Rule("builtin-algorithm",
         "A built-in algorithm's image trains on the processors its page lists: image classification, object "
         "detection and semantic segmentation train on GPU instances only.",
         "developer guide, EC2 instance recommendations of the Image Classification (MXNet), Object Detection "
         "(MXNet) and Semantic Segmentation algorithms ('For training, ... GPU instances'); the images' repository "
         "names and registries: sagemaker-core 2.27.0, sagemaker/core/image_uri_config/image-classification.json, "
         "object-detection.json, semantic-segmentation.json", read="2026-11-26"),
    Rule("spot-wait-builtin",
         "On managed spot training a built-in algorithm that does not checkpoint may wait at most 3,600 s "
         "(StoppingCondition.MaxWaitTimeInSeconds, spot waits and training together); those that checkpoint are "
         "Image Classification, Object Detection, Semantic Segmentation and XGBoost 0.90-1 or later. A Marketplace "
         "algorithm that does not checkpoint has the same limit.",
         "developer guide, 'Checkpoints in Amazon SageMaker AI' (docs.aws.amazon.com/sagemaker/latest/dg/"
         "model-checkpoints.html: 'If a pre-built algorithm that does not support checkpointing is used in a managed "
         "spot training job, SageMaker does not allow a maximum wait time greater than an hour', and its list of "
         "built-in algorithms that checkpoint) and 'Managed Spot Training' ('built-in algorithms and marketplace "
         "algorithms that do not checkpoint are currently limited to a MaxWaitTimeInSeconds of 3600 seconds'); the "
         "repositories: sagemaker-core 2.27.0, sagemaker/core/image_uri_config/*.json", read="2026-11-29"),
    Rule("profiling-interval",
         "ProfilerConfig.ProfilingIntervalInMilliseconds takes one of 100, 200, 500, 1,000, 5,000 or 60,000 (the "
         "model says only that it is a long).",
         f"API reference, ProfilerConfig.ProfilingIntervalInMilliseconds: 'Available values are 100, 200, 500, 1000 (1 "
         f"second), 5000 (5 seconds), and 60000 (1 minute) milliseconds. The default value is 500' ({BOTOCORE_MODEL})",
         read="2026-11-29"),
    Rule("rule-processing-jobs",
         "Each Debugger or Profiler rule of a training job (DebugRuleConfigurations, ProfilerRuleConfigurations) "
         "runs as a processing job beside it, one instance each; CreateTrainingJob counts them against the "
         "account's 'Number of instances across all processing jobs' quota and refuses the job with "
         "ResourceLimitExceeded above it. The built-in rules cost nothing extra; a custom rule bills its "
         "InstanceType.",
         "data-science-on-aws/data-science-on-aws issue #200 (2021-04-03), quoting: \"ResourceLimitExceeded ... "
         "when calling the CreateTrainingJob operation: The account-level service limit 'Number of instances across "
         "all processing jobs' is 4 Instances, with current utilization of 0 Instances and a request delta of 11 "
         "Instances\" and the fix, fewer rules; developer guide, 'Use built-in profiler rules managed by Amazon "
         "SageMaker Debugger' ('provided through Amazon SageMaker processing containers ... at no additional cost')",
         read="2026-11-28"),
]}
