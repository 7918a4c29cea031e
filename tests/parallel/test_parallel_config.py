"""ParallelConfig validation, SMP v2 settings (--mp_parameters) and the per-family tensor-parallel plans.

No processes are spawned here; the multi-process parity tests are tests/parallel/test_parallel_2proc.py and _4proc.py.
"""

import json

import pytest
import torch

from fmlab.parallel import ParallelConfig, PlanError, from_mp_parameters
from fmlab.parallel.smp import to_mp_parameters


@pytest.mark.parametrize("cfg, world, preset, fix", [
    (ParallelConfig(tp=3), 4, None, "tp=3 does not divide the 4 devices"),
    (ParallelConfig(tp=4), 4, "tiny", "must divide tiny's 2 key/value heads"),  # tiny: 4 heads, 2 KV heads
    (ParallelConfig(tp=8), 8, "tiny-gpt", "must divide tiny-gpt's 4 attention heads"),
    (ParallelConfig(sharding="hybrid", hybrid_shard_degree=3), 4, None, "hybrid_shard_degree=3 must divide the 4"),
    (ParallelConfig(sharding="hybrid"), 4, None, "needs hybrid_shard_degree >= 1"),
    (ParallelConfig(sharding="hybrid", hybrid_shard_degree=4, tp=2), 4, None, "must divide the 2 data-parallel"),
    (ParallelConfig(sharding="zero3"), 4, None, "sharding must be one of"),
    (ParallelConfig(hybrid_shard_degree=2), 4, None, "only used with sharding='hybrid'"),
    (ParallelConfig(activation_checkpointing="some"), 1, None, "activation_checkpointing must be one of"),
    (ParallelConfig(backend="mpi"), 1, None, "backend must be one of"),
    (ParallelConfig(offload_horizon=0), 1, None, "offload_horizon must be at least 1"),
])
def test_impossible_layouts_fail_fast_with_the_fix(cfg, world, preset, fix):
    with pytest.raises(PlanError, match=fix.replace("(", r"\(").replace(")", r"\)")):
        cfg.check(world, preset)


@pytest.mark.parametrize("cfg, world, shape", [
    (ParallelConfig(), 4, (4, 1, 1)),
    (ParallelConfig(sharding="full"), 4, (1, 4, 1)),
    (ParallelConfig(sharding="hybrid", hybrid_shard_degree=2), 4, (2, 2, 1)),
    (ParallelConfig(sharding="hybrid", hybrid_shard_degree=1), 2, (2, 1, 1)),
    (ParallelConfig(sharding="full", tp=2), 4, (1, 2, 2)),
    (ParallelConfig(tp=2), 2, (1, 1, 2)),
])
def test_possible_layouts_pass_and_give_the_mesh_shape(cfg, world, shape):
    assert cfg.check(world, "tiny") is cfg
    assert cfg.mesh_shape(world) == shape


def test_one_config_from_planner_to_engine():
    """The planner, the engine and TrainConfig read the same ParallelConfig; what the planner approves the engine
    builds, except what it says it has not got (pipeline stages, ZeRO-1/2)."""
    from fmlab.plan import layout, parallelism
    from fmlab.train.config import parse_config

    assert ParallelConfig is parallelism.ParallelConfig
    plan = layout.make_plan("gpt-30b", 300e9, "ml.p4d.24xlarge", 16,
                            parallel=ParallelConfig(sharding="hybrid", hybrid_shard_degree=64).with_recompute("offload"))
    assert plan.parallel.activation_checkpointing == "full" and plan.parallel.activation_offloading
    assert plan.parallel.recompute == "offload" and plan.parallel.shard_degree(plan.devices) == 64
    plan.parallel.check(128, "gpt-30b").check_trainable()  # the engine's own check
    flags = parse_config([f"--{k}={v}" for k, v in plan.parallel.hyperparameters().items()], env={})
    assert flags.parallel == plan.parallel  # the same layout through flags / SageMaker hyperparameters
    assert ParallelConfig.from_hyperparameters({k: str(v) for k, v in plan.parallel.hyperparameters().items()}) \
        == plan.parallel
    with pytest.raises(PlanError, match="pipeline stages are planned in module 1 but fmlab's engine has no pipeline"):
        layout.make_plan("gpt-30b", 1e9, "ml.p4d.24xlarge", 4, parallel=ParallelConfig(pp=2)).parallel.check_trainable()
    with pytest.raises(PlanError, match="ZeRO stage 2.*use sharding='full'"):
        ParallelConfig(sharding="zero2").check(4).check_trainable()
    with pytest.raises(TypeError, match="unexpected keyword argument 'tp'"):  # one way to give a layout
        layout.make_plan("gpt-30b", 1e9, "ml.p4d.24xlarge", 4, parallel=ParallelConfig(), tp=2)


def test_the_old_hybrid_spelling_is_read_with_a_clear_message():
    with pytest.warns(FutureWarning, match="write sharding='hybrid', hybrid_shard_degree=8"):
        cfg = ParallelConfig(sharding="hybrid:8")
    assert (cfg.sharding, cfg.hybrid_shard_degree) == ("hybrid", 8)
    with pytest.raises(PlanError, match="is not a layout: write sharding='hybrid', hybrid_shard_degree=D"):
        ParallelConfig(sharding="hybrid:eight")


def test_mp_parameters_as_sagemaker_passes_them():
    from sagemaker.train.distributed import SMP

    # SDK v3 serialises SMP(...) into the --mp_parameters hyperparameter; parse exactly that string.
    hp = SMP(hybrid_shard_degree=2, tensor_parallel_degree=2, sm_activation_offloading=True,
             activation_loading_horizon=4)._to_mp_hyperparameters()
    cfg = from_mp_parameters(hp["mp_parameters"])
    assert (cfg.sharding, cfg.hybrid_shard_degree, cfg.tp) == ("hybrid", 2, 2)
    assert cfg.activation_offloading and cfg.offload_horizon == 4
    assert cfg.activation_checkpointing == "full"  # SMP offloads checkpointed layers
    assert json.loads(hp["mp_parameters"]) == to_mp_parameters(cfg)


@pytest.mark.parametrize("mp, expected", [
    ("", ("full", 0, 1, False)),
    ({"hybrid_shard_degree": 0}, ("full", 0, 1, False)),  # 0: shard over every rank (SMP reference)
    ('{"hybrid_shard_degree": "8", "tensor_parallel_degree": "1"}', ("hybrid", 8, 1, False)),
    ("{'sm_activation_offloading': 'True'}", ("full", 0, 1, True)),  # a Python dict literal, string booleans
    ({"tensor_parallel_degree": 4, "random_seed": 12}, ("full", 0, 4, False)),
])
def test_mp_parameters_forms(mp, expected):
    cfg = from_mp_parameters(mp)
    assert (cfg.sharding, cfg.hybrid_shard_degree, cfg.tp, cfg.activation_offloading) == expected


def test_mp_parameters_errors_say_what_to_change():
    with pytest.raises(ValueError, match="must be a JSON object"):
        from_mp_parameters("hybrid_shard_degree=8")
    with pytest.raises(ValueError, match="must be a whole number"):
        from_mp_parameters({"tensor_parallel_degree": "two"})
    with pytest.raises(PlanError, match="context_parallel_degree=2 needs SMP v2 itself"):
        from_mp_parameters({"context_parallel_degree": 2})
    with pytest.warns(UserWarning, match="ignoring SMP settings this course does not use: shard_size"):
        from_mp_parameters({"shard_size": 3})
    with pytest.raises(ValueError, match="SMP v2 always shards"):
        to_mp_parameters(ParallelConfig())


@pytest.mark.parametrize("preset, col, row", [
    ("tiny", {"q_proj", "k_proj", "v_proj", "gate_proj", "up_proj"}, {"o_proj", "down_proj"}),
    ("tiny-gpt", {"q_proj", "k_proj", "v_proj", "fc1"}, {"out_proj", "fc2"}),
])
def test_tp_plan_per_family(preset, col, row):
    from fmlab.models import build_model, tp_plan

    model = build_model(preset)
    plan = tp_plan(model)
    last = {name.rsplit(".", 1)[-1]: style for name, style in plan.items() if ".layers.0." in name}
    assert {k for k, v in last.items() if v == "colwise"} == col
    assert {k for k, v in last.items() if v == "rowwise"} == row
    for name in plan:  # every planned module exists and is one PyTorch TP can split
        assert type(model.get_submodule(name)).__name__ in ("Linear", "Embedding")


def test_build_model_is_deterministic_and_leaves_the_callers_rng_alone():
    from fmlab.models import build_model

    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    a = build_model("tiny", seed=7)
    after = torch.rand(1)
    b = build_model("tiny", seed=7)
    c = build_model("tiny", seed=8)
    assert torch.equal(before, after)
    assert all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters(), strict=True))
    assert not torch.equal(a.lm_head.weight, c.lm_head.weight)
    assert build_model("tiny", dtype=torch.bfloat16).lm_head.weight.dtype == torch.bfloat16
    meta = build_model("tiny-gpt", device="meta")
    assert all(p.is_meta for p in meta.parameters()) and meta.config.use_cache is False


def test_precision_is_fp32_on_cpu_unless_asked():
    from fmlab.parallel.precision import compute_dtype

    cpu = torch.device("cpu")
    assert compute_dtype(ParallelConfig(), cpu) == torch.float32
    assert compute_dtype(ParallelConfig(mixed_precision="bf16"), cpu) == torch.bfloat16


def test_smddp_backend_needs_the_smddp_library():
    from fmlab.parallel import resolve_backend

    with pytest.raises(PlanError, match="SMDDP library"):
        resolve_backend(ParallelConfig(backend="smddp"))
    assert resolve_backend(ParallelConfig()) == "gloo"


def test_plain_ddp_on_smddp_gets_no_mesh_and_reads_data_by_rank():
    from fmlab.parallel import DistInfo, needs_mesh

    assert not needs_mesh(ParallelConfig(), "smddp")  # smddp cannot create the subgroups a mesh needs
    assert needs_mesh(ParallelConfig(sharding="full"), "smddp") and needs_mesh(ParallelConfig(), "nccl")
    info = DistInfo(rank=3, world_size=8, local_rank=3, device=torch.device("cpu"), backend="smddp", mesh=None)
    assert (info.dp_rank, info.dp_size) == (3, 8)  # every rank is one replica of the default group


def test_one_process_without_torchrun_and_bf16_autocast(monkeypatch):
    from fmlab.measure.parity import make_tokens, reference_step
    from fmlab.models import build_model
    from fmlab.parallel import init_distributed, parallelize

    for var in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):
        monkeypatch.delenv(var, raising=False)
    cfg = ParallelConfig(mixed_precision="bf16", activation_checkpointing="full")
    dist = init_distributed(cfg)
    assert (dist.world_size, dist.rank, dist.mesh, dist.backend, dist.dp_size) == (1, 0, None, "gloo", 1)
    model = parallelize(build_model("tiny"), cfg, dist)
    tokens = make_tokens(512, 2, 16)
    out = model(input_ids=tokens, labels=tokens)
    assert out.logits.dtype == torch.bfloat16  # the forward ran under autocast ...
    assert model.lm_head.weight.dtype == torch.float32  # ... on fp32 master weights
    assert out.loss.item() == pytest.approx(reference_step("tiny", tokens)["loss"], abs=0.05)


def test_one_boolean_reader_for_hyperparameters_flags_and_smp_settings_refuses_a_typo():
    from fmlab.parallel.smp import from_mp_parameters
    from fmlab.plan.parallelism import parse_bool
    from fmlab.train.config import TrainConfigError, parse_config

    assert [parse_bool(v) for v in (True, "TRUE", " on ", "1", "yes", False, "False", "0", "no", "off", "")] == \
        [True] * 5 + [False] * 6
    with pytest.raises(ValueError, match="expected true or false, got 'flase'"):
        parse_bool("flase")
    assert ParallelConfig.from_hyperparameters({"activation_offloading": "On"}).activation_offloading is True
    with pytest.raises(PlanError, match="hyperparameter activation_offloading must be a bool, got 'flase'"):
        ParallelConfig.from_hyperparameters({"activation_offloading": "flase"})  # read as false before
    assert parse_config(["--activation-offloading", "yes"]).parallel.activation_offloading is True
    with pytest.raises(TrainConfigError, match="--activation-offloading expects a bool, got 'flase'"):
        parse_config(["--activation-offloading", "flase"])
    with pytest.raises(ValueError, match="SMP setting sm_activation_offloading must be true or false"):
        from_mp_parameters({"sm_activation_offloading": "flase"})
