"""Deck 07 (GPT-30B with sharded data parallelism): every number the planner computes is on the slides as computed.

Run: .venv/bin/pytest tests/course/test_slides_module07.py -q   (a second or two: arithmetic only, no notebook)

The deck quotes the planner (fmlab.plan) for gpt-30b on 16 x ml.p4d.24xlarge, 300B tokens, FlashAttention, its
days from the predicted step of the chosen layout (micro-batch 1 for the memory comparisons); these tests recompute
each figure and look for it, formatted as the slide writes it, so a change in the planner or the catalog shows up
here instead of as a stale slide.
"""

from pathlib import Path

import pytest

from fmlab.course import figures
from fmlab.course.slides import read_deck
from fmlab.plan import catalog, compute, layout
from fmlab.plan.layout import make_plan
from fmlab.plan.parallelism import ParallelConfig

DECK_PATH = Path(__file__).resolve().parents[2] / "slides" / "07_gpt30b_sharded_training.md"
MODEL, INSTANCE, COUNT, TOKENS, MFU = "gpt-30b", "ml.p4d.24xlarge", 16, 300e9, None  # None: the predicted step


@pytest.fixture(scope="module")
def deck() -> str:
    return DECK_PATH.read_text(encoding="utf-8")


def plan(recompute: str = "none", micro_batch: int = 1, **fields):
    """The planner's plan of the deck's run with this layout (ParallelConfig fields; `recompute` as its tables say)."""
    return make_plan(MODEL, TOKENS, INSTANCE, COUNT, parallel=ParallelConfig(**fields).with_recompute(recompute),
                     mfu=MFU, micro_batch=micro_batch, attention="flash", suggest=False)


def chosen():
    """The layout notebook 07 chooses: the fastest predicted step that fits with headroom, micro-batches 1-8."""
    row = layout.choose(layout.candidates(MODEL, TOKENS, INSTANCE, COUNT, attention="flash",
                                          micro_batches=(1, 2, 4, 8)))
    return row, make_plan(MODEL, TOKENS, INSTANCE, COUNT, parallel=row["parallel"], micro_batch=row["micro-batch"],
                          suggest=False)


def test_the_deck_parses_and_shows_the_three_figures():
    parsed = read_deck(DECK_PATH)
    assert parsed.figures == ["gpt30b_memory", "gpt30b_ladder"]
    assert parsed.stacks[1][0].markdown.startswith("## Learning objectives")
    assert all(slide.notes for stack in parsed.stacks for slide in stack), "every slide has speaker notes"
    # the figures are drawn for the run the slides describe
    assert (figures.MODEL, figures.INSTANCE, figures.INSTANCES, figures.TOKENS, figures.MFU) == (
        MODEL, INSTANCE, COUNT, TOKENS, MFU)


def test_model_size_and_why_it_needs_sharding(deck):
    m = catalog.model(MODEL)
    params = compute.param_count(m)
    assert f"{m.layers} layers, hidden {m.hidden:,}, {m.heads} heads, context {m.seq_len:,}" in deck
    assert f"**{params / 1e9:.2f}B parameters**" in deck  # 29.97B
    assert f"**~{16 * params / 1e9:.0f} GB per GPU**" in deck  # DDP: 16 bytes per parameter
    assert f"An A100 in a p4d.24xlarge has **{catalog.instance(INSTANCE).device_memory_gb:.0f} GB**" in deck
    group = plan(sharding="hybrid", hybrid_shard_degree=32)
    states = sum(group.memory_breakdown_gb[k] for k in ("weights", "gradients", "optimizer"))
    assert f"Sharded over a group of 32 GPUs, the states are {states:.1f} GB per GPU" in deck


def test_the_chosen_layout_and_its_alternatives(deck):
    row, best = chosen()
    assert (row["sharding"], row["shard degree"], row["tp"], row["recompute"], row["micro-batch"], row["grad accum"]) \
        == ("hybrid", 32, 1, "full", 8, 1)
    assert "`hybrid_shard_degree=32`" in deck and "4 nodes per group, 4 replicas" in deck
    assert f"**{best.memory_gb_per_device:.1f} GB per GPU** of the {best.memory_limit_gb:.1f} GB a plan" in deck
    assert best.fits and best.memory_gb_per_device <= best.usable_memory_gb * (1 - layout.HEADROOM_FRACTION)
    full = plan(sharding="full")
    eager = make_plan(MODEL, TOKENS, INSTANCE, COUNT, parallel=ParallelConfig(sharding="full"), mfu=MFU,
                      micro_batch=1, suggest=False, attention="eager")
    assert f"({full.memory_gb_per_device:.1f} GB; {eager.memory_gb_per_device:.1f} GB if attention stored its scores)" in deck
    assert full.fits and not eager.fits
    h64 = plan(sharding="hybrid", hybrid_shard_degree=64)  # the old choice: no headroom
    assert not h64.fits and f"groups of 64 need {h64.memory_gb_per_device:.1f} GB, over the limit" in deck
    hybrid8 = plan(sharding="hybrid", hybrid_shard_degree=8)
    states8 = sum(hybrid8.memory_breakdown_gb[k] for k in ("weights", "gradients", "optimizer"))
    assert not hybrid8.fits and states8 > hybrid8.usable_memory_gb  # the states alone do not fit
    assert f"{states8:.0f} GB of states alone, {hybrid8.memory_gb_per_device:.0f} GB with activations" in deck
    m = catalog.model(MODEL)
    extra = compute.hardware_flops_per_token(m, recompute="full") / compute.flops_per_token(m) - 1
    assert extra == pytest.approx(1 / 3) and "**about a third more compute**" in deck
    for tp in (2, 4, 8):
        assert plan(sharding="full", tp=tp).fits  # "Tensor parallelism fits too"
    h16 = plan(sharding="hybrid", hybrid_shard_degree=16, recompute="full")
    assert not h16.fits and f"groups of 16 miss even with full recomputation ({h16.memory_gb_per_device:.1f} GB)" in deck
    p4de = make_plan(MODEL, TOKENS, "ml.p4de.24xlarge", COUNT, micro_batch=1, attention="flash", suggest=False,
                     parallel=ParallelConfig(sharding="hybrid", hybrid_shard_degree=8, activation_checkpointing="full"))
    assert p4de.fits  # the note on 80 GB GPUs


def test_the_global_batch_slide(deck):
    row, best = chosen()
    tokens = best.global_batch * best.seq_len
    text = " ".join(deck.split())
    assert (f"128 replicas x {row['micro-batch']} sequences x {row['grad accum']} step x 2,048 tokens = "
            f"**{tokens:,} tokens per step**") in text
    assert tokens == row["global batch tokens"] <= layout.GLOBAL_BATCH_LIMIT_TOKENS


def test_the_predicted_step(deck):
    _, best = chosen()
    one = plan(sharding="hybrid", hybrid_shard_degree=32, recompute="full", micro_batch=1)
    st, st1 = best.step, one.step
    text = " ".join(deck.split())
    assert (f"**{st['step_s']:.1f} s** = compute {st['compute_s']:.1f} + recomputation {st['recompute_s']:.1f} + "
            f"exposed communication {st['exposed_communication_s']:.1f}") in text
    assert f"**{st['hidden_communication_s']:.1f} s of gathers and reduce-scatters hide behind the compute**" in text
    assert (f"step is **{st1['step_s']:.1f} s**, **{st1['exposed_communication_s']:.1f} s of it exposed "
            "communication**") in text
    assert f"Predicted **MFU {best.mfu:.0%}** (HFU {best.hfu:.0%}) against {one.mfu:.0%} at one sequence" in text


def _usd(x: float) -> str:
    return f"${x / 1e3:.0f}k" if x >= 1e5 else f"${x / 1e3:.1f}k" if x >= 1e3 else f"${x:.0f}"


def test_the_ladder_table_time_and_cost(deck):
    _, run = chosen()
    phases = compute.phased_plan(MODEL, TOKENS, INSTANCE, COUNT, run.mfu)  # every rung at the run's predicted MFU
    assert [p.name for p in phases] == ["base", "medium", "large", "jumbo"]
    for p in phases:
        row = (f"| {p.name} | {p.estimate.params / 1e9:.2g}B | {p.data_fraction:.0%} | {p.devices} | "
               f"{p.estimate.days:.1f} | {_usd(p.estimate.cost_usd)} |").replace("| 30B |", "| 30.0B |")
        assert row in deck, f"the ladder table should read {row!r}"
    assert (phases[-1].estimate.days, phases[-1].estimate.cost_usd) == pytest.approx((run.days, run.cost_usd))
    assert f"at the predicted {run.mfu:.0%} MFU, {run.days:.1f} days and about ${run.cost_usd / 1e3:.0f}k on demand" in deck
    rehearsal = sum(p.estimate.cost_usd for p in phases[:-1]) / run.cost_usd
    assert f"The three rehearsal rungs cost about {rehearsal:.0%} of the full run" in deck


def test_the_published_figure_and_our_reading(deck):
    quote = ("With a 30B parameter GPT-2 model with sequence length 2048, this new feature achieved 141 TFLOPs, "
             "a 39.7%\n> speed up compared to DeepSpeed ZeRO-3")
    assert quote in deck
    peak = catalog.instance(INSTANCE).peak_tflops_bf16
    assert f"about **{141 / peak:.0%}**" in deck and f"{peak:.0f} TFLOP/s bf16 peak" in deck
    assert "That reading is ours" in deck
    from fmlab.environment import ROOT
    from fmlab.plan import published

    runs = published.load(ROOT / "tests/plan/published_runs.json")
    smp = published.predict(next(r for r in runs if r["name"].startswith("sagemaker-sdp")))
    rows = published.compare(runs)
    inside = sum(abs(r["ratio"] - 1) <= 0.2 for r in rows)
    assert f"predicts {inside} of {len(rows)} published runs within 20%" in " ".join(deck.split())
    assert abs(smp["ratio"] - 1) < 0.10 and "within\n  **10%**" in deck
    _, run = chosen()
    assert f"our 16 x p4d at MFU {run.mfu:.0%}" in deck


def test_the_job_slides_name_the_current_image_and_settings(deck):
    assert "658645717510.dkr.ecr.{region}.amazonaws.com/" in deck
    assert '"smdistributed-modelparallel:2.5.1-gpu-py311-cu124",  # SMP v2.8.0' in deck
    assert "Torchrun(smp=SMP(hybrid_shard_degree=32" in deck and "CheckpointConfig(" in deck
    assert 'training_input_mode="FastFile"' in deck
    for line in ("NET/OFI Selected Provider is efa", "Using network AWS Libfabric", "Using network Libfabric",
                 "/GDRDMA", "Using network Socket", "`NCCL_PROTO` | `simple`", "`FI_EFA_USE_DEVICE_RDMA` | `1`"):
        assert line in deck, line
    assert "tests/" not in deck and "pytest" not in deck  # speaker notes are for instructors, not maintainers


def test_the_chain_slide_quotes_the_chain_and_its_cost(deck):
    from fmlab.jobs import sharded
    from fmlab.jobs.guards import worst_case_chain_cost, worst_case_cost

    row, run = chosen()
    job = sharded.ShardedRun().shrink(sharding="hybrid", hybrid_shard_degree=32, activation_checkpointing="full",
                                      micro_batch=row["micro-batch"])
    chain = sharded.job_chain(job, run.days, "s3://b/d", "s3://b/c")
    cost = worst_case_chain_cost(chain)
    one = worst_case_cost(chain[0].with_(max_run_seconds=30 * 86400))
    text = " ".join(deck.split())
    assert f"**{len(chain)} jobs of {chain[0].max_run_seconds / 86400:.1f} days**" in text  # 2 jobs of 20.7 days
    assert f"Planned {run.days:.1f} days + 20% = {cost.run_days:.1f} days" in text
    assert f"worst case **${cost.worst_case_usd / 1e3:.0f}k**" in text and f"**${run.cost_usd / 1e3:.0f}k**" in text
    assert f"showed ${one.worst_case_usd / 1e3:.0f}k: below the plan" in text
    assert cost.worst_case_usd >= run.cost_usd > one.worst_case_usd
    assert "**28 days**" in text and "**8 x 1,000 GB NVMe**" in text
