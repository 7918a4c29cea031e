"""fmlab.hyperpod.stack and .tiered: FP8 rows from the published runs, the reference stacks' names, the tiered
writer's one change to the engine's save, and the cluster settings AWS's API model and guide accept."""

import math

import botocore.session
import pytest

from fmlab.hyperpod import slurm, stack, tiered
from fmlab.jobs.capacity import current_stack_run
from fmlab.plan.parallelism import ParallelConfig
from fmlab.plan.planned import planned_run

RUN = planned_run("gpt-30b", 300e9, "ml.p5.48xlarge", 16)  # module 11's planned run


def test_the_published_fp8_speedups_are_reproduced_from_their_tables():
    """torchtitan's table 1 (8 H100, Llama 3.1 8B): 6,667 -> 8,532 tokens/s per GPU, +28.0%; torchao's docs: rowwise
    +10.05%, tensorwise +25.03% over 6,150 tokens/s; the PyTorch blog: 70B 956 -> 1,430, about +50%."""
    speedups = [round(100 * r.speedup, 2) for r in stack.FP8_RESULTS]
    assert speedups == [27.97, 10.05, 25.03, 49.58]
    for r in stack.FP8_RESULTS:
        bf16, fp8 = r.peak_memory_gb
        assert math.isnan(bf16) or abs(fp8 - bf16) / bf16 < 0.01  # the same peak memory, as measured


def test_fp8_rows_divide_the_planners_days_and_keep_its_memory():
    rows = stack.fp8_rows(RUN)
    bf16, *fp8 = rows
    assert bf16.precision == "bf16" and bf16.days == pytest.approx(RUN.days) and 9 < bf16.days < 11  # predicted
    assert "(predicted)" in bf16.source
    assert len(fp8) == 3  # the three 8B-on-8-H100 measurements
    for row in fp8:
        assert row.days == pytest.approx(bf16.days / (1 + row.speedup))
        assert row.memory_gb_per_device == bf16.memory_gb_per_device
        assert row.cost_usd / row.days == pytest.approx(bf16.cost_usd / bf16.days)  # one price basis


def test_the_30b_run_as_torchtitans_toml_uses_only_names_torchtitan_has():
    toml = stack.torchtitan_toml(current_stack_run(RUN).config, nodes=16)
    assert toml["parallelism"] == {"data_parallel_shard_degree": 32, "data_parallel_replicate_degree": 4,
                                   "tensor_parallel_degree": 1}  # 128 GPUs: 4 groups of 32, the planned layout
    assert toml["training"]["global_batch_size"] == RUN.global_batch and toml["checkpoint"]["interval"] == 519
    for section, fields in toml.items():
        assert set(fields) <= set(stack.TORCHTITAN_FIELDS[section]), section
    for name in stack.NAMES:
        words = name.torchtitan.replace(",", " ").split()
        for key in [w.strip("()") for w in words if "." in w and "/" not in w and not w.startswith('["')]:
            section, field = key.split(".", 1)
            assert field in stack.TORCHTITAN_FIELDS.get(section, ()), key
    assert 'mode = "none"' in stack.toml_text(toml) and "enable = true" in stack.toml_text(toml)


def test_what_torchtitan_cannot_do_is_refused():
    config = current_stack_run(RUN).config
    offloading = type(config)(**{**vars(config), "parallel": ParallelConfig(sharding="full",
                                                                            activation_offloading=True)})
    with pytest.raises(ValueError, match="no activation offloading"):
        stack.torchtitan_toml(offloading, nodes=16)


def test_the_tiered_writer_changes_only_the_engines_storage_writer():
    before, after = tiered.save_change()
    assert before.startswith("response = dcp.async_save(tensors, storage_writer=dcp.FileSystemWriter(tmp)")
    assert after == before.replace("dcp.FileSystemWriter(tmp)",
                                   "SageMakerTieredStorageWriter(checkpoint_config=config, step=step)")


def test_the_tiered_storage_config_is_the_api_models_shape_within_the_guides_range():
    shape = botocore.session.get_session().get_service_model("sagemaker").shape_for("ClusterTieredStorageConfig")
    config = tiered.tiered_storage_config(20)
    assert set(config) <= set(shape.members) and config["Mode"] in shape.members["Mode"].enum
    assert shape.members["InstanceMemoryAllocationPercentage"].type_name == "integer"
    for wrong in (19, 101, 20.5):
        with pytest.raises(tiered.TieredError, match="20 to 100"):
            tiered.tiered_storage_config(wrong)


def test_a_cluster_script_asks_for_gpus_whole_nodes_and_its_container(tmp_path):
    spec = slurm.SlurmTrainSpec("/fsx/runs/x", nodes=16, processes_per_node=8, gpus_per_node=8, exclusive=True,
                                hyperpod=True, container_image="/fsx/images/dlc.sqsh", container_mounts="/fsx:/fsx",
                                code_dir="/fsx/fmlab", python="python")
    text = slurm.batch_script(spec, 29500)
    for line in ("#SBATCH --gres=gpu:8", "#SBATCH --exclusive", "#SBATCH --chdir=/fsx/fmlab"):
        assert line in text.splitlines()
    srun = next(line for line in text.splitlines() if line.startswith("srun "))
    assert srun.startswith("srun --auto-resume=1 --container-image=/fsx/images/dlc.sqsh --container-mounts=/fsx:/fsx "
                           "python -m torch.distributed.run")
    assert "/fsx/fmlab/entrypoints/train.py" in srun
    with pytest.raises(ValueError, match="needs a container_image"):
        slurm.SlurmTrainSpec(tmp_path, container_mounts="/fsx:/fsx")
