"""Run fmlab's preflight over the corpus of real CreateTrainingJob requests and compare with what AWS did.

For every JSON file in this folder (see README.md for the format) it
  1. checks the file's own shape (source, aws_verdict, evidence, depends_on_account, request),
  2. validates the request against botocore's model of CreateTrainingJob (botocore.validate: required members, types,
     minimums; botocore does not check maximums, enums or patterns) and prints every failure; an "accepted" request
     that fails is a broken corpus file,
  3. runs fmlab's current preflight on the request, with no AWS credentials in reach, and prints its verdict beside
     AWS's, with the failing checks' messages when preflight refuses.
It ends with a summary: agree / disagree over the files whose verdict depends on the request alone
(depends_on_account false), and the account-dependent files listed apart.

    .venv/bin/python tests/service/corpus/check_corpus.py            # from the repository root
    .venv/bin/python tests/service/corpus/check_corpus.py --json     # one JSON object (for tools)
    .venv/bin/python tests/service/corpus/check_corpus.py FILE...    # only these files
    .venv/bin/python tests/service/corpus/check_corpus.py --src /tmp/old/src   # another fmlab tree (e.g. an older
                                                                               # commit: git archive COMMIT src | tar -x)

Exit status: 0 when every file is well formed, every accepted request passes botocore's model and preflight agrees
with AWS on every request-only file; 1 otherwise. It calls no AWS service and starts no job.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
VERDICTS = ("accepted", "refused")
SOURCE_KEYS = ("repository", "path", "commit", "url", "read", "what")
TOP_KEYS = ("source", "aws_verdict", "aws_message", "evidence", "depends_on_account", "request")


def corpus_files(names: list[str] | None = None) -> list[Path]:
    if names:  # a path, or a bare file name in this folder
        return [Path(n).resolve() if Path(n).exists() else HERE / Path(n).name for n in names]
    return sorted(HERE.glob("*.json"))


def shape_problems(path: Path, entry: dict) -> list[str]:
    """What is wrong with a corpus file's own format (not with its request)."""
    out = [f"missing key {k!r}" for k in TOP_KEYS if k not in entry]
    source = entry.get("source") or {}
    out += [f"source lacks {k!r}" for k in SOURCE_KEYS if k not in source]
    if not (source.get("url") or (source.get("repository") and source.get("path"))):
        out.append("source names neither a URL nor a repository path")
    verdict = entry.get("aws_verdict")
    if verdict not in VERDICTS:
        out.append(f"aws_verdict {verdict!r} is not one of {VERDICTS}")
    elif not path.name.startswith(verdict + "-"):
        out.append(f"file name does not start with '{verdict}-'")
    if verdict == "refused" and not (entry.get("aws_message") or "").strip():
        out.append("a refused request needs the refusal as its source quotes it (aws_message)")
    if not isinstance(entry.get("depends_on_account"), bool):
        out.append("depends_on_account must be true or false")
    if not isinstance(entry.get("request"), dict):
        out.append("request must be a JSON object")
    return out


def botocore_problems(request: dict) -> list[str]:
    """botocore's own client-side validation of the request against CreateTrainingJob's input shape."""
    import botocore.session
    from botocore.exceptions import ParamValidationError
    from botocore.validate import validate_parameters

    shape = botocore.session.get_session().get_service_model("sagemaker").operation_model("CreateTrainingJob").input_shape
    try:
        validate_parameters(request, shape)
    except ParamValidationError as e:
        report = str(e.kwargs.get("report", e))
        return [line.strip() for line in report.splitlines() if line.strip() and not line.startswith("Invalid type")] \
            or [report]
    return []


def _no_credentials() -> None:
    """Keep every AWS credential out of reach, so preflight reports account checks as not checked, never calls AWS."""
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE",
                "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_WEB_IDENTITY_TOKEN_FILE",
                "AWS_ROLE_ARN"):
        os.environ.pop(key, None)
    os.environ["AWS_SHARED_CREDENTIALS_FILE"] = os.devnull
    os.environ["AWS_CONFIG_FILE"] = os.devnull
    os.environ["AWS_EC2_METADATA_DISABLED"] = "true"
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-west-2")


def preflight_runner(src: Path | None = None):
    """fmlab's preflight entry point as it stands: (name, function request -> (verdict, [failure messages])).

    The rule engine is moving (issue 36 moves it to fmlab.service); this takes the first that exists of
    fmlab.service.preflight, fmlab.jobs.preflight.preflight, and fmlab.service.refusals (+ the API-model walker)."""
    repo_src = Path(src).resolve() if src else HERE.parents[2] / "src"
    if repo_src.is_dir():
        sys.path.insert(0, str(repo_src))

    def from_report(fn):
        kwargs = {}
        params = inspect.signature(fn).parameters
        if "quotas" in params:
            kwargs["quotas"] = False

        def run(request):
            report = fn(request, **kwargs)
            failures = [f for f in getattr(report, "findings", []) if getattr(f, "level", "") == "fail"]
            ok = getattr(report, "ok", not failures)
            return ("accepted" if ok else "refused"), [f"{f.check}: {f.message}" for f in failures]
        return run

    try:
        import fmlab.service as service

        fn = getattr(service, "preflight", None)
        if callable(fn) and not inspect.ismodule(fn):
            return "fmlab.service.preflight", from_report(fn)
    except ImportError:
        service = None
    try:
        from fmlab.jobs.preflight import preflight

        return "fmlab.jobs.preflight.preflight", from_report(preflight)
    except ImportError:
        pass
    if service is not None and hasattr(service, "refusals"):
        api = None
        for where in ("fmlab.service.api_model", "fmlab.sandbox.validate"):
            try:
                api = __import__(where, fromlist=["api_problems"]).api_problems
                break
            except (ImportError, AttributeError):
                continue

        def run(request):
            msgs = [f"api-model: {p}" for p in (api(request) if api else [])]
            msgs += [f"{f.check}: {f.message}" for f in service.refusals(request)]
            return ("refused" if msgs else "accepted"), msgs
        return "fmlab.service.refusals", run
    raise SystemExit("no preflight entry point found in fmlab (looked for fmlab.service.preflight, "
                     "fmlab.jobs.preflight.preflight, fmlab.service.refusals)")


def check(paths: list[Path], src: Path | None = None) -> dict:
    _no_credentials()
    entry_point, run = preflight_runner(src)
    rows = []
    for path in paths:
        entry = json.loads(path.read_text())
        row = {"file": path.name, "aws": entry.get("aws_verdict"), "account": bool(entry.get("depends_on_account")),
               "shape": shape_problems(path, entry), "botocore": [], "preflight": None, "messages": []}
        request = entry.get("request")
        if isinstance(request, dict):
            row["botocore"] = botocore_problems(request)
            try:
                row["preflight"], row["messages"] = run(request)
            except Exception as e:  # a crash is a finding too: report it, do not stop the run
                row["preflight"], row["messages"] = "error", [f"{type(e).__name__}: {e}"]
        row["agree"] = row["preflight"] == row["aws"]
        rows.append(row)
    own = [r for r in rows if not r["account"]]
    summary = {
        "entry_point": entry_point,
        "fmlab_source": str(Path(sys.modules["fmlab"].__file__).resolve().parent) if "fmlab" in sys.modules else "",
        "files": len(rows),
        "accepted": sum(r["aws"] == "accepted" for r in rows),
        "refused": sum(r["aws"] == "refused" for r in rows),
        "request_only": len(own),
        "agree": sum(r["agree"] for r in own),
        "disagree": sum(not r["agree"] for r in own),
        "valid_refused_as_invalid": [r["file"] for r in own if r["aws"] == "accepted" and not r["agree"]],
        "invalid_passed": [r["file"] for r in own if r["aws"] == "refused" and not r["agree"]],
        "account_dependent": [{"file": r["file"], "aws": r["aws"], "preflight": r["preflight"]} for r in rows
                              if r["account"]],
        "malformed": [r["file"] for r in rows if r["shape"]],
        "accepted_failing_botocore": [r["file"] for r in rows if r["aws"] == "accepted" and r["botocore"]],
    }
    return {"summary": summary, "rows": rows}


def render(result: dict) -> str:
    s = result["summary"]
    lines = [f"corpus: {s['files']} requests ({s['accepted']} accepted, {s['refused']} refused by AWS); preflight: "
             f"{s['entry_point']} from {s['fmlab_source']}", ""]
    for r in result["rows"]:
        mark = "agree   " if r["agree"] else "DISAGREE"
        if r["account"]:
            mark = "account "
        lines.append(f"{mark} aws={r['aws']:<8} preflight={r['preflight']:<8} {r['file']}")
        for p in r["shape"]:
            lines.append(f"         corpus file: {p}")
        for p in r["botocore"]:
            lines.append(f"         botocore: {p}")
        if r["preflight"] != "accepted":
            for m in r["messages"]:
                lines.append(f"         preflight: {m}")
    lines += ["", f"request-only files: {s['request_only']}; agree {s['agree']}, disagree {s['disagree']}",
              f"  valid requests preflight refuses: {len(s['valid_refused_as_invalid'])}",
              *[f"    {f}" for f in s["valid_refused_as_invalid"]],
              f"  refused requests preflight passes: {len(s['invalid_passed'])}",
              *[f"    {f}" for f in s["invalid_passed"]],
              f"account-dependent files (not counted): {len(s['account_dependent'])}",
              *[f"    {a['file']}: aws={a['aws']} preflight={a['preflight']}" for a in s["account_dependent"]]]
    if s["malformed"]:
        lines.append(f"malformed corpus files: {', '.join(s['malformed'])}")
    if s["accepted_failing_botocore"]:
        lines.append(f"accepted requests failing botocore's model: {', '.join(s['accepted_failing_botocore'])}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("files", nargs="*", help="corpus files (default: every *.json beside this script)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--src", default=None, help="the src/ folder of the fmlab to check (default: this repository's)")
    args = p.parse_args(argv)
    result = check(corpus_files(args.files), args.src)
    print(json.dumps(result, indent=1) if args.json else render(result))
    s = result["summary"]
    return 0 if not (s["disagree"] or s["malformed"] or s["accepted_failing_botocore"]) else 1


if __name__ == "__main__":
    sys.exit(main())
