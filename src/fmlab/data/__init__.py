"""fmlab.data: corpus -> tokenizer -> packed token shards with a manifest -> a resumable training dataset.

    from fmlab.data import course_dataset, PackedDataset, ResumableSampler
    ds = PackedDataset(course_dataset(seq_len=128, vocab_size=512))   # prepared once, then reused
    sampler = ResumableSampler(len(ds), rank=0, world_size=1, seed=0)

    from fmlab.data import prepare, train_tokenizer
    manifest = prepare("data/corpus", "s3://my-bucket/data/v1", seq_len=128, vocab_size=512, workers=4)

Modules, one step each: corpus (files, documents, work units), tokenizer (byte-level BPE, or an existing
Hugging Face tokenizer folder), packing (documents -> fixed-length sequences), shards (the binary shard
file), manifest (manifest.json), prepare (share-nothing parallel preparation), dataset (memory-mapped
reading, verified), sampler (data-parallel, resumable). Command line: `fmlab data prepare|inspect`.
"""

from fmlab.data.corpus import CORPUS_DIR, corpus_slice, list_input_files, plan_work_units, read_documents
from fmlab.data.dataset import PackedDataset, describe_dataset, has_validation
from fmlab.data.errors import DataError, ManifestError, ShardError
from fmlab.data.manifest import load_manifest
from fmlab.data.packing import count_packed, pack_documents
from fmlab.data.prepare import course_dataset, prepare
from fmlab.data.sampler import ResumableSampler
from fmlab.data.shards import sha256_file, token_dtype
from fmlab.data.tokenizer import load_tokenizer, tokenizer_info, train_tokenizer

__all__ = [
    "CORPUS_DIR", "DataError", "ManifestError", "PackedDataset", "ResumableSampler", "ShardError", "corpus_slice",
    "count_packed", "course_dataset", "describe_dataset", "has_validation", "list_input_files", "load_manifest", "load_tokenizer",
    "pack_documents", "plan_work_units", "prepare", "read_documents", "sha256_file", "token_dtype",
    "tokenizer_info", "train_tokenizer",
]
