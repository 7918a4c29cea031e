"""fmlab preflight against requests the course did not write: tests/service/corpus/ holds 67 CreateTrainingJob
requests from public sources (the SageMaker Python SDK's v2 and v3 tests that run against AWS, AWS's example
notebooks and developer guide, issue threads that quote AWS's ValidationException, the API reference's prose), each
with its source, what AWS did and the evidence (corpus/README.md). Preflight must agree with AWS on every request
whose verdict depends on the request alone: no valid request refused, no refused request passed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fmlab.jobs.preflight import preflight

CORPUS = sorted((Path(__file__).parent / "corpus").glob("*.json"))
CASES = [json.loads(p.read_text()) | {"file": p.name} for p in CORPUS]
REQUEST_ONLY = [c for c in CASES if not c["depends_on_account"]]


def test_the_corpus_is_large_and_mixed_and_every_case_names_its_source():
    assert len(CASES) >= 55 and len(REQUEST_ONLY) >= 55
    verdicts = [c["aws_verdict"] for c in REQUEST_ONLY]
    assert verdicts.count("accepted") >= 30 and verdicts.count("refused") >= 18
    for case in CASES:
        source = case["source"]
        assert (source.get("url") or source.get("repository")) and source.get("read") and case["evidence"], case["file"]


@pytest.mark.parametrize("case", REQUEST_ONLY, ids=lambda c: c["file"].removesuffix(".json"))
def test_preflight_agrees_with_aws(case, no_aws_credentials):
    report = preflight(case["request"], quotas=False)
    failing = [str(f) for f in report.failures]
    if case["aws_verdict"] == "accepted":
        assert report.ok, failing
    else:
        assert not report.ok, f"AWS refused it ({case['aws_message'][:200]}); preflight passed it"
