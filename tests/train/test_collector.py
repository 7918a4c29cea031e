"""fmlab.train.collector: the garbage collector off while entry scripts import, on a schedule while training.

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
def test_entry_scripts_turn_the_collector_off_before_any_import_of_torch_or_fmlab(script):
    tree = ast.parse((ROOT / script).read_text())
    order = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "gc.disable":
            order.append((node.lineno, "gc.disable"))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
            if any(n.split(".")[0] in ("torch", "fmlab", "transformers") for n in names):
                order.append((node.lineno, "import"))
    assert sorted(order)[0][1] == "gc.disable", f"{script}: {sorted(order)[:3]}"
    guards = [node for node in tree.body if isinstance(node, ast.If) and "__name__" in ast.unparse(node.test)
              and "gc.disable()" in ast.unparse(node)]
    assert guards, f"{script}: gc.disable() only when run as a script, so importing it leaves the importer's collector"
