"""Bad input on the jobs CLI (and preflight, data): exit status 2 and ONE line that says what to change, never a
traceback. Runs without AWS credentials, as a new learner would (issue 25: `fmlab job describe nosuchjob` used to
end in botocore's NoCredentialsError traceback, `fmlab data inspect s3://b/x` in a StorageError one)."""

from __future__ import annotations

import io

import pytest

from fmlab.cli import main


@pytest.fixture
def bare(monkeypatch, no_aws_credentials):
    """No AWS credentials anywhere and no region, an empty sandbox and bucket, and a few files to feed in."""
    tmp_path = no_aws_credentials
    for var in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(var, raising=False)
    (tmp_path / "broken.json").write_text('{"TrainingJobName": "x", ')
    (tmp_path / "list.json").write_text('[1, 2]')
    (tmp_path / "empty.json").write_text("")
    (tmp_path / "ok.json").write_text('{"TrainingJobName": "fmlab-x"}')
    return tmp_path


BAD = [
    (["job", "describe", "nosuchjob"], "no AWS credentials"),
    (["job", "describe", "nosuchjob", "--json"], "fmlab job list"),
    (["job", "logs", "nosuchjob"], "no job named 'nosuchjob'"),
    (["job", "logs", "nosuchjob", "--follow"], "local sandbox"),
    (["job", "list", "--backend", "sagemaker"], "needs AWS credentials"),
    (["job", "cleanup", "--backend", "sagemaker", "--dry-run"], "--backend local"),
    (["job", "run", "--name", "x", "--backend", "sagemaker"], "needs AWS credentials"),
    (["job", "request", "nosuchjob"], "fmlab job request --list"),
    (["job", "request"], "--list"),
    (["job", "run", "--name", "bad name!"], "letters, digits and hyphens"),
    (["job", "run", "--name", "x", "--entry-point", "{tmp}/missing.py"], "does not exist"),
    (["job", "run", "--name", "x", "--input", "train={tmp}/no-such-folder"], "neither an s3:// URI"),
    (["job", "run", "--name", "x", "--instance-count", "0"], ">= 1"),
    (["job", "run", "--name", "x", "--smp", "{not json"], "error:"),
    (["job", "run", "--name", "x", "--hp", "novalue"], "KEY=VALUE"),
    (["job", "run", "--name", "x", "--distribution", "horovod"], "invalid choice"),
    (["job", "run", "--name", "x", "--max-run-seconds", "2592000"], "28 days"),
    (["job", "frobnicate"], "invalid choice"),
    (["plan", "--model", "gpt-30b", "--tokens", "inf"], "--tokens: inf is not a finite number"),  # issue 64
    (["preflight", "{tmp}/missing.json"], "no such file"),
    (["preflight", "{tmp}/broken.json"], "not JSON"),
    (["preflight", "{tmp}/list.json"], "not an object"),
    (["preflight", "{tmp}/empty.json"], "not JSON"),
    (["preflight", "-"], "not JSON"),
    (["preflight", "{tmp}/ok.json", "--plan-days", "-3"], "positive"),
    (["preflight", "{tmp}/ok.json", "--plan-days", "many"], "invalid float"),
    (["preflight"], "required"),
    (["data", "inspect", "s3://b/x"], "not a valid S3 bucket name"),
    (["data", "inspect", "{tmp}/no-dataset"], "error:"),
    (["data", "prepare", "--input", "{tmp}/no-corpus", "--output", "{tmp}/out"], "error:"),
    (["course", "--write-only"], "needs --path one-day or --path two-day"),  # issue 65
    (["course", "--path", "one-day", "--only", "03"], "drop --only and --no-labs"),
    (["course", "--path", "half-day"], "invalid choice"),
]


@pytest.mark.parametrize("argv, says", BAD, ids=[" ".join(a)[:50] for a, _ in BAD])
def test_bad_input_gets_one_line_and_exit_2(bare, capsys, monkeypatch, argv, says):
    monkeypatch.setattr("sys.stdin", io.StringIO("this is not a request"))
    argv = [a.replace("{tmp}", str(bare)) for a in argv]
    try:
        code = main(argv)
    except SystemExit as e:  # argparse's errors exit here
        code = e.code
    out = capsys.readouterr()
    lines = [ln for ln in out.err.splitlines() if ln.strip()]
    assert code == 2, (argv, out.out, out.err)
    assert len(lines) == 1 and lines[0].startswith("error:"), out.err
    assert says in lines[0], lines[0]
    assert "Traceback" not in out.err + out.out


def test_there_are_at_least_twenty_bad_inputs():
    assert len(BAD) >= 20
