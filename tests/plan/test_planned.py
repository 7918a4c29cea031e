"""One run, planned once (fmlab.plan.planned): `fmlab plan --json`, the SageMaker jobs of modules 7 and 11, the HyperPod
Slurm script, the EKS manifest and the torchtitan TOML all carry the planned run, and read back to it.

    .venv/bin/python -m pytest tests/plan/test_planned.py -q      # a few seconds
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from fmlab.course_jobs import FROM_PLAN, course_config, course_request
from fmlab.hyperpod import eks, planned, slurm
from fmlab.plan import layout
from fmlab.plan.parallelism import ParallelConfig
from fmlab.plan.planned import AGREED, keep_needed, planned_run
from fmlab.train.config import parse_config
from fmlab.train.planned import differences, fields, flags, train_config

RUNS = {"gpt30b": ("ml.p4d.24xlarge", 16), "gpt30b-p5": ("ml.p5.48xlarge", 16)}


@pytest.fixture(scope="module", params=sorted(RUNS))
def job_and_run(request):
    instance, count = RUNS[request.param]
    return request.param, planned_run("gpt-30b", 300e9, instance, count)


def test_the_command_line_and_the_job_carry_one_run(job_and_run):
    """`fmlab plan --json` (no layout flag) and `fmlab job request NAME` agree on the layout, micro-batch, global
    batch, context and checkpoint interval; the request's hyperparameters parse back to the same run."""
    name, run = job_and_run
    out = subprocess.run([sys.executable, "-m", "fmlab", "plan", "--model", "gpt-30b", "--tokens", "300e9",
                          "--instance", run.instance, "--count", str(run.instances), "--json"],
                         capture_output=True, text=True, check=True)
    printed = json.loads(out.stdout)
    assert printed["layout_chosen_by_planner"] is True
    assert ParallelConfig(**printed["parallel"]) == run.parallel
    for key in ("micro_batch", "global_batch", "seq_len", "checkpoint_every", "keep_checkpoints", "reserved_days"):
        assert printed[key] == getattr(run, key), key
    assert printed["days"] == pytest.approx(run.days) and printed["step_seconds"] == pytest.approx(run.step_seconds)
    hps = course_request(name)["HyperParameters"]
    assert differences(run, parse_config([], env={"SM_HPS": json.dumps(hps)})) == []
    assert differences(run, course_config(name)) == []
    assert int(hps["max_steps"]) == run.steps  # the whole run; the chain's jobs resume to it


def test_the_figures_of_the_two_runs():
    """Module 7's run: hybrid 32, full recomputation, 8 x 1 pass, 36.4 days, a save every 145 steps (0.89 h);
    module 11's on p5: hybrid 32, no recomputation, 2 x 4 passes, 10.2 days, every 519 steps, 13 days reserved."""
    p4d, p5 = (planned_run("gpt-30b", 300e9, *RUNS[n]) for n in ("gpt30b", "gpt30b-p5"))
    assert (p4d.parallel.label, p4d.parallel.recompute, p4d.micro_batch, p4d.grad_accum) == ("hybrid 32", "full", 8, 1)
    assert (p5.parallel.label, p5.parallel.recompute, p5.micro_batch, p5.grad_accum) == ("hybrid 32", "none", 2, 4)
    assert round(p4d.days, 1) == 36.4 and round(p5.days, 1) == 10.2 and p5.reserved_days == 13
    assert p4d.global_batch == p5.global_batch == 1024  # GPT-3's 2M tokens for a 30B model, in 2,048-token sequences
    assert (p4d.checkpoint_every, p5.checkpoint_every) == (145, 519)
    assert p4d.checkpoint_hours == pytest.approx(0.89, abs=0.01) and p5.checkpoint_hours == pytest.approx(0.89, abs=0.01)
    assert p5.keep_checkpoints == max(3, keep_needed(p5.checkpoint_hours, 1.0)) == 3


def test_one_search_space():
    """choose(candidates(...)) searches the micro-batches the planner does, so it gives the planned run's layout."""
    for instance, count in RUNS.values():
        row = layout.choose(layout.candidates("gpt-30b", 300e9, instance, count))
        run = planned_run("gpt-30b", 300e9, instance, count)
        assert (row["parallel"], row["micro-batch"]) == (run.parallel, run.micro_batch)


def test_slurm_eks_and_toml_render_the_run_and_read_back(job_and_run, tmp_path):
    _, run = job_and_run
    script = slurm.batch_script(planned.slurm_spec(run, tmp_path, data="/fsx/data"), port=29500)
    assert differences(run, planned.config_of_script(script)) == []
    assert slurm.script_problems(script, run.instance) == []
    manifest = planned.eks_manifest(run, "gpt30b", eks.eks_image(), data="/fsx/data",
                                    checkpoint_dir="/fsx/checkpoints/gpt30b", elastic=(8, 16))
    assert differences(run, planned.config_of_manifest(manifest)) == [] and eks.problems(manifest) == []
    assert planned.toml_fields(planned.torchtitan(run), run.devices) == run.fields()
    # within a quarter of an hour and four hours of the artefact's own step
    assert 0.25 <= run.checkpoint_hours <= 4


def test_an_artefact_of_another_run_is_refused_by_its_own_flags(tmp_path):
    """Notebook 11's script before the planned run: hybrid 16 and the script's default micro-batch of 8, which
    re-planned asks for about 210 GB per H100; and a manifest whose interval in its own 1 s steps is minutes."""
    old = ParallelConfig(sharding="hybrid", hybrid_shard_degree=16)
    spec = slurm.SlurmTrainSpec(work_dir=tmp_path, nodes=16, processes_per_node=8, gpus_per_node=8,
                                train_args=["--model", "gpt-30b", *old.flags(), "--checkpoint-every", "586"])
    (problem,) = slurm.script_problems(slurm.batch_script(spec, port=1), "ml.p5.48xlarge")
    assert "micro-batch 8 needs 210.0 GB per GPU" in problem
    twice = slurm.SlurmTrainSpec(work_dir=tmp_path, train_args=["--model", "tiny", "--micro-batch", "2",
                                                                  "--micro_batch", "4"])
    assert "--micro-batch is given 2 times" in slurm.script_problems(slurm.batch_script(twice, port=1),
                                                                     "ml.p5.48xlarge")[0]
    with pytest.raises(ValueError, match="set work_dir instead"):
        slurm.SlurmTrainSpec(work_dir=tmp_path, train_args=["--checkpoint-dir", "/fsx/c"])


def test_the_flags_round_trip():
    run = planned_run("gpt-30b", 300e9, "ml.p5.48xlarge", 16)
    config = train_config(run, data="/fsx/data")
    again = parse_config(flags(config), env={})
    assert fields(again, run.devices) == run.fields() and set(run.fields()) == set(AGREED)
    assert again.async_checkpoint and again.keep_checkpoints == run.keep_checkpoints and again.max_steps == run.steps


def test_every_30b_job_is_the_planned_run_or_says_what_it_changes():
    from fmlab.course_jobs import COURSE_CONFIGS

    thirty = {name for name in [*COURSE_CONFIGS, *RUNS] if (course_config(name) or None) and
              course_config(name).model == "gpt-30b"}
    assert thirty == set(FROM_PLAN)
    for name in thirty - set(RUNS):
        assert "not the planned run" in FROM_PLAN[name]


def test_a_run_no_single_reservation_holds_says_so():
    """Llama 2 70B on Chinchilla's 1.4T tokens on 8 p5: about 180 days, over one plan's 182 days with its margin."""
    run = planned_run("llama2-70b", 1.4e12, "ml.p5.48xlarge", 8,
                      parallel=ParallelConfig(sharding="full"), micro_batch=1)
    assert run.reserved_days is None and run.to_dict()["reserved_days"] is None and run.days * 1.2 > 182
