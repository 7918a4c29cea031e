"""The trn1 continued-pretraining script (fmlab.neuron.train, entrypoints/neuron_train.py) on CPU.

    .venv/bin/pytest tests/neuron/test_neuron_train.py

No Neuron machine is needed: tests/neuron/standin holds a stand-in torch_xla and neuronx_distributed (single
process, tensor and pipeline size 1) whose checkpoint functions write and read NxD's current layout themselves,
so a run really checks fmlab's converter (fmlab.neuron) against an independent writer and reader. A tiny Llama
is converted with `hf_to_nxd`, trained 3 steps by the entry script in a subprocess, read back with `nxd_to_hf`,
and resumed to step 5; the first logged loss must equal transformers' loss on the same batch.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from fmlab.neuron.train import main

pytestmark = pytest.mark.slow  # the module trains the converted model in a subprocess


ROOT = Path(__file__).resolve().parents[2]
STANDIN = ROOT / "tests" / "neuron" / "standin"
SEQ_LEN, BATCH, MICRO = 32, 4, 2


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """A tiny GQA Llama (fp32, 2 layers) saved as HF and converted to NxD, and a packed dataset its vocab covers."""
    from fmlab.data import PackedDataset
    from fmlab.data.corpus import corpus_slice
    from fmlab.data.prepare import prepare
    from fmlab.models import build_model
    from fmlab.neuron import hf_to_nxd

    root = tmp_path_factory.mktemp("neuron_train")
    model = build_model("tiny", seed=0)
    assert model.config.num_key_value_heads < model.config.num_attention_heads  # grouped-query attention
    model.save_pretrained(root / "hf")
    hf_to_nxd(root / "hf", root / "nxd", tp=1, pp=1, dtype="fp32")
    prepare(corpus_slice(200_000), root / "data", SEQ_LEN, 300, 1, unit_bytes=16 * 1024, progress=False)
    assert PackedDataset(root / "data").vocab_size <= model.config.vocab_size
    return root


def _args(root: Path, checkpoints: str, max_steps: int, dtype: str = "fp32") -> list[str]:
    return ["--tensor_parallel_size", "1", "--pipeline_parallel_size", "1", "--seq_len", str(SEQ_LEN),
            "--train_batch_size", str(BATCH), "--num_microbatches", str(MICRO), "--lr", "1e-3",
            "--warmup_steps", "1", "--max_steps", str(max_steps), "--checkpoint_freq", "2",
            "--num_kept_checkpoints", "2", "--log_every", "1", "--use_zero1_optimizer", "0",
            "--pretrained_weight_dir", str(root / "nxd"), "--checkpoint_dir", str(root / checkpoints),
            "--training_dir", str(root / "data"), "--seed", "7", "--dtype", dtype]  # fp32: exact against transformers


def _run_script(root: Path, checkpoints: str, max_steps: int, output: str, dtype: str = "fp32"):
    """The entry script in a subprocess with the stand-in on the path; (stdout, metrics records)."""
    from fmlab.train.log import read_metrics

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(STANDIN), str(ROOT / "src")]),
           "SM_OUTPUT_DATA_DIR": str(root / output)}
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_PORT"):
        env.pop(name, None)
    done = subprocess.run([sys.executable, str(ROOT / "entrypoints" / "neuron_train.py"),
                           *_args(root, checkpoints, max_steps, dtype)],
                          env=env, cwd=root, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout, read_metrics(root / output)


@pytest.fixture(scope="module")
def trained(prepared):
    """Three steps from the converted weights, then a restart to five; and an uninterrupted five-step run."""
    from fmlab.neuron import nxd_to_hf

    first = _run_script(prepared, "ckpt", 3, "out1")
    tag = prepared / "ckpt" / "step_3"
    step_3_files = sorted(str(p.relative_to(tag)) for p in tag.rglob("*") if p.is_file())
    restored = prepared / "restored"
    nxd_to_hf(prepared / "ckpt", restored, config=prepared / "hf", tag="step_3")
    step_3_content = torch.load(tag / "user_content.pt", weights_only=False)
    resumed = _run_script(prepared, "ckpt", 5, "out2")  # keeps 2 checkpoints: step_3 goes
    return {"first": first, "resumed": resumed, "restored": restored, "step_3_files": step_3_files,
            "step_3_content": step_3_content}


def _first_batch(data: Path) -> torch.Tensor:
    """What the script trains on first: the sampler's first BATCH sequences of data-parallel rank 0 of 1."""
    from fmlab.data import PackedDataset, ResumableSampler

    dataset = PackedDataset(data)
    order = iter(ResumableSampler(len(dataset), rank=0, world_size=1, seed=7))
    return torch.stack([dataset[next(order)][:SEQ_LEN] for _ in range(BATCH)])


def test_first_logged_loss_is_transformers_loss_on_the_converted_weights(prepared, trained):
    from transformers import LlamaForCausalLM

    stdout, records = trained["first"]
    assert "loaded pretrained weights" in stdout and "(current layout)" in stdout
    batch = _first_batch(prepared / "data")
    reference = LlamaForCausalLM.from_pretrained(prepared / "hf").eval()
    with torch.no_grad():
        expected = reference(input_ids=batch, labels=batch).loss.item()
    assert records[0]["step"] == 1
    assert records[0]["loss"] == pytest.approx(expected, abs=1e-5)
    assert "step=1 loss=" in stdout and " tokens_per_s=" in stdout  # the line SageMaker's metric regexes read


def test_the_checkpoint_is_complete_and_converts_back_to_a_trained_hugging_face_model(prepared, trained):
    from safetensors.torch import load_file
    from transformers import LlamaForCausalLM

    assert {"checkpoint", "done", "model/dp_rank_00_tp_rank_00_pp_rank_00.pt", "user_content.pt"} <= set(
        trained["step_3_files"])
    model = LlamaForCausalLM.from_pretrained(trained["restored"])
    start = load_file(prepared / "hf" / "model.safetensors")
    trained_state = model.state_dict()
    changed = [k for k in start if not torch.equal(start[k], trained_state[k])]
    assert set(changed) == set(start), f"these weights never trained: {sorted(set(start) - set(changed))}"


def test_a_restarted_job_resumes_model_optimizer_schedule_and_data_where_it_stopped(prepared, trained):
    from fmlab.neuron.train import lr_factor

    stdout, records = trained["resumed"]
    assert "resumed from" in stdout and "at step 3" in stdout and "loaded pretrained" not in stdout
    assert [r["step"] for r in records] == [4, 5]
    saved = trained["step_3_content"]
    assert saved["step"] == 3 and saved["consumed"] == 3 * BATCH and saved["sampler"]["offset"] == 3 * BATCH
    # the schedule continued (a fresh one would start warming up again at 1e-3 * lr_factor(0, ...))
    assert records[0]["lr"] == pytest.approx(1e-3 * lr_factor(3, warmup_steps=1, max_steps=5))
    assert lr_factor(3, 1, 5) != pytest.approx(lr_factor(0, 1, 5))
    final = prepared / "ckpt" / "step_5"
    content = torch.load(final / "user_content.pt", weights_only=False)
    assert content["sampler"]["offset"] == 5 * BATCH  # the data went on from sequence 12, not from 0
    optim = torch.load(final / "optim" / "dp_rank_00_tp_rank_00_pp_rank_00.pt", weights_only=False)
    assert {float(state["step"]) for state in optim["state"].values()} == {5.0}  # AdamW kept its moments


def test_only_the_newest_checkpoints_are_kept(prepared, trained):
    assert sorted(p.name for p in (prepared / "ckpt").iterdir()) == ["step_4", "step_5"]


def test_main_without_the_neuron_packages_says_it_runs_only_on_trainium(prepared, capsys):
    try:
        import torch_xla  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("a real torch_xla is installed here")
    assert main(_args(prepared, "never", 3)) == 2
    assert "runs only on Trainium" in capsys.readouterr().err


def test_bad_arguments_get_a_clear_error(prepared, capsys):
    args = _args(prepared, "never", 3)
    args[args.index("--train_batch_size") + 1] = "6"
    args[args.index("--num_microbatches") + 1] = "4"
    assert main(args) == 2
    assert "--train_batch_size 6 is not divisible by --num_microbatches 4" in capsys.readouterr().err
    args = _args(prepared, "never", 3)
    args[args.index("--tensor_parallel_size") + 1] = "3"
    assert main(args) == 2
    assert "tp=3 does not divide" in capsys.readouterr().err


@pytest.fixture
def standin_on_path(monkeypatch):
    """The stand-in packages importable in this process, and forgotten again afterwards."""
    monkeypatch.syspath_prepend(str(STANDIN))
    yield
    for name in [m for m in sys.modules if m.split(".")[0] in ("neuronx_distributed", "torch_xla")]:
        del sys.modules[name]


@pytest.mark.parametrize("qkv_linear", [False, True])
def test_the_nxd_model_has_the_converters_keys_and_shapes_and_transformers_loss(prepared, standin_on_path,
                                                                                qkv_linear):
    import json

    from transformers import LlamaForCausalLM

    from fmlab.neuron import hf_state_to_nxd
    from fmlab.neuron.model import LlamaSpec, NxdLlamaForCausalLM
    from fmlab.neuron.sharding import LlamaShape, NxdLayout, shard_shape, stage_keys

    config = json.loads((prepared / "nxd" / "config.json").read_text())
    layout = NxdLayout(tp=1, pp=1, qkv_linear=qkv_linear)
    shape = LlamaShape.from_config(config)
    model = NxdLlamaForCausalLM(LlamaSpec.from_config(config, qkv_linear=qkv_linear))
    state = model.state_dict()
    assert list(state) == stage_keys(shape, layout, 0)
    assert {k: tuple(v.shape) for k, v in state.items()} == {k: shard_shape(k, shape, layout) for k in state}

    reference = LlamaForCausalLM.from_pretrained(prepared / "hf").eval()
    shards = hf_state_to_nxd(reference.state_dict(), config, layout)
    model.load_state_dict(shards[(0, 0)], strict=True)
    batch = _first_batch(prepared / "data")
    with torch.no_grad():
        assert model(batch, labels=batch)[0].item() == pytest.approx(
            reference(input_ids=batch, labels=batch).loss.item(), abs=1e-5)


def test_pretrained_weights_load_from_either_nxd_layout(prepared, standin_on_path, tmp_path):
    import json

    from fmlab.neuron import hf_to_nxd
    from fmlab.neuron.model import LlamaSpec, NxdLlamaForCausalLM
    from fmlab.neuron.train import NeuronTrainError, _load_pretrained

    hf_to_nxd(prepared / "hf", tmp_path / "legacy", tp=1, pp=1, layout="legacy", dtype="fp32")
    config = json.loads((prepared / "nxd" / "config.json").read_text())
    expected = torch.load(prepared / "nxd" / "pretrained_weight" / "model" / "dp_rank_00_tp_rank_00_pp_rank_00.pt")
    for folder, layout in ((prepared / "nxd", "current"), (tmp_path / "legacy", "legacy")):
        model = NxdLlamaForCausalLM(LlamaSpec.from_config(config))
        assert _load_pretrained(model, folder, tp=1, pp=1) == layout
        assert all(torch.equal(model.state_dict()[k], v) for k, v in expected.items())
        with pytest.raises(NeuronTrainError, match="converted for tp=1, pp=1, but this run uses tp=2, pp=1"):
            _load_pretrained(model, folder, tp=2, pp=1)
    with pytest.raises(NeuronTrainError, match="fmlab convert hf-to-nxd"):
        _load_pretrained(model, tmp_path, tp=1, pp=1)


def test_a_dataset_that_does_not_fit_the_run_is_refused(prepared):
    import json

    from fmlab.neuron.train import NeuronTrainError, open_dataset, parse_args

    config = json.loads((prepared / "nxd" / "config.json").read_text())
    args = parse_args(_args(prepared, "never", 3))
    args.seq_len = 2 * SEQ_LEN
    with pytest.raises(NeuronTrainError, match=f"--seq_len {SEQ_LEN} or less"):
        open_dataset(args, config)
    args.seq_len = SEQ_LEN
    with pytest.raises(NeuronTrainError, match="tokenize with the model's own tokenizer"):
        open_dataset(args, {**config, "vocab_size": 100})


def test_the_nxd_model_traces_with_torch_fx_as_nxd_pipeline_parallelism_needs(prepared, standin_on_path):
    """NxD cuts a pipeline by tracing the model with torch.fx (RMSNorm as a leaf module, as the script names it);
    shape-dependent factories such as torch.ones(seq, seq) would break that trace."""
    import json

    import torch.fx

    from fmlab.neuron.model import LlamaSpec, NxdLlamaForCausalLM, RMSNorm

    class LeafNorms(torch.fx.Tracer):
        def is_leaf_module(self, module, name):
            return isinstance(module, RMSNorm) or super().is_leaf_module(module, name)

    config = json.loads((prepared / "nxd" / "config.json").read_text())
    model = NxdLlamaForCausalLM(LlamaSpec.from_config(config, qkv_linear=True))
    traced = torch.fx.GraphModule(model, LeafNorms().trace(model))
    batch = _first_batch(prepared / "data")
    with torch.no_grad():
        assert torch.equal(traced(batch, batch)[0], model(batch, labels=batch)[0])


def test_the_job_trains_in_bf16_by_default(prepared):
    """Issue 40: on Neuron images newer than 2.24 XLA_DOWNCAST_BF16 is gone, and the pinned trn1 job trained in fp32
    while planned and priced at bf16; the script now casts the model itself unless --dtype fp32."""
    from fmlab.neuron.train import build_parser

    assert build_parser().get_default("dtype") == "bf16"
    stdout, records = _run_script(prepared, "ckpt-bf16", 1, "out-bf16", dtype="bf16")
    saved = torch.load(prepared / "ckpt-bf16" / "step_1" / "model" / "dp_rank_00_tp_rank_00_pp_rank_00.pt",
                       weights_only=False)
    tensors = [v for v in (saved.get("model", saved) if isinstance(saved, dict) else {}).values()
               if isinstance(v, torch.Tensor) and v.is_floating_point()]
    assert tensors and {t.dtype for t in tensors} == {torch.bfloat16}
    assert records[0]["step"] == 1 and records[0]["loss"] > 0
