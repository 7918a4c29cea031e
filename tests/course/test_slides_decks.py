"""Decks 01-11: each opens with learning objectives, shows at least one figure drawn by the package, and keeps
maintainer notes (test files, library versions) out of its speaker notes; the new figures show what the package
computes.

    .venv/bin/pytest tests/course/test_slides_decks.py -q     (about 15 s: lr_sweep trains the tiny model 8 x 30 steps)
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fmlab.course import figures
from fmlab.course.slides import read_deck
from fmlab.plan import catalog, compute, traffic
from fmlab.plan.layout import checkpoint_gb, make_plan
from fmlab.plan.planned import planned_run
from fmlab.plan.scaling import bubble_fraction, gpipe_schedule

ROOT = Path(__file__).resolve().parents[2]
DECKS = sorted(p for p in (ROOT / "slides").glob("[0-9][0-9]_*.md"))
OBJECTIVES = re.compile(r"^##\s+(learning\s+)?objectives\b", re.IGNORECASE)
# what a learner does not need in the speaker notes: the test suite, and pinned library versions
TEST_SUITE = re.compile(r"tests?/\w|test_\w+\.py|\btested\b|\bthe tests\b|test[- ]suite", re.IGNORECASE)
MAINTAINER = re.compile(
    TEST_SUITE.pattern + "|"
    r"\b(py)?torch\s+v?\d+\.\d+|\b(transformers|sagemaker(-train|-core)?|nbconvert|papermill|numpy|matplotlib|"
    r"boto3|botocore|neuronx[-\w]*|reveal\.js|katex|accelerate|datasets|python)\s+v?\d+\.\d+", re.IGNORECASE)


def test_decks_01_to_12_are_all_here():
    assert [p.name[:2] for p in DECKS] == ["01", "02", "03", "04", "05", "06", "07", "08", "09", "10", "11", "12"]


@pytest.mark.parametrize("path", DECKS, ids=lambda p: p.name[:2])
def test_each_deck_opens_with_learning_objectives(path):
    deck = read_deck(path)
    slides = [slide for stack in deck.stacks for slide in stack]
    found = [i for i, slide in enumerate(slides) if OBJECTIVES.match(slide.markdown)]
    assert found, f"{path.name} has no '## Learning objectives' slide"
    assert found[0] <= 2, f"{path.name}: the objectives are slide {found[0] + 1}; put them right after the title"
    items = [line for line in slides[found[0]].markdown.splitlines() if line.startswith("- ")]
    assert 3 <= len(items) <= 6, f"{path.name}: {len(items)} objectives; give three to six"


@pytest.mark.parametrize("path", DECKS, ids=lambda p: p.name[:2])
def test_each_deck_shows_a_figure_of_the_package(path):
    deck = read_deck(path)
    assert deck.figures, f"{path.name} shows no figure: add ![caption](figure:NAME), NAME in fmlab.course.figures"
    assert set(deck.figures) <= set(figures.FIGURES)


# Deck 09 teaches which Neuron release pairs with which PyTorch: versions are its subject, not maintainer notes.
VERSIONS_ARE_THE_SUBJECT = {"09"}


@pytest.mark.parametrize("path", DECKS, ids=lambda p: p.name[:2])
def test_speaker_notes_hold_no_maintainer_notes(path):
    deck = read_deck(path)
    rule = TEST_SUITE if path.name[:2] in VERSIONS_ARE_THE_SUBJECT else MAINTAINER
    for h, stack in enumerate(deck.stacks, start=1):
        for v, slide in enumerate(stack, start=1):
            for line in slide.notes.splitlines():
                assert not rule.search(line), f"{path.name} slide {h}.{v} notes: {line.strip()!r}"


def test_the_maintainer_pattern_catches_what_it_should():
    for line in ("Tested by tests/parallel/test_data_parallel.py.", "transformers 5.23: Llama reshapes",
                 "read in sagemaker-train 1.27.0", "the test-suite asserts it", "torch 2.13 on CPU"):
        assert MAINTAINER.search(line), line
    for line in ("ZeRO paper section 7.2.2", "one interruption every 3.1 hours", "1.25 GB/s per node",
                 "the parity check catches it", "latest tests of the hardware"):
        assert not MAINTAINER.search(line), line


# ---------------------------------------------------------------- the figures show what the package computes


def _ydata(ax) -> dict[str, list[float]]:
    return {line.get_label(): [float(y) for y in line.get_ydata()] for line in ax.lines
            if not line.get_label().startswith("_")}


def test_data_parallel_traffic_plots_the_traffic_functions():
    fig = figures.data_parallel_traffic()
    left, right = fig.axes
    params = compute.param_count(catalog.model(figures.DP_MODEL))
    counts = figures.DP_INSTANCE_COUNTS
    gpus = catalog.instance(figures.INSTANCE).accelerators
    lines = _ydata(left)
    assert len(lines) == 4
    ring = next(v for k, v in lines.items() if k.startswith("ring"))
    herring = next(v for k, v in lines.items() if k.startswith("Herring / SMDDP"))
    apart = next(v for k, v in lines.items() if "separate" in k)
    server = next(v for k, v in lines.items() if k.startswith("parameter server"))
    assert ring == pytest.approx([traffic.ring_allreduce_bytes(params, 2, n * gpus) / 1e9 for n in counts])
    assert herring == pytest.approx([2 * (n - 1) / n * params * 2 / 1e9 for n in counts])  # = a ring among instances
    assert apart == pytest.approx([params * 2 / 1e9] * len(counts))
    assert server == pytest.approx([n * gpus * params * 2 / 1e9 for n in counts])
    steps = _ydata(right)
    assert next(v for k, v in steps.items() if k.startswith("ring")) == [2 * (n * gpus - 1) for n in counts]
    assert next(v for k, v in steps.items() if k.startswith("Herring")) == [2] * len(counts)


def test_pipeline_schedule_draws_every_slot_and_the_bubble():
    fig = figures.pipeline_schedule()
    top, bottom = fig.axes
    p, m = figures.PIPELINE_STAGES, figures.PIPELINE_MICROBATCHES
    assert len(top.patches) == len(gpipe_schedule(p, m)) == 2 * p * m
    assert f"bubble {bubble_fraction(p, m):.0%}" in top.get_title()
    plain = _ydata(bottom)["GPipe / 1F1B"]
    assert plain == pytest.approx([100 * bubble_fraction(p, k) for k in figures.BUBBLE_MICROBATCHES])


def test_layout_memory_is_the_planners_memory_per_device():
    fig = figures.layout_memory()
    ax = fig.axes[0]
    tops: dict[int, float] = {}
    for bar in ax.patches:
        i = round(bar.get_x() + bar.get_width() / 2)
        tops[i] = max(tops.get(i, 0.0), bar.get_y() + bar.get_height())
    for i, (_, layout) in enumerate(figures.LAYOUT_MEMORY):
        plan = make_plan(figures.MODEL, 1e9, figures.INSTANCE, figures.INSTANCES, parallel=layout, suggest=False)
        assert tops[i] == pytest.approx(plan.memory_gb_per_device)  # drawn whole; the axis cuts the tall ones


def test_data_volume_bars_are_chinchilla_tokens_and_their_bytes():
    fig = figures.data_volume()
    tokens_ax, bytes_ax = fig.axes
    expected = [compute.chinchilla_tokens(compute.param_count(catalog.model(n))) for n in figures.DATA_MODELS]
    assert [b.get_height() for b in tokens_ax.patches] == pytest.approx(expected)
    assert [b.get_height() for b in bytes_ax.patches] == pytest.approx([2 * t for t in expected])  # uint16 ids


def test_lr_sweep_trains_the_notebook_03_sweep():
    losses = figures.sweep_losses()
    assert set(losses) == {(lr, s) for lr in figures.SWEEP_LRS for s in figures.SWEEP_SEEDS}
    for curve in losses.values():
        assert list(curve) == list(range(1, figures.SWEEP_STEPS + 1))
        assert curve[figures.SWEEP_STEPS] < curve[1] < 6.3  # it learned, from about ln(512) = 6.24
    ax = figures.lr_sweep().axes[0]
    drawn = [line for line in ax.lines]
    assert len(drawn) == len(losses)
    for line, curve in zip(drawn, losses.values(), strict=True):
        assert [float(y) for y in line.get_ydata()] == pytest.approx(list(curve.values()))


def test_the_recovery_figure_draws_the_planners_goodput():
    from fmlab.plan import recovery

    fig = figures.recovery_goodput()
    lines = {line.get_label(): list(line.get_ydata()) for line in fig.axes[0].get_lines()}
    state_gb = checkpoint_gb(compute.param_count(catalog.model("gpt-30b")))["training"]
    step = planned_run("gpt-30b", 300e9, "ml.p5.48xlarge", 16).step_seconds  # the figure's default step
    sweep = recovery.sweep(state_gb, list(figures.RECOVERY_NODES), step)
    for i, name in enumerate(["checkpoint to S3", "tiered: memory, then S3", "checkpointless"]):
        assert lines[name] == pytest.approx([100 * sweep[n][i].goodput for n in figures.RECOVERY_NODES])


def test_deck_11_sizes_the_plan_from_the_job():
    """The capacity slide's note: the planned 30B run on 16 x p5 and the whole days of plan that hold its job."""
    from fmlab.plan import capacity

    deck = (ROOT / "slides" / "11_pretraining_on_aws_in_2026.md").read_text()
    run = planned_run("gpt-30b", 300e9, "ml.p5.48xlarge", 16)  # module 7's layout on 16 p5, as notebook 11
    held = capacity.reservation(run.days)
    assert f"The 30B run of {run.days:.1f} days needs a plan of {held.days} days" in " ".join(deck.split())
    # the request on the next slide searches for that plan, not for the run's own days
    assert f'"DurationHours": {held.days} * 24' in deck and deck.count('"DurationHours"') == 1


def test_deck_01_quotes_the_planners_memory_per_layout():
    """Issue 64: deck 01 said ~504 / ~28 / ~6 GB where the planner (notebook 01) gives 685.4 / 32.2 / 11.1."""
    from fmlab.plan.layout import make_plan
    from fmlab.plan.parallelism import ParallelConfig

    text = (ROOT / "slides" / "01_when_to_pretrain.md").read_text()
    gb = {name: make_plan("gpt-30b", 300e9, "ml.p4d.24xlarge", 16, parallel=ParallelConfig(**kw),
                          attention=attention).memory_gb_per_device
          for name, kw, attention in (("DDP", {"sharding": "none"}, "flash"), ("ZeRO-1", {"sharding": "zero1"}, "flash"),
                                      ("ZeRO-2", {"sharding": "zero2"}, "flash"), ("full", {"sharding": "full"}, "flash"),
                                      ("eager", {"sharding": "full"}, "eager"),
                                      ("recompute", {"sharding": "full", "activation_checkpointing": "full"}, "flash"))}
    quoted = (f"DDP needs ~{gb['DDP']:.0f} GB per device; ZeRO-1 ~{gb['ZeRO-1']:.0f} and ZeRO-2 ~{gb['ZeRO-2']:.0f}",
              f"FSDP full shard ~{gb['full']:.0f} GB (eager attention: ~{gb['eager']:.0f} GB); full recomputation "
              f"~{gb['recompute']:.0f} GB", f"*{gb['DDP']:.1f} GB per device")
    flat = " ".join(text.split())
    for words in quoted:
        assert words in flat, words
