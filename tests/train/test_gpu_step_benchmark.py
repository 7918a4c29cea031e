"""benchmarks/gpu_step.py, the one-GPU step benchmark, run here on a CPU at a tiny shape: its command line, one run
end to end (the engine, the bare loop and the bare loop handed to torch.compile) writing its rows as JSON, the settings it expands,
the planner it calls, and the replay of a CUDA memory snapshot (on a made-up allocator trace: no GPU here).

    .venv/bin/python -m pytest tests/train/test_gpu_step_benchmark.py -q
"""

import importlib.util
import json
import math
import subprocess
import sys

import pytest

from fmlab.environment import ROOT

SCRIPT = ROOT / "benchmarks" / "gpu_step.py"
TINY = ["--hidden", "64", "--layers", "2", "--heads", "4", "--kv-heads", "2", "--ffn", "176", "--vocab", "512",
        "--seq", "64", "--micro-batch", "2", "--steps", "3"]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("gpu_step", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


def test_help_lists_the_flags():
    out = subprocess.run([sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    for flag in ("--contenders", "--sweep", "--setting", "--snapshot", "--matmul-precision", "--peak-tflops",
                 "--kv-heads", "--recompute", "--loss", "--compile", "--json"):
        assert flag in out.stdout


@pytest.mark.slow
def test_a_tiny_run_writes_every_row(bench, tmp_path, capsys, monkeypatch):
    """Every contender's row, end to end. bare-compiled's torch.compile is recorded and left out here (inductor on a
    CPU costs 30 CPU s to compile this loop; tests/plan/test_memory.py and tests/train/test_loss.py compile for
    real): the row must come from the compiled model, the rest is the bare loop's code."""
    import torch

    compiled = []
    monkeypatch.setattr(torch, "compile", lambda model, **kw: compiled.append(model) or model)
    path = tmp_path / "rows.json"
    assert bench.main([*TINY, "--contenders", "engine,bare,bare-compiled", "--json", str(path)]) == 0
    assert len(compiled) == 1 and type(compiled[0]).__name__.endswith("ForCausalLM")  # bare-compiled's model only
    printed = capsys.readouterr().out
    assert "planner/measured" in printed and "first step s" in printed
    result = json.loads(path.read_text())
    assert result["machine"]["torch"]
    rows = {r["contender"]: r for r in result["rows"]}
    assert list(rows) == ["engine", "bare", "bare-compiled"]
    for name, row in rows.items():
        assert row["status"] == "ok", (name, row["reason"])
        assert row["tokens_per_s"] > 0 and row["first_step_s"] > 0
        assert row["planner_bytes"] > 0 and row["tokens_per_step"] == 128
        assert row["params"] > 0 and row["flops_per_token"] > 0
        assert math.isfinite(row["final_loss"]) and 0 < row["final_loss"] < 10  # ln(512) = 6.2 at the start
        assert row["config"]["micro_batch"] == 2
        if result["machine"]["device"] == "cpu":
            assert row["peak_bytes"] is None and row["mfu"] is None
        else:
            assert row["peak_bytes"] > 0 and row["planner_over_measured"] > 0
    assert rows["engine"]["planner_call"].startswith("loss='chunked'") or "without" in rows["engine"]["planner_call"]
    # the bare loops take transformers' full loss, so the planner is asked for that
    assert "full" in rows["bare"]["planner_call"] or "without" in rows["bare"]["planner_call"]


def test_settings_cross_the_sweep(bench):
    settings, varying = bench.expand_settings(bench.Setting(), ["steps=5"], "micro_batch=1,4;recompute=none,full")
    assert [(s.micro_batch, s.recompute, s.steps) for s in settings] == [
        (1, "none", 5), (1, "full", 5), (4, "none", 5), (4, "full", 5)]
    assert varying == ["micro_batch", "recompute"]
    assert settings[1].label(varying) == "micro_batch=1 recompute=full"
    _, none_varying = bench.expand_settings(bench.Setting(), [], "")
    assert none_varying == [] and bench.Setting().label(none_varying) == "-"
    with pytest.raises(ValueError, match="recompute"):
        bench.expand_settings(bench.Setting(), [], "recompute=sometimes")
    with pytest.raises(ValueError, match="key=value"):
        bench.expand_settings(bench.Setting(), ["depth=3"], "")


def test_the_bare_loop_skips_selective_recomputation(bench):
    setting = bench.Setting(hidden=64, layers=2, heads=4, kv_heads=2, ffn=176, vocab=512, seq=64, micro_batch=2,
                            steps=3, recompute="selective")
    row = bench.measure("bare", setting, "-", bench.find_machine(0.0), 0.0, None)
    assert row.status == "skipped" and "selective" in row.reason
    assert row.planner_bytes > 0


def test_a_planner_without_the_loss_keyword_is_called_without_it(bench, monkeypatch):
    from fmlab.plan import layout

    def old_planner(m, cfg, world, micro_batch=1, seq_len=None, attention="flash"):
        return {"weights": 1000.0, "activations": 24.0}

    monkeypatch.setattr(layout, "memory_per_device", old_planner)
    preset = bench.Setting(hidden=64, layers=2, heads=4, kv_heads=2, ffn=176, vocab=512, seq=64).preset()
    planned, said = bench.planner_bytes(preset, "none", 2, 64, "chunked", compiled=False)
    assert planned == 1024.0 and "without loss=" in said and "TypeError" in said


def test_the_snapshot_replay_finds_what_was_alive_at_the_peak(bench):
    model_frames = [{"filename": "/x/torch/nn/functional.py", "line": 5, "name": "linear"},
                    {"filename": "/x/transformers/modeling_llama.py", "line": 10, "name": "forward"}]
    adam_frames = [{"filename": "/x/torch/optim/adamw.py", "line": 7, "name": "_init_group"},
                   {"filename": "/r/src/fmlab/train/step.py", "line": 208, "name": "train_step"}]
    trace = [{"action": "alloc", "addr": 1, "size": 100, "frames": model_frames},
             {"action": "alloc", "addr": 2, "size": 200, "frames": adam_frames},
             {"action": "free_requested", "addr": 1, "size": 100, "frames": []},
             {"action": "free_completed", "addr": 1, "size": 100, "frames": []},
             {"action": "alloc", "addr": 3, "size": 50, "frames": []},
             {"action": "free_completed", "addr": 2, "size": 200, "frames": []},
             {"action": "free_completed", "addr": 9, "size": 30, "frames": []}]  # made before the recording
    # block 7 lives through the whole recording (allocated before it, never freed)
    segments = [{"device": 0, "blocks": [{"address": 7, "size": 40, "state": "active_allocated", "frames": []},
                                         {"address": 8, "size": 999, "state": "inactive", "frames": []}]}]
    state = bench.live_at_peak({"device_traces": [trace], "segments": segments}, device=0, top=3)
    assert state.peak_bytes == 30 + 40 + 100 + 200 and state.event == 1 and state.events == 7
    assert [size for size, _ in state.live] == [200, 100, 40]  # the largest three of the four alive
    assert not state.truncated
    assert bench.frame_text(model_frames, "/x/torch") == "modeling_llama.py:10 forward (via functional.py:5 linear)"
    assert bench.frame_text(adam_frames, "/x/torch").startswith("step.py:208 train_step")
    backward = [{"filename": "??", "line": 0, "name": "torch::autograd::generated::MmBackward0::apply(...)"}]
    assert bench.frame_text(backward) == "autograd backward: MmBackward0"
    assert "no Python frame" in bench.frame_text([])
    text = bench.format_peak(state, "/x/torch")
    assert "train_step" in text and "at event 2 of 7" in text


def test_a_failing_contender_fills_its_row_and_the_run_goes_on(bench, monkeypatch, tmp_path):
    def fails(name, *args):
        if name == "engine-compiled":
            raise RuntimeError("backend='inductor' raised:\nCompilationError: no C++ compiler")
        raise ImportError("No module named 'transformers'")

    monkeypatch.setattr(bench, "run_contender", fails)
    path = tmp_path / "rows.json"
    assert bench.main([*TINY, "--contenders", "engine-compiled,bare", "--json", str(path)]) == 0
    rows = json.loads(path.read_text())["rows"]
    assert [(r["contender"], r["status"]) for r in rows] == [("engine-compiled", "error"), ("bare", "error")]
    assert rows[0]["reason"] == "RuntimeError: backend='inductor' raised:"
    assert rows[1]["reason"] == "missing: No module named 'transformers'"
    assert rows[0]["tokens_per_s"] is None and rows[0]["planner_bytes"] > 0


def test_step_timer_waits_for_the_device_at_step_boundaries_only():
    from fmlab.train.log import StepTimer

    waits = []
    timer = StepTimer(clock=lambda: float(len(waits)), sync=lambda: waits.append(1))
    with timer.data():
        pass
    assert waits == []  # waiting for data is the host's
    timer.step_done()
    timer.step_done()
    timer.exclude(since=0.0)
    timer.take_window()
    timer.steady_rate(10)
    assert len(waits) == 5
    StepTimer(sync=None).step_done()  # None: never waits
