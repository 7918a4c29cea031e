"""fmlab.train.collector: the garbage collector on a schedule while training, and only then.

    .venv/bin/python -m pytest tests/train/test_collector.py -q
"""

import ast
import gc

import pytest

from fmlab.environment import ROOT
from fmlab.train import collector

ENTRY_SCRIPTS = ["entrypoints/train.py", "src/fmlab/train/__main__.py", "src/fmlab/measure/worker.py"]


@pytest.fixture
def collector_on():
    was = gc.isenabled()
    gc.enable()
    yield
    gc.unfreeze()
    (gc.enable if was else gc.disable)()


def test_scheduled_freezes_what_exists_and_gives_back_the_collector_as_it_was(collector_on):
    with collector.scheduled():
        assert not gc.isenabled()
        assert gc.get_freeze_count() > 0
    assert gc.isenabled() and gc.get_freeze_count() == 0
    gc.disable()
    with collector.scheduled():
        pass
    assert not gc.isenabled()  # a process that had it off (a worker) keeps it off


def test_scheduled_gives_the_collector_back_when_training_fails(collector_on):
    with pytest.raises(RuntimeError), collector.scheduled():
        raise RuntimeError("a collective timed out")
    assert gc.isenabled() and gc.get_freeze_count() == 0


def test_a_young_generation_pass_every_gc_every_steps(monkeypatch):
    passes = []
    monkeypatch.setattr(gc, "collect", lambda generation=2: passes.append(generation) or 0)
    ran = [step for step in range(1, 151) if collector.after_step(step)]
    assert ran == [50, 100, 150] and passes == [1, 1, 1]  # torchtitan's gc_freq, generation 1
    assert [s for s in range(1, 7) if collector.after_step(s, every=3)] == [3, 6]
    assert not any(collector.after_step(s, every=0) for s in range(1, 10))  # 0: never


def test_training_in_process_leaves_the_collector_on(tmp_path, collector_on):
    from fmlab.train import TrainConfig, train

    train(TrainConfig(max_steps=2, log_every=1, tensorboard=False, output_dir=str(tmp_path)))
    assert gc.isenabled() and gc.get_freeze_count() == 0  # a notebook's kernel keeps its collector


@pytest.mark.parametrize("script", ENTRY_SCRIPTS)
def test_entry_scripts_leave_the_collector_alone_until_training_starts(script):
    """An entry script is parse, run, exit: the process SageMaker starts is the one module 8 describes, and the
    collector's schedule starts inside the training loop (collector.scheduled), nowhere else."""
    calls = [ast.unparse(node.func) for node in ast.walk(ast.parse((ROOT / script).read_text()))
             if isinstance(node, ast.Call)]
    assert not [c for c in calls if c.startswith("gc.")], f"{script}: {calls}"
