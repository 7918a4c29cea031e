"""S3 URIs that work on both backends: real Amazon S3 with boto3, or a local bucket folder on disk.

    from fmlab import storage
    storage.upload("runs/my-dataset", "s3://my-bucket/datasets/shakespeare")   # a folder or one file
    storage.list("s3://my-bucket/datasets/shakespeare")     # ["s3://my-bucket/datasets/shakespeare/manifest.json", ...]
    storage.exists("s3://my-bucket/datasets/shakespeare/manifest.json")
    storage.download("s3://my-bucket/datasets/shakespeare", "/tmp/dataset")
    storage.to_local_path("s3://my-bucket/datasets/x")      # where the local backend keeps that key

With the "sagemaker" backend (AWS credentials present, see `fmlab.environment.default_backend`) every call
goes to Amazon S3. With the "local" backend, s3://bucket/key is the file `<local bucket>/bucket/key`, where
the local bucket is `<repo>/runs/bucket` unless the environment variable FMLAB_LOCAL_BUCKET names another
folder: artifacts outlive the kernel, and later notebooks read what earlier ones wrote, with no AWS account.
Plain local paths are accepted wherever a URI is, and are simply copied. `cache_path(uri)` is where a
local working copy of a real S3 location goes (FMLAB_S3_CACHE, else <repo>/runs/s3-cache). The data
pipeline, the job launcher and the local sandbox all go through this module.
"""

from __future__ import annotations

import builtins
import os
import re
import shutil
from pathlib import Path

from fmlab.environment import ROOT

LOCAL_BUCKET_VARIABLE = "FMLAB_LOCAL_BUCKET"
DEFAULT_LOCAL_BUCKET = ROOT / "runs" / "bucket"
S3_CACHE_VARIABLE = "FMLAB_S3_CACHE"
DEFAULT_S3_CACHE = ROOT / "runs" / "s3-cache"
# Bucket naming rules (S3 User Guide, "General purpose bucket naming rules"): 3-63 characters, lower-case
# letters, digits, dots and hyphens, beginning and ending with a letter or digit.
_BUCKET_NAME = re.compile(r"[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]")


class StorageError(ValueError):
    """A URI or a storage operation that cannot work; the message says what to change."""


def is_s3_uri(location: str | os.PathLike) -> bool:
    return isinstance(location, str) and location.startswith("s3://")


def split_s3_uri(uri: str) -> tuple[str, str]:
    """"s3://bucket/some/key" -> ("bucket", "some/key"); the key may be empty (the whole bucket)."""
    if not is_s3_uri(uri):
        raise StorageError(f"{uri!r} is not an S3 URI: write it as s3://bucket/key")
    bucket, _, key = uri[len("s3://"):].partition("/")
    if not _BUCKET_NAME.fullmatch(bucket) or ".." in bucket:
        raise StorageError(f"{bucket!r} in {uri!r} is not a valid S3 bucket name: use 3-63 lower-case letters, "
                           "digits, dots or hyphens, starting and ending with a letter or digit")
    key = key.strip("/")
    if any(part in ("", ".", "..") for part in key.split("/")) and key:
        raise StorageError(f"the key {key!r} in {uri!r} has an empty, '.' or '..' part: remove it")
    return bucket, key


def join(uri: str, *parts: str) -> str:
    """Join key parts onto an S3 URI or a local path, with single slashes."""
    if is_s3_uri(uri):
        return "/".join([uri.rstrip("/"), *(p.strip("/") for p in parts if p.strip("/"))])
    return str(Path(uri, *parts))


def local_bucket_root() -> Path:
    """The folder that stands in for S3 on the local backend (FMLAB_LOCAL_BUCKET, else <repo>/runs/bucket)."""
    chosen = os.environ.get(LOCAL_BUCKET_VARIABLE, "").strip()
    return Path(chosen).expanduser().resolve() if chosen else DEFAULT_LOCAL_BUCKET


def to_local_path(location: str | os.PathLike) -> Path:
    """Where the local backend keeps `location`: s3://b/k -> <local bucket>/b/k; a local path is returned as is."""
    if is_s3_uri(location):
        bucket, key = split_s3_uri(str(location))
        return local_bucket_root().joinpath(bucket, *key.split("/")) if key else local_bucket_root() / bucket
    return Path(location).expanduser()


def cache_path(uri: str) -> Path:
    """A local working copy of a real S3 location (FMLAB_S3_CACHE, else <repo>/runs/s3-cache): bucket/key below it."""
    bucket, key = split_s3_uri(uri)
    chosen = os.environ.get(S3_CACHE_VARIABLE, "").strip()
    root = Path(chosen).expanduser().resolve() if chosen else DEFAULT_S3_CACHE
    return root.joinpath(bucket, *key.split("/")) if key else root / bucket


def _backend(backend: str | None) -> str:
    if backend is None:
        from fmlab.environment import default_backend

        backend = default_backend()
    if backend not in ("local", "sagemaker"):
        raise StorageError(f"backend must be 'local' or 'sagemaker', not {backend!r}")
    return backend


def uses_real_s3(location: str | os.PathLike, backend: str | None) -> bool:
    """True when `location` must go to real Amazon S3."""
    return is_s3_uri(location) and _backend(backend) == "sagemaker"


def _client(client=None):
    if client is not None:
        return client
    import boto3

    return boto3.client("s3")


def _files_under(folder: Path) -> builtins.list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file())


def upload(source: str | os.PathLike, uri: str, backend: str | None = None, client=None) -> str:
    """Copy a local folder (recursively) or one file to `uri`; returns `uri`."""
    source = Path(source)
    if not source.exists():
        raise StorageError(f"cannot upload {source}: it does not exist")
    if uses_real_s3(uri, backend):
        bucket, key = split_s3_uri(uri)
        s3 = _client(client)
        files = [source] if source.is_file() else _files_under(source)
        for f in files:
            rel = "" if source.is_file() else f.relative_to(source).as_posix()
            s3.upload_file(str(f), bucket, "/".join(p for p in (key, rel) if p))
        return uri
    target = to_local_path(uri)
    if source.resolve() == target.resolve():
        return uri
    target.parent.mkdir(parents=True, exist_ok=True)
    if source.is_file():
        shutil.copy2(source, target)
    else:
        shutil.copytree(source, target, dirs_exist_ok=True)
    return uri


def download(uri: str, destination: str | os.PathLike, backend: str | None = None, client=None) -> Path:
    """Copy the object or every object under the prefix `uri` into the folder `destination`; returns it.

    One object lands as destination/<its name>; a prefix keeps the layout below it."""
    destination = Path(destination)
    if uses_real_s3(uri, backend):
        bucket, key = split_s3_uri(uri)
        s3 = _client(client)
        keys = _s3_keys(s3, bucket, key)
        if not keys:
            raise StorageError(f"nothing to download: no object at or under {uri}")
        for k in keys:
            rel = Path(k).name if k == key else k[len(key):].lstrip("/")
            target = destination / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            s3.download_file(bucket, k, str(target))
        return destination
    source = to_local_path(uri)
    if not source.exists():
        raise StorageError(f"nothing to download: {uri} does not exist (looked in {source})")
    destination.mkdir(parents=True, exist_ok=True)
    if source.is_file():
        shutil.copy2(source, destination / source.name)
    elif source.resolve() != destination.resolve():
        shutil.copytree(source, destination, dirs_exist_ok=True)
    return destination


def _s3_keys(s3, bucket: str, key: str) -> builtins.list[str]:
    """The object `key` itself if it exists, else every key under the prefix `key/`."""
    if key:
        found = s3.list_objects_v2(Bucket=bucket, Prefix=key, MaxKeys=1).get("Contents", [])
        if found and found[0]["Key"] == key:
            return [key]
    prefix = f"{key}/" if key else ""
    keys = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        keys += [obj["Key"] for obj in page.get("Contents", [])]
    return sorted(keys)


def exists(uri: str | os.PathLike, backend: str | None = None, client=None) -> bool:
    """True when an object, or anything under the prefix, exists at `uri`."""
    if uses_real_s3(uri, backend):
        bucket, key = split_s3_uri(str(uri))
        return bool(_s3_keys(_client(client), bucket, key))
    return to_local_path(uri).exists()


def list_objects(uri: str | os.PathLike, backend: str | None = None, client=None) -> builtins.list[str]:
    """Every object at or under `uri`, as full URIs (or paths, for a local path), sorted."""
    if uses_real_s3(uri, backend):
        bucket, key = split_s3_uri(str(uri))
        return [f"s3://{bucket}/{k}" for k in _s3_keys(_client(client), bucket, key)]
    path = to_local_path(uri)
    if path.is_file():
        return [str(uri)]
    if not path.is_dir():
        return []
    rels = [f.relative_to(path).as_posix() for f in _files_under(path)]
    return [join(str(uri), rel) for rel in rels]


list = list_objects  # noqa: A001  (the name the other modules use: storage.list(uri))
