"""Deck 08 (checkpointing and recovering from failures): every number the planner computes is on the slides as computed.

Run: .venv/bin/pytest tests/course/test_slides_module08.py -q   (a few seconds: arithmetic and two figures, no training)

The deck quotes fmlab.plan.reliability (the Llama 3 failure record, job MTBF, Young/Daly, wasted time) for the
module 7 run, gpt-30b on 16 x ml.p4d.24xlarge, with notebook 08's assumptions: each node writes its checkpoint
shards at 1 GB/s and reads from S3 at 1.25 GB/s, and 3 checkpoints are kept. These tests recompute each figure
and look for it, formatted as the slide writes it (whitespace folded, so a sentence may wrap), so a change in
the planner shows up here instead of as a stale slide.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

import pytest

from fmlab.course import figures, vendor
from fmlab.course.slides import build_decks, deck_html, read_deck, render_figures
from fmlab.plan import catalog, compute, reliability
from fmlab.plan.layout import checkpoint_gb

ROOT = Path(__file__).resolve().parents[2]
DECK_PATH = ROOT / "slides" / "08_checkpointing_and_recovery.md"
MODEL, INSTANCE, NODES, TOKENS, MFU = "gpt-30b", "ml.p4d.24xlarge", 16, 300e9, None  # None: the predicted step
WRITE_GB_S, S3_GB_S, KEEP = 1.0, 1.25, 3  # notebook 08's parameters
FIGURES = ["job_mtbf", "checkpoint_interval"]


@pytest.fixture(scope="module")
def deck() -> str:
    """The deck's text with all whitespace folded to single spaces (slides wrap sentences over lines)."""
    return " ".join(DECK_PATH.read_text(encoding="utf-8").split())


@pytest.fixture(scope="module")
def run() -> dict[str, float]:
    """The checkpoint arithmetic of the 30B run, recomputed here from fmlab.plan."""
    state_gb = checkpoint_gb(compute.param_count(catalog.model(MODEL)))["training"]
    save_h = reliability.transfer_hours(state_gb / NODES, WRITE_GB_S)
    restart_h = reliability.transfer_hours(KEEP * state_gb, S3_GB_S)
    mtbf_h = reliability.job_mtbf_hours(NODES)
    return {"state_gb": state_gb, "save_h": save_h, "restart_h": restart_h, "mtbf_h": mtbf_h,
            "daly_h": reliability.daly_interval_hours(save_h, mtbf_h),
            "young_h": reliability.young_interval_hours(save_h, mtbf_h)}


def wasted(run: dict[str, float], hours: float) -> str:
    """Percentage of time lost at a checkpoint interval, as the slides and the figure write it: the exact expectation
    (at 16 nodes the first order agrees to the figure's two decimals; the figure draws both)."""
    return f"{100 * reliability.expected_wasted_fraction(hours, run['save_h'], run['mtbf_h'], run['restart_h']):.2f}%"


def test_the_deck_parses_and_shows_its_two_figures():
    parsed = read_deck(DECK_PATH)
    assert parsed.title == "Checkpointing and recovering from failures"
    assert parsed.figures == FIGURES
    assert parsed.stacks[1][0].markdown.startswith("## Learning objectives")
    assert all(slide.notes for stack in parsed.stacks for slide in stack), "every slide has speaker notes"
    assert parsed.stacks[-1][0].markdown.startswith("## Lab 08")
    # the figures are drawn for the run, and with the assumptions, the slides describe
    assert (figures.MODEL, figures.INSTANCE, figures.INSTANCES, figures.TOKENS, figures.MFU) == (
        MODEL, INSTANCE, NODES, TOKENS, MFU)
    assert (figures.WRITE_GB_PER_S_PER_NODE, figures.S3_GB_PER_S_PER_NODE, figures.KEEP_CHECKPOINTS) == (
        WRITE_GB_S, S3_GB_S, KEEP)


def test_the_llama3_record_and_the_job_mtbf(deck):
    rec = reliability.LLAMA3_405B
    nodes = rec.gpus // rec.gpus_per_node
    assert f"a {rec.days:.0f}-day snapshot on **{rec.gpus:,} H100 GPUs** ({nodes:,} nodes of {rec.gpus_per_node})" in deck
    assert "466 interruptions" in rec.source and "47 planned" in rec.source and 466 - 47 == rec.unexpected_interruptions
    assert f"**466 interruptions**, 47 planned, **{rec.unexpected_interruptions} unexpected**; about **78%**" in deck
    cluster = reliability.job_mtbf_hours(nodes)
    assert round(cluster) == 3  # "one failure every three hours"
    assert f"one unexpected interruption every **{cluster:.1f} hours**, \"one failure every three hours\"" in deck
    assert f"Per node: one every **~{rec.node_mtbf_hours / 24:.0f} days**" in deck  # 264
    ours = reliability.job_mtbf_hours(NODES)
    assert ours == pytest.approx(rec.node_mtbf_hours / NODES)
    assert f"on {NODES} nodes: one every **{ours:.0f} hours, ~{ours / 24:.0f} days**" in deck  # 396 h, 16 days
    from fmlab.course.params import module7_plan

    days = module7_plan().days  # module 7's run as notebook 07 plans it: its predicted step
    assert f"over its {days:.0f} days, expect about **{days * 24 / ours:.1f} interruptions**" in deck  # 36, 2.2
    assert f"Module 7 planned a {days:.0f}-day run on {NODES * catalog.instance(INSTANCE).accelerators} GPUs" in deck
    months, per_day = rec.node_mtbf_hours / 24 / (365.25 / 12), 24 / cluster
    assert f"about once in {months:.0f} months interrupts a {nodes:,}-node job about {per_day:.0f} times a day" in deck


def test_the_checkpoint_size_save_time_and_interval(deck, run):
    assert f"**{run['state_gb']:.0f} GB** of training state (fp32 weights, Adam m and v), " \
           f"**{run['state_gb'] / NODES:.1f} GB per node**" in deck  # 360 GB, 22.5 GB
    save_s = run["save_h"] * 3600
    assert f"at {WRITE_GB_S:g} GB/s per node a synchronous save stalls training **{save_s:.0f} s**" in deck  # 22 s
    assert f"({save_s:.0f} s per save for the 30B run)" in deck  # the synchronous save, on the async slide
    assert f"With $M$ = {run['mtbf_h']:.0f} h: checkpoint every **{run['daly_h']:.2f} h**" in deck  # 2.22 h
    assert f"{run['young_h']:.2f}" == f"{run['daly_h']:.2f}" and "(Young and Daly agree to three digits)" in deck
    lo, hi = reliability.BEST_PRACTICE_INTERVAL_HOURS
    assert lo <= run["daly_h"] <= hi and f"inside AWS's \"every {lo:g} to {hi:g} hours\"" in deck


def test_the_formulas_on_the_slide_are_the_planners():
    assert "$\\tau = \\sqrt{2 \\delta M}$" in DECK_PATH.read_text(encoding="utf-8")
    for delta, m in ((22.5 / 3600, 396.0), (0.5, 3.1), (1.0, 2.0)):
        young = math.sqrt(2 * delta * m)
        daly = young * (1 + math.sqrt(delta / (2 * m)) / 3 + delta / (18 * m)) - delta  # as the slide writes it
        assert reliability.young_interval_hours(delta, m) == pytest.approx(young)
        assert reliability.daly_interval_hours(delta, m) == pytest.approx(daly)
    assert "\\tfrac{1}{3}\\sqrt{\\tfrac{\\delta}{2M}} + \\tfrac{\\delta}{18M}\\right] - \\delta$$" in \
        DECK_PATH.read_text(encoding="utf-8")


def test_the_wasted_percentages(deck, run):
    line = (f"Daly's {run['daly_h']:.2f} h: **{wasted(run, run['daly_h'])}** lost · every 1 h: "
            f"**{wasted(run, 1.0)}** · every 3 h: **{wasted(run, 3.0)}**")
    assert line in deck, line  # 0.62%, 0.81%, 0.65%
    line = f"Every 15 min: **{wasted(run, 0.25)}** · once a day: **{wasted(run, 24.0)}**"
    assert line in deck, line  # 2.53%, 3.09%
    first = reliability.wasted_fraction(24.0, run["save_h"], run["mtbf_h"], run["restart_h"])
    assert f"the first order says {100 * first:.2f}%" in deck  # 3.12%: the figure draws both
    bare = reliability.wasted_fraction(run["daly_h"], run["save_h"], run["mtbf_h"])  # Young/Daly's own sum
    line = f"without the restart, Daly's {run['daly_h']:.2f} h loses {100 * bare:.2f}%"
    assert line in deck, line  # 0.56% (in the notes), against the curve's 0.62%
    at = [reliability.wasted_fraction(h, run["save_h"], run["mtbf_h"], run["restart_h"]) for h in (0.25, 1, 3, 24)]
    assert min(at) > reliability.wasted_fraction(run["daly_h"], run["save_h"], run["mtbf_h"], run["restart_h"])


def test_the_restart_download(deck, run):
    # SageMaker's sync mirrors deletions (fmlab.sandbox.host.CHECKPOINT_SYNC_SOURCE): the prefix holds the kept ones
    assert "SageMaker **mirrors** it to the `s3_uri` while the job runs" in deck
    minutes = run["restart_h"] * 60
    assert f"{KEEP} kept x {run['state_gb']:.0f} GB at {S3_GB_S:g} GB/s per node: **about {minutes:.0f} minutes**" \
           f" before training resumes, against a {run['save_h'] * 3600:.0f} s save" in deck  # 14 minutes
    newest = reliability.transfer_hours(run["state_gb"], S3_GB_S) * 60
    assert f"the newest alone is **{newest:.1f} minutes**" in deck  # 4.8
    own = reliability.transfer_hours(run["state_gb"] / NODES, S3_GB_S) * 3600
    assert f"({run['state_gb'] / NODES:.1f} GB per node: **{own:.0f} s**)" in deck  # 18 s
    share = run["restart_h"] / reliability.job_mtbf_hours(2048)
    assert f"every {reliability.job_mtbf_hours(2048):.1f} hours, a {minutes:.0f}-minute restart alone would cost " \
           f"{share:.0%} of the time" in deck  # 8%


def test_the_fault_slides_quote_the_training_script(deck):
    from fmlab.train.config import TrainConfig

    assert (f"**{TrainConfig.init_timeout:.0f} s** while the group forms and through the first step "
            f"(`--init-timeout`), **{TrainConfig.collective_timeout:.0f} s** after it (`--collective-timeout`)") in deck
    assert TrainConfig.keep_checkpoints == KEEP
    for text in ("`.incomplete-step_N`", "`corrupt-step_N`", "`COMPLETE` last", "`--max-restarts 1`",
                 "`TORCHELASTIC_RESTART_COUNT`", "`async_save`", "**staged to CPU memory**",
                 "`MaximumRetryAttempts` 1 to 30", "`InternalServerError`", "`AlgorithmError`",
                 "RetryStrategy(maximum_retry_attempts=", "CheckpointConfig(", "**to float rounding**",
                 "**automatic node recovery**", "**auto-resume**", "FSx for Lustre",
                 # what SageMaker retries and what it does not (a dead process is the job's failure)
                 "is an `AlgorithmError`: **not** retried", "(SDK v3's torchrun driver passes no `--max-restarts`)",
                 "A lost instance is an `InternalServerError`: retried", "cluster repair"):
        assert text in deck, text
    assert "tests/" not in deck and "pytest" not in deck  # speaker notes are for instructors, not maintainers
    assert "lost GPU or the kernel's OOM killer" not in deck and "on new instances" not in deck  # the old claims
    assert "`--max-restarts` recovers it inside the job" not in deck  # SDK v3's Torchrun has no restart option


def test_the_figures_show_what_the_planner_computes(run):
    assert figures.checkpoint_costs() == pytest.approx({
        "state_gb": run["state_gb"], "save_s": run["save_h"] * 3600, "restart_s": run["restart_h"] * 3600,
        "mtbf_h": run["mtbf_h"], "daly_h": run["daly_h"]})
    line = figures.job_mtbf().axes[0].lines[0]
    assert list(line.get_xdata()) == list(figures.MTBF_NODES) and figures.MTBF_NODES[0] == 1 \
        and figures.MTBF_NODES[-1] == 2048
    assert list(line.get_ydata()) == pytest.approx([reliability.job_mtbf_hours(n) for n in figures.MTBF_NODES])
    ax = figures.checkpoint_interval().axes[0]
    labels = ax.get_legend_handles_labels()[1]
    for hours in (run["daly_h"], 1.0, 3.0):  # Daly's optimum and the best-practice ends, with their losses
        assert any(f"every {hours:.2g} h, {wasted(run, hours)} lost" in label for label in labels), labels


def test_the_deck_builds_with_its_figures(tmp_path):
    parsed = read_deck(DECK_PATH)
    svgs = render_figures(parsed.figures, tmp_path / "figures")
    assert [p.name for p in svgs] == [f"{name}.svg" for name in FIGURES]
    assert all(p.stat().st_size > 10_000 and "<text" not in p.read_text() for p in svgs)  # text as paths
    page = deck_html(parsed)
    for name in FIGURES:
        assert f'<img class="fmlab-figure" src="figures/{name}.svg"' in page
    assert len(re.findall(r"<section>", page)) == parsed.slide_count + sum(len(s) > 1 for s in parsed.stacks)

    source = tmp_path / "slides"
    source.mkdir()
    (source / DECK_PATH.name).write_text(DECK_PATH.read_text(encoding="utf-8"), encoding="utf-8")
    try:
        result = build_decks(source, tmp_path / "out")
    except vendor.VendorError as e:  # reveal.js/KaTeX not fetchable here: the rest was checked above
        if os.environ.get("CI", "").lower() in ("true", "1", "yes"):
            pytest.fail(f"cannot vendor reveal.js/KaTeX under CI: {e}", pytrace=False)
        pytest.skip(f"cannot vendor reveal.js/KaTeX here: {e}")
    assert [p.name for p in result.figures] == [f"{name}.svg" for name in FIGURES]
    assert result.pages[0].read_text(encoding="utf-8").count('class="fmlab-figure"') >= 2 * len(FIGURES)
