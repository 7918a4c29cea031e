"""The SageMaker API model's checks on a request (no AWS call): what botocore's model and the service's cross-field
rules refuse, field by field. Part of fmlab.service, the one place that says what SageMaker accepts.

botocore checks a request's shape (required fields, unknown keys, types) but not the service's constraints:
maxima, enumerations (instance types), patterns (job names, role ARNs). The service model that botocore ships
has them all, so the sandbox walks the request against it and names every field that SageMaker would reject,
plus a few cross-field rules the service enforces that the model cannot express (spot needs a max wait time).
Shape is not acceptance: the service's prose rules and the image against the script (fmlab.service: 28 days of
run time, FSDP2 on a PyTorch 2.3 image, ...) are refused too, each with its rule and source.

    from fmlab.service.api_model import validate_request, problems_in
    problems_in({"TrainingJobName": "my_job", ...})   # -> [Problem("TrainingJobName", "..."), ...]
    api_problems(request)                              # the API model's problems only
    validate_request(request)                          # raises RequestInvalid naming each field
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from typing import Any

from fmlab.service.rules import Finding

OPERATION = "CreateTrainingJob"


class Problem(Finding):
    """One field SageMaker would reject, and why: a failing Finding (check "api-model" unless named) whose field is
    the subject, written "field: message". The API model, the service rules (problems_in), JobSpec and the capacity
    checks all report in it, so every verdict in fmlab is a Finding."""

    def __init__(self, field: str, message: str, check: str = "api-model", source: str = ""):
        super().__init__(check, "fail", message, source, field)

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


class RequestInvalid(ValueError):
    """The request would be rejected by SageMaker; `.problems` lists every field at fault."""

    def __init__(self, problems: list[Problem], operation: str = OPERATION):
        self.problems = problems
        lines = "\n  ".join(str(p) for p in problems)
        super().__init__(f"{operation} request is invalid ({len(problems)} problem"
                         f"{'s' if len(problems) != 1 else ''}):\n  {lines}")

    @property
    def fields(self) -> list[str]:
        return [p.field for p in self.problems]


@functools.cache
def service_model():
    """The SageMaker API model shipped inside botocore (no network)."""
    import botocore.session

    return botocore.session.get_session().get_service_model("sagemaker")


@functools.cache
def _pattern(text: str) -> re.Pattern | None:
    try:
        return re.compile(text)
    except re.error:  # a Java-only construct: leave that one check to the service
        return None


def instance_types() -> list[str]:
    """Every training instance type the service model allows (ResourceConfig.InstanceType's enum)."""
    shape = service_model().operation_model(OPERATION).input_shape.members["ResourceConfig"]
    return list(shape.members["InstanceType"].enum)


def _close_matches(value: str, choices: list[str]) -> str:
    import difflib

    near = difflib.get_close_matches(value, choices, n=3, cutoff=0.6)
    return f"; did you mean {' or '.join(near)}?" if near else ""


def _check(shape, value: Any, path: str, out: list[Problem]) -> None:
    meta = shape.metadata
    kind = shape.type_name
    if kind == "structure":
        if not isinstance(value, dict):
            out.append(Problem(path, f"must be an object with fields {', '.join(shape.members)}"))
            return
        for name in shape.required_members:
            if value.get(name) is None:
                out.append(Problem(f"{path}.{name}".lstrip("."), "is required"))
        for name, item in value.items():
            if name not in shape.members:
                out.append(Problem(f"{path}.{name}".lstrip("."), f"is not a field of {shape.name}"
                                   + _close_matches(name, list(shape.members))))
            elif item is not None:
                _check(shape.members[name], item, f"{path}.{name}".lstrip("."), out)
        return
    if kind == "list":
        if not isinstance(value, list | tuple):
            out.append(Problem(path, "must be a list"))
            return
        _check_size(len(value), meta, path, "items", out)
        for i, item in enumerate(value):
            _check(shape.member, item, f"{path}[{i}]", out)
        return
    if kind == "map":
        if not isinstance(value, dict):
            out.append(Problem(path, "must be a map of strings"))
            return
        _check_size(len(value), meta, path, "entries", out)
        for key, item in value.items():
            _check(shape.key, key, f"{path} key {key!r}", out)
            _check(shape.value, item, f"{path}[{key!r}]", out)
        return
    if kind == "string":
        if not isinstance(value, str):
            out.append(Problem(path, f"must be a string, not {type(value).__name__} ({value!r})"))
            return
        _check_size(len(value), meta, path, "characters", out)
        enum = getattr(shape, "enum", None) or []
        if enum and value not in enum:
            out.append(Problem(path, f"{value!r} is not one of the {len(enum)} allowed values"
                               + _close_matches(value, list(enum))))
        pattern = meta.get("pattern")
        compiled = _pattern(pattern) if pattern else None
        if compiled is not None and value and not compiled.fullmatch(value):
            out.append(Problem(path, f"{value!r} does not match the pattern {pattern}"))
        return
    if kind in ("integer", "long"):
        if isinstance(value, bool) or not isinstance(value, int):
            out.append(Problem(path, f"must be an integer, not {type(value).__name__} ({value!r})"))
            return
        _check_range(value, meta, path, out)
        return
    if kind in ("float", "double"):
        if isinstance(value, bool) or not isinstance(value, int | float):
            out.append(Problem(path, f"must be a number, not {type(value).__name__}"))
            return
        _check_range(value, meta, path, out)
        return
    if kind == "boolean":
        if not isinstance(value, bool):
            out.append(Problem(path, f"must be true or false, not {value!r}"))
        return
    if kind == "timestamp" and not isinstance(value, dt.datetime | str | int | float):
        out.append(Problem(path, "must be a timestamp"))


def _check_size(size: int, meta: dict, path: str, unit: str, out: list[Problem]) -> None:
    if "min" in meta and size < meta["min"]:
        out.append(Problem(path, f"has {size} {unit}; at least {meta['min']} required"))
    if "max" in meta and size > meta["max"]:
        out.append(Problem(path, f"has {size} {unit}; at most {meta['max']} allowed"))


def _check_range(value: float, meta: dict, path: str, out: list[Problem]) -> None:
    low, high = meta.get("min"), meta.get("max")
    if low is not None and value < low:
        out.append(Problem(path, f"{value} is below the minimum {low}" + (f" (allowed: {low}..{high})" if high else "")))
    if high is not None and value > high:
        out.append(Problem(path, f"{value} is above the maximum {high} (allowed: {low or 0}..{high})"))


def _cross_field(request: dict, out: list[Problem]) -> None:
    """Rules the service enforces that the model cannot state."""
    stop = request.get("StoppingCondition") or {}
    if request.get("EnableManagedSpotTraining"):
        wait, run = stop.get("MaxWaitTimeInSeconds"), stop.get("MaxRuntimeInSeconds", 86400)
        if wait is None:
            out.append(Problem("StoppingCondition.MaxWaitTimeInSeconds",
                               "is required with EnableManagedSpotTraining (how long to wait for spot capacity)"))
        elif isinstance(wait, int) and isinstance(run, int) and wait < run:
            out.append(Problem("StoppingCondition.MaxWaitTimeInSeconds",
                               f"{wait} must be at least MaxRuntimeInSeconds ({run})"))
    elif stop.get("MaxWaitTimeInSeconds") is not None and not request.get("RetryStrategy"):
        # with a RetryStrategy it bounds all attempts together (the API reference's MaxWaitTimeInSeconds), and AWS
        # accepts it without spot: sagemaker-python-sdk's tests/integ/test_training_with_retry_strategy.py sends it
        out.append(Problem("StoppingCondition.MaxWaitTimeInSeconds",
                           "is only allowed with EnableManagedSpotTraining or a RetryStrategy"))
    names = [c.get("ChannelName") for c in request.get("InputDataConfig") or [] if isinstance(c, dict)]
    for name in sorted({n for n in names if names.count(n) > 1}):
        out.append(Problem("InputDataConfig", f"channel name {name!r} is used more than once"))
    resources = request.get("ResourceConfig") or {}
    preferences = [p for p in resources.get("InstancePreferences") or [] if isinstance(p, dict)]
    if preferences:  # the count on every preference, or for all of them in ResourceConfig: one place, not both
        counted = [p.get("InstanceCount") not in (None, 0) for p in preferences]
        job_count = resources.get("InstanceCount") not in (None, 0)
        if any(counted) and not all(counted):
            out.append(Problem("ResourceConfig.InstancePreferences",
                               f"InstanceCount is set on {sum(counted)} of {len(counted)} preferences: set it on "
                               "every preference, or on none and in ResourceConfig.InstanceCount"))
        elif all(counted) and job_count:
            out.append(Problem("ResourceConfig.InstanceCount",
                               "is set beside a count on every preference: keep one place (per preference when "
                               "each type needs its own count, else ResourceConfig.InstanceCount alone)"))
        elif not any(counted) and not job_count:
            out.append(Problem("ResourceConfig.InstancePreferences",
                               "each preference needs an InstanceCount when ResourceConfig has none"))
        return
    serverless = request.get("ServerlessJobConfig")
    if serverless:  # serverless: SageMaker chooses the compute (SDK v3's fine-tuning path)
        if isinstance(serverless, dict) and serverless.get("JobType") == "Evaluation" and not serverless.get(
                "EvaluationType"):  # the API reference: "Required when serverless job type is Evaluation."
            out.append(Problem("ServerlessJobConfig.EvaluationType", "is required when JobType is Evaluation"))
        return
    if not resources.get("InstanceGroups") and not resources.get("InstanceType"):
        out.append(Problem("ResourceConfig.InstanceType", "is required (or InstanceGroups, or InstancePreferences)"))
    if not resources.get("InstanceGroups") and resources.get("InstanceCount") in (None, 0):
        out.append(Problem("ResourceConfig.InstanceCount", "must be at least 1"))


def api_problems(request: dict, operation: str = OPERATION) -> list[Problem]:
    """The problems botocore's API model (and the cross-field rules above) finds in `request`."""
    shape = service_model().operation_model(operation).input_shape
    out: list[Problem] = []
    _check(shape, request, "", out)
    if operation == OPERATION and isinstance(request, dict):
        _cross_field(request, out)
    return out


def problems_in(request: dict, operation: str = OPERATION) -> list[Problem]:
    """Every problem SageMaker would report for `request` (PascalCase, as boto3 sends it), or that would stop
    the job as it starts: the API model's, then the service rules' and the image's (CreateTrainingJob only)."""
    out = api_problems(request, operation)
    if operation == OPERATION and isinstance(request, dict):
        from fmlab.service.checks import refusals

        named = {p.field for p in out}  # a field the API model already names is not named twice
        out += [Problem(f"[{f.check}]", f"{f.message} (source: {f.source})", f.check, f.source)
                for f in refusals(request) if f.field not in named or not f.field]
    return out


def validate_request(request: dict, operation: str = OPERATION) -> dict:
    """Return `request` unchanged when SageMaker would accept it; raise RequestInvalid otherwise."""
    problems = problems_in(request, operation)
    if problems:
        raise RequestInvalid(problems, operation)
    return request
