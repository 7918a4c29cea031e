"""Every course job's hyperparameters parse back into the TrainConfig that made them (issue 38): the request a
notebook shows is the run the training script builds, through one object, with no field typed twice.

Run: .venv/bin/pytest tests/jobs/test_course_job_configs.py -q   (about 30 s: moto captures each request once)
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from fmlab.course_jobs import COURSE_JOBS, course_config
from fmlab.train.config import TrainConfig, TrainConfigError, parse_config


def test_the_request_parses_back_into_the_jobs_config(course_requests):
    assert set(course_requests) == set(COURSE_JOBS)
    for name, request in course_requests.items():
        _parses_back(name, course_config(name), request["HyperParameters"])


def _parses_back(name: str, config: TrainConfig | None, hps: dict) -> None:
    if config is None:  # the trn1 job runs NxD's own script, not fmlab.train
        assert name == "trn1" and "sharding" not in hps
        return
    parsed = parse_config([], {"SM_HPS": json.dumps(hps)})
    assert parsed.ignored == [], name  # the script understands every hyperparameter the job sends
    if "mp_parameters" in hps:  # SMP jobs: SageMaker adds SMP's settings, and the script found they agree
        parsed = dataclasses.replace(parsed, mp_parameters="")
    assert parsed == config, name
    layout = {k: hps[k] for k in ("sharding", "hybrid_shard_degree", "tp", "activation_checkpointing")}
    assert layout == {k: str(getattr(config.parallel, k)) for k in layout}  # the request states its whole layout


def test_an_smp_job_whose_flags_and_mp_parameters_disagree_is_refused(course_requests):
    hps = course_requests["smp"]["HyperParameters"]
    assert json.loads(hps["mp_parameters"])["hybrid_shard_degree"] == int(hps["hybrid_shard_degree"]) == 8
    with pytest.raises(TrainConfigError, match="hybrid_shard_degree is 16 in the flags, 8 by --mp_parameters"):
        parse_config([], {"SM_HPS": json.dumps({**hps, "hybrid_shard_degree": "16"})})
    # flags left at their defaults take SMP's settings, as a script given only --mp_parameters always did
    only_smp = parse_config([], {"SM_HPS": json.dumps({"model": "gpt-30b", "mp_parameters": hps["mp_parameters"]})})
    assert (only_smp.parallel.sharding, only_smp.parallel.hybrid_shard_degree) == ("hybrid", 8)
    assert only_smp.parallel.activation_offloading and only_smp.parallel.activation_checkpointing == "full"


def test_every_config_is_a_train_config():
    assert all(isinstance(course_config(n), TrainConfig) for n in COURSE_JOBS if n != "trn1")
