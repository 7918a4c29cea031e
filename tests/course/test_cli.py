"""The `fmlab` command: plan in text and JSON, exit codes, clear errors."""

import json
import subprocess
import sys

import pytest

from fmlab.cli import main


def test_plan_json(capsys):
    code = main(["plan", "--model", "gpt-30b", "--tokens", "300e9", "--instance", "ml.p4d.24xlarge", "--count", "16",
                 "--sharding", "full", "--activation-checkpointing", "full", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["fits"] is True
    assert out["params"] == 29_974_432_768
    assert out["memory_gb_per_device"] == pytest.approx(sum(out["memory_breakdown_gb"].values()))


def test_plan_that_does_not_fit_exits_3_and_suggests(capsys):
    code = main(["plan", "--model", "gpt-30b", "--tokens", "300e9", "--instance", "ml.p4d.24xlarge", "--count", "16",
                 "--sharding", "none"])
    out = capsys.readouterr().out
    assert code == 3 and "NO. To make it fit" in out and "--sharding full" in out


def test_plan_without_layout_flags_gives_notebook_07s_answer(capsys):
    from fmlab.course.params import module7_plan

    code = main(["plan", "--model", "gpt-30b", "--tokens", "300e9", "--instance", "ml.p4d.24xlarge", "--count", "16",
                 "--json"])
    out = json.loads(capsys.readouterr().out)
    nb07 = module7_plan()  # notebook 07's parameters, its chosen layout and predicted step
    assert code == 0 and out["layout_chosen_by_planner"] is True and out["fits"] is True
    assert out["days"] == pytest.approx(nb07.days, rel=1e-9) and out["cost_usd"] == pytest.approx(nb07.cost_usd)
    assert out["parallel"]["hybrid_shard_degree"] == nb07.parallel.hybrid_shard_degree
    assert out["micro_batch"] == nb07.micro_batch


def test_impossible_layout_exits_2_with_message(capsys):
    code = main(["plan", "--model", "gpt-30b", "--instance", "ml.p4d.24xlarge", "--count", "16", "--tp", "3"])
    assert code == 2 and "does not divide" in capsys.readouterr().err


@pytest.mark.parametrize("flag, value, says", [
    ("--tokens", "-5", "training tokens must be above 0"),
    ("--tokens", "lots", "'lots' is not a number"),
    ("--count", "0", "the instance count must be at least 1"),
    ("--mfu", "1.5", "the utilisation must be above 0 and at most 1"),
    ("--micro-batch", "-1", "the micro-batch must be at least 1"),
    ("--seq-len", "0", "the sequence length must be at least 1"),
])
def test_out_of_range_numbers_are_refused_before_planning(capsys, flag, value, says):
    with pytest.raises(SystemExit) as stop:
        main(["plan", "--model", "gpt-30b", "--instance", "ml.p4d.24xlarge", "--count", "16", flag, value])
    assert stop.value.code == 2 and says in capsys.readouterr().err


def test_hybrid_sharding_has_one_spelling_and_the_old_one_is_read_with_a_note(capsys):
    base = ["plan", "--model", "gpt-30b", "--tokens", "300e9", "--instance", "ml.p4d.24xlarge", "--count", "16",
            "--activation-checkpointing", "full"]
    main([*base, "--sharding", "hybrid", "--hybrid-shard-degree", "8"])
    new = capsys.readouterr()
    assert "sharding hybrid (groups of 8)" in new.out and new.err == ""
    main([*base, "--sharding", "hybrid:8"])
    old = capsys.readouterr()
    assert old.out == new.out
    assert "note: --sharding hybrid:8 is the old spelling: write --sharding hybrid --hybrid-shard-degree 8" in old.err
    assert main([*base, "--sharding", "hybrid"]) == 2  # a hybrid layout needs its degree
    assert "needs hybrid_shard_degree >= 1" in capsys.readouterr().err


def test_plan_prints_hfu_and_the_lower_mfu_of_full_recomputation_as_a_what_if(capsys):
    main(["plan", "--model", "gpt-30b", "--tokens", "300e9", "--instance", "ml.p4d.24xlarge", "--count", "16",
          "--sharding", "full", "--activation-checkpointing", "full", "--mfu", "0.4"])
    out = capsys.readouterr().out
    assert "at HFU 40%, MFU 30% (recomputation re-runs the forward)" in out
    assert "what if: HFU 0.4 given instead of the predicted step" in out


def test_plan_prints_the_predicted_step_and_bases_the_days_on_it(capsys):
    main(["plan", "--model", "gpt-30b", "--tokens", "300e9", "--instance", "ml.p4d.24xlarge", "--count", "16",
          "--sharding", "hybrid", "--hybrid-shard-degree", "32", "--activation-checkpointing", "full",
          "--micro-batch", "4", "--json"])
    plan = json.loads(capsys.readouterr().out)
    step = plan["step"]
    assert plan["speed_basis"].startswith("predicted step") and plan["global_batch"] == 1024
    assert plan["days"] == pytest.approx(300e9 / (step["tokens_per_second_per_gpu"] * 128) / 86400, rel=1e-6)
    assert step["step_s"] == pytest.approx(sum(step[k] for k in ("compute_s", "recompute_s", "exposed_communication_s",
                                                                  "overlap_slowdown_s", "bubble_s", "optimizer_s",
                                                                  "fixed_s")))
    main(["plan", "--model", "gpt-30b", "--tokens", "300e9", "--instance", "ml.p4d.24xlarge", "--count", "16",
          "--sharding", "hybrid", "--hybrid-shard-degree", "32", "--activation-checkpointing", "full",
          "--micro-batch", "4"])
    out = capsys.readouterr().out
    assert "exposed communication" in out and "fsdp_backward" in out and "hidden     behind compute" in out


def test_plan_without_a_model_or_runs_file_says_what_it_needs(capsys):
    assert main(["plan", "--instance", "ml.p4d.24xlarge"]) == 2
    assert "--model, --count (or --published RUNS.json)" in capsys.readouterr().err


def test_default_tokens_are_chinchilla(capsys):
    main(["plan", "--model", "llama2-7b", "--instance", "ml.p5.48xlarge", "--count", "8", "--json",
          "--sharding", "full", "--activation-checkpointing", "full"])
    out = json.loads(capsys.readouterr().out)
    assert out["tokens"] == 20 * out["params"]


def test_console_entry_point_help():
    out = subprocess.run([sys.executable, "-m", "fmlab", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "plan" in out.stdout


def test_env_reports_local_backend_without_credentials(monkeypatch, capsys, tmp_path):
    for var in ("AWS_ACCESS_KEY_ID", "AWS_PROFILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "FMLAB_BACKEND"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert main(["env", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["backend"] == "local"


def test_a_studio_space_runs_locally_until_the_backend_is_chosen(monkeypatch, capsys, tmp_path):
    """Issue 65: a Studio space's execution role alone launched real jobs for every learner in a room."""
    from fmlab import environment
    from fmlab.jobs import job

    for var in (*environment.CREDENTIAL_VARIABLES, "FMLAB_BACKEND"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("SAGEMAKER_INTERNAL_IMAGE_URI", "studio-image")  # what a Studio space has, like its metadata
    monkeypatch.setattr(environment, "_ANNOUNCED", [])
    assert environment.credential_source() == environment.STUDIO_ROLE
    backend, why = environment.backend_choice()
    assert backend == "local" and "FMLAB_BACKEND=sagemaker" in why and "docs/instructor.md" in why
    assert job._backend(None) == "local" and job._backend(None) == "local"
    assert capsys.readouterr().out.count("fmlab backend: local (a SageMaker Studio space") == 1  # said once
    monkeypatch.setenv("FMLAB_BACKEND", "sagemaker")
    assert environment.backend_choice() == ("sagemaker", "FMLAB_BACKEND=sagemaker is set")
    monkeypatch.setenv("FMLAB_BACKEND", "yes")
    with pytest.raises(ValueError, match="'local' or 'sagemaker'"):
        environment.default_backend()


def test_env_never_prints_a_secret(monkeypatch, capsys):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLESECRET123")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
    monkeypatch.delenv("FMLAB_BACKEND", raising=False)
    main(["env"])
    out = capsys.readouterr().out
    assert "sagemaker" in out and "AKIAEXAMPLE" not in out and "wJalr" not in out


def test_train_subcommand_forwards_to_the_entry_point(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["train", "--help"])
    assert stop.value.code == 0 and "--max" in capsys.readouterr().out


def test_every_train_flag_has_a_description():
    """`fmlab train --help` lists each flag with what it does, taken from TrainConfig's field comments."""
    from fmlab.train.config import _FIELDS, _parser, field_help

    described = field_help()
    assert sorted(described) == sorted(_FIELDS)
    assert described["collective_timeout"].startswith("seconds a collective may wait")
    helps = {a.dest: a.help for a in _parser()._actions if a.dest in _FIELDS}
    assert all(len(h.split("(default:")[0].strip()) > 10 for h in helps.values()), helps


def test_an_instance_without_a_published_price_has_an_unknown_cost_not_nan(capsys):
    """trn2 has no published on-demand price (fmlab.plan.catalog): the text says so and the JSON is strict."""
    main(["plan", "--model", "llama3.1-70b", "--instance", "ml.trn2.48xlarge", "--count", "8", "--sharding", "full"])
    out = capsys.readouterr().out
    assert "cost         unknown" in out and "nan" not in out.lower().replace("nanos", "")
    main(["plan", "--model", "llama3.1-70b", "--instance", "ml.trn2.48xlarge", "--count", "8", "--sharding", "full",
          "--json"])
    assert json.loads(capsys.readouterr().out, parse_constant=lambda c: pytest.fail(f"{c} in JSON"))["cost_usd"] is None
