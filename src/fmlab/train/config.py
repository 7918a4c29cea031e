"""The training entry point's settings: TrainConfig, and reading it from flags and the SageMaker contract.

    cfg = parse_config(["--model", "tiny", "--max_steps", "20"])
    parse_config(["--max-stepz", "2"])   # TrainConfigError: unknown flag --max-stepz (did you mean --max-steps?)
    cfg.ignored            # under SageMaker (SM_TRAINING_ENV set) an unknown argument is ignored, noted here
    cfg.parallel           # the run's ParallelConfig (fmlab.plan.parallelism): its fields are flags too (--tp 2)
    cfg.check()            # TrainConfigError / PlanError naming what to change

Sources, later winning: the TrainConfig defaults; the SageMaker contract when present (SM_CHANNEL_TRAIN ->
data, SM_MODEL_DIR -> model_dir, SM_OUTPUT_DATA_DIR -> output_dir, SM_CHECKPOINT_DIR or FMLAB_CHECKPOINT_DIR,
else /opt/ml/checkpoints inside a job -> checkpoint_dir, SM_HPS -> any field); the command line, where both
`--max-steps` and SageMaker's `--max_steps` spellings work. An argument fmlab.train does not know is an error on
the command line (a typo must not train with the default), and only a note inside a SageMaker job, where the service
passes every hyperparameter of the request as a flag and a newer SDK may add its own. Tested by
tests/train/test_train.py.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import inspect
import io
import json
import math
import os
import sys
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

from fmlab.plan import catalog
from fmlab.plan.parallelism import FIELDS as PARALLEL_FIELDS
from fmlab.plan.parallelism import ParallelConfig, parse_bool
from fmlab.service.smp_settings import from_mp_parameters

SAGEMAKER_CHECKPOINTS = "/opt/ml/checkpoints"
COLLECTIVE_TIMEOUT_RANGE = (1.0, 86400.0)  # seconds: --collective-timeout must lie within
COMPILE_CHOICES = ("auto", "true", "false")
LOSS_CHOICES = ("chunked", "full")  # fmlab.train.loss


class TrainConfigError(ValueError):
    """A setting of the training run that cannot work, with what to change in the message."""


@dataclass
class TrainConfig:
    """Everything a run needs; each field is also a flag (`--micro-batch 8`) and a SageMaker hyperparameter."""

    model: str = "tiny"  # catalog preset (fmlab.plan.catalog.MODELS)
    data: str = ""  # packed dataset; default: SM_CHANNEL_TRAIN, else the course corpus (fmlab.data)
    seq_len: int = 128  # sequence length when the course corpus is built here
    micro_batch: int = 8  # sequences per process per forward pass
    grad_accum: int = 1  # forward/backward passes per optimizer step
    global_batch: int = 0  # sequences per optimizer step over every replica, kept whatever the world (elastic jobs): grad_accum follows; 0: micro_batch x grad_accum x replicas
    max_steps: int = 20  # optimizer steps of the whole run (a resumed run continues to this)
    lr: float = 3e-3  # peak learning rate
    warmup_steps: int = 5  # linear warm-up, then cosine decay to min_lr_ratio * lr
    min_lr_ratio: float = 0.1  # the cosine decay ends at this fraction of lr
    weight_decay: float = 0.1  # AdamW, on matrices only (not norms or biases)
    grad_clip: float = 1.0  # global gradient-norm clipping; 0 turns it off
    seed: int = 0  # model initialisation and data order
    shuffle: bool = True  # shuffle the sequences each epoch
    log_every: int = 10  # steps between log lines (each line also goes to JSONL and TensorBoard)
    output_dir: str = ""  # metrics.jsonl, tensorboard/, summary.json; default: SM_OUTPUT_DATA_DIR
    tensorboard: bool = True  # write TensorBoard event files under output_dir
    model_dir: str = ""  # final model as a Hugging Face folder; default: SM_MODEL_DIR
    checkpoint_dir: str = ""  # default: /opt/ml/checkpoints in a SageMaker job; none locally
    checkpoint_every: int = 0  # steps between checkpoints; 0: only at the end (when checkpoint_dir is set)
    keep_checkpoints: int = 3  # the newest N complete checkpoints are kept
    async_checkpoint: bool = False  # save in the background (DCP async_save); committed only once fully written
    resume: str = "auto"  # "auto": newest complete checkpoint in checkpoint_dir; "none"; or a checkpoint path
    stop_after: int = 0  # stop after this step as if the job were killed (resume drills); 0: run to max_steps
    # two phases, as torchtitan's CommConfig (init_timeout_seconds=300, train_timeout_seconds=100; pytorch/torchtitan,
    # torchtitan/config/configs/comm.py, read 2026-11-24): long while the group forms and the first step runs
    # (compilation, a large first forward), short afterwards. After it 80 s, not torchtitan's 100: torchrun waits
    # 30 s more before it SIGKILLs a frozen worker (torch/distributed/elastic/agent/server/local_elastic_agent.py,
    # _shutdown's timeout=30), and 80 + 5 (traces) + 30 keeps a hung job's failure under two minutes
    init_timeout: float = 300.0  # seconds a collective may wait while the group forms and through the first step
    collective_timeout: float = 80.0  # seconds a collective may wait for a dead or hung peer after the first step
    trace_collectives: int = 2000  # each rank keeps its last N collectives (PyTorch's Flight Recorder); 0: off
    trace_dir: str = ""  # where each surviving rank writes its trace on a failure; default <output_dir>/collective-traces
    loss_alert: float = 0.0  # stop when a logged loss is this many times the mean of the last few (0: off; e.g. 2)
    # recovery drills (fmlab.train.faults), off by default; a fault fires only in torchrun attempt fault_attempt
    fault: str = "none"  # none | kill | hang | freeze (SIGSTOP) | stall | skip | kill-save | lose-host | spike
    fault_step: int = 0  # the step it strikes (kill-save: inside its save; the others: before its forward pass)
    fault_rank: int = 0  # the global rank it strikes
    fault_seconds: float = 0.0  # how long --fault stall sleeps before carrying on
    fault_attempt: int = 0  # the TORCHELASTIC_RESTART_COUNT it fires in: 0, the first start (restarts run clean)
    loss: str = "chunked"  # chunked: head and cross-entropy a chunk of tokens at a time, no whole logits (fmlab.train.loss) | full: transformers' loss
    compile: str = "auto"  # torch.compile each decoder layer: auto (on a GPU, off on a CPU) | true | false
    peak_tflops: float = 0.0  # device peak for MFU; 0: from the instance type or GPU name (none on a CPU)
    save_first_grads: str = ""  # write step 1's gradients (after DDP's all-reduce) to this safetensors file
    eval_sequences: int = 0  # held-out sequences per evaluation (the dataset's validation split); 0: no evaluation
    eval_every: int = 0  # steps between evaluations; 0: at the end of the run only
    # the parallel layout: sharding, hybrid_shard_degree, tp, activation_checkpointing, ... are flags too
    parallel: ParallelConfig = field(default_factory=ParallelConfig)
    mp_parameters: str = ""  # SMP v2 settings as JSON; they and the layout flags must agree (fmlab.service.smp_settings)
    ignored: list[str] = field(default_factory=list)  # arguments seen but not understood (reported)

    def __post_init__(self) -> None:
        if self.mp_parameters:
            self.parallel = agreed_layout(self.parallel, self.mp_parameters)

    def to_hyperparameters(self, defaults: bool = False) -> dict[str, str]:
        """The run as SageMaker hyperparameters (strings, flat: the layout's fields beside the others), the inverse
        of parse_config: parse_config([], {"SM_HPS": json.dumps(hps)}) is this config again. The layout is sent
        whole, so a request states it; other fields at their default are left out unless `defaults`; `ignored` is
        never sent."""
        out: dict[str, str] = {}
        base = TrainConfig()
        for name in _FIELDS:
            layout = name in PARALLEL_FIELDS
            value = getattr(self.parallel if layout else self, name)
            if not (defaults or layout) and value == getattr(base, name):
                continue
            out[name] = ("true" if value else "false") if isinstance(value, bool) else str(value)
        return out

    def check(self, world: int | None = None) -> TrainConfig:
        """Raise TrainConfigError (or PlanError, for the layout) naming what to change; return self. With
        `world`, the layout is checked on that many processes for this model too."""
        if min(self.micro_batch, self.grad_accum, self.max_steps, self.log_every) < 1:
            raise TrainConfigError("--micro-batch, --grad-accum, --max-steps and --log-every must each be at least 1")
        if self.global_batch < 0:
            raise TrainConfigError("--global-batch must be 0 (micro-batch x accumulation x replicas) or the sequences "
                                   "per optimizer step")
        if self.eval_sequences < 0 or self.eval_every < 0:
            raise TrainConfigError("--eval-sequences and --eval-every must be 0 (off / at the end only) or more")
        if self.loss not in LOSS_CHOICES:
            raise TrainConfigError(f"--loss must be one of {', '.join(LOSS_CHOICES)}, not {self.loss!r}")
        if self.compile not in COMPILE_CHOICES:
            raise TrainConfigError(f"--compile must be one of {', '.join(COMPILE_CHOICES)}, not {self.compile!r}")
        if not (self.loss_alert == 0 or 1 < self.loss_alert < math.inf):
            raise TrainConfigError(f"--loss-alert must be 0 (off) or a factor above 1 (e.g. 2: a logged loss twice "
                                   f"the mean of the last few stops the run), not {self.loss_alert!r}")
        check_collective_timeout(self.collective_timeout)
        check_collective_timeout(self.init_timeout, "--init-timeout")
        if self.trace_collectives < 0:
            raise TrainConfigError("--trace-collectives must be 0 (off) or the number of collectives each rank keeps")
        if world is not None:
            self.parallel.check(world, catalog.model(self.model))
        self.parallel.check_trainable()
        return self


# ---------------------------------------------------------------- reading the configuration

# What SMP v2's settings decide about the layout (fmlab.service.smp_settings.from_mp_parameters); precision,
# backend and checkpointing without offloading are the script's own.
SMP_DECIDES = ("sharding", "hybrid_shard_degree", "tp", "activation_offloading")


def agreed_layout(parallel: ParallelConfig, mp_parameters: str) -> ParallelConfig:
    """The layout of a run given SMP v2's `--mp_parameters` beside its layout flags: SMP's settings decide what they
    name (SMP_DECIDES), the flags the rest (precision, backend, checkpointing unless SMP offloads). A flag set away
    from its default must say what SMP says, or TrainConfigError names what differs (an SMP job built by the
    course sends both from one ParallelConfig: fmlab.jobs.sharded)."""
    smp, default = from_mp_parameters(mp_parameters), ParallelConfig()
    names = SMP_DECIDES + (("offload_horizon",) if smp.activation_offloading else ())
    differ = [f"{n} is {getattr(parallel, n)!r} in the flags, {getattr(smp, n)!r} by --mp_parameters" for n in names
              if getattr(parallel, n) not in (getattr(default, n), getattr(smp, n))]
    if differ:
        raise TrainConfigError(f"the layout flags and SMP's --mp_parameters {mp_parameters} disagree: "
                               f"{'; '.join(differ)}. Build the job from one ParallelConfig (fmlab.jobs.sharded."
                               "ShardedRun sends both from it), or drop the layout flags and let --mp_parameters "
                               "decide")
    agreed = dataclasses.replace(parallel, **{n: getattr(smp, n) for n in names})
    if smp.activation_offloading:  # SMP offloads checkpointed layers: offloading turns full checkpointing on
        agreed.activation_checkpointing = smp.activation_checkpointing
    return agreed


def _bool(text) -> bool:
    """parse_bool for argparse, whose error then quotes the message."""
    try:
        return parse_bool(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


_FIELDS = {f.name: f for f in dataclasses.fields(TrainConfig) if f.name not in ("ignored", "parallel")}
_FIELDS.update({f.name: f for f in dataclasses.fields(ParallelConfig)})  # one flag per layout field: --tp 2


def _convert(name: str, value):
    """A flag or hyperparameter value (often a string) as the field's type, with an error naming the field."""
    kind = type(_FIELDS[name].default)
    if isinstance(value, dict | list):
        return json.dumps(value) if kind is str else value
    try:
        return _bool(value) if kind is bool else kind(value)
    except (TypeError, ValueError, argparse.ArgumentTypeError):
        raise TrainConfigError(f"--{name.replace('_', '-')} expects a {kind.__name__}, got {value!r}") from None


def field_help() -> dict[str, str]:
    """Each flag's one-line description: the comment that follows its field in TrainConfig's or ParallelConfig's
    source."""
    out: dict[str, str] = {}
    for cls in (TrainConfig, ParallelConfig):
        line_of: dict[int, str] = {}
        source = inspect.getsource(cls)
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.COMMENT:
                line_of[tok.start[0]] = tok.string.lstrip("#").strip()
        for number, text in enumerate(source.splitlines(), start=1):
            name = text.strip().split(":", 1)[0]
            if name in _FIELDS and number in line_of:
                out[name] = line_of[number]
    return out


def build_config(values: dict) -> TrainConfig:
    """A TrainConfig from flat settings (flags, hyperparameters): the layout's fields go to its ParallelConfig."""
    layout = {k: values.pop(k) for k in list(values) if k in PARALLEL_FIELDS}
    return TrainConfig(**values, parallel=ParallelConfig(**layout))


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="fmlab.train", description="fmlab's training entry point. Every flag is also "
                                "a SageMaker hyperparameter; --max-steps and --max_steps both work.",
                                allow_abbrev=False)  # an unknown --max must not be taken for --max-steps
    described = field_help()
    for name, f in _FIELDS.items():
        flags = sorted({f"--{name.replace('_', '-')}", f"--{name}"})
        text = described.get(name, "").replace("%", "%%")
        if isinstance(f.default, bool):
            p.add_argument(*flags, dest=name, nargs="?", const="true", default=None, type=str, metavar="BOOL",
                           help=f"{text} (default: {f.default})")
        else:
            p.add_argument(*flags, dest=name, default=None, type=str, metavar=type(f.default).__name__.upper(),
                           help=f"{text} (default: {f.default!r})")
    return p


def sagemaker_defaults(env: dict | None = None) -> dict:
    """Settings the SageMaker training contract gives through the environment (empty outside SageMaker)."""
    env = os.environ if env is None else env
    found: dict = {}
    for var, name in (("SM_CHANNEL_TRAIN", "data"), ("SM_MODEL_DIR", "model_dir"),
                      ("SM_OUTPUT_DATA_DIR", "output_dir")):
        if env.get(var):
            found[name] = env[var]
    override = env.get("FMLAB_CHECKPOINT_DIR") or env.get("SM_CHECKPOINT_DIR")
    if override:
        found["checkpoint_dir"] = override
    elif (("SM_MODEL_DIR" in env or "SM_TRAINING_ENV" in env) and "FMLAB_SANDBOX_HOST" not in env
          and Path(SAGEMAKER_CHECKPOINTS).is_dir()):
        found["checkpoint_dir"] = SAGEMAKER_CHECKPOINTS  # CheckpointConfig syncs it with S3
    ignored = []
    if env.get("SM_HPS"):
        try:
            hps = json.loads(env["SM_HPS"])
        except json.JSONDecodeError:
            raise TrainConfigError(f"SM_HPS is not JSON: {env['SM_HPS'][:200]!r}") from None
        for key, value in hps.items():
            name = key.lstrip("-").replace("-", "_")
            if name in _FIELDS:
                found[name] = _convert(name, value)
            else:
                ignored.append(key)
    if ignored:
        found["ignored"] = ignored
    return found


def parse_config(argv: list[str] | None = None, env: dict | None = None) -> TrainConfig:
    """TrainConfig from defaults < SageMaker environment < command line. An unknown argument raises
    TrainConfigError naming it, except inside a SageMaker job (SM_TRAINING_ENV set: the sandbox's too), where it is
    kept in .ignored and the loop notes it."""
    env = os.environ if env is None else env
    values = sagemaker_defaults(env)
    ignored = list(values.pop("ignored", []))
    args, unknown = _parser().parse_known_args(sys.argv[1:] if argv is None else argv)
    if unknown and "SM_TRAINING_ENV" not in env:
        raise TrainConfigError(unknown_flags_message(unknown))
    for name, value in vars(args).items():
        if value is not None:
            values[name] = _convert(name, value)
    ignored = [k for k in ignored if f"--{k}" not in unknown]  # SageMaker passes each hyperparameter both ways
    return build_config({**values, "ignored": ignored + unknown})


def unknown_flags_message(unknown: list[str]) -> str:
    """What to say about arguments no flag takes: each flag named, with the nearest known flag where one is close."""
    known = sorted({f"--{n.replace('_', '-')}" for n in _FIELDS})
    parts = []
    for arg in unknown:
        if not arg.startswith("-"):
            continue
        flag = arg.split("=", 1)[0]
        near = difflib.get_close_matches(flag.replace("_", "-"), known, n=1, cutoff=0.75)
        parts.append(f"{flag} (did you mean {near[0]}?)" if near else flag)
    named = ", ".join(parts) or " ".join(unknown)
    return (f"unknown argument{'s' if len(parts) > 1 else ''} {named}: fmlab.train has no such flag "
            "(`fmlab train --help` lists them; inside a SageMaker job, where SM_TRAINING_ENV is set, unknown "
            "hyperparameters are ignored with a note instead)")


def check_collective_timeout(seconds: float, flag: str = "--collective-timeout") -> float:
    """`seconds` if it is a usable --collective-timeout (or --init-timeout), else TrainConfigError saying what
    it is for."""
    low, high = COLLECTIVE_TIMEOUT_RANGE
    if not low <= seconds <= high:  # NaN fails too
        default = TrainConfig.init_timeout if flag == "--init-timeout" else TrainConfig.collective_timeout
        raise TrainConfigError(
            f"{flag} {seconds:g} is outside {low:g}..{high:g} seconds. It is how long a collective waits for a "
            f"dead or hung peer before the run fails ({'while the group forms and through the first step' if flag == '--init-timeout' else 'after the first step'}): "
            f"the default {default:g} s suits most runs; a failure drill may use 3 to 30; never less than the "
            f"longest time one rank works alone (a checkpoint save, the final export)")
    return seconds


def accumulation_for(cfg: TrainConfig, replicas: int) -> int:
    """The passes per optimizer step on `replicas` data-parallel ranks: cfg.grad_accum, or with --global-batch what
    keeps that many sequences per step (an elastic job on half its nodes accumulates twice as many passes, so the
    optimizer and the schedule, counted in steps, see the same tokens per step)."""
    if not cfg.global_batch:
        return cfg.grad_accum
    per_pass = replicas * cfg.micro_batch
    if cfg.global_batch % per_pass:
        raise TrainConfigError(f"--global-batch {cfg.global_batch} does not split into {replicas} data-parallel "
                               f"replicas x micro-batch {cfg.micro_batch}: use a multiple of {per_pass} (and of the "
                               "replicas x micro-batch at every world an elastic job may run on)")
    return cfg.global_batch // per_pass


def compile_wanted(cfg: TrainConfig, device_type: str) -> bool:
    """Whether the run compiles its decoder layers: --compile auto means on a GPU only (on a laptop CPU the
    compilation takes longer than the course's runs)."""
    return cfg.compile == "true" or (cfg.compile == "auto" and device_type == "cuda")


def phase_timeouts(cfg: TrainConfig) -> tuple[float, float]:
    """(first phase, training phase) collective timeouts of a run: the first never shorter than the second."""
    return max(cfg.init_timeout, cfg.collective_timeout), cfg.collective_timeout


def adopt_mpi_environment(env: dict | None = None) -> bool:
    """Under `mpirun` (SDK v3's `MPI` launcher, needed for SMDDP's AllReduce) set the torchrun variables that
    torch.distributed reads (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT) from Open MPI's and
    SageMaker's; True if it did. Nothing changes under torchrun or in a single process."""
    env = os.environ if env is None else env
    if "WORLD_SIZE" in env or "OMPI_COMM_WORLD_SIZE" not in env:
        return False
    env["RANK"] = env["OMPI_COMM_WORLD_RANK"]
    env["WORLD_SIZE"] = env["OMPI_COMM_WORLD_SIZE"]
    env["LOCAL_RANK"] = env.get("OMPI_COMM_WORLD_LOCAL_RANK", "0")
    env["LOCAL_WORLD_SIZE"] = env.get("OMPI_COMM_WORLD_LOCAL_SIZE", "1")
    hosts = json.loads(env.get("SM_HOSTS", "[]") or "[]")
    env.setdefault("MASTER_ADDR", env.get("SM_MASTER_ADDR") or (hosts[0] if hosts else "127.0.0.1"))
    env.setdefault("MASTER_PORT", env.get("SM_MASTER_PORT") or "29500")
    return True


def warmup_cosine(step: int, warmup_steps: int, max_steps: int, floor: float = 0.1) -> float:
    """The learning-rate multiplier at `step` (0-based): linear warm-up over warmup_steps, then a cosine from 1
    down to `floor` at max_steps. fmlab.train and the trn1 script (fmlab.neuron.train) both schedule with it."""
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    progress = min(1.0, (step - warmup_steps) / max(1, max_steps - warmup_steps))
    return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress))
