"""The data pipeline's errors: each message says what is wrong and what to do about it.

    try:
        PackedDataset("runs/data/my-dataset")
    except ShardError as e:      # a shard whose checksum, size or dtype does not match the manifest
        print(e)
"""

from __future__ import annotations


class DataError(ValueError):
    """Bad input or a dataset that cannot be used as it is."""


class ManifestError(DataError):
    """A missing or inconsistent manifest.json."""


class ShardError(DataError):
    """A shard that does not match its manifest entry: corrupt, truncated, or of another dtype."""
