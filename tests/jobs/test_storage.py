"""S3 URIs on both backends: the local bucket folder, and real S3 calls (against moto's in-process S3)."""

import shutil

import pytest

from fmlab import storage
from fmlab.data import DataError, PackedDataset, corpus_slice, prepare
from fmlab.storage import StorageError


@pytest.fixture
def local_bucket(tmp_path, monkeypatch):
    monkeypatch.setenv("FMLAB_LOCAL_BUCKET", str(tmp_path / "bucket"))
    monkeypatch.setenv("FMLAB_BACKEND", "local")
    return tmp_path / "bucket"


@pytest.fixture
def folder(tmp_path):
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "a.txt").write_text("alpha")
    (src / "sub" / "b.bin").write_bytes(b"\x00\x01")
    return src


def test_uri_parsing_and_errors():
    assert storage.split_s3_uri("s3://my-bucket/a/b/") == ("my-bucket", "a/b")
    assert storage.split_s3_uri("s3://my-bucket") == ("my-bucket", "")
    with pytest.raises(StorageError, match="not an S3 URI"):
        storage.split_s3_uri("/tmp/x")
    with pytest.raises(StorageError, match="not a valid S3 bucket name"):
        storage.split_s3_uri("s3://My_Bucket/x")
    with pytest.raises(StorageError, match=r"'\.\.'"):
        storage.split_s3_uri("s3://bucket/a/../b")
    assert storage.join("s3://b/x/", "y", "/z") == "s3://b/x/y/z"


def test_local_bucket_mapping(monkeypatch, tmp_path):
    monkeypatch.delenv("FMLAB_LOCAL_BUCKET", raising=False)
    assert storage.to_local_path("s3://bkt/k/x.json") == storage.ROOT / "runs" / "bucket" / "bkt" / "k" / "x.json"
    monkeypatch.setenv("FMLAB_LOCAL_BUCKET", str(tmp_path))
    assert storage.to_local_path("s3://bkt/k") == tmp_path / "bkt" / "k"
    assert storage.to_local_path(tmp_path / "plain") == tmp_path / "plain"


def test_local_backend_round_trip(local_bucket, folder, tmp_path):
    uri = "s3://course-bucket/runs/exp1"
    assert not storage.exists(uri)
    assert storage.upload(folder, uri) == uri
    assert (local_bucket / "course-bucket" / "runs" / "exp1" / "sub" / "b.bin").read_bytes() == b"\x00\x01"
    assert storage.exists(uri) and storage.exists(uri + "/a.txt") and not storage.exists(uri + "/nope")
    assert storage.list(uri) == [f"{uri}/a.txt", f"{uri}/sub/b.bin"]
    back = storage.download(uri, tmp_path / "back")
    assert (back / "sub" / "b.bin").read_bytes() == b"\x00\x01"
    storage.download(uri + "/a.txt", tmp_path / "one")
    assert (tmp_path / "one" / "a.txt").read_text() == "alpha"
    with pytest.raises(StorageError, match="does not exist"):
        storage.download("s3://course-bucket/missing", tmp_path / "x")


def test_prepare_to_an_s3_uri_on_the_local_backend(local_bucket):
    uri = "s3://course-bucket/data/tiny"
    m = prepare(corpus_slice(200_000), uri, 32, 300, 1, progress=False)
    assert m["location"] == uri
    assert (local_bucket / "course-bucket" / "data" / "tiny" / "manifest.json").is_file()
    assert len(PackedDataset(uri)) == m["num_sequences"]
    assert f"{uri}/manifest.json" in storage.list(uri)


@pytest.fixture
def fake_s3(monkeypatch, tmp_path):
    """Amazon S3 in-process (moto): the sagemaker backend's code path without an AWS account."""
    moto = pytest.importorskip("moto")
    for var, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_DEFAULT_REGION": "us-east-1", "FMLAB_BACKEND": "sagemaker",
                       "FMLAB_S3_CACHE": str(tmp_path / "s3-cache")}.items():
        monkeypatch.setenv(var, value)
    with moto.mock_aws():
        import boto3

        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket="course-bucket")
        yield client


def test_sagemaker_backend_talks_to_s3(fake_s3, folder, tmp_path):
    uri = "s3://course-bucket/runs/exp1"
    storage.upload(folder, uri)
    keys = sorted(o["Key"] for o in fake_s3.list_objects_v2(Bucket="course-bucket")["Contents"])
    assert keys == ["runs/exp1/a.txt", "runs/exp1/sub/b.bin"]
    assert storage.list(uri) == [f"{uri}/a.txt", f"{uri}/sub/b.bin"]
    assert storage.exists(uri) and storage.exists(uri + "/a.txt") and not storage.exists("s3://course-bucket/runs/ex")
    back = storage.download(uri, tmp_path / "back")
    assert (back / "sub" / "b.bin").read_bytes() == b"\x00\x01"
    assert not (tmp_path / "bucket").exists()  # nothing went to a local bucket


def test_prepare_uploads_to_s3_and_the_dataset_reads_back(fake_s3, tmp_path):
    uri = "s3://course-bucket/data/tiny"
    m = prepare(corpus_slice(200_000), uri, 32, 300, 1, progress=False)
    assert m["location"] == uri
    keys = {o["Key"] for o in fake_s3.list_objects_v2(Bucket="course-bucket", Prefix="data/tiny/")["Contents"]}
    assert {"data/tiny/manifest.json", "data/tiny/tokenizer/tokenizer.json"} <= keys
    assert {f"data/tiny/{s['file']}" for s in m["shards"]} <= keys
    shutil.rmtree(tmp_path / "s3-cache")  # force a fresh download
    ds = PackedDataset(uri)
    assert len(ds) == m["num_sequences"] and str(ds.folder).startswith(str(tmp_path / "s3-cache"))


def test_prepare_refuses_an_s3_prefix_that_holds_other_data(fake_s3):
    fake_s3.put_object(Bucket="course-bucket", Key="data/theirs/report.csv", Body=b"a,b\n")
    with pytest.raises(DataError, match="not an fmlab dataset"):
        prepare(corpus_slice(200_000), "s3://course-bucket/data/theirs", 32, 300, 1, progress=False)
