"""The least-privilege execution role of a course training job, as an IAM policy document, and a small check of
what a policy allows (ground floor: no AWS calls).

    from fmlab.service import iam
    policy = iam.execution_role_policy("my-bucket", images=["763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch:2.13-..."])
    iam.allows(policy, "s3:GetObject", "arn:aws:s3:::my-bucket/fmlab/checkpoints/step_100/model.pt")    # True
    iam.allows(policy, "s3:ListBucket", "arn:aws:s3:::my-bucket", prefix="fmlab/checkpoints/")           # True
    iam.missing(policy, iam.needs("my-bucket", images=[...]))                                          # [] when enough

What a training job's role needs, and why (SOURCES, read 2026-11-26):
- the input channels: s3:GetObject on the data prefix and s3:ListBucket on the bucket, limited to that prefix with
  the s3:prefix condition key (ListBucket acts on the bucket's ARN, never on an object's);
- the output: s3:PutObject on the output prefix (model.tar.gz, output.tar.gz);
- the checkpoints: s3:PutObject to upload /opt/ml/checkpoints while the job runs, and s3:GetObject with
  s3:ListBucket on the checkpoint prefix, because at every start, and at a retry or a chained job's start,
  SageMaker copies the prefix back to each instance with this role. A role that can only write checkpoints saves
  them and can never resume from them. And s3:DeleteObject there: the upload mirrors a deletion in the container
  to S3, so keep-last-N pruning and an `.incomplete-step_N` renamed to `step_N` delete objects (module 8);
- the image: ecr:GetAuthorizationToken (it names no repository, so its Resource is "*"), then
  ecr:BatchCheckLayerAvailability, ecr:GetDownloadUrlForLayer and ecr:BatchGetImage on the image's repository;
- logs and metrics: logs:CreateLogStream, logs:PutLogEvents (and CreateLogGroup, DescribeLogStreams) on the
  /aws/sagemaker/TrainingJobs log group, cloudwatch:PutMetricData (no resource-level permissions: "*").
"""

from __future__ import annotations

import fnmatch
import re

from fmlab.service.sources import Source

READ = "2026-11-26"
SOURCES = {
    "role": Source("How to use SageMaker AI execution roles: CreateTrainingJob API, execution role permissions",
                   "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-roles.html",
                   "the execution role reads the input from S3, pulls the training image from ECR (GetAuthorizationToken "
                   "on '*', BatchCheckLayerAvailability, GetDownloadUrlForLayer, BatchGetImage), writes the model to "
                   "S3, and writes logs and metrics to CloudWatch; the caller needs iam:PassRole", READ),
    "resume": Source("Resume training from a checkpoint (SageMaker developer guide)",
                     "https://docs.aws.amazon.com/sagemaker/latest/dg/model-checkpoints-resume.html",
                     "run a new job with the same checkpoint S3 URI: the checkpoints in that S3 location are restored "
                     "to checkpoint_local_path in each instance of the new training job", READ),
    "checkpoints": Source("Use checkpoints in Amazon SageMaker AI (developer guide)",
                          "https://docs.aws.amazon.com/sagemaker/latest/dg/model-checkpoints.html",
                          "if a checkpoint is deleted in the SageMaker AI container, it will also be deleted in the "
                          "S3 folder", READ),
    "listbucket": Source("Amazon S3 User Guide: identity-based policy examples; policy condition keys (s3:prefix)",
                         "https://docs.aws.amazon.com/AmazonS3/latest/userguide/example-policies-s3.html",
                         "s3:ListBucket is granted on the bucket ARN (arn:aws:s3:::bucket), and a StringLike "
                         "condition on s3:prefix limits the listing to a folder; object actions take object ARNs", READ),
    "ecr": Source("Amazon ECR User Guide: private registry authentication; repository policy actions",
                  "https://docs.aws.amazon.com/AmazonECR/latest/userguide/registry_auth.html",
                  "ecr:GetAuthorizationToken returns a registry token and cannot be limited to a repository (Resource "
                  "'*'); pulling a layer needs ecr:GetDownloadUrlForLayer and ecr:BatchGetImage on the repository", READ),
}

ECR_AUTH = ("ecr:GetAuthorizationToken",)
ECR_PULL = ("ecr:BatchCheckLayerAvailability", "ecr:GetDownloadUrlForLayer", "ecr:BatchGetImage")
LOG_GROUP = "/aws/sagemaker/TrainingJobs"
_IMAGE = re.compile(r"^(?P<account>\d{12})\.dkr\.ecr\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(?:\.cn)?/"
                    r"(?P<repo>[^:@]+)")


class PolicyInputError(ValueError):
    """An argument the policy cannot be built from (the message says what a valid one looks like)."""


def repository_arn(image: str) -> str:
    """'763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch:2.13-...' -> 'arn:aws:ecr:us-east-1:763104351884:repository/pytorch'."""
    m = _IMAGE.match(image)
    if not m:
        raise PolicyInputError(f"{image!r} is not an ECR image URI (ACCOUNT.dkr.ecr.REGION.amazonaws.com/REPO:TAG)")
    return f"arn:aws:ecr:{m['region']}:{m['account']}:repository/{m['repo']}"


def _prefixes(prefix: str) -> dict[str, str]:
    root = prefix.strip("/")
    return {part: f"{root}/{part}/" if root else f"{part}/" for part in ("data", "output", "checkpoints")}


def execution_role_policy(bucket: str, prefix: str = "fmlab", images: list[str] | tuple[str, ...] = (),
                          region: str = "*", account: str = "*") -> dict:
    """The execution role's identity policy for jobs that read s3://bucket/<prefix>/data/, write .../output/ and
    sync .../checkpoints/, pulling `images` (ECR URIs; none: every repository, "*")."""
    if not bucket or "/" in bucket or bucket.startswith("s3:"):
        raise PolicyInputError(f"bucket must be a bare bucket name such as 'my-bucket', not {bucket!r}")
    p = _prefixes(prefix)
    obj = f"arn:aws:s3:::{bucket}/"
    repos = sorted({repository_arn(i) for i in images}) or ["*"]
    return {"Version": "2012-10-17", "Statement": [
        {"Sid": "ReadData", "Effect": "Allow", "Action": ["s3:GetObject"], "Resource": [f"{obj}{p['data']}*"]},
        {"Sid": "WriteOutput", "Effect": "Allow", "Action": ["s3:PutObject"], "Resource": [f"{obj}{p['output']}*"]},
        # Uploaded while the job runs, and copied back to every instance at each (re)start: read and write.
        {"Sid": "SyncCheckpoints", "Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"],
         "Resource": [f"{obj}{p['checkpoints']}*"]},
        # ListBucket acts on the bucket, so the prefixes are a condition, not a resource.
        {"Sid": "ListDataAndCheckpoints", "Effect": "Allow", "Action": ["s3:ListBucket"],
         "Resource": [f"arn:aws:s3:::{bucket}"],
         # the prefix as the job's S3 URI names it (with or without its last "/"), and everything below it
         "Condition": {"StringLike": {"s3:prefix": [v for part in ("data", "checkpoints")
                                                   for v in (p[part].rstrip("/"), f"{p[part]}*")]}}},
        {"Sid": "EcrToken", "Effect": "Allow", "Action": list(ECR_AUTH), "Resource": ["*"]},
        {"Sid": "PullImage", "Effect": "Allow", "Action": list(ECR_PULL), "Resource": repos},
        {"Sid": "Logs", "Effect": "Allow",
         "Action": ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
         "Resource": [f"arn:aws:logs:{region}:{account}:log-group:{LOG_GROUP}:*"]},
        {"Sid": "Metrics", "Effect": "Allow", "Action": ["cloudwatch:PutMetricData"], "Resource": ["*"]},
    ]}


def needs(bucket: str, prefix: str = "fmlab", images: list[str] | tuple[str, ...] = ()) -> list[tuple[str, str, str, str | None]]:
    """What a job that trains, checkpoints and resumes does with its role: (why, action, resource, s3:prefix)."""
    p = _prefixes(prefix)
    obj = f"arn:aws:s3:::{bucket}/"
    out = [("read a data shard", "s3:GetObject", f"{obj}{p['data']}shard_00000.bin", None),
           ("list the data channel", "s3:ListBucket", f"arn:aws:s3:::{bucket}", p["data"]),
           ("write the model", "s3:PutObject", f"{obj}{p['output']}job/output/model.tar.gz", None),
           ("upload a checkpoint", "s3:PutObject", f"{obj}{p['checkpoints']}step_100/model.pt", None),
           ("list the checkpoints at (re)start", "s3:ListBucket", f"arn:aws:s3:::{bucket}", p["checkpoints"]),
           ("download a checkpoint at (re)start", "s3:GetObject", f"{obj}{p['checkpoints']}step_100/model.pt", None),
           ("mirror a pruned checkpoint (keep-last-N)", "s3:DeleteObject",
            f"{obj}{p['checkpoints']}step_100/model.pt", None),
           ("get an ECR token", "ecr:GetAuthorizationToken", "*", None)]
    for image in images:
        out += [(f"pull {image.split('/')[-1]}", action, repository_arn(image), None) for action in ECR_PULL]
    return out


def _as_list(value) -> list[str]:
    return [value] if isinstance(value, str) else list(value or [])


def _condition_holds(condition: dict, prefix: str | None) -> bool:
    for operator, keys in (condition or {}).items():
        for key, patterns in keys.items():
            if key != "s3:prefix" or operator not in ("StringLike", "StringEquals"):
                return False  # a condition this checker does not model never counts as granted
            if prefix is None:
                return False
            match = fnmatch.fnmatchcase if operator == "StringLike" else str.__eq__
            if not any(match(prefix, pattern) for pattern in _as_list(patterns)):
                return False
    return True


def allows(policy: dict, action: str, resource: str, prefix: str | None = None) -> bool:
    """Whether an Allow statement of `policy` grants `action` on `resource` (IAM's wildcards, case-insensitive
    actions), with s3:prefix = `prefix` for ListBucket; an explicit Deny wins. Only the s3:prefix condition is
    modelled: a statement with any other condition never counts."""
    def matches(statement) -> bool:
        actions = [a.lower() for a in _as_list(statement.get("Action"))]
        return (any(fnmatch.fnmatchcase(action.lower(), a) for a in actions)
                and any(fnmatch.fnmatchcase(resource, r) for r in _as_list(statement.get("Resource")))
                and _condition_holds(statement.get("Condition"), prefix))

    statements = _as_list(policy.get("Statement")) if isinstance(policy.get("Statement"), list) else [policy["Statement"]]
    if any(s.get("Effect") == "Deny" and matches(s) for s in statements):
        return False
    return any(s.get("Effect") == "Allow" and matches(s) for s in statements)


def missing(policy: dict, required: list[tuple[str, str, str, str | None]]) -> list[str]:
    """The needs (from `needs`) that `policy` does not grant, as 'why: action on resource'; [] when it is enough."""
    return [f"{why}: {action} on {resource}" + (f" (s3:prefix {prefix})" if prefix else "")
            for why, action, resource, prefix in required if not allows(policy, action, resource, prefix)]


def rows(policy: dict) -> list[dict]:
    """One row per statement, for a table: Sid, actions, resources, condition."""
    return [{"statement": s.get("Sid", ""), "actions": ", ".join(_as_list(s["Action"])),
             "on": ", ".join(_as_list(s["Resource"])),
             "condition": "; ".join(f"{k} {op} {', '.join(_as_list(v))}" for op, kv in (s.get("Condition") or {}).items()
                                    for k, v in kv.items())} for s in policy["Statement"]]
