"""The course's least-privilege execution role (fmlab.service.iam): it can resume from its checkpoints and pull its
image, and nothing beyond its prefixes (issue 40: notebook 00's table granted only s3:PutObject on checkpoints)."""

import pytest

from fmlab.service import iam

IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch:2.13-cu133-amzn2023-sagemaker"
BUCKET = "my-bucket"
CKPT = "arn:aws:s3:::my-bucket/fmlab/checkpoints/step_100/model.pt"


@pytest.fixture
def policy():
    return iam.execution_role_policy(BUCKET, images=[IMAGE], region="us-east-1", account="111122223333")


def test_the_role_can_read_its_checkpoints_back_at_a_restart(policy):
    assert iam.allows(policy, "s3:GetObject", CKPT)
    assert iam.allows(policy, "s3:PutObject", CKPT)
    assert iam.allows(policy, "s3:ListBucket", "arn:aws:s3:::my-bucket", prefix="fmlab/checkpoints/")
    assert iam.allows(policy, "s3:ListBucket", "arn:aws:s3:::my-bucket", prefix="fmlab/checkpoints")  # URI, no "/"
    assert not iam.allows(policy, "s3:ListBucket", "arn:aws:s3:::my-bucket", prefix="fmlab/checkpoints-other/")
    assert iam.missing(policy, iam.needs(BUCKET, images=[IMAGE])) == []


def test_the_role_can_pull_its_image(policy):
    repo = "arn:aws:ecr:us-east-1:763104351884:repository/pytorch"
    assert iam.repository_arn(IMAGE) == repo
    assert iam.allows(policy, "ecr:GetAuthorizationToken", "*")
    for action in ("ecr:GetDownloadUrlForLayer", "ecr:BatchGetImage", "ecr:BatchCheckLayerAvailability"):
        assert iam.allows(policy, action, repo)
    assert not iam.allows(policy, "ecr:BatchGetImage", "arn:aws:ecr:us-east-1:763104351884:repository/other")


def test_list_bucket_is_on_the_bucket_with_a_prefix_condition(policy):
    listing = [s for s in policy["Statement"] if "s3:ListBucket" in s["Action"]]
    assert [s["Resource"] for s in listing] == [["arn:aws:s3:::my-bucket"]]
    assert not iam.allows(policy, "s3:ListBucket", "arn:aws:s3:::my-bucket", prefix="someone-else/")
    assert not iam.allows(policy, "s3:ListBucket", "arn:aws:s3:::my-bucket")  # no prefix: the whole bucket


def test_nothing_beyond_the_prefixes(policy):
    assert not iam.allows(policy, "s3:GetObject", "arn:aws:s3:::my-bucket/private/keys.csv")
    assert not iam.allows(policy, "s3:PutObject", "arn:aws:s3:::my-bucket/fmlab/data/shard_0.bin")  # data is read-only
    assert not iam.allows(policy, "s3:DeleteObject", "arn:aws:s3:::my-bucket/fmlab/data/shard_0.bin")
    assert not iam.allows(policy, "s3:DeleteObject", "arn:aws:s3:::my-bucket/fmlab/output/job/output/model.tar.gz")


def test_the_checkpoint_prefix_may_lose_what_the_folder_prunes(policy):
    """SageMaker's upload mirrors a deletion in the container to S3 (iam.SOURCES["checkpoints"]): keep-last-N and
    the rename of an `.incomplete-` save delete objects, so the role must allow it there, and needs() says so."""
    assert iam.allows(policy, "s3:DeleteObject", CKPT)
    without = {"Statement": [dict(s, Action=[a for a in s["Action"] if a != "s3:DeleteObject"])
                             for s in policy["Statement"]]}
    assert [m for m in iam.missing(without, iam.needs(BUCKET, images=[IMAGE])) if "DeleteObject" in m] == [
        f"mirror a pruned checkpoint (keep-last-N): s3:DeleteObject on {CKPT}"]


def test_the_old_table_could_save_checkpoints_but_never_resume():
    old = {"Statement": [{"Effect": "Allow", "Action": "s3:PutObject", "Resource": [
        "arn:aws:s3:::my-bucket/fmlab/output/*", "arn:aws:s3:::my-bucket/fmlab/checkpoints/*"]},
        {"Effect": "Allow", "Action": "ecr:BatchGetImage", "Resource": "*"}]}
    gaps = iam.missing(old, iam.needs(BUCKET, images=[IMAGE]))
    assert any(g.startswith("download a checkpoint at (re)start: s3:GetObject") for g in gaps)
    assert any(g.startswith("list the checkpoints at (re)start: s3:ListBucket") for g in gaps)
    assert any("ecr:GetAuthorizationToken" in g for g in gaps) and any("GetDownloadUrlForLayer" in g for g in gaps)


def test_a_deny_wins_and_bad_input_is_refused(policy):
    denied = {"Statement": policy["Statement"] + [{"Effect": "Deny", "Action": "s3:*", "Resource": CKPT}]}
    assert not iam.allows(denied, "s3:GetObject", CKPT)
    with pytest.raises(iam.PolicyInputError, match="bare bucket name"):
        iam.execution_role_policy("s3://my-bucket")
    with pytest.raises(iam.PolicyInputError, match="not an ECR image URI"):
        iam.repository_arn("pytorch:latest")
