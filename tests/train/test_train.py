"""fmlab.train, the entry point: flags and the SageMaker contract, exact resume, the HF export, bad settings,
and (2 gloo processes under torchrun) sharded checkpoints that resume exactly and parity with one process.

Run: .venv/bin/pytest tests/train/test_train.py          (-m "not distributed" skips the two torchrun launches)
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
import torch
from torchrun_launch import ENTRY, torchrun

from fmlab.checkpoint import Checkpointer, CheckpointError, latest
from fmlab.data import course_dataset
from fmlab.plan import catalog, compute
from fmlab.train import TrainConfig, main, parse_config, sagemaker_defaults, train
from fmlab.train.config import TrainConfigError, adopt_mpi_environment
from fmlab.train.log import METRIC_DEFINITIONS, read_metrics

ROOT = Path(__file__).resolve().parents[2]
TINY = dict(model="tiny", micro_batch=4, lr=3e-3, warmup_steps=2, tensorboard=False)


@pytest.fixture(scope="module")
def dataset() -> str:
    return str(course_dataset(seq_len=128, vocab_size=512))


# ---------------------------------------------------------------- reading the configuration


def test_sagemaker_arguments_are_tolerated_in_both_spellings():
    inside_a_job = {"SM_TRAINING_ENV": "{}"}  # SageMaker (and the sandbox) set it: unknown arguments are noted
    cfg = parse_config(["--max_steps", "7", "--micro-batch", "2", "--sagemaker_program", "train.py",
                        "--some-new-flag", "--shuffle", "false", "--tensorboard",
                        "--mp_parameters", '{"hybrid_shard_degree": 2, "tensor_parallel_degree": 2}'], env=inside_a_job)
    assert (cfg.max_steps, cfg.micro_batch, cfg.shuffle, cfg.tensorboard) == (7, 2, False, True)
    assert cfg.ignored == ["--sagemaker_program", "train.py", "--some-new-flag"]
    layout = cfg.parallel  # SMP v2's settings decide the layout
    assert (layout.sharding, layout.hybrid_shard_degree, layout.tp) == ("hybrid", 2, 2)
    with pytest.raises(TrainConfigError, match="--max-steps expects a int"):
        parse_config(["--max-steps", "many"], env={})
    with pytest.raises(TrainConfigError, match="expects a bool"):
        parse_config(["--shuffle", "perhaps"], env={})


def test_an_unknown_flag_is_an_error_on_the_command_line_and_a_note_inside_a_job(tmp_path, monkeypatch, capsys):
    """`fmlab train --max-stepz 2` (fmlab.cli.main, what the command runs) exits 2 naming the flag and trains
    nothing; inside a job (SM_TRAINING_ENV set) the same arguments train and the flag is noted."""
    from fmlab import cli

    with pytest.raises(TrainConfigError, match=r"--max-stepz \(did you mean --max-steps\?\)"):
        parse_config(["--max-stepz", "2"], env={})
    for var in [v for v in os.environ if v.startswith("SM_")]:
        monkeypatch.delenv(var)
    out = tmp_path / "out"
    argv = ["train", "--max-stepz", "2", "--max-steps", "2", "--log-every", "1", "--output-dir", str(out),
            "--tensorboard", "false"]
    assert cli.main(argv) == 2
    assert "--max-stepz (did you mean --max-steps?)" in capsys.readouterr().err and not out.exists()
    monkeypatch.setenv("SM_TRAINING_ENV", "{}")
    assert cli.main(argv) == 0
    assert "note: ignoring arguments fmlab.train does not use: --max-stepz 2" in capsys.readouterr().out
    assert [r["step"] for r in read_metrics(out)] == [1, 2]


def test_the_sagemaker_contract_is_read_and_the_command_line_wins(tmp_path):
    env = {"SM_CHANNEL_TRAIN": "/opt/ml/input/data/train", "SM_MODEL_DIR": "/opt/ml/model",
           "SM_OUTPUT_DATA_DIR": "/opt/ml/output/data", "SM_CHECKPOINT_DIR": str(tmp_path),
           "SM_HPS": json.dumps({"max_steps": 9, "micro-batch": 3, "lr": "0.001", "not_ours": 1,
                                 "mp_parameters": {"hybrid_shard_degree": 0}})}
    found = sagemaker_defaults(env)
    assert found["data"] == "/opt/ml/input/data/train" and found["model_dir"] == "/opt/ml/model"
    assert found["output_dir"] == "/opt/ml/output/data" and found["checkpoint_dir"] == str(tmp_path)
    assert (found["max_steps"], found["micro_batch"], found["lr"]) == (9, 3, 0.001)
    assert json.loads(found["mp_parameters"]) == {"hybrid_shard_degree": 0} and found["ignored"] == ["not_ours"]
    cfg = parse_config(["--max-steps", "4"], env=env)
    assert (cfg.max_steps, cfg.micro_batch) == (4, 3) and cfg.parallel.sharding == "full"
    assert sagemaker_defaults({}) == {}  # outside SageMaker nothing is assumed


def test_an_mpirun_launch_gets_the_variables_torch_distributed_reads():
    """SDK v3's MPI launcher (SMDDP AllReduce) starts the script with mpirun: Open MPI's variables only."""
    env = {"OMPI_COMM_WORLD_RANK": "9", "OMPI_COMM_WORLD_SIZE": "16", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
           "OMPI_COMM_WORLD_LOCAL_SIZE": "8", "SM_HOSTS": '["algo-1", "algo-2"]'}
    assert adopt_mpi_environment(env)
    assert (env["RANK"], env["WORLD_SIZE"], env["LOCAL_RANK"], env["MASTER_ADDR"]) == ("9", "16", "1", "algo-1")
    torchrun = {"RANK": "0", "WORLD_SIZE": "2", "OMPI_COMM_WORLD_SIZE": "16"}
    assert not adopt_mpi_environment(torchrun) and torchrun["RANK"] == "0"  # torchrun's own variables win
    assert not adopt_mpi_environment({})


# ---------------------------------------------------------------- one process, in this process


def test_a_sagemaker_style_run_writes_metrics_checkpoints_and_the_model(tmp_path, dataset, monkeypatch, capsys):
    model_dir, output, checkpoints = tmp_path / "model", tmp_path / "output", tmp_path / "checkpoints"
    monkeypatch.setenv("SM_TRAINING_ENV", "{}")  # inside a job: SageMaker's own arguments are noted, not refused
    monkeypatch.setenv("SM_CHANNEL_TRAIN", dataset)
    monkeypatch.setenv("SM_MODEL_DIR", str(model_dir))
    monkeypatch.setenv("SM_OUTPUT_DATA_DIR", str(output))
    monkeypatch.setenv("SM_CHECKPOINT_DIR", str(checkpoints))
    monkeypatch.setenv("SM_CURRENT_INSTANCE_TYPE", "ml.p4d.24xlarge")  # catalog peak: 312 TFLOP/s
    monkeypatch.setenv("SM_HPS", json.dumps({"max_steps": 4, "micro_batch": 4, "log_every": 2}))
    code = main(["--max_steps", "4", "--micro_batch", "4", "--log-every", "1", "--checkpoint-every", "2",
                 "--sagemaker_program", "entrypoints/train.py", "--mp_parameters", '{"hybrid_shard_degree": 0}'])
    out = capsys.readouterr().out
    assert code == 0
    lines = [line for line in out.splitlines() if line.startswith("step=")]
    assert len(lines) == 4  # the command line's --log-every 1 beat SM_HPS's 2
    for definition in METRIC_DEFINITIONS:  # what SageMaker's metric regexes will read
        values = [float(m.group(1)) for line in lines if (m := re.search(definition["Regex"], line))]
        assert len(values) == 4, definition["Name"]
    records = read_metrics(output)
    assert [r["step"] for r in records] == [1, 2, 3, 4]
    assert records[-1]["loss"] < records[0]["loss"] < 6.5  # ln(512) = 6.24 at the start, and falling
    flops_per_token = compute.flops_per_token(catalog.model("tiny"), 128)  # 6N + 12*L*H*T, PaLM appendix B
    for r in records:
        assert r["tokens_per_s"] == pytest.approx(r["tokens"] / (r["step_s"] * 1))
        assert r["tflops"] == pytest.approx(flops_per_token * r["tokens_per_s"] / 1e12)  # one device
        assert r["mfu"] == pytest.approx(r["tflops"] / 312.0)
    assert any(p.name.startswith("events.out.tfevents") for p in (output / "tensorboard").iterdir())
    assert sorted(p.name for p in model_dir.iterdir()) == ["config.json", "model.safetensors"]
    assert [p.name for p in sorted(checkpoints.iterdir())] == ["step_00000002", "step_00000004"]
    summary = json.loads((output / "summary.json").read_text())
    assert summary["steps"] == 4 and summary["config"]["data"] == dataset and summary["tokens_per_s"] > 0


def test_the_engine_trains_with_the_pretraining_attention(monkeypatch):
    """No causal mask prepared and every attention call is fmlab's registered function, held-out evaluation included
    (fmlab.models.use_pretraining_attention; its numbers are checked against "sdpa" in tests/test_models.py)."""
    from fmlab import models

    def refused(*args, **kwargs):
        raise AssertionError("the engine ran transformers' mask preparation")

    calls = []
    registered = models.pretraining_attention

    def counted(*args, **kwargs):
        calls.append(1)
        return registered(*args, **kwargs)

    monkeypatch.setattr("transformers.masking_utils.find_packed_sequence_indices", refused)
    monkeypatch.setattr(models, "pretraining_attention", counted)  # what use_pretraining_attention registers
    result = train(TrainConfig(**TINY, max_steps=2, eval_sequences=4))  # the course data with a held-out split
    assert result.steps == 2 and result.val_loss is not None
    assert calls  # transformers' Llama attention modules called the registered function


def test_a_killed_run_resumes_to_the_same_losses_and_exports_what_it_trained(tmp_path, dataset):
    import transformers

    common = dict(TINY, data=dataset, max_steps=6, checkpoint_every=3, log_every=1)
    whole = train(TrainConfig(**common, checkpoint_dir=str(tmp_path / "a"), model_dir=str(tmp_path / "model")))
    killed = train(TrainConfig(**common, checkpoint_dir=str(tmp_path / "b"), stop_after=4))
    assert killed.interrupted and latest(tmp_path / "b").name == "step_00000003"
    restarted = train(TrainConfig(**common, checkpoint_dir=str(tmp_path / "b")))  # the same command again
    assert restarted.start_step == 3
    assert [restarted.losses[s] for s in (4, 5, 6)] == [whole.losses[s] for s in (4, 5, 6)]  # exactly
    assert killed.losses[4] == whole.losses[4]

    # The Hugging Face export is the trained model: same logits as the final checkpoint restored.
    from fmlab.models import build_model
    from fmlab.train import build_optimizer

    restored = build_model("tiny", seed=1)
    Checkpointer(tmp_path / "a").resume(restored, build_optimizer(restored, TrainConfig(**common))[0])
    exported = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "model")
    x = torch.arange(64).reshape(2, 32)
    with torch.no_grad():
        assert torch.equal(exported(input_ids=x).logits, restored(input_ids=x).logits)


def test_a_corrupt_newest_checkpoint_is_set_aside_and_the_run_resumes_from_the_previous(tmp_path, dataset, capsys):
    args = ["--data", dataset, "--max-steps", "4", "--micro-batch", "2", "--checkpoint-every", "2",
            "--checkpoint-dir", str(tmp_path), "--tensorboard", "false", "--keep-checkpoints", "2"]
    assert main(args) == 0
    newest = latest(tmp_path)
    (newest / "trainer.json").write_text("{}")  # a partial sync from S3
    with pytest.raises(CheckpointError):
        Checkpointer(tmp_path).resume(*_model_and_optimizer())  # the library call stays strict ...
    assert main(args + ["--max-steps", "6"]) == 0  # ... the training run falls back (a restarted job must)
    out, err = capsys.readouterr()
    assert "step_00000004 is corrupt" in err and "set aside as corrupt-step_00000004" in err
    assert "resumed from" in out and "step_00000002 at step 2" in out
    kept = tmp_path / "corrupt-step_00000004"
    assert (kept / "trainer.json").read_text() == "{}"  # kept as it was, and never pruned
    assert [p.name for p in sorted(tmp_path.iterdir())] == [
        "corrupt-step_00000004", "step_00000004", "step_00000006"]  # step 4 saved again, intact


def test_when_every_checkpoint_is_damaged_the_run_stops_and_says_how_to_start_over(tmp_path, dataset, capsys):
    args = ["--data", dataset, "--max-steps", "2", "--micro-batch", "2", "--checkpoint-every", "2",
            "--checkpoint-dir", str(tmp_path), "--tensorboard", "false"]
    assert main(args) == 0
    (latest(tmp_path) / "trainer.json").write_text("{}")
    assert main(args + ["--max-steps", "4"]) == 2
    err = capsys.readouterr().err
    assert "every checkpoint" in err and "start over with --resume none" in err
    assert (tmp_path / "corrupt-step_00000002" / "trainer.json").is_file()


def _model_and_optimizer():
    from fmlab.models import build_model
    from fmlab.train import build_optimizer

    model = build_model("tiny")
    return model, build_optimizer(model, TrainConfig())[0]


def test_an_impossible_layout_fails_fast_with_the_fix(dataset, capsys):
    assert main(["--data", dataset, "--tp", "3"]) == 2
    assert "tp=3 does not divide the 1 device (one process each)" in capsys.readouterr().err
    with pytest.raises(TrainConfigError, match="lower --micro-batch"):
        train(TrainConfig(**{**TINY, "micro_batch": 10**6}, data=dataset))


# ---------------------------------------------------------------- two gloo processes under torchrun


@pytest.mark.distributed
def test_fsdp_checkpoint_on_two_processes_resumes_exactly_and_matches_one_process(tmp_path, dataset):
    """FSDP full sharding, 2 ranks x 4 sequences, against 1 rank x 8 sequences: the same global batch."""
    from safetensors.torch import load_file

    common = ["--data", dataset, "--max-steps", "6", "--warmup-steps", "2", "--tensorboard", "false",
              "--log-every", "1", "--sharding", "full", "--micro-batch", "4"]
    run = torchrun(2, ENTRY, *common, "--checkpoint-dir", str(tmp_path / "a"), "--checkpoint-every", "3",
                   "--output-dir", str(tmp_path / "out_a"), "--save-first-grads",
                   str(tmp_path / "grads2.safetensors"), cwd=tmp_path, timeout=180)
    assert run.returncode == 0, run.text[-3000:]
    step3 = tmp_path / "a" / "step_00000003"
    assert sorted(p.name for p in step3.glob("__*.distcp")) == ["__0_0.distcp", "__1_0.distcp"]  # one shard each
    run = torchrun(2, ENTRY, *common, "--resume", str(step3), "--output-dir", str(tmp_path / "out_b"), cwd=tmp_path,
                   timeout=180)
    assert run.returncode == 0, run.text[-3000:]
    whole = {r["step"]: r["loss"] for r in read_metrics(tmp_path / "out_a")}
    resumed = {r["step"]: r["loss"] for r in read_metrics(tmp_path / "out_b")}
    assert sorted(resumed) == [4, 5, 6]
    assert resumed == {s: whole[s] for s in (4, 5, 6)}  # exactly

    single = train(TrainConfig(**{**TINY, "micro_batch": 8}, data=dataset, max_steps=3, log_every=1,
                               save_first_grads=str(tmp_path / "grads1.safetensors")))
    for s in (1, 2, 3):  # float32 sums in another order: equal to about 1e-6
        assert whole[s] == pytest.approx(single.losses[s], rel=1e-5, abs=1e-6)
    g1, g2 = load_file(tmp_path / "grads1.safetensors"), load_file(tmp_path / "grads2.safetensors")
    assert set(g1) == set(g2) and len(g1) == 21
    for name in g1:
        torch.testing.assert_close(g2[name], g1[name], rtol=1e-4, atol=1e-6)
    shutil.rmtree(tmp_path / "a")


def test_a_sandbox_host_never_takes_this_machines_own_opt_ml(tmp_path, monkeypatch):
    """Inside a SageMaker job /opt/ml/checkpoints is the job's; on a sandbox host it would be this machine's."""
    from fmlab.train import config

    monkeypatch.setattr(config, "SAGEMAKER_CHECKPOINTS", str(tmp_path))  # stands in for a real /opt/ml/checkpoints
    job_env = {"SM_MODEL_DIR": str(tmp_path / "model")}
    assert sagemaker_defaults(job_env)["checkpoint_dir"] == str(tmp_path)
    assert "checkpoint_dir" not in sagemaker_defaults({**job_env, "FMLAB_SANDBOX_HOST": "algo-1"})
    assert sagemaker_defaults({**job_env, "FMLAB_SANDBOX_HOST": "algo-1", "FMLAB_CHECKPOINT_DIR": "/x"})[
        "checkpoint_dir"] == "/x"


def test_asynchronous_saves_resume_to_the_same_losses(tmp_path, dataset):
    """--async-checkpoint: training goes on while the save is written; the checkpoint is the state of its step."""
    common = dict(TINY, data=dataset, max_steps=6, checkpoint_every=2, log_every=1, async_checkpoint=True)
    whole = train(TrainConfig(**common, checkpoint_dir=str(tmp_path / "a")))
    assert [p.name for p in sorted((tmp_path / "a").iterdir())] == ["step_00000002", "step_00000004", "step_00000006"]
    killed = train(TrainConfig(**common, checkpoint_dir=str(tmp_path / "b"), stop_after=3))
    assert killed.interrupted and latest(tmp_path / "b").name == "step_00000002"  # committed by the end of the run
    restarted = train(TrainConfig(**common, checkpoint_dir=str(tmp_path / "b")))
    assert restarted.start_step == 2
    assert [restarted.losses[s] for s in (3, 4, 5, 6)] == [whole.losses[s] for s in (3, 4, 5, 6)]  # exactly
