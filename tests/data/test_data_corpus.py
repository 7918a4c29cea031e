"""Corpus side: the shipped corpus, input files and documents, work units, the cached course dataset, the CLI."""

import json

import pytest

from fmlab.cli import main
from fmlab.data import (
    CORPUS_DIR,
    DataError,
    PackedDataset,
    corpus_slice,
    course_dataset,
    list_input_files,
    plan_work_units,
    read_documents,
)


def test_shipped_corpus_is_a_few_megabytes_with_its_licence_notes():
    files = corpus_slice()
    assert {f.parent.name for f in files} == {"shakespeare", "python-docs"}
    assert 4e6 < sum(f.stat().st_size for f in files) < 7e6
    readme = (CORPUS_DIR.parent / "README.md").read_text()
    assert "Project Gutenberg" in readme and "Python Software Foundation" in readme


def test_slice_keeps_both_sources_and_is_deterministic():
    small = corpus_slice(300_000)
    assert small == corpus_slice(300_000)
    assert {f.parent.name for f in small} == {"shakespeare", "python-docs"}
    assert sum(f.stat().st_size for f in small) < 450_000
    with pytest.raises(DataError, match="positive"):
        corpus_slice(0)


def test_jsonl_documents_and_input_errors(tmp_path):
    (tmp_path / "a.jsonl").write_text(json.dumps({"text": "first"}) + "\n\n" + json.dumps({"text": "second"}) + "\n")
    (tmp_path / "b.txt").write_text("whole file")
    (tmp_path / "notes.md").write_text("ignored: not a document suffix")
    files = list_input_files(tmp_path)
    assert [f.name for f in files] == ["a.jsonl", "b.txt"]
    assert [d for f in files for d in read_documents(f)] == ["first", "second", "whole file"]
    (tmp_path / "bad.jsonl").write_text('{"title": "no text"}\n')
    with pytest.raises(DataError, match="'text' field"):
        list(read_documents(tmp_path / "bad.jsonl"))
    (tmp_path / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    with pytest.raises(DataError, match="not UTF-8"):
        list(read_documents(tmp_path / "latin1.txt"))
    with pytest.raises(DataError, match="not a .txt or .jsonl"):
        list_input_files(tmp_path / "notes.md")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="no .txt or .jsonl"):
        list_input_files(tmp_path / "empty")


def test_work_units_group_files_in_order():
    files = corpus_slice(300_000)
    units = plan_work_units(files, 16 * 1024)
    assert [f for u in units for f in u.files] == [str(f) for f in files]
    assert all(u.bytes >= 16 * 1024 for u in units[:-1])
    assert [u.shard_name for u in units[:2]] == ["shard-00000.bin", "shard-00001.bin"]


def test_course_dataset_is_prepared_once_and_reused(tmp_path):
    first = course_dataset(seq_len=32, vocab_size=300, max_bytes=200_000, cache_dir=tmp_path)
    stamp = (first / "manifest.json").stat().st_mtime_ns
    again = course_dataset(seq_len=32, vocab_size=300, max_bytes=200_000, cache_dir=tmp_path)
    assert again == first and (again / "manifest.json").stat().st_mtime_ns == stamp
    assert first.name.startswith("course-L32-V300-")
    ds = PackedDataset(first)
    assert ds.seq_len == 32 and ds.vocab_size == 300 and len(ds) > 0
    assert ds[-1].tolist() == ds.tokens(len(ds) - 1).tolist()
    with pytest.raises(IndexError, match="out of range"):
        ds.tokens(len(ds))


def test_cli_prepare_then_inspect(tmp_path, capsys):
    out = tmp_path / "ds"
    code = main(["data", "prepare", "--input", str(CORPUS_DIR / "python-docs"), "--output", str(out),
                 "--seq-len", "64", "--vocab-size", "300", "--workers", "2", "--unit-mb", "0.1"])
    assert code == 0 and "sequences x 64" in capsys.readouterr().out
    assert main(["data", "inspect", str(out), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["vocab_size"] == 300 and info["seq_len"] == 64 and info["shards"] >= 2
    assert main(["data", "prepare", "--input", str(tmp_path / "none"), "--output", str(out)]) == 2
    assert "does not exist" in capsys.readouterr().err
