"""Continued pretraining of a Llama on Trainium (trn1) with Neuron Distributed (NxD): the trn1 job's entry point.

    # what fmlab.neuron.job launches on each ml.trn1.32xlarge (32 processes, one per NeuronCore):
    torchrun --nproc-per-node 32 entrypoints/neuron_train.py --tensor_parallel_size 8 --pipeline_parallel_size 1 \
        --seq_len 4096 --train_batch_size 16 --num_microbatches 8 --lr 3e-5 --max_steps 1000 \
        --pretrained_weight_dir /opt/ml/input/data/weights      # made by `fmlab convert hf-to-nxd`

It builds the Llama of <pretrained_weight_dir>/config.json on NxD's parallel layers (fmlab.neuron.model) through
NxD's trainer API (`neuronx_distributed_config`, `initialize_parallel_model`, `initialize_parallel_optimizer`),
loads the converted weights, or resumes from the newest completed checkpoint under --checkpoint_dir when a
restarted job finds one, and trains on an fmlab packed dataset (fmlab.data) split over NxD's data-parallel ranks.
Each optimizer step takes train_batch_size sequences per data-parallel replica: with pipeline parallelism NxD
cuts them into num_microbatches micro-batches (`model.run_train`); without, they are gradient-accumulation steps.
The learning rate warms up linearly, then follows a cosine to a tenth of --lr. Every --log_every steps rank 0
prints `step=.. loss=.. lr=.. tokens_per_s=..` (fmlab.train.log, the format SageMaker's metric regexes read);
every --checkpoint_freq steps and at the end it saves with NxD's `save_checkpoint` (tag step_N). It trains in bf16
unless --dtype fp32: the model is cast to bfloat16 before the optimizer is built (see DTYPES).

torch_xla and neuronx_distributed exist only in the Neuron containers, so they are imported inside functions;
`main` stops with a clear message where they are missing.
Written against github.com/aws-neuron/neuronx-distributed (reference only, no code copied):
examples/training/llama/tp_pp_llama_hf_pretrain/run_llama_nxd.py @ 0598cd8bfc046daf1105b79acd283ff5b6db657e
(config, pipeline_config keys, run_train, loading the tag "pretrained_weight", save_checkpoint arguments),
src/neuronx_distributed/trainer/trainer.py @ 0598cd8bfc046daf1105b79acd283ff5b6db657e (activation_checkpoint_config
takes module classes; "full" needs a Hugging Face model), trainer/optimizer.py @ 0598cd8bfc046daf1105b79acd283ff5b6db657e
(step all-reduces data-parallel gradients and clips), trainer/checkpoint.py @ 0f2a90f6ba2dc8fb12833d85e48732ca36717611
(save_checkpoint / load_checkpoint), parallel_layers/checkpointing.py @ 9e63ff893cdac0e8ce4e5d6595ab7df57d7c4c12
(legacy `load(chkpt_path, model=..., model_key=None)` of tp_rank_XX_pp_rank_YY/checkpoint.pt).
tests/neuron/test_neuron_train.py runs it on CPU against a stand-in for those two packages (tests/neuron/standin).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist

from fmlab.data import DataError, PackedDataset, ResumableSampler
from fmlab.environment import free_port
from fmlab.neuron.files import completed_tags, find_shard_files
from fmlab.neuron.model import DecoderLayer, LlamaSpec, NeuronModelError, NxdLlamaForCausalLM, RMSNorm
from fmlab.neuron.sharding import LlamaShape, NeuronLayoutError, NxdLayout
from fmlab.plan import catalog, compute
from fmlab.train.config import warmup_cosine as lr_factor  # the schedule fmlab.train uses
from fmlab.train.log import TrainLog

TRAINIUM_ONLY = ("runs only on Trainium: torch_xla / neuronx_distributed are not installed; launch it with "
                 "fmlab.neuron.job on ml.trn1")


# Training precision. Neuron 2.24 was the last release to honour XLA_DOWNCAST_BF16 (fmlab.neuron.job), which made
# torch-xla keep float32 tensors as bf16 on the device; on newer images only the script can make the run bf16, so it
# casts the model itself (model.to(torch.bfloat16), the alternative to autocast that Neuron's end-of-support notice
# names). Without it the pinned trn1 job would train in fp32, not in the bf16 its plan and price assume.
DTYPES = ("bf16", "fp32")


class NeuronTrainError(ValueError):
    """A setting the trn1 training script cannot run with, and what to change."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="neuron_train", description="Continued pretraining of a Llama on trn1 (NxD).")
    add = p.add_argument
    add("--tensor_parallel_size", type=int, default=8)
    add("--pipeline_parallel_size", type=int, default=1)
    add("--seq_len", type=int, default=4096)
    add("--train_batch_size", type=int, default=16, help="sequences per data-parallel replica per optimizer step")
    add("--num_microbatches", type=int, default=1, help="pipeline micro-batches (without PP: accumulation steps)")
    add("--qkv_linear", type=int, choices=(0, 1), default=0, help="1: GQAQKVColumnParallelLinear")
    add("--kv_replicator", type=int, default=1, help="kv_size_multiplier of GQAQKVColumnParallelLinear")
    add("--use_zero1_optimizer", type=int, choices=(0, 1), default=1)
    add("--lr", type=float, default=3e-5)
    add("--warmup_steps", type=int, default=100)
    add("--max_steps", type=int, default=1000)
    add("--checkpoint_freq", type=int, default=100, help="save every N steps (0: only at the end)")
    add("--num_kept_checkpoints", type=int, default=2)
    add("--activation_checkpointing", choices=("full", "none"), default="full")
    add("--dtype", choices=DTYPES, default="bf16",
        help="bf16 (default): the model is cast to bfloat16 before training, as the plan and its price assume; "
             "fp32 trains in float32 (for checks on a CPU)")
    add("--pretrained_weight_dir", default="/opt/ml/input/data/weights")
    add("--model_config", default=None, help="HF config.json (default: <pretrained_weight_dir>/config.json)")
    add("--checkpoint_dir", default="/opt/ml/checkpoints/nxd")
    add("--training_dir", default="/opt/ml/input/data/train")
    add("--log_every", type=int, default=10)
    add("--seed", type=int, default=1234)
    return p


@dataclass
class Run:
    """What the training loop needs, from the arguments, the model config and the dataset."""

    args: argparse.Namespace
    config: dict
    micro_batch: int


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """SageMaker may add arguments of its own: unknown ones are ignored (parse_known_args)."""
    args, _ = build_parser().parse_known_args(argv)
    return args


def check_args(args: argparse.Namespace) -> Run:
    """Every check that needs no Neuron package; raises NeuronTrainError (or the layout's error) saying the fix."""
    positive = ("tensor_parallel_size", "pipeline_parallel_size", "seq_len", "train_batch_size", "num_microbatches",
                "kv_replicator", "max_steps", "log_every")
    for name in positive:
        if getattr(args, name) < 1:
            raise NeuronTrainError(f"--{name} is {getattr(args, name)}: it must be at least 1")
    for name in ("warmup_steps", "checkpoint_freq"):
        if getattr(args, name) < 0:
            raise NeuronTrainError(f"--{name} is {getattr(args, name)}: it must be 0 or more")
    if args.lr <= 0:
        raise NeuronTrainError(f"--lr is {args.lr}: the learning rate must be positive")
    if args.num_kept_checkpoints < 1 and args.num_kept_checkpoints != -1:
        raise NeuronTrainError("--num_kept_checkpoints must be at least 1 (or -1 to keep every checkpoint)")
    if args.train_batch_size % args.num_microbatches:
        raise NeuronTrainError(f"--train_batch_size {args.train_batch_size} is not divisible by --num_microbatches "
                               f"{args.num_microbatches}: each micro-batch must hold the same number of sequences; "
                               "choose a batch size that is a multiple of the micro-batch count")
    config_path = Path(args.model_config or Path(args.pretrained_weight_dir) / "config.json")
    if not config_path.is_file():
        raise NeuronTrainError(f"no model config at {config_path}: `fmlab convert hf-to-nxd` writes config.json "
                               "beside the weights; pass --model_config to name another")
    config = json.loads(config_path.read_text())
    layout = NxdLayout(tp=args.tensor_parallel_size, pp=args.pipeline_parallel_size,
                       qkv_linear=bool(args.qkv_linear), kv_size_multiplier=args.kv_replicator)
    layout.check(LlamaShape.from_config(config))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world % (args.tensor_parallel_size * args.pipeline_parallel_size):
        raise NeuronTrainError(f"{world} processes cannot hold tensor size {args.tensor_parallel_size} x pipeline "
                               f"size {args.pipeline_parallel_size}: the product must divide the process count")
    return Run(args, config, args.train_batch_size // args.num_microbatches)


def open_dataset(args: argparse.Namespace, config: dict):
    """The packed dataset, checked against the sequence length and the model's vocabulary."""
    dataset = PackedDataset(args.training_dir)
    if args.seq_len > dataset.seq_len:
        raise NeuronTrainError(f"--seq_len {args.seq_len} is longer than the dataset's sequences ({dataset.seq_len} "
                               f"tokens): use --seq_len {dataset.seq_len} or less, or prepare the data longer")
    if dataset.vocab_size > config["vocab_size"]:
        raise NeuronTrainError(f"the dataset's tokenizer has {dataset.vocab_size} tokens but the model only "
                               f"{config['vocab_size']}: tokenize with the model's own tokenizer")
    return dataset


def _init_distributed() -> None:
    """One process group over the "xla" backend (torchrun sets the rendezvous; alone, a one-process world)."""
    import torch_xla.distributed.xla_backend  # noqa: F401  (registers the "xla" backend)

    if dist.is_initialized():
        return
    if "WORLD_SIZE" not in os.environ:  # started without torchrun
        os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", LOCAL_WORLD_SIZE="1")
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(free_port()))
    dist.init_process_group("xla")


def _nxd_config(run: Run):
    from neuronx_distributed.parallel_layers import mappings
    from neuronx_distributed.trainer import neuronx_distributed_config

    a = run.args
    pipeline = None
    if a.pipeline_parallel_size > 1:
        pipeline = {"transformer_layer_cls": DecoderLayer, "num_microbatches": a.num_microbatches,
                    "output_loss_value_spec": (True, False), "input_names": ["input_ids", "labels"],
                    "auto_partition": True, "param_init_fn": None, "leaf_module_cls": [RMSNorm.__name__],
                    "autowrap_modules": [mappings], "use_zero1_optimizer": bool(a.use_zero1_optimizer),
                    "use_optimizer_wrapper": True}
    return neuronx_distributed_config(
        tensor_parallel_size=a.tensor_parallel_size, pipeline_parallel_size=a.pipeline_parallel_size,
        pipeline_config=pipeline,
        optimizer_config={"zero_one_enabled": bool(a.use_zero1_optimizer), "grad_clipping": True, "max_grad_norm": 1.0},
        activation_checkpoint_config=DecoderLayer if a.activation_checkpointing == "full" else None)


def _load_pretrained(model, weight_dir: Path, tp: int, pp: int) -> str:
    """The converted weights, model only: current layout (tag "pretrained_weight") through load_checkpoint,
    legacy through checkpointing.load. The shards must be for the run's tensor and pipeline sizes (checked on
    the file names before anything is read)."""
    from neuronx_distributed.trainer import load_checkpoint

    try:
        found = find_shard_files(weight_dir, "pretrained_weight" if (weight_dir / "pretrained_weight").is_dir() else None)
    except NeuronLayoutError:
        found = None
    if found is None or (found.layout == "current" and found.tag != "pretrained_weight"):
        raise NeuronTrainError(f"no NxD weights in {weight_dir}: expected pretrained_weight/done (current layout) or "
                               "tp_rank_XX_pp_rank_YY/checkpoint.pt (legacy); make them with `fmlab convert hf-to-nxd`")
    if (found.tp, found.pp) != (tp, pp):
        raise NeuronTrainError(f"the weights in {weight_dir} were converted for tp={found.tp}, pp={found.pp}, but this "
                               f"run uses tp={tp}, pp={pp}: convert again with `fmlab convert hf-to-nxd --tp {tp} "
                               f"--pp {pp}` or run with --tensor_parallel_size {found.tp} --pipeline_parallel_size "
                               f"{found.pp}")
    if found.layout == "current":
        load_checkpoint(str(weight_dir), tag=found.tag, model=model, optimizer=None, scheduler=None)
    else:
        from neuronx_distributed.parallel_layers.checkpointing import load

        load(str(weight_dir), model=model, model_key=None, sharded=True)
    return found.layout


def _next_batch(dataset, sampler, position: dict, count: int, seq_len: int):
    """`count` sequences (cut to seq_len) in the sampler's order, starting a new epoch when one runs out."""
    rows = []
    while len(rows) < count:
        try:
            rows.append(dataset[next(position["iter"])][:seq_len])
        except StopIteration:
            sampler.set_epoch(sampler.epoch + 1)
            position["iter"] = iter(sampler)
    return torch.stack(rows)


def train(run: Run) -> int:
    """The training loop on NxD; returns the last step reached."""
    import torch_xla.core.xla_model as xm
    from neuronx_distributed.parallel_layers import parallel_state as ps
    from neuronx_distributed.trainer import (
        initialize_parallel_model,
        initialize_parallel_optimizer,
        load_checkpoint,
        save_checkpoint,
    )

    a = run.args
    torch.manual_seed(a.seed)
    dataset = open_dataset(a, run.config)
    _init_distributed()
    config = _nxd_config(run)
    spec = LlamaSpec.from_config(run.config, bool(a.qkv_linear), a.kv_replicator)
    model = initialize_parallel_model(config, NxdLlamaForCausalLM, spec)
    if a.dtype == "bf16":
        model.to(torch.bfloat16)  # before the optimizer and the weights: both then hold bf16 parameters
    named = list(model.named_parameters())
    groups = [{"params": [p for _, p in named if p.ndim >= 2], "weight_decay": 0.1},  # no decay on the norms
              {"params": [p for _, p in named if p.ndim < 2], "weight_decay": 0.0}]
    optimizer = initialize_parallel_optimizer(config, torch.optim.AdamW, groups, lr=a.lr, betas=(0.9, 0.95))
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_factor(s, a.warmup_steps, a.max_steps))
    dp_rank, dp_size = ps.get_data_parallel_rank(), ps.get_data_parallel_size()
    sampler = ResumableSampler(len(dataset), rank=dp_rank, world_size=dp_size, seed=a.seed)
    is_logger = (ps.get_pipeline_model_parallel_rank() == a.pipeline_parallel_size - 1  # it holds the loss
                 and ps.get_tensor_model_parallel_rank() == 0 and dp_rank == 0)
    say = print if dist.get_rank() == 0 else (lambda *_, **__: None)

    step = 0
    if Path(a.checkpoint_dir).is_dir() and completed_tags(a.checkpoint_dir):
        content = load_checkpoint(a.checkpoint_dir, tag=None, model=model, optimizer=optimizer, scheduler=scheduler)
        if not isinstance(content, dict) or "step" not in content or "sampler" not in content:
            raise NeuronTrainError(f"the newest checkpoint under {a.checkpoint_dir} was not written by this script "
                                   "(its user_content has no step and sampler): use an empty --checkpoint_dir")
        step = int(content["step"])
        sampler.load_state_dict(content["sampler"])
        # The schedule of this run's command line wins (a restart may change --lr or --max_steps).
        scheduler.base_lrs = [a.lr for _ in optimizer.param_groups]
        for group in optimizer.param_groups:
            group["lr"] = a.lr * lr_factor(scheduler.last_epoch, a.warmup_steps, a.max_steps)
        say(f"resumed from {a.checkpoint_dir} at step {step} ({content['consumed']} sequences consumed)", flush=True)
    else:
        layout = _load_pretrained(model, Path(a.pretrained_weight_dir), a.tensor_parallel_size,
                                  a.pipeline_parallel_size)
        if a.use_zero1_optimizer and hasattr(optimizer.optimizer, "init_zero"):
            optimizer.optimizer.init_zero()  # ZeRO-1 keeps master copies: refresh them from the loaded weights
        say(f"loaded pretrained weights from {a.pretrained_weight_dir} ({layout} layout)", flush=True)
    if step >= a.max_steps:
        say(f"nothing to do: the checkpoint is at step {step}, --max_steps is {a.max_steps}", flush=True)
        return step

    shape = catalog.ModelPreset("trn1-job", "llama", hidden=spec.hidden, layers=spec.layers, heads=spec.heads,
                                vocab=spec.vocab, seq_len=a.seq_len, intermediate=spec.intermediate,
                                kv_heads=spec.kv_heads)
    instance = catalog.INSTANCES.get(os.environ.get("SM_CURRENT_INSTANCE_TYPE", ""))
    per_node = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    peak = instance.cluster_peak_tflops / per_node if instance else None  # one process drives 1/per_node of a node
    log = TrainLog(os.environ.get("SM_OUTPUT_DATA_DIR"), compute.flops_per_token(shape, a.seq_len),
                   world_size=dist.get_world_size(), peak_tflops=peak, rank=0 if is_logger else 1,
                   tensorboard=False)
    device = xm.xla_device()
    position = {"iter": iter(sampler)}
    tokens_per_step = a.train_batch_size * a.seq_len * dp_size
    window_start, window_steps = time.perf_counter(), 0
    while step < a.max_steps:
        batch = _next_batch(dataset, sampler, position, a.train_batch_size, a.seq_len).to(device)
        if a.pipeline_parallel_size > 1:
            loss = model.run_train(input_ids=batch, labels=batch)
        else:
            loss = 0.0
            for micro in batch.split(run.micro_batch):
                micro_loss = model(input_ids=micro, labels=micro)[0] / a.num_microbatches
                micro_loss.backward()
                loss = loss + micro_loss.detach()
        optimizer.step()
        optimizer.zero_grad()
        lr = optimizer.param_groups[0]["lr"]  # what this step used
        scheduler.step()
        step += 1
        window_steps += 1
        if is_logger and (step % a.log_every == 0 or step == a.max_steps):
            def report(loss=loss, step=step, lr=lr, steps=window_steps, start=window_start):
                log.step(step=step, loss=float(loss), lr=lr, tokens=tokens_per_step * steps,
                         seconds=time.perf_counter() - start, steps=steps)
            xm.add_step_closure(report)
        if step % a.log_every == 0 or step == a.max_steps:
            window_start, window_steps = time.perf_counter(), 0
        xm.mark_step()
        if (a.checkpoint_freq and step % a.checkpoint_freq == 0) or step == a.max_steps:
            content = {"step": step, "consumed": step * a.train_batch_size * dp_size,
                       "sampler": sampler.state_dict(), "args": vars(a)}
            save_checkpoint(a.checkpoint_dir, tag=f"step_{step}", model=model, optimizer=optimizer,
                            scheduler=scheduler, user_content=content, num_kept_ckpts=a.num_kept_checkpoints)
            say(f"saved checkpoint step_{step} to {a.checkpoint_dir}", flush=True)
    log.close()
    return step


def main(argv: list[str] | None = None) -> int:
    """Command-line entry: 0 on success, 2 on a bad setting or a machine without the Neuron packages."""
    try:
        run = check_args(parse_args(argv))
        try:
            import neuronx_distributed  # noqa: F401
            import torch_xla  # noqa: F401
        except ImportError as e:
            raise NeuronTrainError(f"{TRAINIUM_ONLY} ({e})") from e
        train(run)
    except (NeuronTrainError, NeuronLayoutError, NeuronModelError, DataError) as e:
        print(f"error: {e}", file=sys.stderr, flush=True)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
