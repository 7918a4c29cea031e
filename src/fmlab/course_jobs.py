"""Every SageMaker training job the course builds, by name, and the CreateTrainingJob request each would send.

    fmlab job request --list            # sweep, ddp, smddp, fsdp, fsdp-tp, smp, retry, gpt30b, trn1, trn2, gpt30b-p5
    fmlab job request gpt30b            # its captured request as JSON: `| fmlab preflight -` checks it

Each job is built by the package's own builders, with the settings its notebook uses: the module 3 sweep job
(fmlab.jobs.sweep on notebook 03's base), module 4's DDP (torchrun, NCCL over EFA) and SMDDP (mpirun with
fmlab.service.mpi_launch.mpi_launch, the smddp backend, on the frozen SMDDP image), module 5's FSDP and SMP v2 jobs
and module 6's FSDP + TP, module 8's retried job, module 7's 30B run (fmlab.jobs.sharded.ShardedRun), and module
9's trn1 (fmlab.neuron.job) and trn2 (fmlab.neuron.native) jobs, and module 11's 30B run on p5 on a training plan
(fmlab.jobs.capacity). The request is captured by
fmlab.jobs.request.capture_request (moto, nothing reaches AWS), with placeholder role, bucket and account that you
replace with yours. tests/service/test_preflight.py asserts that every one passes `fmlab preflight`.

A top-level module because it imports the builders of jobs, parallel and neuron: inside `course` (which they use
for progress bars and records) it closed an import cycle.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from fmlab.jobs.spec import JobSpec
from fmlab.plan.parallelism import ParallelConfig
from fmlab.train.config import TrainConfig

ROLE = "arn:aws:iam::111122223333:role/fmlab-course"  # placeholders: your execution role, bucket and account
BUCKET = "s3://fmlab-course/fmlab"
ACCOUNT = "111122223333"
REGION = "us-west-2"
DATA = f"{BUCKET}/data/gpt2-tokens"


def _efa(spec: JobSpec) -> JobSpec:
    """The spec with the EFA environment its image needs (fmlab.jobs.sharded.environment: none on the DLCs)."""
    from fmlab.jobs.request import training_image
    from fmlab.jobs.sharded import environment

    return replace(spec, environment=environment(training_image(spec)))


# ---------------------------------------------------------------- each job's training settings

SWEEP_LRS = (1e-3, 3e-3)


def _sweep_config() -> TrainConfig:
    """Notebook 03's base run (the tiny model, a step logged each step), before the sweep sets its lr."""
    return TrainConfig(max_steps=40, micro_batch=8, warmup_steps=3, log_every=1, tensorboard=False)


def _config_30b(**layout) -> TrainConfig:
    """The 30B GPT at its context, one sequence per micro-batch, with `layout` as its ParallelConfig."""
    return TrainConfig(model="gpt-30b", seq_len=2048, micro_batch=1, max_steps=1000, parallel=ParallelConfig(**layout))


COURSE_CONFIGS: dict[str, Callable[[], TrainConfig]] = {
    "sweep": lambda: replace(_sweep_config(), lr=SWEEP_LRS[0]),
    "ddp": lambda: TrainConfig(model="llama2-7b", max_steps=1000, micro_batch=1, parallel=ParallelConfig(backend="nccl")),
    "smddp": lambda: TrainConfig(model="llama2-7b", max_steps=1000, micro_batch=1,
                                 parallel=ParallelConfig(backend="smddp")),
    "fsdp": lambda: _config_30b(sharding="hybrid", hybrid_shard_degree=8, activation_checkpointing="full"),
    "smp": lambda: _config_30b(sharding="hybrid", hybrid_shard_degree=8, activation_checkpointing="full",
                               activation_offloading=True, offload_horizon=2),
    "fsdp-tp": lambda: _config_30b(sharding="full", tp=2, activation_checkpointing="full"),
    "retry": lambda: TrainConfig(model="tiny", max_steps=200, checkpoint_every=20,
                                 parallel=ParallelConfig(sharding="full")),
}


def course_config(name: str) -> TrainConfig | None:
    """The TrainConfig whose hyperparameters course job `name` sends (fmlab.train parses them back into it);
    None for the trn1 job, which runs NxD's own script."""
    if name == "gpt30b":
        from fmlab.jobs.sharded import gpt30b_config

        return gpt30b_config()
    if name == "gpt30b-p5":
        from fmlab.jobs.capacity import current_stack_run
        from fmlab.plan.planned import planned_run

        return current_stack_run(planned_run(**P5_RUN)).config
    if name == "trn2":
        from fmlab.neuron.native import LLAMA2_70B_TRN2

        return LLAMA2_70B_TRN2.config
    course_spec(name)  # an unknown name raises with the list
    return COURSE_CONFIGS[name]() if name in COURSE_CONFIGS else None


# ---------------------------------------------------------------- the jobs


def sweep_job() -> JobSpec:
    """Module 3: one job of the learning-rate sweep (notebook 03's base, a warm pool kept between jobs)."""
    from fmlab.jobs import sweep

    base = JobSpec("sweep", hyperparameters=_sweep_config().to_hyperparameters(), inputs={"train": DATA},
                   instance_type="ml.g5.xlarge", keep_alive_seconds=600, max_run_seconds=900, role=ROLE, region=REGION)
    return sweep(base, "lr", list(SWEEP_LRS))[0]


def _data_parallel(name: str, **changes) -> JobSpec:
    fields = dict(hyperparameters=COURSE_CONFIGS[name]().to_hyperparameters(), instance_type="ml.p4d.24xlarge",
                  instance_count=2, distribution="torchrun", inputs={"train": DATA},
                  checkpoint_s3_uri=f"{BUCKET}/checkpoints/{name}", max_run_seconds=86400, role=ROLE, region=REGION)
    fields.update(changes)
    return _efa(JobSpec(name, **fields))


def ddp_job() -> JobSpec:
    """Module 4: DDP over NCCL (EFA) on 2 x p4d, torchrun, in the current PyTorch DLC."""
    return _data_parallel("ddp")


def smddp_job() -> JobSpec:
    """Module 4: the same DDP job with SMDDP's AllReduce: mpirun (16 ranks, 8 per instance), backend smddp, on the
    last SageMaker PyTorch DLC that ships SMDDP (2.5.1, frozen)."""
    # fmlab.jobs.request builds MPI(**fmlab.service.mpi_launch.mpi_launch(8, 2)) for distribution="mpi"
    return _data_parallel("smddp", distribution="mpi")


def fsdp_job() -> JobSpec:
    """Module 5: FSDP2 hybrid sharding of the 30B model on 16 x p4de, in the current PyTorch DLC."""
    return _data_parallel("fsdp", instance_type="ml.p4de.24xlarge", instance_count=16)


def fsdp_tp_job() -> JobSpec:
    """Module 6: FSDP2 + DTensor tensor parallelism (tp 2) on 2 x p4d."""
    return _data_parallel("fsdp-tp")


def smp_job() -> JobSpec:
    """Module 5: SMP v2 hybrid sharding with activation offloading, in the SMP v2 image (frozen at v2.8.0): SMP's
    settings and the script's layout flags come from one ParallelConfig."""
    from fmlab.service.smp_settings import to_mp_parameters

    return _data_parallel("smp", instance_type="ml.p4de.24xlarge", instance_count=16, distribution="smp",
                          smp=to_mp_parameters(COURSE_CONFIGS["smp"]().parallel))


def retry_job() -> JobSpec:
    """Module 8: a sharded job with a RetryStrategy and checkpoints synced to S3 (a lost instance is retried)."""
    return JobSpec("retry", distribution="torchrun", instance_type="ml.g5.12xlarge", inputs={"train": DATA},
                   checkpoint_s3_uri=f"{BUCKET}/checkpoints/retry", max_retry_attempts=2, max_run_seconds=7200,
                   hyperparameters=COURSE_CONFIGS["retry"]().to_hyperparameters(), role=ROLE, region=REGION)


def gpt30b_job() -> JobSpec:
    """Module 7: the 30B GPT run as planned (SMP v2 on 16 x p4d, EFA, FastFile, checkpoints): fmlab.jobs.sharded's
    planned job. Its 34.5 days are longer than one job's 28: this is the first job of its chain (job_chain), each
    job the same request, resuming from the checkpoints the one before left."""
    from fmlab.jobs.sharded import GPT30B_RUN, job_chain, planned_job
    from fmlab.plan.planned import planned_run

    run = planned_run(**GPT30B_RUN)
    return job_chain(planned_job(run, "gpt30b"), run.days, DATA, f"{BUCKET}/checkpoints/gpt30b", role=ROLE,
                     region=REGION)[0]


def trn1_job() -> JobSpec:
    """Module 9: continued pretraining of Llama 2 70B on trn1 with NxD (the pinned Neuron image)."""
    from fmlab.neuron.job import LLAMA2_70B_TRN1, trn1_job_spec

    return trn1_job_spec(LLAMA2_70B_TRN1, weights_uri=f"{BUCKET}/weights/llama2-70b-nxd", data_uri=DATA,
                         checkpoint_uri=f"{BUCKET}/checkpoints/llama2-70b", role=ROLE, region=REGION)


def trn2_job() -> JobSpec:
    """Module 9: the course's own script on trn2 with TorchNeuron (your image in your ECR)."""
    from fmlab.jobs.images import torchneuron_image_uri
    from fmlab.neuron.native import LLAMA2_70B_TRN2, trn2_job_spec

    return trn2_job_spec(LLAMA2_70B_TRN2, image_uri=torchneuron_image_uri(ACCOUNT, "us-east-2"), data_uri=DATA,
                         checkpoint_uri=f"{BUCKET}/checkpoints/llama2-70b-trn2", role=ROLE, region="us-east-2")


P5_RUN = {"model": "gpt-30b", "tokens": 300e9, "instance": "ml.p5.48xlarge", "instances": 16}  # module 11's run


def gpt30b_p5_job() -> JobSpec:
    """Module 11: the 30B run as planned on today's stack (16 x p5, FSDP2 over NCCL, the PyTorch DLC) on a SageMaker
    training plan's reserved capacity (a placeholder plan ARN: yours comes from CreateTrainingPlan)."""
    from fmlab.jobs.capacity import current_stack_spec
    from fmlab.plan.planned import planned_run

    plan = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-plan/fmlab-gpt30b"
    return current_stack_spec(planned_run(**P5_RUN), plan, DATA, f"{BUCKET}/checkpoints/gpt30b-p5", role=ROLE,
                              region=REGION)


# How each job of the 30B model stands to the planned run (fmlab.plan.planned): the two runs are rendered from it; the
# jobs that teach one knob say what they change from it, so nobody launches them expecting the planned days.
FROM_PLAN = {
    "gpt30b": "the planned run on 16 x p4d (fmlab.plan.planned.planned_run), the first job of its chain",
    "gpt30b-p5": "the planned run on 16 x p5, on a training plan",
    "fsdp": "teaches the shard group: hybrid sharding in groups of 8 (one node), full recomputation, micro-batch 1, "
            "1,000 steps on 16 x p4de; not the planned run",
    "smp": "teaches SMP's activation offloading: the fsdp job with offloading on; not the planned run",
    "fsdp-tp": "teaches tensor parallelism: tp 2 with full sharding on 2 x p4d, micro-batch 1, 1,000 steps; not the "
               "planned run",
}

COURSE_JOBS: dict[str, tuple[str, Callable[[], JobSpec]]] = {
    "sweep": ("module 3", sweep_job), "ddp": ("module 4", ddp_job), "smddp": ("module 4", smddp_job),
    "fsdp": ("module 5", fsdp_job), "smp": ("module 5", smp_job), "fsdp-tp": ("module 6", fsdp_tp_job),
    "gpt30b": ("module 7", gpt30b_job), "retry": ("module 8", retry_job), "trn1": ("module 9", trn1_job),
    "trn2": ("module 9", trn2_job), "gpt30b-p5": ("module 11", gpt30b_p5_job),
}


class UnknownCourseJob(KeyError):
    def __str__(self) -> str:
        return str(self.args[0])


def course_spec(name: str) -> JobSpec:
    """The JobSpec of one course job by name."""
    if name not in COURSE_JOBS:
        raise UnknownCourseJob(f"no course job named {name!r}: choose one of {', '.join(COURSE_JOBS)} "
                               "(fmlab job request --list)")
    return COURSE_JOBS[name][1]()


def course_request(name: str) -> dict:
    """The CreateTrainingJob request the course job `name` would send (captured in-process, nothing sent)."""
    from fmlab.jobs.request import capture_request

    return capture_request(course_spec(name), backend="sagemaker").request
